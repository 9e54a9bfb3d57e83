"""A turn on a large session that does not wait for the whole file (engine/resume.py): the
one-shot reads the session's ends, asks the model, and reads the rest meanwhile. What it sends
and keeps is what the whole history would have sent and kept, and everything that needs the
whole history (search, fork, export, /rewind, adoption, compaction) waits for it.

In-process, the sizes that make a session "large" are scaled down (a file of about 350 KB, a
2,000-token window); the process tests use a real 18 MB session."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import orjson
import pytest
from conftest import CHATCLI, run_chatcli

from chatcli.commands.builtin import build_registry
from chatcli.config.settings import Settings
from chatcli.core import journal as rules
from chatcli.core.errors import ProviderError
from chatcli.core.messages import Message
from chatcli.engine import resume, sessions
from chatcli.engine.conversation import Conversation
from chatcli.store.home import Home
from chatcli.store.sessions import SessionError

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma".split()


def said(i: int) -> str:
    """About 1 KB of text, different for every message (the first one holds a word no other does)."""
    words = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(150))
    return f"message {i} {'aardvark ' if i == 0 else ''}{words}"


@pytest.fixture
def small_large(monkeypatch, openai_env):
    """What counts as large, scaled down; a 2,000-token window (tails of 16 KB are larger)."""
    monkeypatch.setattr("chatcli.store.sessions.CHUNKED_FROM", 64 << 10)
    monkeypatch.setattr("chatcli.store.session_ends.FRONT", 64 << 10)  # a small journal's checkpoints are in the file
    monkeypatch.setattr("chatcli.engine.resume.TAIL_MIN", 16 << 10)
    openai_env.update(CHATCLI_CONTEXT_WINDOW="2000")
    return openai_env


def build(env: dict, name: str = "big", count: int = 400, turns: int = 2) -> Path:
    """Session `name` as chatcli writes one: `count` messages journaled, then `turns` real turns
    (each with its /rewind checkpoint)."""
    conv = Conversation(Settings.load(env), journal=True)
    sessions.start(conv, name=name)
    conv.history += [Message("user" if i % 2 == 0 else "assistant", said(i)) for i in range(count)]
    conv.sync_transcript()
    conv.binding.write_through()
    for index in range(turns):
        conv.send(f"turn {index}")
    return conv.store.path(name)


def early(env: dict, name: str = "big") -> Conversation:
    """A conversation started as the one-shot starts one: the session's ends read, the rest not yet."""
    conv = Conversation(Settings.load(env), journal=True)
    sessions.start(conv, name=name, early=True)
    assert conv.pending is not None, "the session was read whole, not from its ends"
    return conv


def whole(env: dict, name: str = "big") -> Conversation:
    conv = Conversation(Settings.load(env), journal=True)
    sessions.start(conv, name=name)
    assert conv.pending is None
    return conv


def contents(path: Path) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in json.loads(path.read_bytes())["chat_history"]]


def live_journal(conv: Conversation) -> list[str]:
    journal = Home.of(conv.settings).journal(conv.transcript.id)
    return rules.replay(journal.read().events).live


