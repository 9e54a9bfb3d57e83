"""The Conversation Hub's state (store/hub.py: hub.db; store/pg_hub.py: the same on a PostgreSQL
store, shared by gateway replicas): bindings, threads, refusals and delivery state survive a
restart, a kill -9 included; a message is claimed by one hub at a time, on any host; a hub.db
chatcli cannot read is left alone."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from conftest import wait_until

from chatcli.core.names import validate_name
from chatcli.store.home import Home
from chatcli.store.hub import ANSWERED, BUSY, NEW, HubError


@pytest.fixture(params=["files", "postgresql"])
def place(request, home) -> Home:
    """CHATCLI_HOME, its hub in hub.db, then on a PostgreSQL server."""
    return Home(home / ".chatcli", store=request.getfixturevalue("pg_dsn") if request.param == "postgresql" else None)


@pytest.fixture
def hub(place):
    hub = place.hub()
    yield hub
    hub.close()


def hub_process(place: Home, then: str) -> subprocess.Popen:
    """Another gateway's hub, in a process of its own: it binds telegram:42, claims a message, then
    does `then` (kill itself, or wait to be killed)."""
    script = ("import os, signal, sys, time; from pathlib import Path; from chatcli.store.home import Home; "
              "hub = Home(Path(sys.argv[1]), store=sys.argv[2] or None).hub(); "
              "hub.principal('telegram', '42', 'Ana'); hub.bind('telegram', '42', 'projeto-x'); "
              "hub.claim('telegram', '42/1001', f'{os.getpid()}:t'); print('claimed', flush=True); " + then)
    child = subprocess.Popen([sys.executable, "-c", script, str(place.root), place.store or ""],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "claimed\n", child.stderr.read()
    return child


def test_a_binding_survives_a_kill_of_the_daemon(place, hub):
    child = hub_process(place, "os.kill(os.getpid(), signal.SIGKILL)")
    assert child.wait(10) == -signal.SIGKILL
    principal = hub.get("telegram", "42")
    assert principal.session == "projeto-x" and principal.display == "Ana"
    # The message it was answering when it died is answered by the next daemon.
    assert wait_until(lambda: hub.claim("telegram", "42/1001", f"{os.getpid()}:next") == NEW)
    if place.store is None:
        assert oct(place.hub_path.stat().st_mode & 0o777) == "0o600"


def test_a_claim_of_a_hub_still_running_is_busy_until_it_dies(place, hub):
    child = hub_process(place, "time.sleep(60)")
    try:
        assert hub.claim("telegram", "42/1001", f"{os.getpid()}:mine") == BUSY  # a redelivery to this one
    finally:
        child.kill()
        child.wait(10)
    assert wait_until(lambda: hub.claim("telegram", "42/1001", f"{os.getpid()}:mine") == NEW)
    assert hub.claim("telegram", "42/1001", f"{os.getpid()}:mine") == BUSY  # a retry while this one answers


def test_two_hubs_racing_for_the_same_messages_take_each_once(place):
    """Two running hubs claim the same 200 messages at once: each is NEW for exactly one of them."""
    script = ("import os, sys; from pathlib import Path; from chatcli.store.home import Home; "
              "hub = Home(Path(sys.argv[1]), store=sys.argv[2] or None).hub(); me = f'{os.getpid()}:r'; "
              "hub.claim('webhook', f'warm/{me}', me); sys.stdin.readline(); "  # both open and ready
              "print(' '.join(str(i) for i in range(200) if hub.claim('webhook', f'alice/m-{i}', me) == 'new'), "
              "flush=True); sys.stdin.readline()")  # both stay running until both are done
    racers = [subprocess.Popen([sys.executable, "-c", script, str(place.root), place.store or ""],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for _ in range(2)]
    for racer in racers:
        racer.stdin.write("go\n")
        racer.stdin.flush()
    won = [set(map(int, racer.stdout.readline().split())) for racer in racers]
    outputs = [racer.communicate("done\n", timeout=60) for racer in racers]
    assert all(racer.returncode == 0 for racer in racers), [err for _out, err in outputs]
    assert won[0].isdisjoint(won[1]) and won[0] | won[1] == set(range(200))


def test_load_and_new_rotate_the_thread_into_a_valid_mirror_name(hub):
    first = hub.principal("webhook", "alice@example.org / desk 7")
    assert first.generation == 1 and first.session is None
    rotated = hub.rotate("webhook", "alice@example.org / desk 7")
    assert rotated.thread != first.thread and rotated.thread.endswith("-2")
    validate_name("mcp-gw-" + rotated.thread)  # any sender id makes a session name


def test_an_unlisted_sender_is_refused_once_and_counted(hub):
    assert hub.refuse("slack", "U999", "stranger") is True
    assert hub.refuse("slack", "U999") is False
    assert hub.refuse("slack", "U999") is False
    assert hub.get("slack", "U999").refused == 3


def test_a_message_is_answered_once_even_across_a_restart(place, hub):
    me = f"{os.getpid()}:first"
    assert hub.claim("telegram", "update-7", me) == NEW
    assert hub.claim("telegram", "update-7", me) == BUSY  # a retry while it is being answered
    hub.answered("telegram", "update-7")
    hub.close()
    again = place.hub()
    assert again.claim("telegram", "update-7", f"{os.getpid()}:second") == ANSWERED
    assert again.forget_deliveries(time.time() + 1) == 1
    assert again.claim("telegram", "update-7", f"{os.getpid()}:second") == NEW
    again.close()


def test_a_released_claim_is_answered_by_the_next_try(hub):
    assert hub.claim("webhook", "alice/m-1", f"{os.getpid()}:mine") == NEW
    hub.release("webhook", "alice/m-1")  # its turn failed: a retry answers it
    assert hub.claim("webhook", "alice/m-1", f"{os.getpid()}:mine") == NEW
    hub.answered("webhook", "alice/m-1")
    hub.release("webhook", "alice/m-1")  # a release after the answer changes nothing
    assert hub.claim("webhook", "alice/m-1", f"{os.getpid()}:mine") == ANSWERED


def test_on_a_server_two_machines_share_one_hub_and_its_claims(pg_dsn, tmp_path):
    """Two gateways on two hosts (two CHATCLI_HOMEs, one process here: the owner is the hub's
    lock on the server, not a process id)."""
    first, second = (Home(tmp_path / name, store=pg_dsn).hub() for name in ("a", "b"))
    try:
        first.principal("slack", "U1", "Ana")
        first.bind("slack", "U1", "projeto-x")
        assert second.get("slack", "U1").session == "projeto-x"
        assert second.rotate("slack", "U1").generation == 2 == first.get("slack", "U1").generation
        assert first.claim("slack", "U1/ts-1", "1:a") == NEW
        assert second.claim("slack", "U1/ts-1", "1:b") == BUSY
        first.close()  # the replica stops (or its host goes): its claim is taken over
        assert second.claim("slack", "U1/ts-1", "1:b") == NEW
        second.answered("slack", "U1/ts-1")
        third = Home(tmp_path / "c", store=pg_dsn).hub()
        assert third.claim("slack", "U1/ts-1", "1:c") == ANSWERED
        third.close()
    finally:
        first.close()
        second.close()


def test_on_a_server_a_hub_that_lost_its_lock_takes_a_new_one_and_leaves_a_taken_over_claim_alone(pg_dsn, tmp_path):
    import psycopg

    first, second = (Home(tmp_path / name, store=pg_dsn).hub() for name in ("a", "b"))
    try:
        assert first.claim("slack", "U1/ts-1", "1:a") == NEW
        with psycopg.connect(pg_dsn, autocommit=True) as admin:  # the server cuts its lock's connection
            admin.execute("SELECT pg_terminate_backend(%s)", (first._owner_conn.info.backend_pid,))
        assert wait_until(lambda: second.claim("slack", "U1/ts-1", "1:b") == NEW)  # its claim is a dead one's now
        assert first.claim("slack", "U1/ts-2", "1:a") == NEW  # with a lock of its own again
        assert second.claim("slack", "U1/ts-2", "1:b") == BUSY
        first.answered("slack", "U1/ts-1")  # it finished the one taken over: the new owner's claim stands
        assert first.claim("slack", "U1/ts-1", "1:a") == BUSY
        first.release("slack", "U1/ts-1")
        assert first.claim("slack", "U1/ts-1", "1:a") == BUSY
        second.answered("slack", "U1/ts-1")
        assert first.claim("slack", "U1/ts-1", "1:a") == ANSWERED
    finally:
        first.close()
        second.close()


def test_on_a_server_ids_it_cannot_keep_are_refused_and_names_are_kept(pg_dsn, tmp_path):
    hub = Home(tmp_path, store=pg_dsn).hub()
    try:
        assert hub.principal("webhook", "bob", "B\0b").display == "B\ufffdb"
        with pytest.raises(HubError, match="NUL"):
            hub.claim("webhook", "bob/m\0", "1:x")
        assert hub.deliveries() == 0
    finally:
        hub.close()


def test_a_hub_of_the_first_schema_is_carried_over(home):
    path = Home(home / ".chatcli").hub_path
    path.parent.mkdir(parents=True)
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE principals (channel TEXT NOT NULL, sender TEXT NOT NULL, display TEXT NOT NULL DEFAULT '',
            session TEXT, generation INTEGER NOT NULL DEFAULT 1, first_seen REAL NOT NULL, last_seen REAL NOT NULL,
            refused INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (channel, sender)) WITHOUT ROWID;
        CREATE TABLE cursors (channel TEXT PRIMARY KEY, cursor TEXT NOT NULL) WITHOUT ROWID;
        CREATE TABLE delivered (channel TEXT NOT NULL, message TEXT NOT NULL, at REAL NOT NULL,
            PRIMARY KEY (channel, message)) WITHOUT ROWID;
        INSERT INTO principals VALUES ('telegram', '42', 'Ana', 'projeto-x', 3, 1.0, 2.0, 0);
        INSERT INTO delivered VALUES ('telegram', 'update-7', 2.0);
        PRAGMA user_version=1;""")
    db.close()
    hub = Home(home / ".chatcli").hub()
    try:
        assert hub.get("telegram", "42").session == "projeto-x" and hub.get("telegram", "42").generation == 3
        assert hub.claim("telegram", "update-7", f"{os.getpid()}:t") == ANSWERED
    finally:
        hub.close()


def test_stale_unbound_principals_are_what_a_sweep_may_forget(hub):
    hub.principal("telegram", "1")
    hub.principal("telegram", "2")
    hub.bind("telegram", "2", "kept")
    stale = hub.stale(time.time() + 1)
    assert [p.sender for p in stale] == ["1"]  # a bound principal is never stale
    assert hub.forget(stale) == stale
    assert [p.sender for p in hub.principals()] == ["2"]


def test_a_hub_from_a_newer_chatcli_is_refused_and_left_as_it_is(home):
    path = Home(home / ".chatcli").hub_path
    path.parent.mkdir(parents=True)
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version=9")
    db.close()
    before = path.read_bytes()
    with pytest.raises(HubError, match="written by a newer chatcli"):
        Home(home / ".chatcli").hub().principal("telegram", "1")
    assert path.read_bytes() == before


def test_a_hub_that_is_not_a_database_is_a_clear_error(home):
    path = Home(home / ".chatcli").hub_path
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(HubError, match="cannot be used"):
        Home(home / ".chatcli").hub().principal("telegram", "1")
    assert path.read_bytes() == b"not sqlite at all" * 100
    assert not os.path.exists(str(path) + "-wal") or os.path.getsize(str(path) + "-wal") == 0
