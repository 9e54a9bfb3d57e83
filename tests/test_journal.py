"""The transcript journal (SPEC §7): append-once, rewrites, damage, forks and crashes, on real files."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from repl_driver import Repl
from test_go_reader import go_reads

from chatcli.config.settings import Settings
from chatcli.core import journal as rules
from chatcli.core.messages import Message
from chatcli.engine import sessions
from chatcli.engine.conversation import Conversation
from chatcli.store.journal import Journal
from chatcli.store.sessions import WHOLE_BELOW, SessionStore


@pytest.fixture
def settings(env) -> Settings:
    return Settings.load(env)


@pytest.fixture
def transcripts(env) -> Path:
    return Path(env["CHATCLI_HOME"]) / "transcripts"


def conversation(settings, *contents: str) -> Conversation:
    conv = Conversation(settings, journal=True)
    for i, text in enumerate(contents):
        conv.history.append(Message("user" if i % 2 == 0 else "assistant", text))
    return conv


def events(path: Path) -> list[dict]:
    """The journal's events but its `synced` lines (a sync's bookkeeping, not the history)."""
    return [e for e in map(json.loads, filter(str.strip, path.read_text().splitlines())) if e["type"] != "synced"]


def messages_of(path: Path) -> list[str]:
    return [e["message"]["content"] for e in events(path) if e["type"] == "message"]


def test_each_message_is_recorded_once_over_many_syncs(settings, transcripts):
    conv = conversation(settings)
    for turn in range(5):
        conv.history.append(Message("user", f"question {turn}"))
        conv.history.append(Message("assistant", f"answer {turn}"))
        assert conv.sync_transcript() == []
        assert conv.sync_transcript() == []  # nothing new: nothing written
    path = transcripts / f"{conv.transcript.id}.jsonl"
    assert messages_of(path) == [text for t in range(5) for text in (f"question {t}", f"answer {t}")]
    assert all(e["v"] == 1 for e in events(path))
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert conv.snapshot().transcript_id == conv.transcript.id


def test_identical_repeated_messages_stay_distinct(settings, transcripts):
    conv = conversation(settings, "ok", "ok", "ok", "ok")
    conv.sync_transcript()
    recorded = [e for e in events(transcripts / f"{conv.transcript.id}.jsonl") if e["type"] == "message"]
    assert len(recorded) == 4 and len({e["hash"] for e in recorded}) == 4


def test_a_compaction_like_rewrite_adds_only_the_summary_and_one_rewrite(settings, transcripts):
    conv = conversation(settings, "u1", "a1", "u2", "a2", "u3", "a3")
    conv.sync_transcript()
    summary = Message("assistant", "summary of u1..a2", meta={"is_summary": True, "summary_of": 4})
    conv.history = [summary, *conv.history[4:]]  # what /compact does: a new history list
    conv.sync_transcript()
    path = transcripts / f"{conv.transcript.id}.jsonl"
    tail = events(path)[6:]
    assert [e["type"] for e in tail] == ["message", "rewrite"]
    assert tail[0]["message"]["content"] == "summary of u1..a2"
    state = rules.replay(events(path))
    live, missing = state.history()
    assert [m.content for m in live] == ["summary of u1..a2", "u3", "a3"] and missing == []
    # As of the sixth event, before the compaction, the live history was the original six.
    before, _ = rules.replay(events(path), upto=6).history()
    assert [m.content for m in before] == ["u1", "a1", "u2", "a2", "u3", "a3"]


def test_a_message_changed_in_place_is_a_rewrite(settings, transcripts):
    conv = conversation(settings, "u1", "a1")
    conv.sync_transcript()
    conv.history[1] = Message("assistant", "a1, corrected")
    conv.sync_transcript()
    kinds = [e["type"] for e in events(transcripts / f"{conv.transcript.id}.jsonl")]
    assert kinds == ["message", "message", "message", "rewrite"]


def test_a_torn_line_and_a_foreign_line_are_skipped_counted_and_appends_start_fresh(settings, transcripts):
    conv = conversation(settings, "u1", "a1")
    conv.sync_transcript()
    path = transcripts / f"{conv.transcript.id}.jsonl"
    with open(path, "ab") as handle:
        handle.write(b"not json at all\n")
        handle.write(b'{"v": 1, "type": "message", "hash": "abc", "mess')  # a crash mid-append
    reading = Journal(transcripts, conv.transcript.id).read()
    assert ([e["type"] for e in reading.events], reading.foreign, reading.torn) == (["message", "message", "synced"],
                                                                                   1, 1)
    fresh = Conversation(settings, journal=True)
    fresh.binding.bind(None, conv.snapshot(), None)
    fresh.history.append(Message("user", "u2"))
    assert fresh.sync_transcript() == []
    reading = Journal(transcripts, conv.transcript.id).read()
    assert (reading.foreign, reading.torn) == (2, 0)  # the torn line was ended, not continued
    assert [e["message"]["content"] for e in reading.events if e["type"] == "message"] == ["u1", "a1", "u2"]


def test_two_writers_of_one_journal_never_duplicate(settings, transcripts):
    first = conversation(settings, "u1", "a1")
    first.sync_transcript()
    second = Conversation(settings, journal=True)
    second.binding.bind(None, first.snapshot(), None)
    first.history += [Message("user", "u2"), Message("assistant", "a2")]
    first.sync_transcript()
    second.history = first.history  # it adopted the other surface's turn, then answered
    second.history += [Message("user", "u3"), Message("assistant", "a3")]
    second.sync_transcript()
    assert messages_of(transcripts / f"{first.transcript.id}.jsonl") == ["u1", "a1", "u2", "a2", "u3", "a3"]


def test_the_journal_can_be_turned_off(env, transcripts):
    env["CHATCLI_SESSION_TRANSCRIPT"] = "false"
    conv = conversation(Settings.load(env), "u1", "a1")
    conv.sync_transcript()
    assert not transcripts.exists() and conv.snapshot().transcript_id is None


# -- through the real REPL -------------------------------------------------------------------
def session_doc(env, name: str) -> dict:
    return json.loads((Path(env["CHATCLI_HOME"]) / "sessions" / f"{name}.json").read_text())


def test_a_repl_session_names_its_journal_and_keeps_writing_it_after_a_reload(repl_env, workdir, transcripts):
    repl = Repl(repl_env, "m", cwd=workdir, args=("--session", "work"))
    repl.send("first")
    repl.close()
    transcript_id = session_doc(repl_env, "work")["transcript_id"]
    assert transcript_id and messages_of(transcripts / f"{transcript_id}.jsonl") == ["first", "You said: first"]
    again = Repl(repl_env, "m", cwd=workdir, args=("-c",))
    again.send("second")
    again.close()
    assert session_doc(repl_env, "work")["transcript_id"] == transcript_id
    assert messages_of(transcripts / f"{transcript_id}.jsonl") == [
        "first", "You said: first", "second", "You said: second"]


def test_an_autosave_names_the_journal_of_the_unsaved_conversation(repl_env, workdir, transcripts):
    repl = Repl(repl_env, "m", cwd=workdir)
    repl.send("unsaved words")
    repl.child.send("/exit\r")
    repl.child.expect(pexpect.EOF)
    [autosave] = (Path(repl_env["CHATCLI_HOME"]) / "sessions").glob("autosave-*.json")
    transcript_id = json.loads(autosave.read_text())["transcript_id"]
    assert messages_of(transcripts / f"{transcript_id}.jsonl") == ["unsaved words", "You said: unsaved words"]


def test_fork_seeds_a_new_journal_and_then_the_two_diverge(repl_env, workdir, transcripts):
    repl = Repl(repl_env, "m", cwd=workdir, args=("--session", "parent"))
    repl.send("shared turn")
    repl.send("/session fork child")
    repl.send("child turn")
    repl.send("/session load parent")
    repl.send("parent turn")
    repl.close()
    parent_id = session_doc(repl_env, "parent")["transcript_id"]
    child_id = session_doc(repl_env, "child")["transcript_id"]
    assert parent_id and child_id and parent_id != child_id
    child_events = events(transcripts / f"{child_id}.jsonl")
    assert child_events[0]["type"] == "fork" and child_events[0]["from"] == parent_id
    assert messages_of(transcripts / f"{child_id}.jsonl") == [
        "shared turn", "You said: shared turn", "child turn", "You said: child turn"]
    assert messages_of(transcripts / f"{parent_id}.jsonl") == [
        "shared turn", "You said: shared turn", "parent turn", "You said: parent turn"]


def test_kill_9_mid_turn_keeps_the_question_and_loses_at_most_the_answer_in_flight(repl_env, workdir, transcripts,
                                                                                  openai_server):
    repl = Repl(repl_env, "m", cwd=workdir, args=("--session", "crash"))
    repl.send("kept turn")
    openai_server.reply("half", hang_after=True)
    repl.child.send("asked turn\r")
    repl.child.expect("half")
    repl.child.kill(signal.SIGKILL)
    repl.child.expect(pexpect.EOF)
    transcript_id = session_doc(repl_env, "crash")["transcript_id"]
    reading = Journal(transcripts, transcript_id).read()
    assert reading.torn == 0 and reading.foreign == 0
    # The question is journaled as it is asked, before the model answers: what the user said stays.
    assert [e["message"]["content"] for e in reading.events if e["type"] == "message"] == [
        "kept turn", "You said: kept turn", "asked turn"]
    SessionStore(Path(repl_env["CHATCLI_HOME"]) / "sessions").load("crash")


# -- a writer killed at random instants, 200 times -------------------------------------------
_WRITER = """
import os, sys
from chatcli.config.settings import Settings
from chatcli.core.messages import Message
from chatcli.engine import sessions
from chatcli.engine.conversation import Conversation
conv = Conversation(Settings.load(), journal=True)
sessions.start(conv, name="crashy")
print("ready", flush=True)
turn = 0
while True:
    turn += 1
    conv.history.append(Message("user", f"question {os.getpid()}.{turn} " + "x" * (turn % 7) * 300))
    conv.history.append(Message("assistant", f"answer {os.getpid()}.{turn}"))
    conv.sync_transcript()
    conv.binding.write_through()
