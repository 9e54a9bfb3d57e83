"""Costs that do not grow with the session: a turn is appended to the session file in
place, a crash mid-append leaves a file that reads, listings see appended turns, the first sync
after a load trusts the journal's own record of itself, and a freshly resumed session that no
longer fits the context window is not compacted behind the user's back."""

from __future__ import annotations

import json
import os

import pytest
from conftest import bound, run_chatcli, turn

from chatcli.config.settings import Settings
from chatcli.core import journal as rules
from chatcli.core.messages import Message
from chatcli.engine import sessions, transcript
from chatcli.engine.conversation import Conversation
from chatcli.store import journal as journal_store
from chatcli.store.home import Home
from chatcli.store.journal import Journal
from chatcli.store.sessions import SessionStore


def test_a_turn_is_appended_to_the_session_file_in_place(env, appends_at_any_size):
    conv = bound(env, "grow")
    turn(conv, "first question")
    path = conv.store.path("grow")
    before, inode = path.read_bytes(), os.stat(path).st_ino
    turn(conv, "second question", "second answer")
    after = path.read_bytes()
    assert os.stat(path).st_ino == inode  # not a new file renamed over it: the same one, grown
    assert after[: len(before) - 2] == before[:-2]  # nothing before the old end was rewritten
    document = json.loads(after)  # a plain v2 document to any JSON reader
    assert list(document)[-1] == "chat_history"
    # The checkpoints the first (whole) write stored; the appended turn's is in the journal.
    assert [c["label"] for c in document["checkpoints"]] == ["first question"]
    assert [m["content"] for m in document["chat_history"]] == ["first question", "ok", "second question",
                                                               "second answer"]


def test_a_change_beyond_the_history_writes_the_file_whole(env):
    conv = bound(env, "titled")
    turn(conv, "first question")
    inode = os.stat(conv.store.path("titled")).st_ino
    conv.session.title = "A title of my own"
    turn(conv, "second question")
    assert os.stat(conv.store.path("titled")).st_ino != inode
    assert json.loads(conv.store.path("titled").read_bytes())["title"] == "A title of my own"


def test_an_append_cut_short_by_a_crash_reads_as_the_file_before_it(env):
    conv = bound(env, "torn")
    turn(conv, "kept question", "kept answer")
    path = conv.store.path("torn")
    # Step 1 of an append reached the disk, step 2 did not: new messages after the old end.
    with open(path, "ab") as handle:
        handle.write(b'{"role":"user","content":"half a turn"},{"role":"assistant","content":"l\xc3\xa9"}]}')
    with pytest.raises(json.JSONDecodeError):
        json.loads(path.read_bytes())
    later = bound(env, "torn")
    assert [m.content for m in later.history] == ["kept question", "kept answer"]
    turn(later, "next question")  # the next write makes the file whole again
    assert [m["content"] for m in json.loads(path.read_bytes())["chat_history"]] == [
        "kept question", "kept answer", "next question", "ok"]


def test_a_file_that_merely_ends_in_garbage_is_still_refused(env):
    store = SessionStore(Home.of(Settings.load(env)).sessions_dir)
    store.root.mkdir(parents=True)
    (store.root / "odd.json").write_bytes(b'{"chat_history":[],"title":"x"}{"role":"user"}]}')
    with pytest.raises(Exception, match="not valid JSON"):
        store.load("odd")


def test_listings_see_turns_appended_in_place(env):
    conv = bound(env, "listed")
    turn(conv, "first question")
    store = SessionStore(Home.of(Settings.load(env)).sessions_dir)
    assert [(i.name, i.messages) for i in store.list()] == [("listed", 2)]
    os.utime(store.root, ns=(1, 1))  # a directory that looks settled: the catalog is trusted as it is
    store.list()
    turn(conv, "second question")  # in place: the directory does not change
    [info] = store.list()
    assert info.messages == 4 and info.size == os.stat(store.path("listed")).st_size
    listed = run_chatcli("session", "list", env=env)
    assert "4" in listed.stdout.split("listed", 1)[1].splitlines()[0], listed.stdout


