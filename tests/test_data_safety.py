"""Data-safety defects found by a fault campaign, one test each, named after the defect's fix:
nothing the user wrote is lost, and nothing wrong is read as if it were right."""

from __future__ import annotations

import base64
import json
import multiprocessing
import os
import re
import shutil
import subprocess
from pathlib import Path

import pexpect
import pytest
from conftest import CHATCLI, exported_contents, run_chatcli
from repl_driver import plain

from chatcli.commands.builtin import build_registry
from chatcli.config.settings import Settings
from chatcli.core.messages import Message
from chatcli.core.session import SessionData
from chatcli.engine import records, sessions
from chatcli.engine.conversation import Conversation
from chatcli.store.home import Home
from chatcli.store.journal import Journal
from chatcli.store.sessions import SessionError, SessionStore

LONG_ANSWER = "Long answer. " + "y" * 800  # about 200 tokens


def key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def command(conv: Conversation, line: str) -> str:
    return build_registry().dispatch(line, conv).text


def turn(conv: Conversation, text: str) -> None:
    conv.history += [Message("user", text), Message("assistant", f"re: {text}")]
    conv.sync_transcript()
    conv.binding.write_through()


def started(settings: Settings, name: str, *texts: str) -> Conversation:
    """A conversation bound to session `name` (created), with a turn for each of `texts`."""
    conv = Conversation(settings, journal=True)
    sessions.start(conv, name=name)
    for text in texts:
        turn(conv, text)
    return conv


def journal_path(home: Path, session: str) -> Path:
    transcript = json.loads((home / "sessions" / f"{session}.json").read_text())["transcript_id"]
    return home / "transcripts" / f"{transcript}.jsonl"


# -- 1. compaction with the journal off ------------------------------------------------------
def test_compaction_with_the_journal_off_keeps_the_originals_in_the_session(openai_env, openai_server):
    openai_env.update(CHATCLI_SESSION_TRANSCRIPT="false", CHATCLI_CONTEXT_WINDOW="540", CHATCLI_AUTO_COMPACT="50%")
    home = Path(openai_env["CHATCLI_HOME"])
    conv = Conversation(Settings.load(openai_env), journal=True)
    sessions.start(conv, name="notes")
    openai_server.reply(LONG_ANSWER)
    for i in range(1, 5):
        conv.send(f"turn {i} question")
    openai_server.reply("Short briefing.")
    said: list[str] = []
    conv.send("turn 5 question", on_notice=said.append)
    assert any("Automatic compaction" in note for note in said), said
    first = re.search(r"<<ccr:([0-9a-f]{16})>>", conv.history[0].content).group(1)
    openai_server.reply("Shorter.")
    assert "Compacted" in command(conv, "/compact")  # the first summary is itself summarised
    second = re.search(r"<<ccr:([0-9a-f]{16})>>", conv.history[0].content).group(1)
    shutil.rmtree(home / "ccr")  # what the recall store's TTL does a week later
    assert not (home / "transcripts").exists()  # and there is no journal

    later = Conversation(Settings.load(openai_env), journal=True)
    sessions.start(later, name="notes")
    assert "Short briefing." in command(later, f"/recall {second}")
    recalled = command(later, f"/recall {first}")  # kept inside the second summary's originals
    assert LONG_ANSWER in recalled and "#1 user\nturn 1 question" in recalled
    restored = command(later, "/rewind compact")
    assert "Undid the compaction" in restored and later.history[0].content.startswith("Short briefing.")
    assert "keeps its originals in its session" in command(later, "/storage")


# -- 2. one flipped byte in a sealed journal -------------------------------------------------
def flip_byte_in_line(path: Path, line_index: int) -> None:
    lines = path.read_bytes().split(b"\n")
    line = bytearray(lines[line_index])
    middle = len(line) // 2  # inside the base64 ciphertext: still base64, no longer authentic
    line[middle] = ord("A") if line[middle] != ord("A") else ord("B")
    lines[line_index] = bytes(line)
    path.write_bytes(b"\n".join(lines))


