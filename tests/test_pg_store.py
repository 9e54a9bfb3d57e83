"""chatcli with its sessions on a real PostgreSQL server (CHATCLI_STORE), as users meet it: two
machines (two CHATCLI_HOMEs) sharing one conversation, and the server going away mid-session."""

from __future__ import annotations

import base64
import os
import re
import time
from pathlib import Path

import psycopg
import pytest
from conftest import run_chatcli, wait_until
from pg_server import Server
from repl_driver import Repl, plain
from test_store_contract import said

from chatcli.config.settings import Settings
from chatcli.store.home import Home
from chatcli.store.hub import ANSWERED
from chatcli.store.pg import shown


def machine(env: dict, tmp_path, name: str, dsn: str) -> dict:
    """`env` as another machine sees it: its own home, the same server."""
    (tmp_path / name).mkdir()
    return dict(env, HOME=str(tmp_path / name), CHATCLI_HOME=str(tmp_path / name / ".chatcli"), CHATCLI_STORE=dsn)


def test_two_machines_continue_one_conversation_through_the_server(openai_env, openai_server, pg_dsn, tmp_path):
    laptop, workstation = machine(openai_env, tmp_path, "laptop", pg_dsn), machine(openai_env, tmp_path, "ws", pg_dsn)
    done = run_chatcli("--session", "trip", "-p", "plan a trip to Lisbon", env=laptop)
    assert done.returncode == 0, done.stderr
    listing = run_chatcli("session", "list", env=workstation)
    assert listing.returncode == 0 and "trip" in listing.stdout, listing.stderr
    done = run_chatcli("--session", "trip", "-p", "and Porto?", env=workstation)
    assert done.returncode == 0, done.stderr
    sent = [m["content"] for m in openai_server.requests[-1].body["messages"]]
    assert "plan a trip to Lisbon" in sent and sent[-1] == "and Porto?"
    done = run_chatcli("--session", "trip", "-p", "and back to Lisbon", env=laptop)  # each machine's turn in turn
    assert done.returncode == 0 and done.stderr.strip() == "Attached to session 'trip' (4 messages).", done.stderr
    sent = [m["content"] for m in openai_server.requests[-1].body["messages"]]
    assert sent.index("plan a trip to Lisbon") < sent.index("and Porto?") < sent.index("and back to Lisbon")
    shown = run_chatcli("session", "show", "trip", env=laptop)
    assert "plan a trip to Lisbon" in shown.stdout and "and Porto?" in shown.stdout
    for place in ("laptop", "ws"):  # nothing of the conversation on either disk: session and journal are shared
        assert not list((tmp_path / place).rglob("sessions/*.json"))
        assert not list((tmp_path / place).rglob("transcripts/*.jsonl"))
    data = Home.of(Settings.load(laptop)).sessions().load("trip")[0]
    recorded = Home.of(Settings.load(workstation)).journal(data.transcript_id).read().events
    assert [e["message"]["content"] for e in recorded if e["type"] == "message" and e["message"]["role"] == "user"] \
        == ["plan a trip to Lisbon", "and Porto?", "and back to Lisbon"]


def test_a_sealed_store_keeps_no_word_of_a_conversation_on_the_server(openai_env, pg_dsn, tmp_path):
    env = dict(machine(openai_env, tmp_path, "vault", pg_dsn),
               CHATCLI_ENCRYPTION_KEY=base64.b64encode(os.urandom(32)).decode())
    for question in ("the heliotrope passphrase", "the marigold code"):
        done = run_chatcli("--session", "vault", "-p", question, env=env)
        assert done.returncode == 0, done.stderr
    store = Home.of(Settings.load(env)).sessions()
    history = [m.content for m in store.load("vault")[0].history]
    assert "the heliotrope passphrase" in history and "the marigold code" in history
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        held = b"".join(bytes(value) if isinstance(value, (bytes, memoryview)) else str(value).encode()
                        for table in ("chatcli_sessions", "chatcli_session_turns", "chatcli_meta")
                        for row in conn.execute(f"SELECT * FROM {table}").fetchall() for value in row)
    assert b"heliotrope" not in held and b"marigold" not in held and b"vault" in held


def test_a_server_that_cannot_be_reached_is_one_clear_line(openai_env, tmp_path):
    server = Server().start()
    dsn = server.dsn
    server.stop()
    done = run_chatcli("--session", "trip", "-p", "hello", env=machine(openai_env, tmp_path, "m", dsn))
    assert done.returncode != 0
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "session store at postgresql://chatcli@127.0.0.1" in done.stderr


@pytest.fixture
def own_server():
    server = Server().start()
    yield server
    server.stop()


