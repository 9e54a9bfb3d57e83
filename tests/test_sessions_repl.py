"""Every /session command through the real REPL (pexpect) and a fake model server (SPEC §5, §6.1)."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import pytest
from repl_driver import Repl, plain


@pytest.fixture
def repl(repl_env, workdir):
    session = Repl(repl_env, "m", cwd=workdir)
    yield session
    session.close()


def contents(path: Path) -> list[str]:
    return [m["content"] for m in json.loads(path.read_text())["chat_history"]]


def sent(server, index: int = -1) -> list[str]:
    return [m["content"] for m in server.requests[index].body["messages"]]


def test_save_binds_and_the_prompt_shows_the_session(repl, sessions_dir):
    repl.send("first question")
    out = plain(repl.send("/session save proj"))
    assert "Session 'proj' saved (2 messages)." in out
    assert "[proj] m>" in out
    assert contents(sessions_dir / "proj.json") == ["first question", "You said: first question"]
    assert stat.S_IMODE((sessions_dir / "proj.json").stat().st_mode) == 0o600
    assert "Bound to session 'proj'" in plain(repl.send("/session status"))


def test_load_gives_the_model_the_saved_history(repl_env, workdir, sessions_dir, openai_server):
    first = Repl(repl_env, "m", cwd=workdir)
    first.send("remember the number 42")
    first.send("/session save numbers")
    first.close()
    second = Repl(repl_env, "m", cwd=workdir)
    try:
        assert "Session 'numbers' loaded (2 messages)." in plain(second.send("/session load numbers"))
        second.send("what was the number?")
        assert sent(openai_server) == ["remember the number 42", "You said: remember the number 42",
                                       "what was the number?"]
    finally:
        second.close()


def test_attach_creates_then_writes_through_every_turn(repl, sessions_dir):
    assert "Attached to session 'live' (0 messages; created)." in plain(repl.send("/session attach live"))
    assert contents(sessions_dir / "live.json") == []
    repl.send("one")
    assert contents(sessions_dir / "live.json") == ["one", "You said: one"]
    repl.send("two")
    assert contents(sessions_dir / "live.json") == ["one", "You said: one", "two", "You said: two"]


def test_two_repls_alternate_turns_and_each_sees_the_others(repl_env, workdir, sessions_dir, openai_server):
    left = Repl(repl_env, "m", cwd=workdir)
    right = Repl(repl_env, "m", cwd=workdir)
    try:
        left.send("/session attach shared")
        right.send("/session attach shared")
        left.send("from left")
        out = plain(right.send("from right"))
        assert "was updated elsewhere: took its 2 new message(s)" in out
        assert sent(openai_server) == ["from left", "You said: from left", "from right"]
        left.send("left again")
        assert sent(openai_server) == ["from left", "You said: from left", "from right", "You said: from right",
                                       "left again"]
        assert contents(sessions_dir / "shared.json")[-2:] == ["left again", "You said: left again"]
    finally:
        left.close()
        right.close()


def test_two_repls_answering_at_the_same_moment_both_keep_their_turns(repl_env, workdir, sessions_dir,
                                                                      openai_server):
    left = Repl(repl_env, "m", cwd=workdir)
    right = Repl(repl_env, "m", cwd=workdir)
    try:
        left.send("/session attach race")
        right.send("/session attach race")
        openai_server.reply("slow ", "left answer", delay=0.8)
        openai_server.reply("quick right answer")
        left.child.send("left question\r")
        openai_server.wait_for_requests(1)
        right.child.send("right question\r")
        right.child.expect("quick right answer")
        left.child.expect("was also written by another surface")
        left.expect_prompt()
        right.expect_prompt()
    finally:
        left.close()
        right.close()
    assert contents(sessions_dir / "race.json") == [
        "right question", "quick right answer", "left question", "slow left answer",
    ]


def test_fork_leaves_the_parent_untouched(repl, sessions_dir):
    repl.send("/session attach parent")
    repl.send("shared start")
    parent_bytes = (sessions_dir / "parent.json").read_bytes()
    out = plain(repl.send("/session fork child"))
    assert "to:       'child'" in out and "messages: 2" in out and "[child] m>" in out
    repl.send("only in the fork")
    assert (sessions_dir / "parent.json").read_bytes() == parent_bytes
    assert contents(sessions_dir / "child.json") == ["shared start", "You said: shared start", "only in the fork",
                                                     "You said: only in the fork"]


def test_fork_of_an_unsaved_conversation(repl, sessions_dir):
    repl.send("never saved")
    assert "from:     the unsaved conversation" in plain(repl.send("/session fork copy"))
    assert contents(sessions_dir / "copy.json") == ["never saved", "You said: never saved"]


def test_deleting_the_active_session_clears_what_the_model_sees(repl, sessions_dir, openai_server):
    repl.send("/session attach doomed")
    repl.send("secret plans")
    out = plain(repl.send("/session delete doomed"))
    assert "Session 'doomed' deleted. It was the active session" in out
    assert not (sessions_dir / "doomed.json").exists()
    repl.send("fresh start")
    assert sent(openai_server) == ["fresh start"]


def test_detach_keeps_the_history_but_stops_writing(repl, sessions_dir, openai_server):
    repl.send("/session attach notes")
    repl.send("kept")
    assert "Detached from session 'notes'" in plain(repl.send("/session detach"))
    repl.send("not written")
    assert contents(sessions_dir / "notes.json") == ["kept", "You said: kept"]
    assert sent(openai_server)[:2] == ["kept", "You said: kept"]
    assert "Not bound to a session (4 messages in memory)." in plain(repl.send("/session status"))


@pytest.mark.parametrize("command", ["/session new", "/newsession"])
def test_new_clears_the_history_and_the_binding(repl, openai_server, command):
    repl.send("/session attach old")
    repl.send("old talk")
    assert "New conversation started; history cleared." in plain(repl.send(command))
    repl.send("new talk")
    assert sent(openai_server) == ["new talk"]
    assert "Not bound" in plain(repl.send("/session status"))


def test_load_over_an_unsaved_conversation_keeps_it_as_an_autosave(repl, sessions_dir):
    repl.send("/session attach target")
    repl.send("/session detach")
    repl.send("/session new")
    repl.send("precious unsaved work")
    out = plain(repl.send("/session load target"))
    assert "The unsaved conversation was kept as 'autosave-" in out
    autosaves = list(sessions_dir.glob("autosave-*.json"))
    assert len(autosaves) == 1
    assert contents(autosaves[0]) == ["precious unsaved work", "You said: precious unsaved work"]


def test_machine_sessions_load_but_never_bind(repl, sessions_dir):
    sessions_dir.mkdir(parents=True)
    (sessions_dir / "mcp-abc.json").write_text(json.dumps({"version": 2, "chat_history": [
        {"role": "user", "content": "from mcp"}, {"role": "assistant", "content": "ok"}]}))
    out = plain(repl.send("/session load mcp-abc"))
    assert "loaded (2 messages)" in out and "not bound" in out
    repl.send("more")
    assert contents(sessions_dir / "mcp-abc.json") == ["from mcp", "ok"]
    for command in ("/session save mcp-x", "/session attach autosave-1", "/session fork mcp-y"):
        assert "prefix chatcli keeps for its own sessions" in plain(repl.send(command))


def test_a_session_deleted_elsewhere_unbinds_and_is_not_resurrected(repl, sessions_dir):
    repl.send("/session attach ephemeral")
    repl.send("hello")
    (sessions_dir / "ephemeral.json").unlink()
    out = plain(repl.send("again"))
    assert "was deleted elsewhere; unbound" in out
    assert not (sessions_dir / "ephemeral.json").exists()
    assert "Not bound" in plain(repl.send("/session status"))


def test_writethrough_off_disables_both_directions(repl_env, workdir, sessions_dir):
    repl_env["CHATCLI_SESSION_WRITETHROUGH"] = "off"
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        repl.send("/session save manual")
        repl.send("not written through")
        assert contents(sessions_dir / "manual.json") == []
        repl.send("/session save manual")
        assert len(contents(sessions_dir / "manual.json")) == 2
        assert re.search(r"CHATCLI_SESSION_WRITETHROUGH +off +\(environment\)", plain(repl.send("/config session")))
    finally:
        repl.close()


def test_list_shows_counts_titles_and_the_active_session(repl):
    repl.send("/session attach alpha")
    repl.send("Explain   the repository pattern")
    repl.send("/session fork beta")
    out = plain(repl.send("/session list"))
    assert "Sessions (2), newest first:" in out
    assert "* beta" in out and "  alpha" in out
    assert "2 msgs" in out and "Explain the repository pattern" in out


def test_bad_names_and_missing_sessions_are_one_line_errors(repl):
    for command, needle in (
        ("/session save ../escape", "invalid session name '../escape'"),
        ("/session load has space", "invalid session name 'has space'"),
        ("/session delete nothing-here", "session 'nothing-here' does not exist"),
        ("/session frobnicate", "unknown action 'frobnicate' for /session (actions: save, load"),
    ):
        out = plain(repl.send(command))
        assert needle in out, command


def test_unreadable_session_file_is_reported_and_left_alone(repl, sessions_dir):
    sessions_dir.mkdir(parents=True)
    (sessions_dir / "future.json").write_text('{"version": 3, "chat_history": [], "new_thing": true}')
    before = (sessions_dir / "future.json").read_bytes()
    out = plain(repl.send("/session load future"))
    assert "format version 3 is newer" in out
    out = plain(repl.send("/session attach future"))
    assert "format version 3 is newer" in out
    assert (sessions_dir / "future.json").read_bytes() == before


def test_config_session_lists_the_settings_and_their_sources(repl):
    out = plain(repl.send("/config session"))
    for name in ("CHATCLI_HOME", "CHATCLI_SESSION_WRITETHROUGH", "CHATCLI_SESSION_AUTOSAVE", "HISTORY_MAX_SIZE"):
        assert name in out
    assert "(environment)" in out and "(default)" in out


def test_saving_over_another_session_keeps_what_it_held(repl, sessions_dir, repl_env, workdir):
    other = Repl(repl_env, "m", cwd=workdir)
    try:
        other.send("their important work")
        other.send("/session save proj")
    finally:
        other.close()
    repl.send("my unrelated chat")
    out = plain(repl.send("/session save proj"))
    assert "Session 'proj' held 2 other messages; they were kept as 'autosave-" in out
    kept = [p for p in sessions_dir.glob("autosave-*.json")
            if "their important work" in contents(p)]
    assert len(kept) == 1
    assert contents(sessions_dir / "proj.json") == ["my unrelated chat", "You said: my unrelated chat"]


def test_new_keeps_an_unsaved_conversation_as_an_autosave(repl, sessions_dir):
    repl.send("precious unsaved idea")
    out = plain(repl.send("/session new"))
    assert "The unsaved conversation was kept as 'autosave-" in out
    assert any("precious unsaved idea" in contents(p) for p in sessions_dir.glob("autosave-*.json"))


def test_leaving_keeps_an_unbound_conversation_and_says_where(repl_env, workdir, sessions_dir):
    repl = Repl(repl_env, "m", cwd=workdir)
    repl.send("worth keeping")
    name = repl.exit_keeping()
    assert contents(sessions_dir / f"{name}.json") == ["worth keeping", "You said: worth keeping"]


def test_leaving_a_trivial_conversation_writes_nothing(repl_env, workdir, sessions_dir):
    repl = Repl(repl_env, "m", cwd=workdir)
    repl.send("/help")
    repl.close()
    assert not sessions_dir.exists() or not list(sessions_dir.glob("autosave-*.json"))


def test_leaving_a_bound_session_with_write_through_off_writes_it_once_more(repl_env, workdir, sessions_dir):
    repl_env["CHATCLI_SESSION_WRITETHROUGH"] = "off"
    repl = Repl(repl_env, "m", cwd=workdir)
    repl.send("/session save wt")
    repl.send("late turn")
    assert contents(sessions_dir / "wt.json") == []
    repl.close()
    assert contents(sessions_dir / "wt.json") == ["late turn", "You said: late turn"]
    assert not list(sessions_dir.glob("autosave-*.json"))  # a bound REPL makes no autosave copy


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_a_signal_mid_answer_keeps_the_question_and_the_partial_answer(repl_env, workdir, sessions_dir,
                                                                       openai_server, signame):
    import signal

    import pexpect

    repl = Repl(repl_env, "m", cwd=workdir, args=("--session", "sig"))
    openai_server.reply("half an ", "answer", hang_after=True)
    repl.child.send("a question\r")
    repl.child.expect("half an answer")
    repl.child.kill(getattr(signal, signame))
    repl.child.expect(pexpect.EOF, timeout=20)
    document = json.loads((sessions_dir / "sig.json").read_text())
    assert document["chat_history"] == [
        {"role": "user", "content": "a question", "meta": {"mode": "chat"}},
        {"role": "assistant", "content": "half an answer", "meta": {"mode": "chat", "interrupted": True}},
    ]


def test_a_long_session_name_is_shortened_in_the_prompt(repl):
    name = "a" * 100 + "z"
    repl.child.send(f"/session save {name}\r")
    repl.child.expect("saved")
    repl.child.expect(r"\[a{15}…a{15}z\] ")


def test_tab_completes_session_actions_and_names(repl, sessions_dir):
    repl.send("/session save alpha-notes")
    repl.child.send("/ses\t")
    repl.child.send("LOAD al\t")
    repl.child.expect("pha-notes")
    assert "Session 'alpha-notes' loaded" in plain(repl.send(""))
