"""Session-name rules (SPEC §4): fuzzed so that no accepted name can leave the sessions directory."""

from __future__ import annotations

import os.path
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatcli.core.errors import UsageError
from chatcli.core.names import NAME_RE, is_valid_name, validate_name, validate_user_target
from chatcli.store.sessions import SessionStore


@pytest.mark.parametrize("name", ["a", "debug-api", "Proj_2.v1", "x" * 128, "0", "a.b-c_d"])
def test_valid_names_are_accepted(name):
    assert validate_name(name) == name


@pytest.mark.parametrize("name", ["", ".hidden", "-x", "_x", "a..b", "..", "a/b", "../etc", "a b", "x" * 129,
                                  "naïve", "a\x00b", "a\\b", "~home"])
def test_invalid_names_are_refused_with_the_rule(name):
    with pytest.raises(UsageError, match="letters, digits"):
        validate_name(name)


@pytest.mark.parametrize("name", ["autosave-20260101-000000", "mcp-abc"])
def test_reserved_prefixes_are_refused_as_user_targets_but_valid_names(name):
    assert validate_name(name) == name
    with pytest.raises(UsageError, match="prefix chatcli keeps"):
        validate_user_target(name)


SESSIONS = Path("/home/u/.chatcli/sessions")
# Arbitrary text, valid names, and near-misses built from the allowed alphabet plus '.', '/' and '..'.
names = st.one_of(
    st.text(max_size=200),
    st.from_regex(NAME_RE, fullmatch=True),
    st.lists(st.sampled_from(["a", "Z", "9", "-", "_", ".", "..", "/", "\\", " ", "~", "\x00"]), max_size=40).map("".join),
)


@given(names)
def test_no_accepted_name_escapes_the_sessions_directory(name):
    store = SessionStore(SESSIONS)
    try:
        path = store.path(name)
    except UsageError as exc:
        message = str(exc)
        assert "\n" not in message and message.startswith("invalid session name")
        return
    assert os.path.normpath(path) == str(path)  # nothing to resolve: no '..', no '//'
    assert path.parent == SESSIONS and path.name == name + ".json"
    assert len(name) <= 128 and not name.startswith((".", "-", "_"))


def test_autosave_names_in_the_same_second_get_a_suffix():
    import datetime

    from chatcli.core.names import autosave_name

    now = datetime.datetime(2026, 12, 2, 14, 5, 9)
    taken: set[str] = set()
    made = []
    for _ in range(3):
        name = autosave_name(now, taken.__contains__)
        taken.add(name)
        made.append(name)
    assert made == ["autosave-20261202-140509", "autosave-20261202-140509-2", "autosave-20261202-140509-3"]


@given(names)
def test_is_valid_name_accepts_exactly_what_validate_name_accepts(name):
    try:
        validate_name(name)
    except UsageError:
        assert not is_valid_name(name)
    else:
        assert is_valid_name(name)


# A name typed as several words reaches the name rule on every surface (SPEC §4): one line that
# says which characters are allowed, never only the action's usage.
SPACED = "my notes"


def assert_refused_as_a_name(message: str) -> None:
    assert f"invalid session name {SPACED!r}" in message and "no spaces" in message, message
    assert "usage:" not in message and "\n" not in message.strip() and "Traceback" not in message, message


@pytest.mark.parametrize("action", ["save", "load", "attach", "fork", "delete"])
def test_a_session_name_of_several_words_is_refused_by_the_slash_command(action, make_conversation):
    from chatcli.commands.builtin import build_registry

    result = build_registry().dispatch(f"/session {action} {SPACED}", make_conversation())
    assert result.error
    assert_refused_as_a_name(result.text)


@pytest.mark.parametrize("argv", [
    ("--session", SPACED, "-p", "hi"),
    ("session", "show", SPACED),
    ("session", "delete", SPACED),
    ("session", "fork", SPACED, "copy"),
    ("session", "export", SPACED, "md"),
])
def test_a_session_name_with_a_space_is_a_one_line_usage_error_on_the_command_line(argv, env):
    from conftest import run_chatcli

    result = run_chatcli(*argv, env=env)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("chatcli: error: ") and result.stdout == ""
    assert_refused_as_a_name(result.stderr)


def test_a_session_name_of_several_words_is_refused_over_mcp(openai_env, openai_server):
    pytest.importorskip("mcp")
    import asyncio

    from conftest import CHATCLI

    async def main():
        from mcp import Client, StdioServerParameters

        params = StdioServerParameters(command=CHATCLI, args=["mcp-server"], env=openai_env)
        async with Client(params) as client:
            return [await client.call_tool("manage_session", {"action": action, "name": SPACED})
                    for action in ("save", "load", "attach", "delete")]

    for result in asyncio.run(main()):
        assert result.is_error
        assert_refused_as_a_name("\n".join(part.text for part in result.content if getattr(part, "text", None)))


def test_a_session_name_of_several_words_is_refused_from_a_chat(settings, fake_model):
    from chatcli.gateway.hub import ConversationHub

    hub = ConversationHub(settings, ("telegram:42",), registry=fake_model.registry())
    try:
        for action in ("save", "load", "attach"):
            reply = hub.handle("telegram", "42", f"/session {action} {SPACED}")
            assert_refused_as_a_name(reply.text)
    finally:
        hub.close()
