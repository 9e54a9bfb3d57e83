"""What every session store promises, run against each: the files under CHATCLI_HOME and a real
PostgreSQL server (CHATCLI_STORE). The engine reaches either through store/home.py and cannot
tell them apart; these tests hold them to the same behaviour."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import textwrap
import time

import pytest

from chatcli.config.settings import Settings
from chatcli.core.messages import Message
from chatcli.core.session import SessionData
from chatcli.store.home import Home
from chatcli.store.session_file import SessionError, SessionExists, SessionNotFound


def store_of(env):
    return Home.of(Settings.load(env)).sessions()


def chat(*texts: str) -> list[Message]:
    return [Message("user" if i % 2 == 0 else "assistant", text) for i, text in enumerate(texts)]


def texts(data: SessionData) -> list[str]:
    return [m.content for m in data.history]


@pytest.fixture
def sealed_env(any_store_env):
    return dict(any_store_env, CHATCLI_ENCRYPTION_KEY=base64.b64encode(os.urandom(32)).decode())


def test_a_session_written_reads_back_as_written(any_store_env):
    store = store_of(any_store_env)
    assert not store.exists("notes") and store.stamp("notes") is None
    stamp = store.create("notes", SessionData(history=chat("what is a lighthouse", "a tower with a light")))
    data, read = store.load("notes")
    assert texts(data) == ["what is a lighthouse", "a tower with a light"]
    assert data.title == "what is a lighthouse" and read == stamp == store.stamp("notes")
    with pytest.raises(SessionExists):
        store.create("notes", SessionData(history=chat("again")))
    with pytest.raises(SessionNotFound):
        store.load("missing")


def test_a_turn_appended_keeps_the_session_and_is_read_alone_by_another_surface(any_store_env, appends_at_any_size):
    store = store_of(any_store_env)
    first = store.create("notes", SessionData(history=chat("one", "two")))
    data, _ = store.load("notes")
    assert data.appendable
    grown = store.append("notes", chat("three", "four"), 2, first)
    assert grown is not None and grown.inode == first.inode and grown.size > first.size
    assert grown == store.stamp("notes")
    assert texts(store.load("notes")[0]) == ["one", "two", "three", "four"]
    added, inode, size = store.appended_since("notes", first.inode, first.size)
    assert [m.content for m in added] == ["three", "four"] and (inode, size) == (grown.inode, grown.size)
    assert store.append("notes", chat("five"), 4, first) is None  # not the session expected: written whole


def test_a_whole_write_is_a_new_session_to_a_reader_of_the_old_one(any_store_env):
    store = store_of(any_store_env)
    first = store.create("notes", SessionData(history=chat("one", "two")))
    with store.lock("notes"):
        again = store.write("notes", SessionData(history=chat("uno", "dos", "tres")))
    assert again != first and again.inode != first.inode
    assert store.appended_since("notes", first.inode, first.size) is None
    assert texts(store.load("notes")[0]) == ["uno", "dos", "tres"]


def test_the_listing_shows_each_session_newest_first_and_the_latest_is_offered(any_store_env):
    store = store_of(any_store_env)
    store.create("older", SessionData(history=chat("first question", "answer")))
    time.sleep(0.01)
    store.create("newer", SessionData(history=chat("second question", "answer", "more")))
    time.sleep(0.01)
    store.create("mirror", SessionData(history=chat("a mirror")), latest=False)
    listing = store.list()
    assert [info.name for info in listing] == ["mirror", "newer", "older"]
    assert [(info.messages, info.title) for info in listing[1:]] == [(3, "second question"), (2, "first question")]
    assert store.latest().name == "newer"


def test_a_deleted_session_is_gone_and_only_an_unchanged_one_is_removed(any_store_env):
    store = store_of(any_store_env)
    stamp = store.create("gone", SessionData(history=chat("bye")))
    store.delete("gone")
    assert store.stamp("gone") is None and "gone" not in store.entries()
    with pytest.raises(SessionNotFound):
        store.delete("gone")
    stamp = store.create("kept", SessionData(history=chat("hi")))
    with store.lock("kept"):
        store.write("kept", SessionData(history=chat("hi", "changed")))
    assert not store.remove_if_unchanged("kept", *stamp)
    assert store.remove_if_unchanged("kept", *store.stamp("kept")) and not store.exists("kept")


def test_a_session_lock_excludes_another_process_until_it_is_let_go(any_store_env, tmp_path):
    store = store_of(any_store_env)
    store.create("shared", SessionData(history=chat("hi")))
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, time
        from chatcli.config.settings import Settings
        from chatcli.store.home import Home
        store = Home.of(Settings.load()).sessions()
        with store.lock("shared"):
            print("held", flush=True)
            sys.stdin.readline()
    """)], env=any_store_env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with store.lock("shared", wait=False) as held:
            assert held is False
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.wait(timeout=30) == 0
        with store.lock("shared", wait=False) as held:
            assert held is True
    finally:
        holder.kill()


