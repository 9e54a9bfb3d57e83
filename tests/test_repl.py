"""The real REPL in a pseudo-terminal (pexpect), talking to fake model servers over HTTP."""

from __future__ import annotations

import stat

import pexpect
import pytest
from repl_driver import Repl, plain


@pytest.fixture
def repl_env(openai_env):
    openai_env["NO_COLOR"] = "1"
    return openai_env


@pytest.fixture
def repl(repl_env, workdir):
    session = Repl(repl_env, "m", cwd=workdir)
    yield session
    session.close()


def test_repl_streams_the_answer_and_returns_to_the_prompt(repl, openai_server):
    openai_server.reply("Hello ", "from ", "the server")
    out = plain(repl.send("hi"))
    assert "Hello from the server" in out
    assert openai_server.requests[0].body["messages"] == [{"role": "user", "content": "hi"}]


def test_repl_keeps_the_conversation_across_turns(repl, openai_server):
    repl.send("one")
    repl.send("two")
    messages = openai_server.requests[1].body["messages"]
    assert messages == [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "You said: one"},
        {"role": "user", "content": "two"},
    ]


def test_repl_renders_markdown_on_a_terminal(openai_env, openai_server, workdir):
    openai_server.reply("Some **bold", "** words\n\n", "- item one\n- item two\n", stall_before=0.5)
    repl = Repl(openai_env, "m", cwd=workdir)
    try:
        out = plain(repl.send("md"))
    finally:
        repl.close()
    # Intermediate frames of the live area are drawn (then erased) while text streams in;
    # what stays on screen is the rendered Markdown.
    final = [line for line in out.splitlines() if "bold" in line][-1]
    assert "Some bold words" in final and "**" not in final
    assert "• item one" in out and "• item two" in out
    assert out.index("thinking") < out.index("Some")  # the spinner shows until the first token


def test_help_is_generated_from_the_registry(repl):
    out = plain(repl.send("/help"))
    for usage in ("/help", "/model [name]", "/provider [name]", "/exit"):
        assert usage in out
    assert "/quit" in out


def test_unknown_command_is_an_error_line(repl, openai_server):
    out = plain(repl.send("/frobnicate now"))
    assert "error: unknown command /frobnicate (/help lists them" in out
    assert openai_server.requests == []


def test_a_path_or_a_double_slash_goes_to_the_model(repl, openai_server):
    assert "You said: /usr/bin/python3 segfaults, why?" in plain(repl.send("/usr/bin/python3 segfaults, why?"))
    assert "You said: /help is a command" in plain(repl.send("//help is a command"))
    assert len(openai_server.requests) == 2


def test_a_malformed_answer_is_one_error_line_and_the_repl_goes_on(repl, openai_server):
    openai_server.reply(frames=['data: {"choices": ["oops"]}\n\n'])
    out = plain(repl.send("first"))
    assert "error: openai: unexpected event from the server" in out
    assert "You said: second" in plain(repl.send("second"))


def test_setting_warnings_are_shown_once(repl_env, workdir):
    repl_env["HISTORY_MAX_SIZE"] = "lots"
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        shown = repl.child.before
        assert shown.count("HISTORY_MAX_SIZE") == 1
    finally:
        repl.close()


def test_model_command_shows_and_switches_the_model(repl, openai_server):
    assert "Model: m (provider openai)" in plain(repl.send("/model"))
    repl.prompt = "gpt-big"
    assert "Model set to gpt-big." in plain(repl.send("/model gpt-big"))
    repl.send("hello")
    assert openai_server.requests[0].body["model"] == "gpt-big"


def test_provider_command_switches_to_anthropic(repl_env, anthropic_server, workdir):
    repl_env.update(ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=anthropic_server.base_url, ANTHROPIC_MODEL="claude-x")
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        assert "Provider: openai" in plain(repl.send("/provider"))
        repl.prompt = "claude-x"
        assert "Provider set to anthropic, model claude-x." in plain(repl.send("/provider claudeai"))
        anthropic_server.reply("Hi from Claude")
        assert "Hi from Claude" in plain(repl.send("hi"))
        repl.prompt = "claude-x"
        assert "unknown provider 'nope'" in plain(repl.send("/provider nope"))
    finally:
        repl.close()


def test_tab_completes_slash_commands(repl):
    repl.child.send("/he\t")
    # The completed part: on a busy machine "/he" is drawn before the Tab arrives, and the
    # terminal then receives only "lp".
    repl.child.expect("lp")
    repl.child.send("\r")
    repl.child.expect(r"Commands:[\s\S]*?m>")


def test_tab_completes_model_names_the_configuration_knows(repl_env, workdir, openai_server):
    repl_env["LLM_MODEL"] = "gpt-4o"
    repl = Repl(repl_env, "gpt-4o", cwd=workdir)
    try:
        repl.child.send("/model gpt-4o-m\t")
        repl.child.expect("ini")  # completed to the provider default, gpt-4o-mini
        repl.prompt = "gpt-4o-mini"
        assert "Model set to gpt-4o-mini." in plain(repl.send(""))
    finally:
        repl.close()


