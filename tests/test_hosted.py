"""Live conversations hosted for MCP, ACP and the gateway (engine/hosted.py), in process: a real
store on disk, the model faked in process. The server-level checks are in test_mcp_server.py and
test_acp.py."""

from __future__ import annotations

import json

import pytest

from chatcli.commands import session as session_commands
from chatcli.commands.builtin import build_registry
from chatcli.core.errors import UsageError
from chatcli.engine import sessions
from chatcli.engine.hosted import ATTACHED, Host
from chatcli.store.sessions import SessionError


@pytest.fixture
def host(settings, fake_model):
    return Host(settings, registry=fake_model.registry())


def act(hosted, action: str, argument: str = "") -> str:
    """A manage_session action, as the MCP server runs it."""
    return session_commands.run_hosted(hosted, session_commands.BY_MCP_ACTION[action], argument)


def test_a_mirror_never_becomes_the_session_continue_resumes(host, make_conversation, sessions_dir):
    hosted = host.open("mcp")
    hosted.send("take notes on the heron")
    assert "Session 'notes' saved (2 messages)." in act(hosted, "save", "notes")
    hosted.send("and on the egret")  # written to notes; the mirror only names notes, and is written after
    mirror = json.loads((sessions_dir / "mcp-mcp.json").read_text())
    assert mirror["chat_history"] == [] and mirror[ATTACHED] == "notes"
    assert host.store.latest().name == "notes"  # the pointer the REPL's start line follows
    later = make_conversation()
    lines = sessions.start(later, resume=True)  # chatcli --continue
    assert lines == ["Resumed session 'notes' (4 messages)."]
    assert later.session_name == "notes"


def test_a_mirror_written_alone_does_not_move_the_pointer(host, sessions_dir):
    first = host.open("a")
    first.send("the first conversation")  # mirrored, unbound
    assert host.store.latest() is None
    assert json.loads((sessions_dir / "mcp-a.json").read_text())["chat_history"][0]["content"] == \
        "the first conversation"


def test_the_mirror_gate_is_the_mcp_variable_when_set(fake_model, make_conversation, sessions_dir):
    for variables, mirrored in (({"CHATCLI_SESSION_AUTOSAVE": "on", "CHATCLI_MCP_SESSION_AUTOSAVE": "off"}, False),
                                ({"CHATCLI_SESSION_AUTOSAVE": "off", "CHATCLI_MCP_SESSION_AUTOSAVE": "on"}, True),
                                ({"CHATCLI_SESSION_AUTOSAVE": "off"}, False)):
        settings = make_conversation(**variables).settings
        hosted = Host(settings, registry=fake_model.registry()).open("gate")
        hosted.send("hello")
        assert (sessions_dir / "mcp-gate.json").exists() is mirrored, variables
        if mirrored:
            (sessions_dir / "mcp-gate.json").unlink()


def test_a_restarted_host_continues_from_the_mirror_and_resume_finds_an_older_editor_mirror(
        settings, fake_model, sessions_dir):
    hosted = Host(settings, registry=fake_model.registry()).open("e1")
    hosted.send("remember the heron")
    again = Host(settings, registry=fake_model.registry())
    resumed, note = again.resume("e1")
    assert note == "Continued from 'mcp-e1' (2 messages)."
    assert [m.content for m in resumed.conv.history] == ["remember the heron", "You said: remember the heron"]
    # An editor session an older version mirrored as autosave-acp-<id>.
    (sessions_dir / "mcp-e1.json").rename(sessions_dir / "autosave-acp-e2.json")
    older, note = again.resume("e2")
    assert note == "Continued from 'autosave-acp-e2' (2 messages)."
    assert older.conv.session_name is None  # a machine session is never bound


def test_clear_keeps_the_conversation_once_and_drops_the_mirror(host, sessions_dir):
    hosted = host.open("c")
    hosted.send("worth keeping")
    assert act(hosted, "clear").startswith("New conversation started; history cleared.")
    assert not (sessions_dir / "mcp-c.json").exists()  # a restart does not bring it back
    [kept] = sessions_dir.glob("autosave-*.json")
    assert json.loads(kept.read_text())["chat_history"][0]["content"] == "worth keeping"