def test_the_repl_keeps_a_turn_the_server_missed_and_writes_it_when_it_is_back(repl_env, own_server, tmp_path, workdir):
    env = machine(repl_env, tmp_path, "m", own_server.dsn)
    repl = Repl(env, "m", cwd=workdir, args=("--session", "notes"))
    try:
        repl.send("first question")
        own_server._pg_ctl("stop")
        out = plain(repl.send("second question", timeout=40))
        assert "still in memory" in out and "Traceback" not in out
        own_server._pg_ctl("start")
        out = plain(repl.send("third question", timeout=40))
        assert "Traceback" not in out
    finally:
        repl.close()
    history = Home.of(Settings.load(env)).sessions().load("notes")[0].history
    assert [m.content for m in history if m.role == "user"] == ["first question", "second question", "third question"]
    assert [m.content for m in history if m.role == "assistant"] == [
        "You said: first question", "You said: second question", "You said: third question"]


def test_a_repl_left_while_the_server_is_down_keeps_the_conversation_in_this_machines_files(
        repl_env, own_server, tmp_path, workdir):
    import pexpect

    env = machine(repl_env, tmp_path, "m", own_server.dsn)
    repl = Repl(env, "m", cwd=workdir, args=("--session", "notes"))
    try:
        repl.send("first question")
        own_server._pg_ctl("stop")
        repl.send("asked while the server is down", timeout=40)
        repl.child.send("/exit\r")
        repl.child.expect(pexpect.EOF, timeout=60)
        said = plain(repl.child.before)
    finally:
        repl.close()
        own_server._pg_ctl("start")
    assert "Traceback" not in said and "kept in this machine's files instead, as 'autosave-" in said, said
    kept = said.split("instead, as '")[1].split("'")[0]
    local = Home(Path(env["CHATCLI_HOME"])).sessions()
    assert [m.content for m in local.load(kept)[0].history if m.role == "user"] == [
        "first question", "asked while the server is down"]
    moved = run_chatcli("storage", "migrate", "--to", own_server.dsn, env=dict(env, CHATCLI_STORE="files"))
    assert moved.returncode == 0, moved.stderr
    on_server = Home.of(Settings.load(env)).sessions().load(kept)[0].history
    assert [m.content for m in on_server][-1] == "You said: asked while the server is down"


@pytest.mark.parametrize("sealed", [False, True])
def test_session_search_on_another_machine_finds_what_the_first_said(openai_env, pg_dsn, tmp_path, sealed):
    key = {"CHATCLI_ENCRYPTION_KEY": base64.b64encode(os.urandom(32)).decode()} if sealed else {}
    laptop = dict(machine(openai_env, tmp_path, "laptop", pg_dsn), **key)
    workstation = dict(machine(openai_env, tmp_path, "ws", pg_dsn), **key)
    for name, question in (("birds", "where do puffins nest"), ("boats", "how does a keel work")):
        assert run_chatcli("--session", name, "-p", question, env=laptop).returncode == 0
    found = run_chatcli("session", "search", "puffins", env=workstation)
    assert found.returncode == 0, found.stderr
    assert "birds" in found.stdout and "boats" not in found.stdout
    assert run_chatcli("--session", "boats", "-p", "and puffins on boats?", env=laptop).returncode == 0
    found = run_chatcli("session", "search", "puffins", env=workstation)
    assert "birds" in found.stdout and "boats" in found.stdout


def test_a_machine_with_another_key_or_none_is_refused_before_anything_is_written(openai_env, pg_dsn, tmp_path):
    first = dict(machine(openai_env, tmp_path, "first", pg_dsn),
                 CHATCLI_ENCRYPTION_KEY=base64.b64encode(os.urandom(32)).decode())
    assert run_chatcli("--session", "vault", "-p", "the heliotrope passphrase", env=first).returncode == 0
    other_key = dict(machine(openai_env, tmp_path, "second", pg_dsn),
                     CHATCLI_ENCRYPTION_KEY=base64.b64encode(os.urandom(32)).decode())
    no_key = machine(openai_env, tmp_path, "third", pg_dsn)
    for env, said in ((other_key, "is not the key"), (no_key, "is encrypted")):
        for command in (("--session", "other", "-p", "hello"), ("session", "list")):
            done = run_chatcli(*command, env=env)
            assert done.returncode != 0 and said in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert [info.name for info in Home.of(Settings.load(first)).sessions().list()] == ["vault"]


