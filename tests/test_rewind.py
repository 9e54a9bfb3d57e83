"""/rewind through the real REPL and a fake model server (SPEC §8): checkpoints, restore, undo,
persistence with the session, and undoing a compaction."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from repl_driver import Repl, plain

from chatcli.commands.builtin import build_registry
from chatcli.config.settings import Settings
from chatcli.core.journal import checkpoints_line
from chatcli.core.messages import Message
from chatcli.engine import sessions
from chatcli.engine.conversation import Conversation
from chatcli.store.journal import Journal


def sent(server, index: int = -1) -> list[str]:
    return [m["content"] for m in server.requests[index].body["messages"]]


def listing(repl: Repl, answer: str = "") -> str:
    """/rewind, then answer its question (Enter alone keeps the history)."""
    repl.child.send("/rewind\r")
    question = r"Rewind to checkpoint \(number; Enter keeps the history\):"
    if repl.child.expect([question, r"No checkpoints yet[\s\S]*?" + repl.prompt_re]) == 1:
        return plain(repl.child.before + repl.child.after)  # nothing to choose from: no question
    shown = plain(repl.child.before)
    return shown + plain(repl.send(answer))


def turns(repl: Repl, *numbers: int) -> None:
    for i in numbers:
        repl.send(f"turn {i} question")


def session_file(env, name: str) -> dict:
    return json.loads((Path(env["CHATCLI_HOME"]) / "sessions" / f"{name}.json").read_text())


def journal_checkpoints(env, name: str) -> list[dict]:
    """The checkpoints a session's journal records, oldest first (they are not in the session file)."""
    return [e for e in journal_events(env, session_file(env, name)) if e["type"] == "checkpoint"]


def journal_events(env, document: dict) -> list[dict]:
    path = Path(env["CHATCLI_HOME"]) / "transcripts" / f"{document['transcript_id']}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_rewind_1_after_three_turns_drops_the_third_turn(repl_env, workdir, openai_server):
    repl = Repl(repl_env, "m", cwd=workdir, args=("--session", "r"))
    try:
        turns(repl, 1, 2, 3)
        shown = listing(repl)
        rows = re.findall(r"^\s+(\d)\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+before (.+?)\s+\((\d+) messages\)$", shown, re.M)
        assert rows == [("1", "“turn 3 question”", "4"), ("2", "“turn 2 question”", "2"),
                        ("3", "“turn 1 question”", "0")], shown
        out = plain(repl.send("/rewind 1"))
        assert "Rewound to before “turn 3 question”" in out and "the history has 4 messages (2 set aside" in out
        repl.send("turn 4 question")
        assert sent(openai_server) == ["turn 1 question", "You said: turn 1 question", "turn 2 question",
                                       "You said: turn 2 question", "turn 4 question"]
    finally:
        repl.close()
    document = session_file(repl_env, "r")
    assert [m["content"] for m in document["chat_history"]][-2:] == ["turn 4 question", "You said: turn 4 question"]
    events = journal_events(repl_env, document)
    rewinds = [e for e in events if e["type"] == "rewrite"]
    assert [e.get("reason") for e in rewinds] == ["rewind"] and len(rewinds[0]["hashes"]) == 4
    contents = [e["message"]["content"] for e in events if e["type"] == "message"]
    assert contents.count("turn 3 question") == 1  # the dropped turn stays in the journal, once


