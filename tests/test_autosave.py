"""Autosave on exit (SPEC §6.2) through the real REPL, for every way a REPL ends."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pexpect
import pytest
from conftest import CHATCLI, run_chatcli
from repl_driver import Repl, plain


def autosaves(sessions_dir: Path) -> list[Path]:
    return sorted(sessions_dir.glob("autosave-*.json")) if sessions_dir.exists() else []


def contents(path: Path) -> list[str]:
    return [m["content"] for m in json.loads(path.read_text())["chat_history"]]


def end(repl: Repl, how: str) -> str:
    """End the REPL the way a user (or the system) would; return what it printed last."""
    if how in ("/exit", "/quit"):
        repl.child.send(how + "\r")
    elif how == "ctrl-d":
        repl.child.sendeof()
    else:
        repl.child.kill(getattr(signal, how))
    repl.child.expect(pexpect.EOF, timeout=20)
    return plain(repl.child.before)


@pytest.mark.parametrize("how", ["/exit", "/quit", "ctrl-d", "SIGTERM", "SIGHUP"])
def test_every_way_out_keeps_one_autosave_holding_the_conversation(repl_env, workdir, sessions_dir, how):
    repl = Repl(repl_env, "m", cwd=workdir)
    repl.send("remember the blue door")
    said = end(repl, how)
    [kept] = autosaves(sessions_dir)
    assert contents(kept) == ["remember the blue door", "You said: remember the blue door"]
    assert kept.stem.startswith("autosave-20") and len(kept.stem) in (24, 26, 27)
    assert oct(kept.stat().st_mode & 0o777) == "0o600"
    if how not in ("SIGHUP",):  # after a hang-up there is no terminal left to read the line
        assert f"Conversation kept as session '{kept.stem}'" in said


def test_closing_the_terminal_keeps_the_conversation_and_ends_quietly(repl_env, workdir, sessions_dir, tmp_path):
    """A real hang-up: the terminal goes away under the prompt, so drawing it fails too."""
    errors = tmp_path / "stderr"
    child = pexpect.spawn("/bin/sh", ["-c", f"exec '{CHATCLI}' 2>'{errors}'"], env=repl_env, cwd=workdir,
                          encoding="utf-8", timeout=20, dimensions=(40, 100))
    child.expect(r"m>")
    child.send("remember the blue door\r")
    child.expect(r"\n[\s\S]*?m>")
    pid = child.pid
    os.close(child.child_fd)  # the terminal window is closed: the kernel hangs up the session
    child.closed = True
    deadline = time.monotonic() + 20
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert done[0] == pid, "the REPL did not end after the hang-up"
    assert os.waitstatus_to_exitcode(done[1]) == 0
    assert errors.read_text() == ""
    [kept] = autosaves(sessions_dir)
    assert contents(kept) == ["remember the blue door", "You said: remember the blue door"]


@pytest.mark.parametrize("value", ["false", "0", "off", "no", "disabled", "OFF"])
def test_the_gate_turns_autosave_off(repl_env, workdir, sessions_dir, value):
    repl_env["CHATCLI_SESSION_AUTOSAVE"] = value
    repl = Repl(repl_env, "m", cwd=workdir)
    repl.send("not to be kept")
    end(repl, "/exit")
    assert autosaves(sessions_dir) == []


def test_a_trivial_conversation_leaves_nothing(repl_env, workdir, sessions_dir, openai_server):
    repl = Repl(repl_env, "m", cwd=workdir)
    repl.send("/model")
    end(repl, "SIGTERM")
    assert autosaves(sessions_dir) == [] and openai_server.requests == []


def test_a_bound_repl_writes_its_session_and_makes_no_autosave(repl_env, workdir, sessions_dir):
    repl = Repl(repl_env, "m", cwd=workdir, args=("--session", "work"))
    repl.send("a bound turn")
    said = end(repl, "/exit")
    assert "Conversation saved in session 'work' (chatcli --session work resumes it)." in said
    assert contents(sessions_dir / "work.json") == ["a bound turn", "You said: a bound turn"]
    assert autosaves(sessions_dir) == []


def test_two_repls_leaving_together_keep_two_autosaves(repl_env, workdir, sessions_dir):
    repls = [Repl(repl_env, "m", cwd=workdir) for _ in range(2)]
    for i, repl in enumerate(repls):
        repl.send(f"conversation {i}")
    for repl in repls:
        repl.child.send("/exit\r")
    for repl in repls:
        repl.child.expect(pexpect.EOF, timeout=20)
    kept = autosaves(sessions_dir)
    assert sorted(contents(path)[0] for path in kept) == ["conversation 0", "conversation 1"]


def test_one_shot_runs_never_autosave(repl_env, workdir, sessions_dir):
    result = run_chatcli("-p", "just once", env=repl_env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert autosaves(sessions_dir) == []


def test_the_repl_names_the_most_recent_session_at_start(repl_env, workdir, sessions_dir):
    repl = Repl(repl_env, "m", cwd=workdir)
    repl.send("/session save plans")
    repl.send("one turn")
    repl.close()
    again = Repl(repl_env, "m", cwd=workdir)
    try:
        assert ("Most recent session: 'plans' (2 messages, saved just now); resume it with chatcli -c "
                "or /session load plans.") in plain(again.child.before)
    finally:
        again.close()


def test_the_start_line_follows_the_newest_write_and_skips_what_the_sweep_removes(repl_env, workdir,
                                                                                 sessions_dir):
    repl = Repl(repl_env, "m", cwd=workdir)
    repl.send("kept by exiting")
    end(repl, "/exit")
    [kept] = autosaves(sessions_dir)
    again = Repl(repl_env, "m", cwd=workdir)
    assert f"Most recent session: '{kept.stem}'" in plain(again.child.before)
    again.close()
    old = time.time() - 100 * 86_400
    os.utime(kept, (old, old))  # now past the TTL: the sweep is about to remove it
    third = Repl(repl_env, "m", cwd=workdir)
    try:
        assert "Most recent session" not in plain(third.child.before)
    finally:
        third.close()


def test_no_start_line_when_resuming(repl_env, workdir, sessions_dir):
    repl = Repl(repl_env, "m", cwd=workdir, args=("--session", "alpha"))
    repl.send("a turn")
    repl.close()
    again = Repl(repl_env, "m", cwd=workdir, args=("-c",))
    try:
        before = plain(again.child.before)
        assert "Resumed session 'alpha'" in before and "Most recent session" not in before
    finally:
        again.close()


def continued_autosave(repl_env, workdir, sessions_dir) -> tuple[Path, Repl]:
    """An autosave left by one REPL, and a second REPL that continued it with a turn."""
    repl = Repl(repl_env, "m", cwd=workdir)
    repl.send("remember the blue door")
    end(repl, "/exit")
    [first] = autosaves(sessions_dir)
    repl = Repl(repl_env, "m", cwd=workdir, args=("--continue",))
    repl.send("and the red key")
    return first, repl


def test_continuing_an_autosave_keeps_it_there_and_makes_no_second_copy(repl_env, workdir, sessions_dir):
    first, repl = continued_autosave(repl_env, workdir, sessions_dir)
    said = end(repl, "/exit")
    assert autosaves(sessions_dir) == [first]  # one conversation, one copy
    assert contents(first) == ["remember the blue door", "You said: remember the blue door",
                               "and the red key", "You said: and the red key"]
    assert f"Conversation kept in session '{first.stem}'" in said
    # Loaded with /session load, continued, and replaced by a new conversation: kept there too.
    repl = Repl(repl_env, "m", cwd=workdir)
    repl.send(f"/session load {first.stem}")
    repl.send("and the green lamp")
    repl.send("/session new")
    end(repl, "/exit")
    assert autosaves(sessions_dir) == [first]
    assert contents(first)[-2:] == ["and the green lamp", "You said: and the green lamp"]


def test_an_autosave_changed_meanwhile_is_not_overwritten(repl_env, workdir, sessions_dir):
    first, repl = continued_autosave(repl_env, workdir, sessions_dir)
    before = first.read_bytes()
    data = json.loads(before)
    data["chat_history"].append({"role": "user", "content": "written elsewhere"})
    first.write_text(json.dumps(data))
    end(repl, "/exit")
    assert json.loads(first.read_text())["chat_history"][-1]["content"] == "written elsewhere"
    assert len(autosaves(sessions_dir)) == 2  # the continued conversation is kept as a new one