"""


@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "sealed"])
def test_a_writer_killed_at_random_instants_always_leaves_files_that_load(env, tmp_path, sealed):
    rng = random.Random(1234)
    home = Path(env["CHATCLI_HOME"])
    key = None
    if sealed:  # sealed lines are bound to their offsets: a torn one must be cut, never left to fail
        key = os.urandom(32)
        env["CHATCLI_ENCRYPTION_KEY"] = base64.b64encode(key).decode()
    store = SessionStore(home / "sessions", key)
    # Past the size under which a plaintext session is written whole at every turn: turns are
    # appended in place, in two steps a kill can come between.
    seed = Conversation(Settings.load(env), journal=True)
    sessions.start(seed, name="crashy")
    seed.history += [Message("user" if i % 2 == 0 else "assistant", f"seed {i} " + "s" * 600) for i in range(500)]
    seed.sync_transcript()
    seed.binding.write_through()
    path = home / "sessions" / "crashy.json"
    assert path.stat().st_size > WHOLE_BELOW
    torn = kills = 0
    # 40 kills, and on until one has come between an append's two steps (about one in eight does)
    # so that the mending is tried: `make faults` kills 400 times more.
    while kills < 40 or (not sealed and not torn and kills < 240):
        kills += 1
        proc = subprocess.Popen([sys.executable, "-c", _WRITER], env=env, stdout=subprocess.PIPE)
        assert proc.stdout.readline() == b"ready\n"
        # A loaded machine writes slower: the window widens every 40 kills without a torn one.
        time.sleep(rng.uniform(0, 0.03 * 2 ** min(kills // 40, 3)))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        if not sealed:
            try:
                json.loads(path.read_bytes())
            except ValueError:
                torn += 1  # a kill between an append's two steps: trailing data, until the next command
        data, _ = store.load("crashy")  # the next command: the session file always loads
        if not sealed:  # and is whole JSON again for every reader: json and Go refuse trailing data
            json.loads(path.read_bytes())
            read = go_reads(path)
            assert read.returncode == 0 and read.stdout.startswith("ok "), read.stdout
        reading = Journal(home / "transcripts", data.transcript_id, key).read()
        assert reading.torn <= 1 and reading.foreign + reading.torn <= kills  # a kill tears one line at most
        assert reading.damaged == reading.stray == 0
        recorded = [e for e in reading.events if e["type"] == "message"]
        live, missing = rules.replay(reading.events).history()
        assert missing == []
        # The journal holds everything the session holds, and maybe the turn the kill kept
        # from the session file: the journal is written first.
        assert [m.content for m in data.history] == [m.content for m in live][: len(data.history)]
        assert len(recorded) == len({e["hash"] for e in recorded})  # nothing recorded twice
    if not sealed:
        assert torn, "no kill came between an append's two steps: the mending was not tried"


# -- one journal per session, whatever path the conversation takes ----------------------------
def journal_ids(env) -> dict[str, str]:
    sessions_dir = Path(env["CHATCLI_HOME"]) / "sessions"
    return {p.stem: json.loads(p.read_text())["transcript_id"] for p in sessions_dir.glob("*.json")}


def turn(conv: Conversation, text: str) -> None:
    conv.history += [Message("user", text), Message("assistant", f"re: {text}")]
    conv.sync_transcript()
    conv.binding.write_through()


def test_save_as_detach_attach_and_machine_sessions_never_share_a_journal(env, settings, transcripts):
    conv = Conversation(settings, journal=True)
    sessions.start(conv, name="a")
    turn(conv, "in a")
    sessions.save(conv, "b")  # save-as while bound: a copy
    turn(conv, "in b")
    sessions.attach(conv, "c")  # created from a conversation bound to b: a copy
    turn(conv, "in c")
    sessions.detach(conv)
    turn(conv, "detached")
    sessions.save(conv, "d")
    ids = journal_ids(env)
    assert len(set(ids.values())) == 4, ids
    assert messages_of(transcripts / f"{ids['a']}.jsonl") == ["in a", "re: in a"]
    assert messages_of(transcripts / f"{ids['c']}.jsonl")[-2:] == ["in c", "re: in c"]
    assert "detached" not in messages_of(transcripts / f"{ids['c']}.jsonl")
    assert messages_of(transcripts / f"{ids['d']}.jsonl")[-2:] == ["detached", "re: detached"]


def test_continuing_an_autosave_writes_a_copy_of_its_journal(env, settings, transcripts):
    first = Conversation(settings, journal=True)
    turn(first, "kept on exit")
    [line] = sessions.finish(first)
    autosave = re.search(r"'(autosave-[\d-]+)'", line).group(1)
    conv = Conversation(settings, journal=True)
    sessions.load(conv, autosave)
    turn(conv, "later")
    sessions.save(conv, "n1")
    turn(conv, "in n1")
    sessions.save(conv, "n2")
    turn(conv, "in n2")
    ids = journal_ids(env)
    assert len({ids[autosave], ids["n1"], ids["n2"]}) == 3
    assert messages_of(transcripts / f"{ids[autosave]}.jsonl") == ["kept on exit", "re: kept on exit"]
    assert "in n2" not in messages_of(transcripts / f"{ids['n1']}.jsonl")


def test_a_failed_fork_keeps_writing_the_same_journal_and_leaves_no_file(env, settings, transcripts):
    conv = Conversation(settings, journal=True)
    sessions.start(conv, name="a")
    turn(conv, "one")
    sessions.save(conv, "taken")
    sessions.load(conv, "a")
    before = set(os.listdir(transcripts))
    with pytest.raises(Exception, match="already exists"):
        sessions.fork(conv, "taken")
    assert set(os.listdir(transcripts)) == before
    turn(conv, "two")
    assert messages_of(transcripts / f"{journal_ids(env)['a']}.jsonl")[-2:] == ["two", "re: two"]


def test_an_id_that_cannot_name_a_journal_costs_no_turn(env, settings, transcripts):
    sessions_dir = Path(env["CHATCLI_HOME"]) / "sessions"
    sessions_dir.mkdir(parents=True)
    (sessions_dir / "foreign.json").write_text(json.dumps({"version": 2, "transcript_id": "../v1.2",
                                                            "chat_history": []}))
    conv = Conversation(settings, journal=True)
    sessions.start(conv, name="foreign")
    turn(conv, "still written")
    data = json.loads((sessions_dir / "foreign.json").read_text())
    assert [m["content"] for m in data["chat_history"]] == ["still written", "re: still written"]
    assert messages_of(transcripts / f"{data['transcript_id']}.jsonl") == ["still written", "re: still written"]


def test_a_journal_deleted_while_in_use_gets_the_whole_history_again(env, settings, transcripts):
    conv = Conversation(settings, journal=True)
    sessions.start(conv, name="live")
    turn(conv, "one")
    path = transcripts / f"{conv.transcript.id}.jsonl"
    path.unlink()
    turn(conv, "two")
    assert messages_of(path) == ["one", "re: one", "two", "re: two"]


def test_adopting_a_session_rewritten_under_another_journal_follows_it(env, settings, transcripts):
    mine = Conversation(settings, journal=True)
    sessions.start(mine, name="shared")
    turn(mine, "mine")
    other = Conversation(settings, journal=True)
    turn(other, "theirs")
    sessions.save(other, "elsewhere")
    other.binding.unbind()  # save it over 'shared' as an unrelated conversation would
    sessions.save(other, "shared")
    assert mine.binding.adopt()  # took the file's version
    assert mine.transcript.id == journal_ids(env)["shared"]
    turn(mine, "after")
    assert messages_of(transcripts / f"{mine.transcript.id}.jsonl")[-2:] == ["after", "re: after"]


def test_the_search_index_sees_a_replaced_journal(env, settings, transcripts):
    from chatcli.engine import records

    conv = Conversation(settings, journal=True)
    sessions.start(conv, name="s")
    turn(conv, "zebra crossing")
    rec = records.record(settings, conv.snapshot(), conv.transcript.id)
    assert records.search(settings, rec, "zebra")
    path = transcripts / f"{conv.transcript.id}.jsonl"
    path.unlink()
    turn(conv, "giraffe neck")  # the journal is recreated with the whole live history
    rec = records.record(settings, conv.snapshot(), conv.transcript.id)
    assert sorted(hit[2] for hit in records.search(settings, rec, "giraffe")) == ["giraffe neck", "re: giraffe neck"]
    assert sorted(hit[0] for hit in records.search(settings, rec, "zebra")) == [1, 2]  # re-indexed, not twice


@hypothesis_settings(max_examples=300, deadline=None)
@given(st.sampled_from(["user", "assistant", "system", "tool", "rôle"]), st.text())
def test_the_quick_digest_of_a_plain_message_is_the_documented_one(role, text):
    """Plain messages skip building a JSON encoder; the bytes hashed must stay the documented ones."""
    key = [role, text, [], None, None]
    documented = json.dumps(key, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    expected = hashlib.sha256(documented.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    assert rules.content_digest(Message(role, text)) == expected