def test_a_rewind_is_undone_by_rewinding_to_the_checkpoint_it_left(repl_env, workdir, openai_server):
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        turns(repl, 1, 2, 3)
        repl.send("/rewind 3")  # back to before the first turn: an empty history
        shown = listing(repl, "1")  # chosen interactively: the newest, left by the rewind
        assert re.search(r"1\s+\S+ \S+\s+before /rewind 3\s+\(6 messages\)", shown), shown
        assert "Rewound to before /rewind 3" in shown and "the history has 6 messages" in shown
        repl.send("turn 4 question")
        assert sent(openai_server)[:6] == ["turn 1 question", "You said: turn 1 question", "turn 2 question",
                                           "You said: turn 2 question", "turn 3 question",
                                           "You said: turn 3 question"]
        assert "no checkpoint 9: choose 1 to 5" in plain(repl.send("/rewind 9"))
        shown = listing(repl)  # the undone rewind gave back the checkpoints it had dropped
        assert "History kept." in shown
        rows = re.findall(r"before (.+?)\s+\((\d+) messages?\)", shown)
        assert rows == [("“turn 4 question”", "6"), ("/rewind 1", "0"), ("“turn 3 question”", "4"),
                        ("“turn 2 question”", "2"), ("“turn 1 question”", "0")], shown
    finally:
        repl.close()


def test_checkpoints_survive_save_exit_and_load(repl_env, workdir, openai_server):
    repl = Repl(repl_env, "m", cwd=workdir, args=("--session", "kept"))
    turns(repl, 1, 2, 3)
    repl.close()
    # Saved with the session (a small one is written whole at every turn), and in the journal.
    assert [c["label"] for c in session_file(repl_env, "kept")["checkpoints"]] == [
        "turn 1 question", "turn 2 question", "turn 3 question"]
    events = journal_events(repl_env, session_file(repl_env, "kept"))
    marks = [(e["label"], sum(1 for x in events[:i] if x["type"] == "message"))
             for i, e in enumerate(events) if e["type"] == "checkpoint"]
    assert marks == [("turn 1 question", 0), ("turn 2 question", 2), ("turn 3 question", 4)]

    again = Repl(repl_env, "m", cwd=workdir)
    try:
        assert "loaded (6 messages)" in plain(again.send("/session load kept"))
        shown = listing(again, "2")
        assert "before “turn 3 question”  (4 messages)" in shown and "before “turn 1 question”  (0 messages)" in shown
        assert "Rewound to before “turn 2 question”" in shown
        again.send("turn 5 question")
        assert sent(openai_server) == ["turn 1 question", "You said: turn 1 question", "turn 5 question"]
    finally:
        again.close()


def test_a_checkpoint_the_journal_no_longer_has_is_dropped_with_a_note(repl_env, workdir, openai_server):
    repl = Repl(repl_env, "m", cwd=workdir, args=("--session", "lost"))
    turns(repl, 1, 2)
    repl.close()
    document = session_file(repl_env, "lost")
    # A checkpoint list (as a /rewind leaves it) naming a message the journal never recorded.
    journal = Journal(Path(repl_env["CHATCLI_HOME"]) / "transcripts", document["transcript_id"])
    items = [{"time": "2026-12-03T10:00:00.000+00:00", "label": "turn 1 question", "keep": 0, "hashes": []},
             {"time": "2026-12-03T10:00:01.000+00:00", "label": "turn 2 question", "keep": 0, "hashes": ["0" * 32]}]
    with journal.appending(journal.size()) as append:
        append.write([checkpoints_line(items, "2026-12-03T10:00:02.000+00:00")])
    again = Repl(repl_env, "m", cwd=workdir, args=("--session", "lost"))
    try:
        shown = listing(again)
        assert "Dropped 1 checkpoint(s) whose messages the journal no longer has" in shown
        assert "before “turn 1 question”  (0 messages)" in shown  # an empty history needs no messages
        assert "turn 2 question" not in shown
    finally:
        again.close()


def test_with_the_journal_off_checkpoints_live_in_the_process(repl_env, workdir, openai_server):
    repl_env["CHATCLI_SESSION_TRANSCRIPT"] = "false"
    repl = Repl(repl_env, "m", cwd=workdir, args=("--session", "plain"))
    try:
        turns(repl, 1, 2)
        assert "Rewound to before “turn 2 question”" in plain(repl.send("/rewind 1"))
        repl.send("turn 3 question")
        assert sent(openai_server) == ["turn 1 question", "You said: turn 1 question", "turn 3 question"]
    finally:
        repl.close()
    assert session_file(repl_env, "plain")["checkpoints"] == []
    again = Repl(repl_env, "m", cwd=workdir, args=("--session", "plain"))
    try:
        assert "No checkpoints yet" in listing(again)
    finally:
        again.close()


