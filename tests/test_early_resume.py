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
from chatcli.engine import turn as turn_module
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
    return conv.store.path(name) if conv.store.root is not None else None  # (none on a server)


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


def stored(env: dict, name: str = "big") -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in Home.of(Settings.load(env)).sessions().load(name)[0].history]


def test_on_a_server_the_ends_are_read_without_the_rest_and_the_turn_is_the_whole_historys(
        small_large, openai_server, pg_dsn, monkeypatch):
    server = dict(small_large, CHATCLI_STORE=pg_dsn)
    build(server)  # its snapshot, then two turns appended as rows of their own
    path = build(small_large)  # the same session in a file, read whole
    made = asked_early(monkeypatch)
    loads = []
    real_load = Home.of(Settings.load(server)).sessions().__class__.load
    monkeypatch.setattr(type(Home.of(Settings.load(server)).sessions()), "load",
                        lambda self, *a, **k: loads.append(a) or real_load(self, *a, **k))

    conv = early(server)
    assert loads == []  # the ends only: the whole is read after the request is sent
    result = conv.send("what comes next?")
    assert made[-1] is not None and result.text == "You said: what comes next?"
    sent_early = openai_server.requests[-1].body["messages"]
    whole(small_large).send("what comes next?")
    assert sent_early == openai_server.requests[-1].body["messages"] and len(sent_early) < 50
    assert stored(server) == contents(path) and len(stored(server)) == 406

    again = early(server)  # the ends now hold three appended turns
    other = whole(server)
    other.send("from another machine")  # written after the ends were read: adopted, the turn planned on the whole
    notes: list[str] = []
    again.send("and after that?", on_notice=notes.append)
    assert made[-1] is None and any("updated elsewhere" in note for note in notes), notes
    assert stored(server)[-4:] == [("user", "from another machine"), ("assistant", "You said: from another machine"),
                                   ("user", "and after that?"), ("assistant", "You said: and after that?")]
    forked = early(server)
    build_registry().dispatch("/session fork copy", forked)  # needs the whole history: reads it first
    assert stored(server, "copy") == stored(server) and len(stored(server)) == 410


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


def stop_while_reading(monkeypatch) -> list[bool]:
    """A real Ctrl-C (SIGINT to this process) once the turn waits for the rest of the session,
    which is read slowly enough to be waited for."""
    import threading

    from chatcli.store.sessions import SessionStore

    waiting, pressed = threading.Event(), []
    real_settle, real_load = resume.Pending.settle, SessionStore.load_opened

    def settle(self, conv):
        waiting.set()
        return real_settle(self, conv)

    def slow(self, name, fd, st):
        if waiting.wait(10):
            time.sleep(0.05)
            pressed.append(True)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.3)
        return real_load(self, name, fd, st)

    monkeypatch.setattr(resume.Pending, "settle", settle)
    monkeypatch.setattr(SessionStore, "load_opened", slow)
    return pressed