def test_save_refuses_what_it_cannot_read_and_hands_over_what_it_replaces(any_store_env):
    store = store_of(any_store_env)
    store.create("notes", SessionData(history=chat("kept before")))
    replaced = []
    store.save("notes", SessionData(history=chat("new")), before_replace=replaced.append)
    assert [texts(data) for data in replaced] == [["kept before"]]


def test_the_journal_a_session_named_is_remembered(any_store_env):
    store = store_of(any_store_env)
    store.create("notes", SessionData(history=chat("hi"), transcript_id="0123456789abcdef0123456789abcdef"))
    assert store.catalog.remembered_journal("notes") == "0123456789abcdef0123456789abcdef"
    assert store.entries()["notes"][5] == "0123456789abcdef0123456789abcdef"


def test_a_sealed_store_round_trips_and_its_turns_append(sealed_env, appends_at_any_size):
    store = store_of(sealed_env)
    first = store.create("vault", SessionData(history=chat("the passphrase is heliotrope", "noted")))
    grown = store.append("vault", chat("and the door code", "1234"), 2, first)
    assert grown is not None and grown.inode == first.inode
    assert texts(store.load("vault")[0]) == ["the passphrase is heliotrope", "noted", "and the door code", "1234"]
    assert store.list()[0].title == "" and store.list()[0].messages is None  # the listing knows no contents
    other = store_of(dict(sealed_env, CHATCLI_ENCRYPTION_KEY=base64.b64encode(os.urandom(32)).decode()))
    with pytest.raises(SessionError, match="cannot be opened"):
        other.load("vault")


# -- transcript journals: beside the sessions, in files or on the server ------------------------
def said(*texts: str) -> list[dict]:
    from chatcli.core import journal as rules

    messages = [Message("user" if i % 2 == 0 else "assistant", text) for i, text in enumerate(texts)]
    return [rules.message_line(rules.content_digest(m), m, "2026-01-01T00:00:00Z") for m in messages]


def journal_of(env, transcript_id: str = "0123456789abcdef0123456789abcdef"):
    return Home.of(Settings.load(env)).journal(transcript_id)


def contents(reading) -> list[str]:
    return [event["message"]["content"] for event in reading.events if event["type"] == "message"]


def test_a_journal_reads_back_what_was_appended_from_any_offset(any_store_env):
    journal = journal_of(any_store_env)
    assert not journal.exists() and journal.read().events == [] and journal.last_event() is None
    with journal.appending(0) as append:
        assert append.new.events == []
        append.write(said("one", "two"))
    middle = journal.read().end
    with journal.appending(middle) as append:
        append.write(said("three"))
    whole = journal.read()
    assert contents(whole) == ["one", "two", "three"] and whole.end == journal.size() and not whole.skipped
    assert contents(journal.read(middle)) == ["three"]
    event, size, identity = journal.last_event()
    assert event["message"]["content"] == "three" and size == whole.end and identity == whole.identity
    assert journal.stat()[1:] == (size, identity)


def test_a_writer_behind_the_journal_is_shown_what_others_appended_first(any_store_env):
    first, second = journal_of(any_store_env), journal_of(any_store_env)
    with first.appending(0) as append:
        append.write(said("mine"))
    with second.appending(0) as append:  # it had read nothing: it is given what is there
        assert contents(append.new) == ["mine"]
        append.write(said("yours"))
    assert contents(first.read()) == ["mine", "yours"]


def test_two_processes_appending_at_once_never_interleave_or_lose_a_line(any_store_env):
    script = textwrap.dedent("""
        import sys
        from chatcli.config.settings import Settings
        from chatcli.core import journal as rules
        from chatcli.core.messages import Message
        from chatcli.store.home import Home
        journal = Home.of(Settings.load()).journal("0123456789abcdef0123456789abcdef")
        for i in range(40):
            m = Message("user", f"{sys.argv[1]} {i}")
            with journal.appending(journal.size()) as append:
                append.write([rules.message_line(rules.content_digest(m), m, "2026-01-01T00:00:00Z")])
    """)
    writers = [subprocess.Popen([sys.executable, "-c", script, who], env=any_store_env) for who in ("a", "b")]
    assert [writer.wait(timeout=120) for writer in writers] == [0, 0]
    reading = journal_of(any_store_env).read()
    assert sorted(contents(reading)) == sorted(f"{who} {i}" for who in "ab" for i in range(40))
    assert not reading.skipped


def test_a_sealed_journal_opens_only_with_its_key_and_a_fork_starts_from_its_parent(sealed_env):
    from chatcli.store.journal import JournalError

    journal = journal_of(sealed_env)
    with journal.appending(0) as append:
        append.write(said("the heliotrope passphrase"))
    assert b"heliotrope" not in journal.read_bytes()
    fork = journal_of(sealed_env, "fedcba9876543210fedcba9876543210")
    fork.seed_fork(journal, "2026-01-02T00:00:00Z")
    events = fork.read().events
    assert events[0]["type"] == "fork" and contents(fork.read()) == ["the heliotrope passphrase"]
    other = dict(sealed_env, CHATCLI_ENCRYPTION_KEY=base64.b64encode(os.urandom(32)).decode())
    with pytest.raises(JournalError):
        journal_of(other).read()
    assert fork.remove() and not fork.exists() and not fork.remove()