@pytest.mark.parametrize("sealed", [False, True])
def test_a_store_moves_to_the_server_and_back_byte_for_byte_and_the_source_is_left_alone(
        env, pg_dsn, tmp_path, sealed, appends_at_any_size):
    import hashlib

    from chatcli.core.messages import Message
    from chatcli.core.session import SessionData

    key = {"CHATCLI_ENCRYPTION_KEY": base64.b64encode(os.urandom(32)).decode()} if sealed else {}
    files = dict(env, **key)
    store = Home.of(Settings.load(files)).sessions()
    first = store.create("lisbon", SessionData(history=[Message("user", "trams of Lisbon"), Message("assistant", "28")]))
    store.append("lisbon", [Message("user", "and the funiculars"), Message("assistant", "three")], 2, first)
    store.create("porto", SessionData(history=[Message("user", "bridges of Porto")]))
    journal = Home.of(Settings.load(files)).journal("0123456789abcdef0123456789abcdef")
    with journal.appending(0) as append:
        append.write(said("trams of Lisbon"))
    small = Home.of(Settings.load(files))  # a note, a compacted original, a scheduled job
    small.memory().save("the user prefers metric units")
    recalled = small.recall().put([Message("user", "the original of a summary")])
    small.schedule().add("@daily", "/storage")
    hub = Home.of(Settings.load(files)).hub()  # a gateway ran here: a sender bound, a message answered
    hub.principal("telegram", "42", "Ana")
    hub.bind("telegram", "42", "lisbon")
    hub.rotate("telegram", "42")
    hub.claim("telegram", "42/1001", "1:t")
    hub.answered("telegram", "42/1001")
    hub.close()
    before = {path.name: hashlib.sha256(path.read_bytes()).hexdigest()
              for path in [*store.root.glob("*.json"), journal.path]}

    done = run_chatcli("storage", "migrate", "--to", pg_dsn, env=files)
    assert done.returncode == 0, done.stderr
    assert "Copied 2 session(s) (5 messages) and 1 transcript journal(s)" in done.stdout
    assert "Added 1 gateway sender(s)" in done.stdout
    assert "Copied 3 file(s) of the recall store, memory, contexts, cost snapshots and the schedule" in done.stdout
    on_the_server = Home.of(Settings.load(dict(files, CHATCLI_STORE=pg_dsn)))
    assert [n.text for n in on_the_server.memory().notes()[0]] == ["the user prefers metric units"]
    assert on_the_server.recall().get(recalled)[0][0].content == "the original of a summary"
    assert [job.command for job in on_the_server.schedule().jobs()] == ["/storage"]
    server_hub = Home.of(Settings.load(dict(files, CHATCLI_STORE=pg_dsn))).hub()
    moved = server_hub.get("telegram", "42")
    assert (moved.session, moved.generation, moved.display) == ("lisbon", 2, "Ana")
    assert server_hub.claim("telegram", "42/1001", "1:u") == ANSWERED  # a replay after the move: no second answer
    server_hub.close()
    assert {path.name: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in [*store.root.glob("*.json"), journal.path]} == before
    server = dict(files, CHATCLI_STORE=pg_dsn)
    on_server = Home.of(Settings.load(server)).sessions()
    assert [m.content for m in on_server.load("lisbon")[0].history] == [
        "trams of Lisbon", "28", "and the funiculars", "three"]
    again = run_chatcli("storage", "migrate", "--to", pg_dsn, env=files)  # an interrupted run, finished
    assert again.returncode == 0 and "Copied 0 session(s)" in again.stdout and "gateway sender" not in again.stdout
    assert "Copied 0 file(s)" in again.stdout and "3 were there already" in again.stdout
    assert "2 session(s) and 1 journal(s) were there already" in again.stdout
    assert [info.name for info in on_server.list()] == ["porto", "lisbon"]  # the same order by time

    elsewhere = machine(dict(env, **key), tmp_path, "elsewhere", pg_dsn)
    back = run_chatcli("storage", "migrate", "--to", "files", env=elsewhere)
    assert back.returncode == 0, back.stderr
    copied = Home.of(Settings.load(dict(elsewhere, CHATCLI_STORE="files")))
    assert {path.name: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in [*copied.sessions().root.glob("*.json"), *copied.transcripts_dir.glob("*.jsonl")]} == before
    assert copied.hub().get("telegram", "42").session == "lisbon"
    assert [n.text for n in copied.memory().notes()[0]] == ["the user prefers metric units"]
    assert [job.command for job in copied.schedule().jobs()] == ["/storage"]