@pytest.fixture
def ctrl_c():
    """Ctrl-C raises KeyboardInterrupt in this process, whatever the test runner set."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def fail_at_checkpoint(monkeypatch, error: BaseException) -> None:
    real = Conversation.checkpoint

    def checkpoint(self, label, command=False):
        if label.startswith("stopped"):
            raise error
        return real(self, label, command)

    monkeypatch.setattr(Conversation, "checkpoint", checkpoint)


def stop_while_binding(monkeypatch) -> list[bool]:
    """A real Ctrl-C in the middle of binding the session read whole."""
    from chatcli.engine.binding import Binding

    pressed, real_bind = [], Binding.bind

    def bind(self, *args, **kwargs):
        pressed.append(True)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the signal arrives here, halfway
        return real_bind(self, *args, **kwargs)

    monkeypatch.setattr(Binding, "bind", bind)
    return pressed


@pytest.mark.parametrize("where", ["while the rest is read", "while it is bound", "at the checkpoint",
                                   "an error at the checkpoint"])
def test_a_stop_after_the_early_answer_keeps_the_answer_shown(small_large, openai_server, monkeypatch, ctrl_c,
                                                                where):
    build(small_large)
    made = asked_early(monkeypatch)
    conv = early(small_large)
    if where == "while the rest is read":
        pressed = stop_while_reading(monkeypatch)
    elif where == "while it is bound":
        pressed = stop_while_binding(monkeypatch)
    else:
        fail_at_checkpoint(monkeypatch, KeyboardInterrupt() if where == "at the checkpoint" else OSError("no space"))
    shown: list[str] = []
    if where == "an error at the checkpoint":
        with pytest.raises(OSError, match="no space"):
            conv.send("stopped after its answer", on_text=shown.append)
    else:
        result = conv.send("stopped after its answer", on_text=shown.append)
        assert result.interrupted and result.text == "You said: stopped after its answer"
        assert not where.startswith("while") or pressed
    assert made[-1] is not None and "".join(shown) == "You said: stopped after its answer"
    path = conv.store.path("big")
    kept = json.loads(path.read_bytes())["chat_history"]
    assert [(m["role"], m["content"]) for m in kept[-2:]] == [("user", "stopped after its answer"),
                                                               ("assistant", "You said: stopped after its answer")]
    assert "interrupted" not in kept[-1]["meta"] and len(kept) == 406  # its stream had ended: the answer is whole
    assert live_journal(conv) == rules.history_hashes(conv.history)
    monkeypatch.undo()
    later = whole(small_large)
    assert len(later.history) == 406
    later.send("and then")
    assert contents(path)[-3:] == [("assistant", "You said: stopped after its answer"), ("user", "and then"),
                                   ("assistant", "You said: and then")]


@pytest.mark.parametrize("asked", ["early", "after the whole read"])
def test_a_session_made_read_only_while_it_is_read_says_so_and_the_one_shot_fails(small_large, openai_server,
                                                                                   monkeypatch, capsys, asked):
    from chatcli.cli.oneshot import run_oneshot
    from chatcli.store.sessions import SessionStore

    path = build(small_large)
    real = SessionStore.load_opened

    def made_read_only_meanwhile(self, name, fd, st):
        path.chmod(0o444)
        return real(self, name, fd, st)

    monkeypatch.setattr(SessionStore, "load_opened", made_read_only_meanwhile)
    if asked != "early":  # a turn planned on the whole history (its tail fits the window, say)
        monkeypatch.setattr(resume, "ask_early", lambda *_args, **_kwargs: None)
    made = asked_early(monkeypatch)
    code = run_oneshot(Settings.load(small_large), "written where?", None, start={"name": "big"})
    out, err = capsys.readouterr()
    assert (made[-1] is not None) == (asked == "early") and out.strip() == "You said: written where?"
    assert "It is not bound" in err and "read-only" in err, err
    assert "this turn was not written to a session" in err and code == 1, err
    kept = contents(path)
    if asked == "early":  # appended before it was made read-only
        assert kept[-1] == ("user", "written where?") and len(kept) == 405
    else:
        assert len(kept) == 404


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




# -- a long session another program wrote: the journal recorded after the answer -------------------

def go_shaped(env: dict, name: str = "theirs", count: int = 60) -> Path:
    """Session `name` as Go ChatCLI writes one: no journal, its times after the history."""
    path = Path(env["CHATCLI_HOME"]) / "sessions" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": said(i)} for i in range(count)]
    path.write_bytes(orjson.dumps({"name": name, "chat_history": history, "created_at": "2026-01-02T03:04:05Z",
                                   "updated_at": "2026-01-02T03:04:06Z"}))
    path.chmod(0o600)
    return path


@pytest.fixture
def record_later(monkeypatch):
    """A history of 50 messages counts as long, and as long enough for the progress line."""
    monkeypatch.setattr(resume, "RECORD_LATER_FROM", 50)
    monkeypatch.setattr(resume, "PROGRESS_FROM", 50)


def recorded_messages(env: dict, conv: Conversation) -> int:
    journal = Home.of(Settings.load(env)).journal(conv.session.transcript_id)
    return len(rules.replay(journal.read().events).live) if journal.exists() else 0


@pytest.mark.foreign_sessions("theirs")
def test_the_answer_comes_before_a_long_foreign_history_is_journaled(openai_env, openai_server, record_later,
                                                                      monkeypatch):
    path = go_shaped(openai_env)
    conv = Conversation(Settings.load(openai_env), journal=True)
    sessions.start(conv, name="theirs")
    seen_when_asked: list = []
    real = turn_module.stream_round

    def asked(conv_, request, on_text):
        seen_when_asked.append((contents(path)[-1], recorded_messages(openai_env, conv_)))
        return real(conv_, request, on_text)

    monkeypatch.setattr(turn_module, "stream_round", asked)
    notes: list[str] = []
    result = conv.send("a new question", on_notice=notes.append)
    # When the model was asked, the question was in the session file, and the journal held nothing yet.
    assert seen_when_asked == [(("user", "a new question"), 0)]
    assert result.text == "You said: a new question"
    assert any(note.startswith("Recording session 'theirs' in its transcript journal (62 messages") for note in notes)
    kept = contents(path)
    assert len(kept) == 62 and kept[-2:] == [("user", "a new question"), ("assistant", "You said: a new question")]
    assert kept[:60] == [("user" if i % 2 == 0 else "assistant", said(i)) for i in range(60)]
    assert live_journal(conv) == rules.history_hashes(conv.history)
    document = json.loads(path.read_bytes())
    assert document["created_at"] == "2026-01-02T03:04:05Z" and document["transcript_id"] == conv.transcript.id
    # The turn's checkpoint is in the journal where the ordinary turn puts it: before the question.
    later = whole(openai_env, "theirs")
    build_registry().dispatch("/rewind 1", later)
    assert len(later.history) == 60 and later.history[-1].content == said(59)


@pytest.mark.foreign_sessions("theirs")
def test_a_stop_while_the_journal_is_recorded_loses_nothing(openai_env, openai_server, record_later, monkeypatch):
    from chatcli.engine import transcript
    from chatcli.store import journal as journal_store

    path = go_shaped(openai_env)
    monkeypatch.setattr(transcript, "STREAMED_LINES", 10)
    real_write = journal_store._Append.write
    writes: list[int] = []

    def stopped(self, events, durable=True):
        writes.append(len(events))
        if len(writes) == 3:
            raise KeyboardInterrupt  # Ctrl-C (or a kill) in the middle of recording the history
        return real_write(self, events, durable)

    monkeypatch.setattr(journal_store._Append, "write", stopped)
    conv = Conversation(Settings.load(openai_env), journal=True)
    sessions.start(conv, name="theirs")
    with pytest.raises(KeyboardInterrupt):
        conv.send("asked before the stop")
    # The answer was kept in the session before the recording began.
    assert contents(path)[-2:] == [("user", "asked before the stop"), ("assistant", "You said: asked before the stop")]
    assert 0 < recorded_messages(openai_env, conv) < 62
    monkeypatch.setattr(journal_store._Append, "write", real_write)
    later = whole(openai_env, "theirs")
    later.send("and after it")
    assert len(contents(path)) == 64
    assert live_journal(later) == rules.history_hashes(later.history)
    shown = run_chatcli("session", "transcript", "theirs", "show", "61", "4", env=openai_env)
    assert "asked before the stop" in shown.stdout and "You said: and after it" in shown.stdout, shown.stdout
    # The stopped turn's /rewind checkpoint is where the ordinary turn puts it: before its question.
    out = build_registry().dispatch("/rewind 2", later).text
    assert len(later.history) == 60 and later.history[-1].content == said(59), out


@pytest.mark.foreign_sessions("theirs")
def test_a_question_the_file_could_not_take_keeps_one_checkpoint(openai_env, openai_server, record_later,
                                                                  monkeypatch):
    go_shaped(openai_env)
    monkeypatch.setattr(resume, "question_kept", lambda _conv, _later: False)  # journaled now, as always
    conv = Conversation(Settings.load(openai_env), journal=True)
    sessions.start(conv, name="theirs")
    conv.send("one checkpoint, please")
    later = whole(openai_env, "theirs")
    assert [point.label for point in later.checkpoints] == ["one checkpoint, please"]
    build_registry().dispatch("/rewind 1", later)
    assert len(later.history) == 60


@pytest.mark.foreign_sessions("theirs")
def test_a_go_shaped_file_read_in_pieces_is_the_file_read_whole(openai_env, monkeypatch):
    from chatcli.core.session import encode_session
    from chatcli.store import sessions as store_module

    go_shaped(openai_env, count=300)
    store = Conversation(Settings.load(openai_env)).store
    whole_read, _ = store.load("theirs")
    pieces: list[bool] = []
    real = store_module._read_in_pieces
    monkeypatch.setattr(store_module, "_read_in_pieces",
                        lambda *args: pieces.append((found := real(*args)) is not None) or found)
    monkeypatch.setattr(store_module, "CHUNKED_FROM", 1024)
    monkeypatch.setattr(store_module, "PIECE", 4096)
    read, _ = store.load("theirs")
    assert pieces == [True]
    assert encode_session(read) == encode_session(whole_read)
    assert read.appendable is False and whole_read.appendable is False  # written whole, in chatcli's layout