def test_a_flipped_byte_in_a_sealed_journal_skips_that_line_and_journaling_goes_on(env):
    env["CHATCLI_ENCRYPTION_KEY"] = key()
    settings = Settings.load(env)
    conv = started(settings, "sealed", "q0", "q1", "q2")
    path = settings.home / "transcripts" / f"{conv.transcript.id}.jsonl"
    flip_byte_in_line(path, 3)  # the second turn's question (each turn: question, answer, `synced` line)

    later = Conversation(Settings.load(env), journal=True)
    sessions.start(later, name="sealed")
    later.history += [Message("user", "q3"), Message("assistant", "re: q3")]
    notes = later.sync_transcript()
    assert len(notes) == 1 and "skipped 1 damaged line(s)" in notes[0], notes
    turn(later, "q4")  # reported once: the next sync says nothing
    assert later.sync_transcript() == []
    reading = Journal(settings.home / "transcripts", path.stem, settings.encryption_key).read()
    contents = [e["message"]["content"] for e in reading.events if e["type"] == "message"]
    assert reading.damaged == 1
    # The damaged line's message is recorded again from the live history, then appending goes on.
    assert contents == ["q0", "re: q0", "re: q1", "q2", "re: q2", "q1", "q3", "re: q3", "q4", "re: q4"]
    rec = records.record(settings, later.snapshot(), path.stem)
    assert "Skipped 1 damaged line(s)" in records.stats(rec)

    new_key = key()  # a rekey carries the damaged line over as it is, and finishes
    rekeyed = run_chatcli("storage", "rekey", env=dict(env, CHATCLI_NEW_ENCRYPTION_KEY=new_key))
    assert rekeyed.returncode == 0, rekeyed.stderr
    assert "Kept 1 damaged journal line(s) as they were" in rekeyed.stdout
    after = Journal(path.parent, path.stem, base64.b64decode(new_key)).read()
    assert after.damaged == 1 and [e["message"]["content"] for e in after.events if e["type"] == "message"] == contents

    wrong = dict(env, CHATCLI_ENCRYPTION_KEY=key())  # a wrong key is still an error, not damage
    try:
        Journal(settings.home / "transcripts", path.stem, Settings.load(wrong).encryption_key).read()
    except Exception as exc:  # noqa: BLE001 - the type is the point below
        assert "cannot be opened with CHATCLI_ENCRYPTION_KEY" in str(exc)
    else:
        pytest.fail("a journal read with the wrong key must fail")
    env["CHATCLI_ENCRYPTION_KEY"] = new_key
    again = Conversation(Settings.load(env), journal=True)  # a later process says nothing: the record is whole
    sessions.start(again, name="sealed")
    assert again.sync_transcript() == []  # the first sync after a load, as every turn's checkpoint makes it
    again.history += [Message("user", "q5")]
    assert again.sync_transcript() == []


def test_damage_to_the_last_line_of_a_sealed_journal_is_said_too(env):
    env["CHATCLI_ENCRYPTION_KEY"] = key()
    settings = Settings.load(env)
    conv = started(settings, "tail", "q0", "q1")
    path = settings.home / "transcripts" / f"{conv.transcript.id}.jsonl"
    flip_byte_in_line(path, 4)  # the last answer (a `synced` line follows it)
    later = Conversation(Settings.load(env), journal=True)
    sessions.start(later, name="tail")
    [note] = later.sync_transcript()  # the message goes back at the end, with no rewrite: still said
    assert "skipped 1 damaged line(s)" in note


def sealed_line_kinds(path: Path, settings: Settings) -> list[str]:
    """The event type of each line of a sealed journal, in order."""
    from chatcli.store.seal import sealer_for

    kinds, offset = [], 0
    for line in path.read_bytes().split(b"\n")[:-1]:
        kinds.append(json.loads(sealer_for(settings.encryption_key).open_line(line, path.stem, offset))["type"])
        offset += len(line) + 1
    return kinds


@pytest.mark.parametrize("kind", ["checkpoint", "synced"])
def test_damage_to_a_sealed_journal_s_checkpoint_or_synced_line_is_said_once_like_a_message_line(env, kind):
    env["CHATCLI_ENCRYPTION_KEY"] = key()
    settings = Settings.load(env)
    conv = started(settings, "marks", "q0")
    conv.checkpoint("q1")
    turn(conv, "q1")
    conv.checkpoint("q2")
    turn(conv, "q2")
    path = settings.home / "transcripts" / f"{conv.transcript.id}.jsonl"
    kinds = sealed_line_kinds(path, settings)
    flip_byte_in_line(path, kinds.index(kind))  # the first of its kind: a /rewind point, or a sync's record

    later = Conversation(Settings.load(env), journal=True)
    sessions.start(later, name="marks")
    [note] = later.sync_transcript()  # no message was lost with it: said all the same
    assert "skipped 1 damaged line(s)" in note
    assert later.sync_transcript() == []  # once
    if kind == "checkpoint":  # the /rewind point it held is gone, the other one is still there
        assert [point.label for point in later.checkpoints] == ["q2"]
    again = Conversation(Settings.load(env), journal=True)  # a later process: already said
    sessions.start(again, name="marks")
    assert again.sync_transcript() == []
    again.history += [Message("user", "q3")]
    assert again.sync_transcript() == []
    reading = Journal(path.parent, path.stem, settings.encryption_key).read()
    assert reading.damaged == 1
    assert [e["message"]["content"] for e in reading.events if e["type"] == "message"] == [
        "q0", "re: q0", "q1", "re: q1", "q2", "re: q2", "q3"]