def test_rewind_compact_brings_back_the_originals_and_keeps_later_turns(repl_env, workdir, openai_server):
    repl = Repl(repl_env, "m", cwd=workdir, args=("--session", "squeezed"))
    try:
        turns(repl, 1, 2, 3, 4, 5)
        openai_server.reply("Briefing: five questions.")
        assert "Compacted 4 messages" in plain(repl.send("/compact"))
        repl.send("turn 6 question")
        assert "turn 1 question" not in sent(openai_server)
        out = plain(repl.send("/rewind compact"))
        assert "Undid the compaction of 4 messages (originals from the journal): the history has 12 messages" in out
        repl.send("turn 7 question")
        expected = []
        for i in range(1, 7):
            expected += [f"turn {i} question", f"You said: turn {i} question"]
        assert sent(openai_server) == [*expected, "turn 7 question"]
        assert "no compaction summary" in plain(repl.send("/rewind compact"))
    finally:
        repl.close()
    events = journal_events(repl_env, session_file(repl_env, "squeezed"))
    assert [e.get("reason") for e in events if e["type"] == "rewrite"] == ["compact", "rewind"]


def test_rewind_compact_without_a_journal_uses_the_recall_store(repl_env, workdir, openai_server):
    repl_env["CHATCLI_SESSION_TRANSCRIPT"] = "off"
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        turns(repl, 1, 2, 3, 4)
        openai_server.reply("Briefing.")
        assert "Compacted 2 messages" in plain(repl.send("/compact"))
        out = plain(repl.send("/rewind compact"))
        assert "Undid the compaction of 2 messages (originals from the recall store)" in out
        repl.send("next")
        assert sent(openai_server)[:2] == ["turn 1 question", "You said: turn 1 question"]
        assert "Briefing." not in sent(openai_server)
    finally:
        repl.close()


def test_rewind_1_after_a_compaction_undoes_it(repl_env, workdir, openai_server):
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        turns(repl, 1, 2, 3, 4)
        openai_server.reply("Briefing.")
        repl.send("/compact")
        assert "Rewound to before /compact" in plain(repl.send("/rewind 1"))
        repl.send("next")
        assert sent(openai_server)[0] == "turn 1 question" and "Briefing." not in sent(openai_server)
    finally:
        repl.close()


def test_rewind_arguments_are_checked(repl_env, workdir, openai_server):
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        assert "No checkpoints yet" in listing(repl)
        assert "no checkpoints to rewind to" in plain(repl.send("/rewind 1"))
        assert "unknown action 'back' for /rewind (actions: compact; or a checkpoint number" in \
            plain(repl.send("/rewind back"))
        assert openai_server.requests == []
    finally:
        repl.close()


def test_a_journal_that_is_off_for_a_while_does_not_cost_the_stored_checkpoints(repl_env, workdir, openai_server):
    repl = Repl(repl_env, "m", cwd=workdir, args=("--session", "paused"))
    turns(repl, 1, 2, 3)
    repl.close()
    off = dict(repl_env, CHATCLI_SESSION_TRANSCRIPT="off")
    again = Repl(off, "m", cwd=workdir, args=("--session", "paused"))
    try:
        shown = listing(again)
        assert "2 checkpoint(s) need the journal to be restored, and the transcript journal is off" in shown
        again.send("turn 4 question")
    finally:
        again.close()
    labels = [c["label"] for c in journal_checkpoints(repl_env, "paused")]
    assert labels == ["turn 1 question", "turn 2 question", "turn 3 question"]  # the process-only one is not saved
    assert [c["label"] for c in session_file(repl_env, "paused")["checkpoints"]] == labels  # the file's, kept
    back = Repl(repl_env, "m", cwd=workdir, args=("--session", "paused"))
    try:
        assert "before “turn 3 question”  (4 messages)" in listing(back)
    finally:
        back.close()