def test_a_migration_never_overwrites_another_session_of_the_same_name(env, pg_dsn):
    from chatcli.core.messages import Message
    from chatcli.core.session import SessionData

    local = Home.of(Settings.load(env))
    left = "0123456789abcdef0123456789abcdef"
    with local.journal(left).appending(0) as append:
        append.write(said("on disk"))
    local.sessions().create("notes", SessionData(history=[Message("user", "on disk")], transcript_id=left))
    server_home = Home.of(Settings.load(dict(env, CHATCLI_STORE=pg_dsn)))
    server = server_home.sessions()
    server.create("notes", SessionData(history=[Message("user", "on the server")]))
    done = run_chatcli("storage", "migrate", "--to", pg_dsn, env=env)
    assert done.returncode == 1 and "session 'notes': the target holds another version of it" in done.stderr
    assert [m.content for m in server.load("notes")[0].history] == ["on the server"]
    assert "1 journal(s) of sessions left behind were not copied" in done.stdout  # nothing there names it
    assert not server_home.journal(left).exists()
    local.sessions().create("fork", SessionData(history=[Message("user", "on disk")], transcript_id=left))
    again = run_chatcli("storage", "migrate", "--to", pg_dsn, env=env)  # a session copied names it now
    assert again.returncode == 1 and "left behind" not in again.stdout
    assert server_home.journal(left).exists() and server.load("fork")[0].transcript_id == left


@pytest.mark.parametrize("sealed", [False, True])
def test_storage_prunes_a_servers_machine_sessions_and_the_journals_only_they_named(openai_env, pg_dsn, tmp_path,
                                                                                   repl_env, workdir, sealed):
    key = {"CHATCLI_ENCRYPTION_KEY": base64.b64encode(os.urandom(32)).decode()} if sealed else {}
    env = dict(machine(openai_env, tmp_path, "m", pg_dsn), **key)
    assert run_chatcli("--session", "notes", "-p", "remember the lighthouse", env=env).returncode == 0
    home = Home.of(Settings.load(env))
    kept_journal = home.sessions().load("notes")[0].transcript_id
    from chatcli.core.messages import Message
    from chatcli.core.session import SessionData

    store = home.sessions()
    gone_journal, orphan, fresh = "0123456789abcdef0123456789abcdef", "ab" * 16, "cd" * 16
    for transcript in (gone_journal, orphan, fresh):
        with home.journal(transcript).appending(0) as append:
            append.write(said("an old autosave"))
    for name, transcript in (("autosave-20250101-000000", gone_journal), ("autosave-20250102-000000", kept_journal),
                             ("autosave-20250103-000000", fresh)):
        store.create(name, SessionData(history=[Message("user", "an old autosave")], transcript_id=transcript))
        store.date(name, time.time() - 400 * 86400)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # all but `fresh` last written two days ago
        conn.execute("UPDATE chatcli_journals SET changed_ns = %s WHERE transcript <> %s",
                     (time.time_ns() - 2 * 86400 * 10**9, fresh))
    done = run_chatcli("storage", "prune", "--apply", env=env)
    assert done.returncode == 0, done.stderr
    assert "autosave-20250101-000000" in done.stdout and f"transcripts/{gone_journal}.jsonl" in done.stdout
    assert f"transcripts/{orphan}.jsonl" in done.stdout  # no session names it
    assert kept_journal not in done.stdout, done.stdout  # "notes" names it too
    assert fresh not in done.stdout  # written lately: a running conversation may be about to name it
    assert [info.name for info in store.list()] == ["notes"]
    assert not home.journal(gone_journal).exists() and not home.journal(orphan).exists()
    assert home.journal(kept_journal).exists() and home.journal(fresh).exists()
    report = run_chatcli("storage", env=env)
    assert report.returncode == 0 and "transcripts" in report.stdout, report.stderr
    repl = Repl(dict(repl_env, **key, **{k: env[k] for k in ("HOME", "CHATCLI_HOME", "CHATCLI_STORE")}), "m",
                cwd=workdir)
    try:
        out = plain(repl.send("/storage"))
        assert "transcripts" in out and "error" not in out.lower()
    finally:
        repl.close()
    assert [m.content for m in Home.of(Settings.load(env)).sessions().load("notes")[0].history][0] == \
        "remember the lighthouse"


def test_a_rekey_with_sessions_on_a_server_is_refused_with_the_way_to_do_it(env, pg_dsn):
    key = base64.b64encode(os.urandom(32)).decode()
    done = run_chatcli("storage", "rekey", env=dict(env, CHATCLI_STORE=pg_dsn, CHATCLI_ENCRYPTION_KEY=key,
                                                     CHATCLI_NEW_ENCRYPTION_KEY=base64.b64encode(os.urandom(32)).decode()))
    assert done.returncode == 2 and "storage migrate --to files" in done.stderr and "Traceback" not in done.stderr


def test_a_lock_whose_connection_the_server_dropped_fails_the_writes_it_guarded(env, pg_server, pg_dsn):
    from chatcli.core.messages import Message
    from chatcli.core.session import SessionData
    from chatcli.store.session_file import SessionError

    mine = Home.of(Settings.load(dict(env, CHATCLI_STORE=pg_dsn))).sessions()
    mine.create("shared", SessionData(history=[Message("user", "hi")]))
    with pytest.raises(SessionError), mine.lock("shared"):
        data, _ = mine.load("shared")
        with psycopg.connect(pg_server.dsn, autocommit=True) as admin:  # the lock's connection goes
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted")
        data.history.append(Message("user", "written without its lock"))
        mine.write("shared", data)
    assert [m.content for m in mine.load("shared")[0].history] == ["hi"]