# -- the small stores: recall, memory, contexts, cost snapshots, the schedule ---------------------
def two_surfaces(env, tmp_path) -> tuple[Home, Home]:
    """Two surfaces of one store: on one disk (one CHATCLI_HOME), or on two machines (a home each)
    sharing the server."""
    first = Home.of(Settings.load(env))
    if first.store is None:
        return first, Home.of(Settings.load(env))
    return first, Home(tmp_path / "elsewhere", first.key, first.store)


def test_recall_entries_memory_notes_and_contexts_are_shared_and_forgotten_alike(any_store_env, tmp_path):
    from chatcli.store.recall import RecallError

    here, there = two_surfaces(any_store_env, tmp_path)
    key = here.recall().put(chat("the gate code is 4711", "noted"), {"session": "notes"})
    assert here.recall().put(chat("the gate code is 4711", "noted")) == key  # stored once, by content
    assert texts(SessionData(history=there.recall().get(key)[0])) == ["the gate code is 4711", "noted"]
    with pytest.raises(RecallError, match="no recall entry"):
        there.recall().get("0123456789abcdef")

    before = there.memory().stamp()
    note = here.memory().save("the user prefers metric units", origin="notes")
    assert there.memory().stamp() != before
    assert [(n.id, n.text, n.origin) for n in there.memory().notes()[0]] == [(note.id, note.text, "notes")]
    saved = there.memory().stamp()
    there.memory().forget("1")
    assert here.memory().notes() == ([], []) and here.memory().stamp() != saved

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("print('lighthouse')\n")
    context, replaced = here.contexts().save("app", ["src"], tmp_path)
    assert not replaced and there.contexts().names() == ["app"]
    stamp = there.contexts().stamp("app")
    assert [c.text for c in there.contexts().load("app").chunks] == ["print('lighthouse')"]
    again, replaced = there.contexts().save("app", ["src"], tmp_path)
    assert replaced and again.id == context.id and here.contexts().stamp("app") != stamp
    here.contexts().delete("app")
    assert there.contexts().names() == [] and there.contexts().stamp("app") is None


def test_cost_lines_appended_by_two_processes_at_once_are_all_kept(any_store_env, tmp_path):
    script = textwrap.dedent("""
        import os, sys
        from chatcli.config.settings import Settings
        from chatcli.store.costs import Line
        from chatcli.store.home import Home
        costs = Home.of(Settings.load(dict(os.environ))).costs()
        for n in range(100):
            costs.add("0123456789ab", Line(float(n), sys.argv[1], "openai", "m", n, 1, False, 0.001))
    """)
    writers = [subprocess.Popen([sys.executable, "-c", script, name], env=any_store_env) for name in ("a", "b")]
    assert [writer.wait(60) for writer in writers] == [0, 0]
    lines = Home.of(Settings.load(any_store_env)).costs().lines("0123456789ab")
    assert sorted((line.session, line.input_tokens) for line in lines) == [
        (name, n) for name in ("a", "b") for n in range(100)]


def test_a_scheduled_run_is_claimed_once_by_surfaces_racing_for_it(any_store_env):
    store = Home.of(Settings.load(any_store_env)).schedule()
    job = store.add("*/5 * * * *", "/memory list")
    script = textwrap.dedent("""
        import os, sys
        from chatcli.config.settings import Settings
        from chatcli.store.home import Home
        store = Home.of(Settings.load(dict(os.environ))).schedule()
        print(*[due for due in range(1, 51) if store.claim(sys.argv[1], float(due), now=float(due))])
    """)
    racers = [subprocess.Popen([sys.executable, "-c", script, job.id], env=any_store_env, stdout=subprocess.PIPE,
                               text=True) for _ in range(3)]
    won = [racer.communicate(timeout=60)[0].split() for racer in racers]
    claimed = [due for dues in won for due in dues]
    assert len(claimed) == len(set(claimed)) and "50" in claimed  # each due time run once at most, the last once
    assert store.jobs()[0].last_run > 0 and store.add("@daily", "/storage").id == "2"
    store.remove(job.id)
    assert [j.id for j in store.jobs()] == ["2"]


def test_a_sealed_stores_small_files_hold_no_word(sealed_env, tmp_path):
    here, there = two_surfaces(sealed_env, tmp_path)
    key = here.recall().put(chat("the lighthouse keeper's secret", "kept"))
    here.memory().save("the lighthouse is painted red")
    (tmp_path / "notes.txt").write_text("lighthouse maintenance log\n")
    here.contexts().save("log", ["notes.txt"], tmp_path)
    assert there.recall().get(key)[0][0].content == "the lighthouse keeper's secret"
    assert there.memory().notes()[0][0].text == "the lighthouse is painted red"
    assert "lighthouse" in there.contexts().load("log").chunks[0].text
    places = [here.recall().place, here.memory().place, here.contexts().place]
    for place in places:
        for filename in place.filenames():
            assert b"lighthouse" not in place.read(filename)