def asked_early(monkeypatch) -> list:
    """The early requests made from here on (None for a turn that waited for the whole)."""
    made: list = []
    real = resume.ask_early

    def spy(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(resume, "ask_early", spy)
    return made


def test_the_early_request_and_what_is_kept_are_what_the_whole_history_gives(small_large, openai_server, tmp_path,
                                                                             monkeypatch):
    build(small_large)
    twin = dict(small_large, CHATCLI_HOME=str(tmp_path / "twin"))
    shutil.copytree(small_large["CHATCLI_HOME"], twin["CHATCLI_HOME"])
    made = asked_early(monkeypatch)

    notes_early: list[str] = []
    conv = early(small_large)
    result = conv.send("what comes next?", on_notice=notes_early.append)
    assert made and made[-1] is not None, "the request waited for the whole history"
    sent_early = openai_server.requests[-1].body

    notes_whole: list[str] = []
    other = whole(twin)
    other_result = other.send("what comes next?", on_notice=notes_whole.append)
    sent_whole = openai_server.requests[-1].body

    assert sent_early["messages"] == sent_whole["messages"] and sent_early.get("tools") == sent_whole.get("tools")
    assert sent_early["messages"][-1]["content"] == "what comes next?" and len(sent_early["messages"]) < 50
    assert result.text == other_result.text == "You said: what comes next?"
    assert notes_early == notes_whole and any("Nothing was compacted" in note for note in notes_early), notes_early
    assert result.notes == other_result.notes
    mine, theirs = conv.store.path("big"), other.store.path("big")
    assert contents(mine) == contents(theirs)
    assert len(contents(mine)) == 400 + 4 + 2 and contents(mine)[-2:] == [("user", "what comes next?"),
                                                                          ("assistant", "You said: what comes next?")]
    assert live_journal(conv) == live_journal(other)
    # The next process trusts what this one left: another early turn, then /rewind to before it.
    again = early(small_large)
    again.send("and after that?")
    assert made[-1] is not None
    out = build_registry().dispatch("/rewind 1", again).text
    assert "restored" in out.lower() or "rewound" in out.lower(), out
    assert contents(mine)[-1] == ("assistant", "You said: what comes next?")


@pytest.mark.parametrize("operation", ["fork", "export", "transcript search", "session search", "rewind", "compact"])
def test_what_needs_the_whole_history_reads_the_rest_first(small_large, openai_server, tmp_path, operation):
    build(small_large)
    conv = early(small_large)
    registry = build_registry()
    if operation == "fork":
        registry.dispatch("/session fork copy", conv)
        assert contents(conv.store.path("copy")) == contents(conv.store.path("big"))
        assert len(contents(conv.store.path("copy"))) == 404
    elif operation == "export":
        target = tmp_path / "out.md"
        registry.dispatch(f"/session export md {target}", conv)
        text = target.read_text()
        assert "aardvark" in text and said(399)[:40] in text
    elif operation == "transcript search":
        out = registry.dispatch("/session transcript search aardvark", conv).text
        assert "#1 " in out and "aardvark" in out, out
    elif operation == "session search":  # reads the saved files, this one whole too
        out = registry.dispatch("/session search aardvark", conv).text
        assert "big" in out and "aardvark" in out, out
        return
    elif operation == "rewind":
        out = registry.dispatch("/rewind 1", conv).text
        assert len(conv.history) == 402, out  # back to before the last turn, the 400 before it kept
        assert conv.history[0].content == said(0)
    else:
        openai_server.reply("A summary of the early part.")
        registry.dispatch("/compact", conv)
        asked = openai_server.requests[-1].body["messages"]
        assert any("aardvark" in str(message.get("content")) for message in asked)  # the first message too
        assert conv.history[0].is_summary and len(conv.history) < 20
    assert conv.pending is None


def test_another_surfaces_write_after_the_ends_were_read_is_adopted(small_large, openai_server, monkeypatch):
    build(small_large)
    made = asked_early(monkeypatch)
    conv = early(small_large)
    other = whole(small_large)
    other.send("from the editor")
    notes: list[str] = []
    conv.send("from the terminal", on_notice=notes.append)
    assert made[-1] is None  # the file changed since its ends were read: planned on the whole
    assert any("updated elsewhere" in note for note in notes), notes
    assert contents(conv.store.path("big"))[-4:] == [
        ("user", "from the editor"), ("assistant", "You said: from the editor"),
        ("user", "from the terminal"), ("assistant", "You said: from the terminal")]
    assert len(contents(conv.store.path("big"))) == 408


def test_a_session_damaged_in_its_middle_keeps_its_bytes_and_the_question(small_large, openai_server):
    path = build(small_large)
    raw = path.read_bytes()
    middle = raw.index(b'"content":"message 200 ')
    damaged = raw[:middle] + b"!" + raw[middle + 1:]
    path.write_bytes(damaged)
    conv = early(small_large)
    with pytest.raises(SessionError, match="not valid JSON"):
        conv.send("still there?")
    after = path.read_bytes()
    assert after[: len(damaged) - 2] == damaged[:-2]  # every byte it had, but the closing "]}" the append moved
    assert b'"still there?"' in after[len(damaged) - 2:]
    assert conv.session_name is None  # unbound: nothing more is written to it


def test_a_provider_error_on_the_early_request_keeps_the_question(small_large, openai_server):
    build(small_large)
    conv = early(small_large)
    openai_server.reply(status=401, error="Incorrect API key provided")
    with pytest.raises(ProviderError, match="Incorrect API key"):
        conv.send("are you there?")
    kept = contents(conv.store.path("big"))
    assert kept[-1] == ("user", "are you there?") and len(kept) == 405
    assert live_journal(conv)[-1] == rules.content_digest(Message("user", "are you there?"))


def large_session(env: dict, count: int = 22_000) -> Path:
    """An 18 MB session chatcli wrote (past the size from which it is read in pieces)."""
    conv = Conversation(Settings.load(env), journal=True)
    sessions.start(conv, name="big")
    conv.history += [Message("user" if i % 2 == 0 else "assistant", said(i)) for i in range(count)]
    conv.sync_transcript()
    conv.binding.write_through()
    conv.send("warm")  # names its cost record: later turns append in place
    return conv.store.path("big")


def test_a_one_shot_killed_while_it_waits_for_the_answer_loses_nothing(openai_env, openai_server):
    path = large_session(openai_env)
    count = len(orjson.loads(path.read_bytes())["chat_history"])
    openai_server.reply("never", stall_before=30)
    process = subprocess.Popen([CHATCLI, "--session", "big", "-p", "the question asked"], env=openai_env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not openai_server.requests[len(openai_server.requests) - 1:] or \
            openai_server.requests[-1].body["messages"][-1]["content"] != "the question asked":
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    history = orjson.loads(path.read_bytes())["chat_history"]  # whole JSON, the question in it
    assert len(history) == count + 1 and history[-1]["content"] == "the question asked"
    done = run_chatcli("--session", "big", "-p", "and again", env=openai_env, timeout=120)
    assert done.returncode == 0, done.stderr
    history = orjson.loads(path.read_bytes())["chat_history"]
    assert [m["content"] for m in history[-3:]] == ["the question asked", "and again", "You said: and again"]
    shown = run_chatcli("session", "transcript", "big", "show", str(count + 1), "3", env=openai_env)
    assert "the question asked" in shown.stdout and "You said: and again" in shown.stdout, shown.stdout


def test_the_one_shot_answers_a_large_session_before_reading_it_whole(openai_env, openai_server):
    path = large_session(openai_env)
    done = run_chatcli("--session", "big", "-p", "quick one", env=openai_env, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "You said: quick one", done.stderr
    assert f"Attached to session 'big' ({22_002:,} messages)".replace(",", "") in done.stderr, done.stderr
    history = orjson.loads(path.read_bytes())["chat_history"]
    assert len(history) == 22_004 and history[0]["content"] == said(0)