def test_the_first_sync_after_a_load_trusts_a_big_journal_and_numbers_repeats_right(env, monkeypatch):
    monkeypatch.setattr(transcript, "TRUST_FROM", 0)
    conv = bound(env, "long")
    for i in range(30):
        turn(conv, f"question {i}", "ok")  # "ok" thirty times: each has its own hash
    journal_path = conv.transcript.journal.path
    size = journal_path.stat().st_size

    parsed: list[int] = []
    real_parse = journal_store.parse
    monkeypatch.setattr(journal_store, "parse", lambda data, *a, **k: parsed.append(len(data)) or real_parse(data, *a, **k))
    later = bound(env, "long")
    turn(later, "question 30", "ok")
    assert sum(parsed) < size / 10  # the last line, and what this turn added: not the journal
    reading = Journal(journal_path.parent, journal_path.stem).read()
    assert reading.skipped == 0
    live, missing = rules.replay(reading.events).history()
    assert missing == [] and [m.content for m in live] == [m.content for m in later.history]
    oks = [e["hash"] for e in reading.events if e["type"] == "message" and e["message"]["content"] == "ok"]
    assert len(oks) == len(set(oks)) == 31


def test_a_length_is_found_only_where_it_is_one_not_across_two():
    import array

    packed = array.array("q", [0x500, 0, 5, 7, 5]).tobytes()  # 5's bytes also start inside the first
    assert list(transcript._found(packed, 5, 5)) == [2, 4]
    assert list(transcript._found(packed, 5, 4)) == [2]  # only before `end`
    assert list(transcript._found(packed, 0, 5)) == [1]


def test_many_messages_added_after_a_trusted_prefix_are_numbered_as_a_whole_read_would(env, monkeypatch):
    # A sync with many new messages groups the prefix's messages by length once, rather than
    # searching them again for each: both ways must number repeats the same.
    monkeypatch.setattr(transcript, "TRUST_FROM", 0)
    conv = bound(env, "many")
    for i in range(12):
        turn(conv, f"question {i}", "ok" if i % 2 else "fine")
    later = bound(env, "many")
    added = transcript.SCANNED_LOOKUPS + 12
    later.history += [Message("user", f"question {i}") if i < 12 else Message("assistant", f"new {i}")
                      for i in range(added)]  # twelve that repeat earlier questions, the rest new
    later.sync_transcript()
    assert later.transcript._by_length is not None  # the grouped way was taken
    path = later.transcript.journal.path
    reading = Journal(path.parent, path.stem).read()
    live, missing = rules.replay(reading.events).history()
    assert missing == [] and [m.content for m in live] == [m.content for m in later.history]
    assert list(later.transcript.live_hashes(later.history)) == rules.history_hashes(later.history)


def test_a_journal_written_after_its_last_sync_is_read_whole(env, monkeypatch):
    monkeypatch.setattr(transcript, "TRUST_FROM", 0)
    conv = bound(env, "shared")
    turn(conv, "question 1")
    path = conv.transcript.journal.path
    other = Conversation(Settings.load(env), journal=True)
    other.history = [Message("user", "from a tool that writes no synced line")]
    with Journal(path.parent, path.stem).appending(path.stat().st_size) as append:
        append.write([rules.message_line("0" * 32, other.history[0], transcript.now_text())])
    later = bound(env, "shared")
    turn(later, "question 2")
    assert later.transcript._base == 0  # the last line was not a synced one: read, not trusted
    assert later.transcript.live_hashes(later.history) is not None


LONG = "word " * 400  # about 500 tokens


def resumed(env, name: str, history: list[Message], *head: Message) -> Conversation:
    """Session `name` saved with `head` then `history` (a 4,000-token window, compacting at
    half), loaded again in a new conversation."""
    env.update(CHATCLI_CONTEXT_WINDOW="4000", CHATCLI_AUTO_COMPACT="50%")
    conv = bound(env, name)
    conv.history += [*head, *history]
    conv.sync_transcript()
    conv.binding.write_through()
    return bound(env, name)


def alternating(count: int, text: str) -> list[Message]:
    return [Message("user" if i % 2 == 0 else "assistant", f"{i} {text}") for i in range(count)]