# -- a flipped bit in the last sealed turn record of a session file ----------------------------
def last_record(path: Path) -> tuple[int, int]:
    """Where the last turn record of a sealed session file starts and ends."""
    from chatcli.store.seal import session_layout

    raw = path.read_bytes()
    offset, start = session_layout(raw), None
    while offset < len(raw):
        start, offset = offset, offset + 4 + 12 + int.from_bytes(raw[offset: offset + 4], "big")
    assert start is not None and offset == len(raw)
    return start, len(raw)


@pytest.mark.parametrize("where", ["length", "length's low byte", "nonce", "text", "tag"])
def test_a_flipped_bit_in_the_last_sealed_turn_record_is_damage_said_and_taken_back_from_the_journal(env, where):
    env["CHATCLI_ENCRYPTION_KEY"] = key()
    settings = Settings.load(env)
    started(settings, "sealed", "q0", "q1")  # q1's turn is the last record appended to the file
    path = settings.home / "sessions" / "sealed.json"
    start, end = last_record(path)
    position = {"length": start + 2, "length's low byte": start + 3, "nonce": start + 4 + 5,
                "text": (start + end) // 2, "tag": end - 1}[where]
    raw = bytearray(path.read_bytes())
    raw[position] ^= 0x10 if where != "length's low byte" else 0x01
    path.write_bytes(bytes(raw))

    later = Conversation(Settings.load(env), journal=True)
    said = sessions.start(later, name="sealed")
    taken = [line for line in said if "taken back from the session's journal" in line]
    assert len(taken) == 1 and "its 2 message(s)" in taken[0], said
    # A length made longer runs past the end of the file (as a crash's cut would); any other change is damage.
    assert "damaged" in taken[0] or (where.startswith("length") and "cut short" in taken[0])
    assert [m.content for m in later.history] == ["q0", "re: q0", "q1", "re: q1"]
    turn(later, "q2")  # the next write rewrites the file whole, the taken-back turn in it
    reread, _ = SessionStore(settings.home / "sessions", settings.encryption_key).load("sealed")
    assert [m.content for m in reread.history] == ["q0", "re: q0", "q1", "re: q1", "q2", "re: q2"]
    assert reread.left_out == ""
    again = Conversation(Settings.load(env), journal=True)  # said once: the file is whole again
    assert not [line for line in sessions.start(again, name="sealed") if "taken back" in line or "damaged" in line]


def test_session_show_of_a_damaged_last_turn_record_shows_it_from_the_journal_and_says_so(env, workdir):
    env["CHATCLI_ENCRYPTION_KEY"] = key()
    settings = Settings.load(env)
    started(settings, "sealed", "q0", "q1")
    path = settings.home / "sessions" / "sealed.json"
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 1  # the last record's tag
    path.write_bytes(bytes(raw))
    shown = run_chatcli("session", "show", "sealed", env=env, cwd=workdir)
    assert shown.returncode == 0, shown.stderr
    assert "— 4 messages" in shown.stdout and "re: q1" in shown.stdout
    assert shown.stderr.count("\n") == 1 and "its last turn record is damaged" in shown.stderr
    assert path.read_bytes() == bytes(raw)  # shown, not written


def test_a_damaged_sealed_turn_record_followed_by_one_that_opens_is_still_refused(env):
    env["CHATCLI_ENCRYPTION_KEY"] = key()
    settings = Settings.load(env)
    started(settings, "sealed", "q0", "q1", "q2")
    path = settings.home / "sessions" / "sealed.json"
    before = path.read_bytes()
    start, end = last_record(path)
    raw = bytearray(before)
    raw[start - 1] ^= 0x10  # the tag of q1's record: q2's record after it still opens
    path.write_bytes(bytes(raw))
    with pytest.raises(SessionError, match="a turn appended to it was altered"):
        SessionStore(settings.home / "sessions", settings.encryption_key).load("sealed")


# -- 3. fields of the wrong type in a session file -------------------------------------------
@pytest.mark.parametrize("field,value,says", [
    ("tool_calls", 5, "'tool_calls' must be a list of objects, not a number (5)"),
    ("tool_calls", ["x"], "'tool_calls' must be a list of objects, not a list holding a string"),
    ("tool_call_id", 7, "'tool_call_id' must be a string, not a number (7)"),
    ("content", {"a": 1}, "'content' must be a string or a list of parts, not an object"),
    # a tool call an OpenAI-compatible API refuses with HTTP 400 at every later turn
    ("tool_calls", [{"id": 1, "function": "x"}], "tool_calls[0]: 'id' must be a string, not a number (1)"),
    ("tool_calls", [{"id": "1", "function": "x"}],
     "tool_calls[0] must name its function: a string 'name', or a 'function' object with a string 'name'"),
    ("tool_calls", [{"id": "1", "name": "f", "arguments": 5}],
     "tool_calls[0]: 'arguments' must be an object, a string or null, not a number (5)"),
    ("tool_calls", [{"id": "1", "name": "f", "arguments": {}, "raw": 3}],
     "tool_calls[0]: 'raw' must be a string, not a number (3)"),
    ("tool_calls", [{"id": "1", "name": "f", "arguments": {}}, {"id": "2", "function": {"name": 7}}],
     "tool_calls[1]: 'function' must have a string 'name', not a number (7)"),
    ("tool_calls", [{"id": "1", "type": "function", "function": {"name": "f", "arguments": [1]}}],
     "tool_calls[0]: the function's 'arguments' must be a string or an object, not a list holding a number"),
])
def test_a_message_field_of_the_wrong_type_is_refused_on_load_naming_file_and_position(
        openai_env, sessions_dir, workdir, field, value, says):
    sessions_dir.mkdir(parents=True)
    document = {"version": 2, "chat_history": [{"role": "user", "content": "hi"},
                                               {"role": "assistant", "content": "ok", field: value}]}
    path = sessions_dir / "odd.json"
    path.write_text(json.dumps(document))
    before = path.read_bytes()
    result = run_chatcli("--session", "odd", "-p", "again", env=openai_env, cwd=workdir)
    assert result.returncode == 1
    assert result.stderr == (f"chatcli: error: session 'odd' ({path}): chat_history[1] (message 2): {says}; the "
                             "file was left untouched\n")
    assert path.read_bytes() == before


def test_a_journal_line_with_a_field_of_the_wrong_type_is_skipped_not_fatal(env, workdir):
    settings = Settings.load(env)
    started(settings, "typed", "fine")
    path = journal_path(settings.home, "typed")
    odd = {"v": 1, "type": "message", "hash": "e" * 32, "time": "2026-12-03T00:00:00+00:00",
           "message": {"role": "tool", "content": "x", "tool_call_id": 5}}
    with path.open("a") as handle:
        handle.write(json.dumps(odd) + "\n")
    result = run_chatcli("session", "export", "typed", "jsonl", str(workdir / "t.jsonl"), env=env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert "Exported 1 turn (2 messages)" in result.stdout and "Skipped 1 foreign line(s)" in result.stdout


def test_deeply_nested_unknown_fields_still_load(env, sessions_dir):
    sessions_dir.mkdir(parents=True)
    nested = "[" * 900 + "]" * 900
    (sessions_dir / "deep.json").write_text('{"version": 2, "chat_history": [{"role": "user", "content": "hi", '
                                            f'"x": {nested}}}], "y": {nested}}}')
    data, _ = SessionStore(sessions_dir).load("deep")
    assert data.history[0].content == "hi"


# -- 4. an empty key --------------------------------------------------------------------------
def test_an_empty_encryption_key_is_a_usage_error_not_plaintext(env, workdir):
    env["CHATCLI_ENCRYPTION_KEY"] = ""
    result = run_chatcli("-p", "hi", env=env, cwd=workdir)
    assert result.returncode == 2
    assert result.stderr == ("chatcli: error: CHATCLI_ENCRYPTION_KEY is set but empty; set it to a key (make one "
                             "with: openssl rand -base64 32), or unset it to store plaintext\n")
    assert not (Path(env["CHATCLI_HOME"]) / "sessions").exists()
    listing = run_chatcli("session", "list", env=env, cwd=workdir)
    assert listing.returncode == 2 and "is set but empty" in listing.stderr


# -- 5. a read-only home ------------------------------------------------------------------------
def needs_mount_namespace() -> None:
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"]).returncode != 0:
        pytest.skip("no private mount namespace here")


@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "sealed"])
def test_a_read_only_home_still_chats_with_one_warning(repl_env, home, sealed):
    """HOME on a tmpfs remounted read-only in a private mount namespace (root ignores file modes)."""
    needs_mount_namespace()
    if sealed:
        repl_env["CHATCLI_ENCRYPTION_KEY"] = key()
    prepare = f"mount -t tmpfs -o size=1m tmpfs {home} && mount -o remount,ro {home} && exec {CHATCLI}"
    child = pexpect.spawn("unshare", ["-m", "sh", "-c", prepare], env=repl_env, encoding="utf-8", timeout=20,
                          dimensions=(40, 100))
    prompt = r"m(?:\x1b\[[0-9;]*m)*>"
    child.expect(prompt)
    said = child.before
    for text in ("first question", "second question", "third question"):
        child.send(text + "\r")
        child.expect(r"You said: " + text)
        child.expect(prompt)
        said += child.before
    child.send("/exit\r")
    child.expect(pexpect.EOF)
    said = plain(said + child.before)
    assert said.count("warning:") == 1, said
    assert (f"warning: CHATCLI_HOME {home}/.chatcli cannot be written (read-only file system): you can chat, but "
            "nothing is saved this run") in said
    assert "transcript journal" not in said and "internal error" not in said
    assert "The conversation was not kept (read-only file system)." in said