def test_many_threads_holding_session_locks_each_get_their_work_done(env, pg_dsn):
    import threading

    from chatcli.core.messages import Message
    from chatcli.core.session import SessionData

    store = Home.of(Settings.load(dict(env, CHATCLI_STORE=pg_dsn))).sessions()
    failures = []

    def sender(k: int) -> None:
        try:
            with store.lock(f"sender-{k % 5}"):  # five sessions, eight threads on each
                data = store.load(f"sender-{k % 5}")[0] if store.exists(f"sender-{k % 5}") else SessionData()
                data.history.append(Message("user", f"message {k}"))
                store.write(f"sender-{k % 5}", data)
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            failures.append(exc)

    pool = store.db.pool
    threads = [threading.Thread(target=sender, args=(k,)) for k in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == [] and store.db.pool is pool  # no connection was waited for long enough to renew the pool
    assert sum(len(store.load(f"sender-{k}")[0].history) for k in range(5)) == 40


def test_a_server_stopped_in_the_middle_of_a_write_leaves_the_session_as_it_was_or_whole(env, own_server):
    import threading

    from chatcli.core.messages import Message
    from chatcli.core.session import SessionData
    from chatcli.store.session_file import SessionError

    store = Home.of(Settings.load(dict(env, CHATCLI_STORE=own_server.dsn))).sessions()
    store.create("big", SessionData(history=[Message("user", "before")]))
    outcome = []

    def write() -> None:
        try:
            with store.lock("big"):
                store.write("big", SessionData(history=[Message("user", f"message {i} " + "x" * 500)
                                                        for i in range(100_000)]))
            outcome.append("written")
        except SessionError as exc:
            outcome.append(str(exc))

    writer = threading.Thread(target=write)
    writer.start()
    time.sleep(0.3)  # the document is being sent
    own_server.restart()
    writer.join(timeout=120)
    history = store.load("big")[0].history
    assert (outcome == ["written"] and len(history) == 100_000) or \
        ([m.content for m in history] == ["before"] and "cannot be written" in outcome[0]), outcome
    with psycopg.connect(own_server.dsn) as conn:  # no turn rows of a generation no session has
        assert conn.execute("SELECT count(*) FROM chatcli_session_turns t WHERE NOT EXISTS (SELECT 1 FROM"
                            " chatcli_sessions s WHERE s.name = t.name AND s.generation = t.generation)"
                            ).fetchone()[0] == 0


def test_a_rewind_on_one_machine_goes_back_to_a_checkpoint_another_made(repl_env, openai_server, pg_dsn, tmp_path,
                                                                         workdir):
    from test_rewind import listing, sent, turns

    laptop, workstation = machine(repl_env, tmp_path, "laptop", pg_dsn), machine(repl_env, tmp_path, "ws", pg_dsn)
    first = Repl(laptop, "m", cwd=workdir, args=("--session", "kept"))
    try:
        turns(first, 1, 2)
    finally:
        first.close()
    second = Repl(workstation, "m", cwd=workdir, args=("--session", "kept"))
    try:
        turns(second, 3)
        shown = listing(second, "2")  # the laptop's checkpoints, from the journal they share
        assert "before “turn 1 question”  (0 messages)" in shown and "before “turn 3 question”  (4 messages)" in shown
        assert "Rewound to before “turn 2 question”" in shown
        second.send("turn 4 question")
        assert sent(openai_server) == ["turn 1 question", "You said: turn 1 question", "turn 4 question"]
    finally:
        second.close()
    history = Home.of(Settings.load(laptop)).sessions().load("kept")[0].history
    assert [m.content for m in history if m.role == "user"] == ["turn 1 question", "turn 4 question"]


@pytest.mark.parametrize("whole", [False, True])
def test_a_turn_whose_write_landed_but_whose_answer_was_lost_is_not_written_twice(env, pg_dsn, monkeypatch, whole):
    from conftest import bound

    from chatcli.core.messages import Message
    from chatcli.store.pg_sessions import PgSessionStore
    from chatcli.store.session_file import StoreUnavailable

    if not whole:
        monkeypatch.setattr("chatcli.store.sessions.WHOLE_BELOW", 0)
    conv = bound(dict(env, CHATCLI_STORE=pg_dsn), "notes")

    def turn(text: str) -> list[str]:
        notes = conv.binding.adopt()
        conv.history += [Message("user", text), Message("assistant", f"re: {text}")]
        conv.sync_transcript()
        return notes + conv.binding.write_through()

    turn("one")

    class Unanswered(dict):
        def pop(self, *_args):  # the commit's answer never comes: the write is not known to be done
            return None

    def lost(real):
        def write(self, *args, **kwargs):
            self._unanswered = Unanswered(self._unanswered)
            done = real(self, *args, **kwargs)
            self._unanswered = dict(self._unanswered)
            if done is not None:
                raise StoreUnavailable("the session store at … cannot be written: server closed the connection")
            return done
        return write

    real_write, real_append = PgSessionStore.write, PgSessionStore.append
    monkeypatch.setattr(PgSessionStore, "write", lost(real_write))
    monkeypatch.setattr(PgSessionStore, "append", lost(real_append))
    assert any("still in memory" in note for note in turn("two"))
    monkeypatch.setattr(PgSessionStore, "write", real_write)
    monkeypatch.setattr(PgSessionStore, "append", real_append)
    assert turn("three") == []
    assert [m.content for m in conv.store.load("notes")[0].history] == [
        "one", "re: one", "two", "re: two", "three", "re: three"]


def test_no_password_is_shown_whatever_form_the_address_takes(env):
    from chatcli.store.pg import Database

    for dsn in ("postgresql://ann:s3cretpw@127.0.0.1:1/db", "postgresql://ann@127.0.0.1:1/db?password=s3cretpw",
                "postgresql://ann:s3cret%2Fpw@127.0.0.1:1/db", "postgresql://ann:s3cret/pw@127.0.0.1:1/db",
                "postgresql://ann:s3%ZZcretpw@127.0.0.1:1/db"):
        assert "s3cret" not in shown(dsn)
        done = run_chatcli("session", "list", env=dict(env, CHATCLI_STORE=dsn))
        assert done.returncode != 0 and "s3cret" not in done.stderr + done.stdout and "Traceback" not in done.stderr
        assert "s3cret" not in str(Database(dsn).failure(ValueError(f"bad token in {dsn}"), "cannot be reached"))


def test_a_plaintext_session_of_a_sealed_home_is_sealed_on_its_way_to_the_server(env, pg_dsn):
    from chatcli.core.messages import Message
    from chatcli.core.session import SessionData

    # Written before the key was set: the file store seals it at its next write, the move at once.
    Home.of(Settings.load(env)).sessions().create("old", SessionData(history=[Message("user", "the marigold code")]))
    sealed = dict(env, CHATCLI_ENCRYPTION_KEY=base64.b64encode(os.urandom(32)).decode())
    done = run_chatcli("storage", "migrate", "--to", pg_dsn, env=sealed)
    assert done.returncode == 0 and "Copied 1 session(s)" in done.stdout, done.stderr
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        snapshot = bytes(conn.execute("SELECT snapshot FROM chatcli_sessions WHERE name = 'old'").fetchone()[0])
    assert b"marigold" not in snapshot
    on_server = Home.of(Settings.load(dict(sealed, CHATCLI_STORE=pg_dsn))).sessions()
    assert [m.content for m in on_server.load("old")[0].history] == ["the marigold code"]


def test_storage_prune_sweeps_the_servers_hub_and_never_drops_a_binding(env, pg_dsn, tmp_path):
    gateway = machine(env, tmp_path, "gateway", pg_dsn)
    hub = Home.of(Settings.load(gateway)).hub()
    for sender in "123":
        hub.principal("telegram", sender, "Ann" if sender == "1" else "")
    hub.bind("telegram", "2", "projeto-x")
    for n in range(2):
        hub.claim("telegram", f"42/{n}", "1:t")
        hub.answered("telegram", f"42/{n}")
    hub.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # 1 and 2 last seen 100 days ago, 42/0 answered 8 days ago
        conn.execute("UPDATE chatcli_hub_principals SET last_seen = %s WHERE sender <> '3'", (time.time() - 100 * 86400,))
        conn.execute("UPDATE chatcli_hub_delivered SET at = %s WHERE message = '42/0'", (time.time() - 8 * 86400,))

    dry = run_chatcli("storage", "prune", "hub", env=machine(env, tmp_path, "laptop", pg_dsn))  # from any machine
    assert dry.returncode == 0, dry.stderr
    assert "Would remove 1 gateway sender and 1 delivery record from conversation hub:" in dry.stdout, dry.stdout
    assert "1 sender in the hub on the server" in dry.stdout and "telegram:1 (Ann)" in dry.stdout
    applied = run_chatcli("storage", "prune", "--apply", "hub", env=gateway)
    assert applied.returncode == 0, applied.stderr
    assert "Forgot 1 gateway sender and 1 delivery record in the hub on the server." in applied.stdout
    hub = Home.of(Settings.load(gateway)).hub()
    assert sorted(p.sender for p in hub.principals()) == ["2", "3"] and hub.deliveries() == 1
    assert hub.get("telegram", "2").session == "projeto-x"
    hub.close()


def test_storage_prune_expires_the_servers_recall_entries_and_cost_bursts(env, pg_dsn, tmp_path):
    from chatcli.core.messages import Message
    from chatcli.store.costs import Line

    machine_env = machine(env, tmp_path, "m", pg_dsn)
    home = Home.of(Settings.load(machine_env))
    old, fresh = (home.recall().put([Message("user", text)]) for text in ("an old original", "a fresh one"))
    for n in range(5):  # a scripted burst: five one-request runs within a minute, no session
        home.costs().add(f"{n:012x}", Line(time.time(), "", "openai", "m", 1, 1, False, None))
    home.costs().add("00000000beef", Line(time.time(), "notes", "openai", "m", 1, 1, False, None))
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("UPDATE chatcli_files SET changed_ns = %s WHERE kind = 'recall' AND name = %s",
                     (time.time_ns() - 8 * 86400 * 10**9, f"{old}.json"))
    dry = run_chatcli("storage", "prune", env=machine_env)
    assert dry.returncode == 0, dry.stderr
    assert f"recall/{old}.json" in dry.stdout and fresh not in dry.stdout, dry.stdout
    done = run_chatcli("storage", "prune", "--apply", env=machine_env)
    assert done.returncode == 0, done.stderr
    from chatcli.store.recall import RecallError

    with pytest.raises(RecallError, match="no recall entry"):
        home.recall().get(old)
    assert home.recall().get(fresh)[0][0].content == "a fresh one"
    assert sorted(home.costs().place.filenames()) == ["00000000beef.jsonl"]  # the named session's cost stays


def test_a_session_another_machine_changes_is_announced_and_one_unchanged_is_not_asked_for(
        openai_env, openai_server, pg_dsn, tmp_path, monkeypatch):
    from chatcli.core.messages import Message
    from chatcli.core.session import SessionData
    from chatcli.store.pg_sessions import PgSessionStore

    laptop, workstation = machine(openai_env, tmp_path, "laptop", pg_dsn), machine(openai_env, tmp_path, "ws", pg_dsn)
    store = Home.of(Settings.load(laptop)).sessions()
    store.create("notes", SessionData(history=[Message("user", "one"), Message("assistant", "uno")]))
    asked = []
    real = PgSessionStore.stamp
    monkeypatch.setattr(PgSessionStore, "stamp", lambda self, name: asked.append(name) or real(self, name))
    listener = store.db.listener()
    assert wait_until(lambda: listener.mark("notes")[0] != 0)  # listening
    first = [store.watched_stamp("notes") for _ in range(3)][-1]  # a check before each of three turns
    before = len(asked)
    assert [store.watched_stamp("notes") for _ in range(5)] == [first] * 5
    assert len(asked) == before  # nothing was announced: the server was not asked

    done = run_chatcli("--session", "notes", "-p", "two", env=workstation)  # another machine's turn
    assert done.returncode == 0, done.stderr
    assert wait_until(lambda: store.watched_stamp("notes") != first)
    changed = store.watched_stamp("notes")
    assert changed != first and changed == store.stamp("notes")

    other = Home.of(Settings.load(laptop)).sessions()  # another conversation of this process
    grown = other.append("notes", [Message("user", "three")], 4, changed)
    assert grown is not None and store.watched_stamp("notes") == grown  # what the other wrote, at once


def test_storage_reports_what_the_server_holds(env, pg_dsn, tmp_path):
    import re

    from chatcli.core.messages import Message
    from chatcli.core.session import SessionData

    elsewhere = machine(env, tmp_path, "m", pg_dsn)
    home = Home.of(Settings.load(elsewhere))
    home.sessions().create("notes", SessionData(history=[Message("user", "hello there")]))
    home.memory().save("the user prefers metric units")
    home.recall().put([Message("user", "an original")])
    report = run_chatcli("storage", env=elsewhere)
    assert report.returncode == 0, report.stderr
    assert report.stdout.splitlines()[0].endswith(f" and at {shown(pg_dsn)}:"), report.stdout
    for label in ("sessions", "recall store", "memory"):
        assert re.search(rf"^  {label} +1 +\d+ B ", report.stdout, re.M), report.stdout


def test_a_key_that_could_not_be_checked_at_start_is_checked_before_the_first_operation(env, own_server, tmp_path):
    from chatcli.core.messages import Message
    from chatcli.core.session import SessionData
    from chatcli.store.session_file import SessionError

    right, wrong = (base64.b64decode(base64.b64encode(os.urandom(32))) for _ in range(2))
    Home(tmp_path / "first", right, own_server.dsn).sessions().create(
        "vault", SessionData(history=[Message("user", "sealed words")]))
    Home(tmp_path / "first", right, own_server.dsn).check_key()  # the store's key check is made
    own_server._pg_ctl("stop")
    try:
        late = Home(tmp_path / "late", wrong, own_server.dsn + "?application_name=late")
        late.check_key()  # the server is away: started all the same, the check deferred
    finally:
        own_server._pg_ctl("start")
    # Refused as a store that cannot be used (every caller of a session operation handles that:
    # a REPL keeps its conversation), and nothing is written.
    with pytest.raises(SessionError, match="is not the key"):
        late.sessions().create("planted", SessionData(history=[Message("user", "under the wrong key")]))
    with pytest.raises(SessionError, match="is not the key"):  # and every operation after it
        late.sessions().list()
    assert [info.name for info in Home(tmp_path / "first", right, own_server.dsn).sessions().list()] == ["vault"]


def test_a_schema_the_address_names_is_made_and_named_where_the_store_is_shown(env, pg_server, tmp_path):
    from chatcli.core.messages import Message
    from chatcli.core.session import SessionData

    schema = "own_" + os.urandom(3).hex()
    dsn = f"{pg_server.dsn}?options=-csearch_path%3D{schema}"
    Home(tmp_path, None, dsn).sessions().create("notes", SessionData(history=[Message("user", "in a schema")]))
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        assert conn.execute(f"SELECT count(*) FROM {schema}.chatcli_sessions").fetchone()[0] == 1
    assert shown(dsn).endswith(f"/postgres?options=-csearch_path%3D{schema}")
    listing = run_chatcli("session", "list", env=dict(env, CHATCLI_STORE=dsn))
    assert listing.returncode == 0 and "notes" in listing.stdout, listing.stderr


def test_a_store_an_older_chatcli_made_gets_what_it_lacks_when_first_opened(env, pg_dsn, tmp_path):
    from chatcli.core.messages import Message
    from chatcli.core.session import SessionData

    Home(tmp_path, None, pg_dsn).sessions().create("notes", SessionData(history=[Message("user", "kept")]))
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # as the last version left it: schema 4
        for table in ("chatcli_files", "chatcli_hub_principals", "chatcli_hub_delivered"):
            conn.execute(f"DROP TABLE {table}")
        conn.execute("DROP TRIGGER chatcli_session_changed ON chatcli_sessions")
        conn.execute("DROP FUNCTION chatcli_session_changed()")
        conn.execute("UPDATE chatcli_meta SET value = '4' WHERE key = 'schema'")
    newer = Home(tmp_path / "newer", None, pg_dsn + "&application_name=newer")  # another process, this version
    newer.memory().save("the user prefers metric units")
    assert [n.text for n in newer.memory().notes()[0]] == ["the user prefers metric units"]
    assert newer.hub().principal("webhook", "alice").generation == 1
    assert [info.name for info in newer.sessions().list()] == ["notes"]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT value FROM chatcli_meta WHERE key = 'schema'").fetchone()[0] == "6"
        assert conn.execute("SELECT count(*) FROM pg_trigger WHERE tgname = 'chatcli_session_changed'"
                            " AND tgrelid = 'chatcli_sessions'::regclass").fetchone()[0] == 1


def test_a_compaction_and_the_notes_while_the_server_is_away_lose_nothing(env, own_server, make_conversation,
                                                                          fake_model):
    from chatcli.commands.builtin import build_registry
    from chatcli.engine import sessions

    conv = make_conversation(CHATCLI_STORE=own_server.dsn)
    sessions.start(conv, name="trip")
    registry = build_registry()
    registry.dispatch("/memory save the user prefers trains", conv)
    for i in range(6):
        conv.send(f"leg {i} of the trip")
    own_server._pg_ctl("stop")
    try:
        fake_model.reply("Summary: six legs were planned.")
        out = registry.dispatch("/compact", conv).text
        assert "the summary holds them" in out, out
        key = re.search(r"<<ccr:([0-9a-f]{16})>>", conv.history[0].content).group(1)
        recalled = registry.dispatch(f"/recall {key}", conv).text
        assert "leg 0 of the trip" in recalled, recalled
        conv.send("and the way back?")
        assert "the user prefers trains" in fake_model.requests[-1].system  # the notes as they were read last
    finally:
        own_server._pg_ctl("start")
    conv.send("back online")  # the turns kept meanwhile are written now
    history = Home.of(conv.settings).sessions().load("trip")[0].history
    assert history[0].content.startswith("Summary: six legs were planned.")
    assert [m.content for m in history][-2:] == ["back online", "You said: back online"]