def test_a_resumed_session_too_big_for_the_window_is_not_compacted_on_its_first_turn(openai_env, openai_server):
    # About 3,000 tokens: past the threshold, and the older part fits in one summary request.
    later = resumed(openai_env, "big", alternating(12, "word " * 200))
    said: list[str] = []
    later.send("and now?", on_notice=said.append)
    [note] = [n for n in said if "context window" in n]
    assert "Nothing was compacted" in note and "of 12 messages" in note and "later turns compact" in note, note
    sent = openai_server.requests[-1].body["messages"]
    assert 1 < len(sent) < 12 and sent[-1]["content"] == "and now?" and sent[0]["role"] == "user"
    assert len(SessionStore(Home.of(later.settings).sessions_dir).load("big")[0].history) == 14  # all kept

    openai_server.reply("A summary.")
    said.clear()
    later.send("and then?", on_notice=said.append)  # a later turn compacts, and says so
    assert any("Automatic compaction" in n for n in said), said


def test_session_list_updates_its_saved_rendering_with_appended_turns(env):
    conv = bound(env, "alpha")
    turn(conv, "alpha question")
    other = bound(env, "beta")
    turn(other, "beta question")
    store = SessionStore(Home.of(Settings.load(env)).sessions_dir)
    os.utime(store.root, ns=(1, 1))  # settled: the rendering is saved and kept
    first = run_chatcli("session", "list", env=env).stdout
    assert first.splitlines()[1].split()[0] == "beta"
    turn(conv, "alpha again")  # appended in place: the directory does not change
    rows = run_chatcli("session", "list", env=env).stdout.splitlines()
    assert rows[1].split()[:3] == ["alpha", "4", "msgs"] and rows[2].split()[:3] == ["beta", "2", "msgs"], rows
    (store.root.parent / "sessions.listing.txt").unlink()  # made again from the catalog: the same text
    assert run_chatcli("session", "list", env=env).stdout.splitlines() == rows


# -- search: kept up to date as turns are written; sealed stores keep an index of their own ------
def test_a_journal_is_searchable_as_soon_as_it_is_written(env):
    import sqlite3

    conv = bound(env, "indexed")
    turn(conv, "the quokka question", "a marsupial answer")
    turn(conv, "another question")
    index = Settings.load(env).home / "index" / "search.sqlite"
    with sqlite3.connect(index) as db:  # no search has run: each sync put its messages there
        [(offset, count)] = db.execute("SELECT offset, count FROM sources WHERE kind='j'").fetchall()
    assert offset == conv.transcript.journal.path.stat().st_size and count == 4


def test_session_search_indexes_only_the_turns_appended_since(env, monkeypatch, appends_at_any_size):
    from chatcli.engine import records

    conv = bound(env, "notes")
    turn(conv, "the first platypus question")
    settings = Settings.load(env)
    store = SessionStore(Home.of(settings).sessions_dir)
    assert [g.name for g in records.search_sessions(settings, store, "platypus")] == ["notes"]
    turn(conv, "a wombat comes later")
    monkeypatch.setattr(SessionStore, "load", lambda *_a: pytest.fail("the whole session was read again"))
    [group] = records.search_sessions(settings, store, "wombat")
    assert group.name == "notes" and group.hits[0][0] == 3  # the third message of the session


def test_a_sealed_store_keeps_a_search_index_with_no_word_of_the_conversations(env):
    import base64

    from chatcli.engine import records

    env["CHATCLI_ENCRYPTION_KEY"] = base64.b64encode(os.urandom(32)).decode()
    conv = bound(env, "secret")
    turn(conv, "the zanzibar rendezvous is at noon", "noted: zanzibar")
    settings = Settings.load(env)
    index = settings.home / "index" / "sealed.sqlite"
    assert index.exists() and not (settings.home / "index" / "search.sqlite").exists()
    raw = b"".join(p.read_bytes() for p in index.parent.glob("sealed.sqlite*"))
    assert b"zanzibar" not in raw.lower() and b"rendezvous" not in raw.lower()
    [group] = records.search_sessions(settings, Home.of(settings).sessions(),
                                      "Zanzibar")
    assert group.name == "secret" and any("zanzibar" in snippet for _pos, _role, snippet in group.hits)
    rec = records.record(settings, conv.snapshot(), conv.transcript.id)
    [(pos, role, text)] = records.search(settings, rec, "rendezvous")
    assert (pos, role) == (1, "user") and "rendezvous is at noon" in text