def test_every_surface_offers_the_session_table():
    """Adding a row to the /session table is all it takes: dispatch, /help, completion, the
    ACP hint and the MCP action list come from it."""
    from chatcli.mcp.server import ACTIONS

    registry = build_registry()
    help_text = registry.help_text()
    completions = registry.find("session").complete(None, "")
    for sub in session_commands.SUBCOMMANDS:
        assert sub.usage in help_text and sub.summary in help_text
        assert sub.name in [word.strip() for word in completions]
        assert session_commands.BY_NAME[sub.name] is sub
    assert list(ACTIONS) == [sub.mcp for sub in session_commands.SUBCOMMANDS if sub.mcp]
    assert set(ACTIONS) == {"save", "load", "attach", "detach", "status", "list", "delete", "clear", "search", "fork"}


def test_a_clear_with_words_after_it_is_refused_before_anything_is_kept(host, sessions_dir):
    hosted = host.open("w")
    hosted.send("still here")
    with pytest.raises(UsageError, match="usage: /session new"):
        session_commands.run_hosted(hosted, session_commands.BY_NAME["new"], "now")
    assert [m.content for m in hosted.conv.history][0] == "still here"
    assert not list(sessions_dir.glob("autosave-*.json"))


def test_continue_passes_over_a_newer_mirror_as_the_start_line_does(host, make_conversation):
    mine = make_conversation()
    sessions.start(mine, name="notes")
    mine.send("my own notes")
    host.open("other").send("an MCP client's chat, later")  # a newer file: its mirror
    assert host.store.latest().name == "notes"
    later = make_conversation()
    assert sessions.start(later, resume=True) == ["Resumed session 'notes' (2 messages)."]


def test_an_attached_mirror_says_where_the_conversation_is_and_a_mirror_loads_by_its_own_name(
        host, settings, fake_model, sessions_dir):
    hosted = host.open("m")
    hosted.send("first")
    act(hosted, "attach", "notes")
    [row] = [info for info in host.store.list() if info.name == "mcp-m"]
    assert row.title == "attached to 'notes'"  # not an untitled, empty session in listings
    editor = Host(settings, registry=fake_model.registry(), prefix="mcp-acp-")
    editor.open("e").send("in the editor")
    again = Host(settings, registry=fake_model.registry(), prefix="mcp-acp-")
    resumed, note = again.resume("mcp-acp-e")  # the name `session list` shows
    assert note == "Continued from 'mcp-acp-e' (2 messages)."
    resumed.send("more")
    assert not list(sessions_dir.glob("mcp-acp-mcp-acp-*.json"))  # continued there, not copied


def test_a_turn_too_long_for_the_window_with_nothing_to_summarise_says_what_it_sent(make_conversation, fake_model):
    conv = make_conversation(CHATCLI_CONTEXT_WINDOW="256")
    notes: list[str] = []
    conv.send("word " * 150)
    conv.send("word " * 150, on_notice=notes.append)
    assert len(fake_model.requests[-1].messages) == 1  # only the latest fits
    assert any("none of it is old enough to summarise: this turn sends the new message and the latest 0 of the "
               "2 before it" in n for n in notes), notes


def test_a_message_longer_than_the_window_set_is_refused_in_one_line_and_kept(make_conversation, fake_model):
    import pytest

    from chatcli.core.errors import ProviderError

    conv = make_conversation(CHATCLI_CONTEXT_WINDOW="256")
    with pytest.raises(ProviderError, match=r"this message is about [\d,]+ tokens with the system prompt, more than "
                                            r"the 256-token context window \(CHATCLI_CONTEXT_WINDOW\), so it was not sent"):
        conv.send("word " * 400)
    assert fake_model.requests == []  # never sent whole: no request at all
    assert conv.history[-1].content == "word " * 400  # nothing the user typed is lost
    conv.send("shorter")
    assert [m.content for m in fake_model.requests[-1].messages] == ["shorter"]  # the window leaves it out


def test_a_mirror_name_with_no_mirror_is_not_read_as_the_session_it_contains(settings, fake_model, make_conversation):
    mine = make_conversation()
    sessions.start(mine, name="notes")
    mine.send("my notes")
    editor = Host(settings, registry=fake_model.registry(), prefix="mcp-acp-")
    with pytest.raises(SessionError, match="mcp-acp-notes"):
        editor.resume("mcp-acp-notes")
    assert editor.live == {}