def test_a_one_shot_on_a_read_only_home_answers_and_says_the_turn_was_not_written(openai_env, home):
    needs_mount_namespace()
    sessions_dir = home / ".chatcli" / "sessions"
    script = (f"mount -t tmpfs -o size=1m tmpfs {home} && mkdir -p {sessions_dir} && "
              f"printf '%s' '{{\"version\": 2, \"chat_history\": [{{\"role\": \"user\", \"content\": \"x\"}}]}}' "
              f"> {sessions_dir}/ex.json && mount -o remount,ro {home} && {CHATCLI} --session ex -p two; "
              f"echo rc=$?")
    result = subprocess.run(["unshare", "-m", "sh", "-c", script], env=openai_env, capture_output=True, text=True,
                            timeout=60)
    assert result.stdout == "You said: two\nrc=1\n", result.stderr
    assert result.stderr.count("warning:") == 1 and "cannot be written (read-only file system)" in result.stderr
    assert "this turn could not be written to session 'ex'" in result.stderr
    assert "transcript journal" not in result.stderr and "internal error" not in result.stderr


def test_a_full_home_reports_a_failing_journal_once(openai_env, openai_server):
    settings = Settings.load(openai_env)
    conv = Conversation(settings, journal=True)
    conv.send("first")
    transcripts = settings.home / "transcripts"
    real_write = os.write

    def full(fd, data):
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(transcripts)):
            raise OSError(28, "No space left on device")
        return real_write(fd, data)

    os.write = full
    said: list[list[str]] = []

    def said_in(text: str) -> list[str]:  # what a turn says: notices before the answer, notes after it
        notices: list[str] = []
        notes = conv.send(text, on_notice=notices.append).notes
        return notices + list(notes)

    try:
        said = [said_in(f"turn {i}") for i in range(3)]
    finally:
        os.write = real_write
    assert len(said[0]) == 1 and "disk full" in said[0][0] and said[1:] == [[], []]
    assert said_in("space again") == []
    reading = Journal(transcripts, conv.transcript.id).read()
    contents = [e["message"]["content"] for e in reading.events if e["type"] == "message"]
    assert contents[-2:] == ["space again", "You said: space again"] and "turn 1" in contents