def test_a_large_session_read_in_pieces_is_the_session_read_whole(env, monkeypatch, appends_at_any_size):
    from chatcli.core.session import SessionData
    from chatcli.store import sessions as store_module

    store = SessionStore(Home.of(Settings.load(env)).sessions_dir)
    history = [Message("user" if i % 2 == 0 else "assistant",
                       f"{i} " + ('}, {"role": "user"} é ' if i % 7 == 0 else "") + "x" * (i % 50),
                       # (a meta whose objects hold "role": a place that looks like a cut and is not one)
                       meta={"n": i} if i % 11 == 0 else {"log": [{"a": 1}, {"role": "x"}]} if i % 17 == 0 else None,
                       tool_calls=[{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
                       if i % 13 == 0 else None) for i in range(3000)]
    history.insert(1500, Message("user", "long " * 3000))  # longer than a piece
    for at in (700, 2200):  # a piece ends in its tool call: the nested "role" is tried as a cut first
        history.insert(at, Message("assistant", "", meta={"log": [{"a": 1}, {"role": "x"}]}, tool_calls=[
            {"id": f"c{at}", "type": "function", "function": {"name": "f", "arguments": "y" * 6000}}]))
    store.write("big", SessionData(history=history, title='a "chat_history":[ title'))
    whole, _ = store.load("big")
    pieces_read: list[bool] = []
    real = store_module._read_in_pieces
    monkeypatch.setattr(store_module, "_read_in_pieces", lambda fd, size, *more: pieces_read.append(
        (found := real(fd, size, *more)) is not None) or found)
    monkeypatch.setattr(store_module, "CHUNKED_FROM", 1024)
    monkeypatch.setattr(store_module, "PIECE", 4096)
    read, _ = store.load("big")
    assert pieces_read == [True]
    assert [m.to_dict() for m in read.history] == [m.to_dict() for m in whole.history] and read.title == whole.title

    with open(store.path("big"), "ab") as handle:  # an append stopped between its steps: its second is made
        handle.write(b'{"role":"user","content":"half"}]}')
    recovered, _ = store.load("big")
    assert pieces_read[-2:] == [False, True]  # read whole, mended, read in pieces as mended
    assert [m.to_dict() for m in recovered.history] == [m.to_dict() for m in whole.history] + [
        {"role": "user", "content": "half"}]
    assert len(json.loads(store.path("big").read_bytes())["chat_history"]) == len(whole.history) + 1


def test_a_sealed_session_takes_its_turns_as_sealed_records_and_folds_them(env):
    import base64

    env["CHATCLI_ENCRYPTION_KEY"] = base64.b64encode(os.urandom(32)).decode()
    conv = bound(env, "vault")
    turn(conv, "first secret question " + "x" * 2000)
    path = conv.store.path("vault")
    inode, size = os.stat(path).st_ino, path.stat().st_size
    turn(conv, "second secret")
    assert os.stat(path).st_ino == inode and path.stat().st_size > size  # a record appended, not a rewrite
    assert b"second secret" not in path.read_bytes()
    store = SessionStore(conv.store.root, conv.store.key)
    assert [m.content[:6] for m in store.load("vault")[0].history] == ["first ", "ok", "second", "ok"]

    grown = path.read_bytes()
    path.write_bytes(grown[:-5])  # the last record cut short by a crash: left out
    assert [m.content for m in store.load("vault")[0].history][-2:] == ["first secret question " + "x" * 2000, "ok"]
    damaged = bytearray(grown + grown[size:])  # a record in the middle altered: refused, not skipped
    damaged[size + 20] ^= 1
    path.write_bytes(bytes(damaged))
    with pytest.raises(Exception, match="altered"):
        store.load("vault")
    path.write_bytes(grown)

    later = bound(env, "vault")
    for i in range(12):  # the records outgrow the snapshot: the file is written whole again, with them in it
        turn(later, f"turn {i} " + "y" * 400)
    assert os.stat(path).st_ino != inode
    assert len(store.load("vault")[0].history) == 4 + 24
    turn(later, "one more")  # appended to the new snapshot
    new_key = base64.b64encode(os.urandom(32)).decode()
    rekeyed = run_chatcli("storage", "rekey", env=dict(env, CHATCLI_NEW_ENCRYPTION_KEY=new_key))
    assert rekeyed.returncode == 0, rekeyed.stderr
    after = SessionStore(conv.store.root, base64.b64decode(new_key)).load("vault")[0]
    assert [m.content for m in after.history][-2:] == ["one more", "ok"] and len(after.history) == 30


# -- what a review of the above found -------------------------------------------------------------
def test_a_file_with_per_mode_histories_is_written_whole_not_appended_to(env):
    sessions_dir = Home.of(Settings.load(env)).sessions_dir
    sessions_dir.mkdir(parents=True)
    (sessions_dir / "modes.json").write_text(json.dumps({
        "version": 2, "agent_history": [{"role": "user", "content": "agent q"}, {"role": "assistant", "content": "a"}],
        "chat_history": []}))
    conv = bound(env, "modes")
    turn(conv, "chat q")
    document = json.loads((sessions_dir / "modes.json").read_text())  # still a document, in order
    assert [m["content"] for m in document["chat_history"]] == ["agent q", "a", "chat q", "ok"]


def test_a_failed_fsync_after_the_second_step_leaves_the_file_as_it_was(env, monkeypatch, appends_at_any_size):
    conv = bound(env, "disk")
    turn(conv, "kept")
    path = conv.store.path("disk")
    before = path.read_bytes()
    calls = []
    real_fsync = os.fsync

    def failing(fd):
        calls.append(fd)
        if len(calls) == 2:  # the append's second step
            raise OSError(5, "Input/output error")
        return real_fsync(fd)

    conv.history += [Message("user", "lost?"), Message("assistant", "maybe")]
    with conv.store.lock("disk"):
        monkeypatch.setattr(os, "fsync", failing)
        with pytest.raises(Exception, match="Input/output error"):
            conv.store.append("disk", conv.history[2:], 2, conv.sync_stamp)
        monkeypatch.setattr(os, "fsync", real_fsync)
    assert path.read_bytes() == before and json.loads(before)


@pytest.mark.parametrize("tail", [b'{"role":"user","cont', b"\0" * 300], ids=["partial", "zeros"])
def test_an_append_torn_inside_its_first_step_is_cut_off_at_the_next_load(env, tail):
    conv = bound(env, "partial")
    turn(conv, "kept question")
    path = conv.store.path("partial")
    whole = path.read_bytes()
    with open(path, "ab") as handle:
        handle.write(tail)
    data, stamp = SessionStore(conv.store.root).load("partial")
    assert [m.content for m in data.history] == ["kept question", "ok"]
    assert path.read_bytes() == whole and stamp.size == len(whole)  # mended: whole JSON for every reader
    turn(bound(env, "partial"), "next")
    assert [m["content"] for m in json.loads(conv.store.path("partial").read_bytes())["chat_history"]][-2:] == [
        "next", "ok"]


def test_a_small_session_is_written_whole_at_every_turn_and_a_large_one_appended_in_place(env):
    from chatcli.store.sessions import WHOLE_BELOW

    conv = bound(env, "sizes")
    turn(conv, "first")
    path = conv.store.path("sizes")
    inode = path.stat().st_ino
    turn(conv, "second")  # small: a new file, renamed into place (whole JSON at every moment)
    assert path.stat().st_ino != inode and json.loads(path.read_bytes())
    conv.history += [Message("user", "x" * 1000) for _ in range(WHOLE_BELOW // 1000)]
    conv.sync_transcript()
    conv.binding.write_through()
    inode = path.stat().st_ino
    turn(conv, "third")  # past WHOLE_BELOW: appended in place, a turn costing the same at any size
    assert path.stat().st_ino == inode
    assert [m["content"] for m in json.loads(path.read_bytes())["chat_history"]][-2:] == ["third", "ok"]


def stopped_between_steps(env, name: str) -> tuple:
    """A session whose last append a kill stopped between its two steps: the turn is written
    after the old document's end, which still closes it (json, jq and Go refuse the trailing data)."""
    conv = bound(env, name)
    turn(conv, "kept question")
    path = conv.store.path(name)
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"role":"user","content":"cut question"},{"role":"assistant","content":"ok"}]}')
    with pytest.raises(ValueError, match="Extra data"):
        json.loads(path.read_bytes())
    return conv, path


def test_an_append_stopped_between_its_steps_is_finished_by_the_next_load(env):
    _conv, path = stopped_between_steps(env, "between")
    data, stamp = SessionStore(path.parent).load("between")
    contents = ["kept question", "ok", "cut question", "ok"]
    assert [m.content for m in data.history] == contents and stamp.size == path.stat().st_size
    assert [m["content"] for m in json.loads(path.read_bytes())["chat_history"]] == contents


@pytest.mark.parametrize("how", ["session list", "start-up sweep"])
def test_an_append_stopped_between_its_steps_is_finished_by_a_listing_or_the_start_up_sweep(env, workdir, how):
    _conv, path = stopped_between_steps(env, "between")
    if how == "session list":
        assert run_chatcli("session", "list", env=env, cwd=workdir).returncode == 0
    else:
        from chatcli.store.storage import Storage

        Storage(Settings.load(env)).sweep()
    assert [m["content"] for m in json.loads(path.read_bytes())["chat_history"]][-2:] == ["cut question", "ok"]


def test_mending_never_waits_for_a_writer_holding_the_session(env):
    _conv, path = stopped_between_steps(env, "held")
    store = SessionStore(path.parent)
    before = path.read_bytes()
    with store.lock("held"):  # a writer between its two steps holds the lock: it finishes them itself
        data, stamp = store.load("held")
        assert stamp.size == -1 and path.read_bytes() == before
    assert store.mend("held") and json.loads(path.read_bytes())


def test_a_hard_linked_session_file_is_not_changed_through_its_other_name(env, tmp_path):
    conv = bound(env, "linked")
    turn(conv, "first")
    backup = tmp_path / "backup.json"
    os.link(conv.store.path("linked"), backup)
    saved = backup.read_bytes()
    turn(conv, "second")
    assert backup.read_bytes() == saved and len(json.loads(conv.store.path("linked").read_bytes())["chat_history"]) == 4


def test_the_first_turn_window_keeps_the_system_messages_and_summary_before_it(openai_env, openai_server):
    later = resumed(openai_env, "framed", alternating(40, LONG), Message("system", "Always answer in French."),
                    Message("assistant", "Summary of before.", meta={"is_summary": True}))
    later.send("and now?")
    sent = openai_server.requests[-1].body["messages"]
    assert [m["content"] for m in sent[:2]] == ["Always answer in French.", "Summary of before."]
    assert sent[2]["role"] == "user" and sent[-1]["content"] == "and now?" and len(sent) < 12


def test_a_compaction_leaves_one_checkpoint_and_turns_do_not_rebuild_the_list(openai_env, openai_server):
    from chatcli.engine import compaction, rewind

    conv = Conversation(Settings.load(openai_env), journal=True)
    sessions.start(conv, name="compacted")
    for i in range(8):
        conv.send(f"turn {i} question")
    openai_server.reply("A summary.")
    compaction.compact(conv, label="/compact")
    listed = rewind.listing(conv).text
    assert listed.count("before /compact") == 1, listed
    conv.send("after the compaction")
    listed = rewind.listing(conv).text
    assert listed.count("before /compact") == 1 and listed.count("“after the compaction”") == 1, listed


def test_a_session_too_large_to_summarise_is_never_sent_whole(openai_env, openai_server):
    later = resumed(openai_env, "huge", alternating(40, LONG))
    said: list[str] = []
    for question in ("first?", "second?", "third?"):
        later.send(question, on_notice=said.append)
    assert all(len(request.body["messages"]) < 12 for request in openai_server.requests)  # no summary request, no whole history
    notes = [n for n in said if "too large to summarise" in n]
    assert len(notes) == 1 and "Nothing was compacted" in notes[0], said
    assert len(SessionStore(Home.of(later.settings).sessions_dir).load("huge")[0].history) == 46