def test_odd_numbers_are_refused_in_one_line(repl_env, workdir, openai_server):
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        turns(repl, 1)
        assert "'²' is not a checkpoint number" in plain(repl.send("/rewind ²"))
        assert "no checkpoint 0: there is only checkpoint 1" in plain(repl.send("/rewind 0"))
        assert "no checkpoint 99999999999999999999" in plain(repl.send("/rewind 99999999999999999999"))
        assert "'-1' is not a checkpoint number" in plain(repl.send("/rewind -1"))
        repl.send("//rewind as text")
        assert "before “/rewind as text”" in listing(repl)
    finally:
        repl.close()


def two_windows(openai_env):
    from chatcli.config.settings import Settings
    from chatcli.engine import sessions
    from chatcli.engine.conversation import Conversation

    first = Conversation(Settings.load(openai_env), journal=True)
    for i in range(1, 5):
        first.send(f"turn {i} question")
    sessions.save(first, "shared")
    second = Conversation(Settings.load(openai_env), journal=True)
    sessions.load(second, "shared")
    return first, second


def test_a_rewind_not_yet_written_and_another_window_s_turn_are_both_kept(openai_env, openai_server, monkeypatch):
    import os

    from chatcli.engine import rewind

    first, second = two_windows(openai_env)
    real_replace = os.replace

    def disk_full(*_args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    outcome = rewind.rewind(first, 2)  # back to before turn 3; the session file cannot be written
    assert any("disk full" in note for note in outcome.notes)
    monkeypatch.setattr(os, "replace", real_replace)
    second.send("from the other window")  # the file still holds turns 1-4; this adds a fifth
    first.binding.write_through()  # merges: the rewound history, then what the file gained
    contents = [m.content for m in first.history]
    assert contents == ["turn 1 question", "You said: turn 1 question", "turn 2 question",
                        "You said: turn 2 question", "from the other window", "You said: from the other window"]
    assert contents == [m["content"] for m in session_file(openai_env, "shared")["chat_history"]]


def test_checkpoints_taken_in_two_windows_are_merged(openai_env, openai_server):
    first, second = two_windows(openai_env)
    second.send("second window turn")
    first.send("first window turn")  # adopts the other turn first; both windows' checkpoints are in the journal
    labels = [c["label"] for c in journal_checkpoints(openai_env, "shared")]
    assert labels == ["turn 1 question", "turn 2 question", "turn 3 question", "turn 4 question",
                      "second window turn", "first window turn"]
    from chatcli.engine import rewind

    listed = rewind.listing(first).text
    assert listed.index("first window turn") < listed.index("second window turn") < listed.index("turn 4 question")


def test_two_compactions_are_undone_one_after_the_other(repl_env, workdir, openai_server):
    repl = Repl(repl_env, "m", cwd=workdir, args=("--session", "nested"))
    try:
        turns(repl, 1, 2, 3, 4)
        openai_server.reply("First briefing.")
        repl.send("/compact")
        turns(repl, 5, 6, 7, 8)
        openai_server.reply("Second briefing.")
        assert "Compacted 9 messages" in plain(repl.send("/compact"))  # the first summary among them
        first = plain(repl.send("/rewind compact"))
        assert "Undid the compaction of 9 messages" in first and "the history has 15 messages" in first
        second = plain(repl.send("/rewind compact"))
        assert "Undid the compaction of 2 messages" in second and "the history has 16 messages" in second
        assert "no compaction summary" in plain(repl.send("/rewind compact"))
        repl.send("turn 9 question")
        expected = []
        for i in range(1, 9):
            expected += [f"turn {i} question", f"You said: turn {i} question"]
        assert sent(openai_server) == [*expected, "turn 9 question"]
    finally:
        repl.close()


def test_undoing_a_rewind_records_no_message_twice(repl_env, workdir, openai_server):
    repl = Repl(repl_env, "m", cwd=workdir, args=("--session", "twice"))
    try:
        turns(repl, 1, 2, 3)
        repl.send("/rewind 2")
        assert "the history has 6 messages" in plain(repl.send("/rewind 1"))
    finally:
        repl.close()
    events = journal_events(repl_env, session_file(repl_env, "twice"))
    contents = [e["message"]["content"] for e in events if e["type"] == "message"]
    assert len(contents) == len(set(contents)) == 6
    assert [e.get("reason") for e in events if e["type"] == "rewrite"] == ["rewind", "rewind"]


# -- checkpoints saved with the session -------------------------------------------------------
def conversation_with_checkpoints(env, name: str | None, *questions: str) -> Conversation:
    conv = Conversation(Settings.load(env), journal=True)
    if name:
        sessions.start(conv, name=name)
    for question in questions:
        conv.checkpoint(question)
        conv.history += [Message("user", question), Message("assistant", "ok")]
        conv.sync_transcript()
        conv.binding.write_through()
    return conv


def test_checkpoints_are_written_into_the_file_whenever_it_is_written_whole_and_read_back_once(env):
    conv = conversation_with_checkpoints(env, "whole", "one", "two")
    path = Path(env["CHATCLI_HOME"]) / "sessions" / "whole.json"
    stored = json.loads(path.read_text())["checkpoints"]
    assert [c["label"] for c in stored] == ["one", "two"] and all("hashes" in c for c in stored)
    later = Conversation(Settings.load(env), journal=True)  # the file's and the journal's are one list
    sessions.start(later, name="whole")
    assert [point.label for point in later.checkpoints] == ["one", "two"]
    later.checkpoint("three")
    later.history += [Message("user", "three"), Message("assistant", "ok")]
    later.sync_transcript()
    later.binding.write_through()
    assert [c["label"] for c in json.loads(path.read_text())["checkpoints"]] == ["one", "two", "three"]


def test_a_large_session_leaves_its_turns_checkpoints_to_the_journal_until_it_is_written_whole(
        env, appends_at_any_size):
    conv = conversation_with_checkpoints(env, "large", "one")
    path = Path(env["CHATCLI_HOME"]) / "sessions" / "large.json"
    for question in ("two", "three"):  # appended in place: the file's list as it was
        conv.checkpoint(question)
        conv.history += [Message("user", question), Message("assistant", "ok")]
        conv.sync_transcript()
        conv.binding.write_through()
    assert [c["label"] for c in json.loads(path.read_text())["checkpoints"]] == ["one"]
    assert [point.label for point in conv.checkpoints] == ["one", "two", "three"]
    conv.session.title = "renamed"  # a change beyond the history: the file is written whole
    conv.binding.write_through(force=True)
    assert [c["label"] for c in json.loads(path.read_text())["checkpoints"]] == ["one", "two", "three"]


@pytest.mark.parametrize("how", ["save", "attach", "fork"])
def test_with_the_journal_off_a_save_attach_or_fork_keeps_the_rewind_checkpoints(env, how):
    env["CHATCLI_SESSION_TRANSCRIPT"] = "off"
    conv = conversation_with_checkpoints(env, None, "one", "two")
    assert len(conv.checkpoints) == 2
    {"save": sessions.save, "attach": sessions.attach, "fork": sessions.fork}[how](conv, "copy")
    assert [point.label for point in conv.checkpoints] == ["one", "two"]
    rewound = build_registry().dispatch("/rewind 2", conv).text  # newest first: 2 is before "one"
    assert rewound.startswith("Rewound to before “one”") and [m.content for m in conv.history] == [], rewound