def test_alt_enter_inserts_a_newline(repl, openai_server):
    repl.child.send("first line")
    repl.child.send("\x1b\r")
    repl.child.send("second line\r")
    repl.child.expect("You said: first line")
    repl.expect_prompt()
    assert openai_server.requests[0].body["messages"][-1]["content"] == "first line\nsecond line"


def test_pasted_text_keeps_its_newlines_until_enter(repl, openai_server):
    repl.child.send("\x1b[200~pasted one\npasted two\x1b[201~")  # a bracketed paste
    repl.child.expect("pasted two")
    assert openai_server.requests == []  # the newline inside the paste did not send
    repl.child.send("\r")
    repl.child.expect("You said: pasted one")
    assert openai_server.requests[0].body["messages"][-1]["content"] == "pasted one\npasted two"


def test_ctrl_c_at_the_prompt_clears_the_line(repl, openai_server):
    repl.child.send("discard this")
    repl.child.expect("discard this")
    repl.child.send("\x03")
    repl.expect_prompt()
    repl.child.send("keep this\r")
    repl.child.expect("You said: keep this")
    assert openai_server.requests[0].body["messages"][-1]["content"] == "keep this"


def test_ctrl_c_during_an_answer_keeps_the_partial_answer_and_the_repl(repl, openai_server):
    openai_server.reply("a partial ", "answer", hang_after=True)
    repl.child.send("tell me a long story\r")
    repl.child.expect("a partial answer")
    repl.child.send("\x03")
    repl.child.expect(r"\[interrupted\]")
    repl.expect_prompt()
    repl.send("go on")
    messages = openai_server.requests[1].body["messages"]
    assert messages[1] == {"role": "assistant", "content": "a partial answer"}
    assert messages[2] == {"role": "user", "content": "go on"}


def test_provider_error_is_one_line_and_the_message_is_kept(repl, openai_server):
    openai_server.reply(status=401, error="Incorrect API key provided")
    out = plain(repl.send("first question"))
    assert "error: openai: HTTP 401 Unauthorized: Incorrect API key provided" in out
    assert "Traceback" not in out
    repl.send("second question")
    contents = [m["content"] for m in openai_server.requests[1].body["messages"]]
    assert contents == ["first question", "second question"]


@pytest.mark.parametrize("leave", ["/exit", "/quit", "ctrl-d"])
def test_exit_quit_and_ctrl_d_leave_cleanly(repl_env, workdir, leave):
    repl = Repl(repl_env, "m", cwd=workdir)
    if leave == "ctrl-d":
        repl.child.sendeof()
    else:
        repl.child.send(leave + "\r")
    repl.child.expect(pexpect.EOF, timeout=10)
    repl.child.close()
    assert repl.child.exitstatus == 0


def test_prompt_history_is_written_redacted_and_private(repl_env, home, workdir):
    repl = Repl(repl_env, "m", cwd=workdir)
    repl.send("my key is sk-abcdefghijklmnopqrstuvwxyz123456")
    repl.send("/help")
    repl.close()
    history = home / ".chatcli_history"
    text = history.read_text()
    assert "+my key is [REDACTED]" in text and "+/help" in text
    assert "abcdefghijklmnop" not in text
    assert stat.S_IMODE(history.stat().st_mode) == 0o600


def test_history_file_setting_and_recall_with_up_arrow(repl_env, tmp_path, workdir, openai_server):
    repl_env["HISTORY_FILE"] = str(tmp_path / "hist")
    (tmp_path / "hist").write_text("\n# 2026-01-01 00:00:00\n+an old question\n")
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        repl.child.send("\x1b[A")  # Up
        repl.child.expect("an old question")
        repl.send("")
        assert openai_server.requests[0].body["messages"][-1]["content"] == "an old question"
    finally:
        repl.close()


def test_bootstrap_prompt_is_sent_every_turn_but_never_stored(repl_env, openai_server, home, workdir):
    (home / ".chatcli").mkdir()
    (home / ".chatcli" / "SOUL.md").write_text("Be terse.")
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        repl.send("one")
        repl.send("two")
    finally:
        repl.close()
    for seen in openai_server.requests:
        roles = [m["role"] for m in seen.body["messages"]]
        assert roles.count("system") == 1 and roles[0] == "system"
        assert "Be terse." in seen.body["messages"][0]["content"]
    assert [m["role"] for m in openai_server.requests[1].body["messages"]] == ["system", "user", "assistant", "user"]


def test_anthropic_through_the_repl(env, anthropic_server, workdir):
    env.update(ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=anthropic_server.base_url, ANTHROPIC_MODEL="claude-x",
               NO_COLOR="1")
    anthropic_server.reply("Streaming ", "from ", "Messages")
    repl = Repl(env, "claude-x", cwd=workdir)
    try:
        assert "Streaming from Messages" in plain(repl.send("hi"))
    finally:
        repl.close()