# -- 6. a damaged plain journal --------------------------------------------------------------
def test_lines_that_do_not_belong_in_a_plain_journal_are_skipped_and_counted(env, workdir):
    settings = Settings.load(env)
    started(settings, "mine", "mine 0", "mine 1", "mine 2")
    started(settings, "other", "foreign words")
    path, foreign = journal_path(settings.home, "mine"), journal_path(settings.home, "other")
    lines = path.read_bytes().splitlines(keepends=True)
    damaged = (lines[:1] + [lines[4]]  # a later line copied before the ones it follows
               + lines[1:3] + [lines[1]]  # a duplicated line
               + [foreign.read_bytes().splitlines(keepends=True)[0]]  # a line from another journal
               + lines[3:] + [b'{"noise": 1}\n'])  # a line of some other tool
    path.write_bytes(b"".join(damaged))

    out = workdir / "mine.jsonl"
    result = run_chatcli("session", "export", "mine", "jsonl", str(out), env=env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (f"Exported 3 turns (6 messages) to {out} (source: journal). Skipped 3 out-of-place and "
                             f"1 foreign line(s) of journal {path.stem} (damage, or lines that do not belong there).\n")
    contents = exported_contents(out)
    assert [c for c in contents if c] == ["mine 0", "re: mine 0", "mine 1", "re: mine 1", "mine 2", "re: mine 2"]
    hits = run_chatcli("session", "search", "foreign", env=env, cwd=workdir)
    assert "mine" not in hits.stdout.split("other", 1)[0]  # only the other session has those words


# -- 7. the search index schema, created by many at once -------------------------------------
def _search(path: str, barrier) -> str:
    from chatcli.store.search import SearchIndex

    barrier.wait()
    try:
        SearchIndex(Path(path)).search_journal("j", "s", lambda _offset: ([("user", "hello there")], 1), "hello")
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        return f"{type(exc).__name__}: {exc}"
    return "ok"


def test_thirty_processes_creating_the_search_index_at_once_all_succeed(tmp_path):
    context = multiprocessing.get_context("fork")
    for round_ in range(3):  # a lost race is rare (switching to WAL failed in about 1 of 200 starts): 90 starts
        barrier = context.Manager().Barrier(30)
        with context.Pool(30) as pool:
            results = pool.starmap(_search, [(str(tmp_path / f"index{round_}" / "search.sqlite"), barrier)] * 30)
        assert results == ["ok"] * 30


# -- 8. big integers in fields chatcli does not know ------------------------------------------
def test_big_integers_in_unknown_fields_round_trip_exactly(env, sessions_dir, workdir):
    sessions_dir.mkdir(parents=True)
    raw = ('{"version": 2, "chat_history": [{"role": "user", "content": "hi", "x_id": 123456789012345678901234567890,'
           ' "meta": {"n": -9223372036854775809}}], "big": 18446744073709551616, "small": 1.5}')
    (sessions_dir / "ids.json").write_text(raw)
    settings = Settings.load(env)
    started(settings, "ids", "more")
    document = json.loads((sessions_dir / "ids.json").read_text())
    assert document["big"] == 18446744073709551616 and document["small"] == 1.5
    assert document["chat_history"][0]["x_id"] == 123456789012345678901234567890
    assert document["chat_history"][0]["meta"] == {"n": -9223372036854775809}
    reading = Journal(settings.home / "transcripts", document["transcript_id"]).read()
    assert reading.events[0]["message"]["x_id"] == 123456789012345678901234567890


def test_an_integer_past_a_double_in_an_unknown_field_loads_and_is_written_back_as_written(sessions_dir):
    # orjson refuses such a document ("number is infinity when parsed as double"); Python's json reads it
    sessions_dir.mkdir(parents=True)
    huge = "9" * 401
    (sessions_dir / "huge.json").write_text(f'{{"version": 2, "huge": {huge}, "chat_history": '
                                            f'[{{"role": "user", "content": "hi", "x": [-{huge}]}}]}}')
    store = SessionStore(sessions_dir)
    data, _ = store.load("huge")
    assert data.extra["huge"] == int(huge) and data.history[0].extra["x"] == [-int(huge)]
    data.history.append(Message("assistant", "hello"))
    store.save("huge", data)
    written = (sessions_dir / "huge.json").read_text()
    assert f'"huge":{huge},' in written and f'"x":[-{huge}]' in written
    again, _ = store.load("huge")
    assert again.extra["huge"] == int(huge) and [m.content for m in again.history] == ["hi", "hello"]


def test_an_integer_of_more_digits_than_python_reads_is_refused_in_one_line(sessions_dir):
    sessions_dir.mkdir(parents=True)
    path = sessions_dir / "vast.json"
    path.write_text('{"version": 2, "vast": ' + "9" * 5000 + ', "chat_history": []}')
    before = path.read_bytes()
    store = SessionStore(sessions_dir)
    with pytest.raises(SessionError) as caught:
        store.load("vast")
    assert str(caught.value) == (f"session 'vast' ({path}) holds an integer of more than 4300 digits, more than "
                                 "Python reads; the file was left untouched")
    with pytest.raises(SessionError):
        store.save("vast", SessionData())
    assert path.read_bytes() == before


def test_a_float_past_a_double_is_still_not_valid_json(sessions_dir):
    # 1e400 has no value a JSON reader keeps: written back it would be "Infinity", which no reader takes
    sessions_dir.mkdir(parents=True)
    path = sessions_dir / "inf.json"
    path.write_text('{"version": 2, "x": 1e400, "chat_history": []}')
    with pytest.raises(SessionError, match=r"is not valid JSON \(line 1, column 21\); the file was left untouched"):
        SessionStore(sessions_dir).load("inf")


# -- 9. smaller ones ----------------------------------------------------------------------------
def test_deleting_a_session_removes_its_journal_and_its_indexed_text(env, workdir):
    settings = Settings.load(env)
    started(settings, "gone", "zanzibar plans")
    path = journal_path(settings.home, "gone")
    records.warm_index(settings, path.stem)
    result = run_chatcli("session", "delete", "gone", env=env, cwd=workdir)
    assert result.returncode == 0 and f"Its transcript journal {path.stem} was removed too." in result.stdout
    assert not path.exists()
    import sqlite3

    with sqlite3.connect(settings.home / "index" / "search.sqlite") as db:
        assert db.execute("SELECT count(*) FROM journal_entries WHERE source=?", (path.stem,)).fetchone() == (0,)


def test_a_session_file_that_is_a_symbolic_link_is_never_followed_nor_replaced(openai_env, sessions_dir, tmp_path,
                                                                                workdir):
    outside = tmp_path / "elsewhere.json"
    outside.write_text('{"version": 2, "chat_history": [{"role": "user", "content": "not yours"}]}')
    sessions_dir.mkdir(parents=True)
    (sessions_dir / "link.json").symlink_to(outside)
    (sessions_dir / "real.json").write_text('{"version": 2, "chat_history": [{"role": "user", "content": "mine"}]}')
    (sessions_dir / "alias.json").symlink_to("real.json")  # another session under a second name
    (sessions_dir / "dangling.json").symlink_to(tmp_path / "nowhere.json")
    shown = run_chatcli("session", "show", "link", env=openai_env, cwd=workdir)
    assert shown.returncode == 1 and "not yours" not in shown.stdout
    assert (f"a symbolic link (to {outside}); chatcli does not follow links in the sessions directory"
            in shown.stderr)
    for name in ("alias", "dangling"):
        turn_ = run_chatcli("--session", name, "-p", "hi", env=openai_env, cwd=workdir)
        assert turn_.returncode == 1 and "a symbolic link" in turn_.stderr
        assert (sessions_dir / f"{name}.json").is_symlink()  # not replaced by a file of its own
    assert not (tmp_path / "nowhere.json").exists()
    assert "not yours" not in run_chatcli("session", "list", env=openai_env, cwd=workdir).stdout


def test_a_read_only_session_file_is_not_replaced(openai_env, sessions_dir, workdir):
    sessions_dir.mkdir(parents=True)
    path = sessions_dir / "frozen.json"
    path.write_text('{"version": 2, "chat_history": [{"role": "user", "content": "keep me"}]}')
    path.chmod(0o400)
    before = path.read_bytes()
    result = run_chatcli("--session", "frozen", "-p", "more", env=openai_env, cwd=workdir)
    assert result.returncode == 1 and result.stdout == "You said: more\n"
    assert "error: this turn was not written to a session" in result.stderr
    assert (f"It is not bound: {path} is read-only (mode 0400; chmod u+w allows writing it), so new turns are "
            "not written to it") in result.stderr
    assert path.read_bytes() == before and oct(path.stat().st_mode & 0o777) == "0o400"
    settings = Settings.load(openai_env)
    for _ in range(2):  # opened and left as it was: no copy of it is made
        looked = Conversation(settings, journal=True)
        sessions.load(looked, "frozen")
        assert sessions.finish(looked) == []
    assert not list(Home.of(settings).sessions_dir.glob("autosave-*"))
    conv = Conversation(settings, journal=True)  # made read-only while bound: refused, then kept elsewhere
    sessions.start(conv, name="later")
    conv.send("first")
    Home.of(settings).sessions_dir.joinpath("later.json").chmod(0o400)
    kept = Home.of(settings).sessions_dir.joinpath("later.json").read_bytes()
    assert any("is read-only" in note for note in conv.send("second").notes)
    [*_, line] = sessions.finish(conv)
    autosave = re.search(r"Session 'later' could not be written; the conversation was kept as '(autosave-[\d-]+)'",
                         line).group(1)
    data, _ = SessionStore(Home.of(settings).sessions_dir).load(autosave)
    assert [m.content for m in data.history][-2:] == ["second", "You said: second"]
    assert Home.of(settings).sessions_dir.joinpath("later.json").read_bytes() == kept


def test_two_writers_starting_a_session_share_one_journal(openai_env):
    settings = Settings.load(openai_env)
    a, b = Conversation(settings, journal=True), Conversation(settings, journal=True)
    sessions.start(a, name="both")
    sessions.start(b, name="both")
    # Both answered at once: a is written first, b's turn is recorded after.
    a.history += [Message("user", "from a"), Message("assistant", "re: a")]
    b.history += [Message("user", "from b"), Message("assistant", "re: b")]
    a.sync_transcript()
    a.binding.write_through()
    b.sync_transcript()
    b.binding.write_through()
    journals = list((settings.home / "transcripts").glob("*.jsonl"))
    assert len(journals) == 1, journals  # no orphan journal holding b's turn
    recorded = [e["message"]["content"] for e in Journal(journals[0].parent, journals[0].stem).read().events
                if e["type"] == "message"]
    assert sorted(recorded) == sorted(["from a", "re: a", "from b", "re: b"])
    data, _ = SessionStore(Home.of(settings).sessions_dir).load("both")
    assert [m.content for m in data.history] == ["from a", "re: a", "from b", "re: b"]


@pytest.mark.parametrize("secret", [
    "sk-ant-api03-" + "AbC1" * 10,
    "sk-proj-" + "Zx9_" * 8,
    "OPENAI_KEY_sk-" + "a1" * 12,
    "ghp_" + "A1b2" * 9,
    "xoxb-1234567890-0987654321-" + "AbCd" * 5,
    "xapp-1-A0123-4567-" + "ab12" * 4,
    "AKIAIOSFODNN7EXAMPLE",
    "ASIAIOSFODNN7EXAMPLE",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc",
])
def test_the_prompt_history_redacts_common_key_shapes(secret, tmp_path):
    from chatcli.store.history import PromptHistory

    history = PromptHistory(tmp_path / "history", 1 << 20)
    history.append(f"use {secret} now")
    assert history.load() == [f"use {secret.split('_sk-')[0] + '_' if '_sk-' in secret else ''}[REDACTED] now"]
    assert secret.split("_sk-")[-1] not in (tmp_path / "history").read_text()


# -- concurrency: two surfaces, 50 turns each, at once, on the sealed store ---------------------
_SURFACE = """
import sys
from chatcli.config.settings import Settings
from chatcli.engine import sessions
from chatcli.engine.conversation import Conversation
conv = Conversation(Settings.load(), journal=True)
sessions.start(conv, name="shared")
print("ready", flush=True)
sys.stdin.readline()  # both start together
for i in range(50):
    result = conv.send(f"{sys.argv[1]} turn {i}")
    assert result.text == f"You said: {sys.argv[1]} turn {i}", result
sessions.finish(conv)
"""


def test_two_surfaces_taking_fifty_turns_each_at_once_lose_nothing_on_the_sealed_store(openai_env):
    import sys

    openai_env["CHATCLI_ENCRYPTION_KEY"] = key()
    settings = Settings.load(openai_env)
    writers = [subprocess.Popen([sys.executable, "-c", _SURFACE, who], env=openai_env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE) for who in ("left", "right")]
    for writer in writers:
        assert writer.stdout.readline() == b"ready\n"
    for writer in writers:
        writer.stdin.write(b"go\n")
        writer.stdin.flush()
    for writer in writers:
        assert writer.wait(timeout=120) == 0, writer.stderr.read().decode()
    data, _ = Home.of(settings).sessions().load("shared")
    contents = [m.content for m in data.history]
    assert len(contents) == 200 and len(set(contents)) == 200
    for who in ("left", "right"):
        mine = [c for c in contents if c.startswith(f"{who} ")]
        assert mine == [f"{who} turn {i}" for i in range(50)]  # every turn, in its order
        for i in range(50):  # each answer right after its question
            at = contents.index(f"{who} turn {i}")
            assert contents[at + 1] == f"You said: {who} turn {i}"
    journals = list((settings.home / "transcripts").glob("*.jsonl"))
    assert [p.stem for p in journals] == [data.transcript_id]  # one journal, shared
    reading = Journal(journals[0].parent, data.transcript_id, settings.encryption_key).read()
    assert reading.skipped == 0
    recorded = [e["message"]["content"] for e in reading.events if e["type"] == "message"]
    assert sorted(recorded) == sorted(contents)  # each message recorded once


def test_rekey_keeps_a_read_only_session_read_only(env, workdir):
    env["CHATCLI_ENCRYPTION_KEY"] = key()
    settings = Settings.load(env)
    started(settings, "frozen", "keep me")
    path = Home.of(settings).sessions_dir / "frozen.json"
    path.chmod(0o400)
    new_key = key()
    result = run_chatcli("storage", "rekey", env=dict(env, CHATCLI_NEW_ENCRYPTION_KEY=new_key), cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert oct(path.stat().st_mode & 0o777) == "0o400"
    data, _ = Home(settings.home, base64.b64decode(new_key)).sessions().load("frozen")
    assert data.history[0].content == "keep me"


def _planted(home: Path, kind: str, data: dict) -> Path:
    """Where session `linked` keeps a file of `kind` that chatcli writes in place."""
    if kind == "journal":
        return home / "transcripts" / f"{data['transcript_id']}.jsonl"
    if kind == "costs":
        return home / "costs" / f"{data['cost_ref']}.jsonl"
    return home / "sessions" / ".linked.lock"


@pytest.mark.parametrize("target", ["existing", "missing"])
@pytest.mark.parametrize("kind", ["journal", "costs", "lock"])
def test_a_journal_cost_snapshot_or_lock_that_is_a_symbolic_link_is_never_followed(openai_env, openai_server,
                                                                                    tmp_path, workdir, kind, target):
    home = Path(openai_env["CHATCLI_HOME"])
    first = run_chatcli("--session", "linked", "-p", "hi", env=openai_env, cwd=workdir)
    assert first.returncode == 0, first.stderr
    data = json.loads((home / "sessions" / "linked.json").read_text())
    planted = _planted(home, kind, data)
    outside = tmp_path / "outside.txt"
    if target == "existing":
        outside.write_text("not chatcli's\n")
    planted.unlink(missing_ok=True)
    planted.symlink_to(outside)

    turn_ = run_chatcli("--session", "linked", "-p", "hi again", env=openai_env, cwd=workdir)
    if target == "existing":
        assert outside.read_text() == "not chatcli's\n"
    else:
        assert not outside.exists()
    assert planted.is_symlink()
    refusals = [line for line in turn_.stderr.splitlines() if "symbolic link" in line]
    if kind == "lock":  # the session's write is refused, as for a linked session file
        assert turn_.returncode == 1 and len(refusals) == 1, turn_.stderr
        assert f"cannot write {planted}: a symbolic link (to {outside})" in refusals[0]
    elif kind == "journal":  # the turn goes on; the journal's write fails with a notice
        assert turn_.returncode == 0 and "You said: hi again" in turn_.stdout, turn_.stderr
        assert len(refusals) == 1, turn_.stderr
        assert f"transcript journal {data['transcript_id']}: cannot write {planted}: a symbolic link" in refusals[0]
    else:  # a cost line is best effort: the turn goes on, the snapshot is not written
        assert turn_.returncode == 0 and "You said: hi again" in turn_.stdout, turn_.stderr
    if kind == "costs":
        from chatcli.store.costs import CostStore, Line

        with pytest.raises(OSError) as refused:
            CostStore(home / "costs").add(data["cost_ref"], Line(0.0, "linked", "p", "m", 1, 1, False, None))
        assert str(planted) in str(refused.value) and "a symbolic link" in str(refused.value)
        assert "\n" not in str(refused.value)
