"""hub.db, the Conversation Hub's state (store/hub.py): bindings, threads, refusals and delivery
state survive a restart, a kill -9 included, and a file chatcli cannot read is left alone."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from chatcli.core.names import validate_name
from chatcli.store.home import Home
from chatcli.store.hub import ANSWERED, BUSY, NEW, HubError


@pytest.fixture
def hub(home):
    hub = Home(home / ".chatcli").hub()
    yield hub
    hub.close()


def test_a_binding_survives_a_kill_of_the_daemon(home, hub):
    path = Home(home / ".chatcli").hub_path
    script = ("import os, signal, sys; from pathlib import Path; from chatcli.store.hub import Hub; "
              "hub = Hub(Path(sys.argv[1])); hub.principal('telegram', '42', 'Ana'); "
              "hub.bind('telegram', '42', 'projeto-x'); hub.claim('telegram', '42/1001', f'{os.getpid()}:t'); "
              "os.kill(os.getpid(), signal.SIGKILL)")
    child = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True)
    assert child.returncode == -signal.SIGKILL, child.stderr
    principal = hub.get("telegram", "42")
    assert principal.session == "projeto-x"
    # The message it was answering when it died is answered by the next daemon.
    assert hub.claim("telegram", "42/1001", f"{os.getpid()}:next") == NEW
    assert oct(path.stat().st_mode & 0o777) == "0o600"


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


def test_a_message_is_answered_once_even_across_a_restart(home, hub):
    me = f"{os.getpid()}:first"
    assert hub.claim("telegram", "update-7", me) == NEW
    assert hub.claim("telegram", "update-7", me) == BUSY  # a retry while it is being answered
    hub.answered("telegram", "update-7")
    hub.close()
    again = Home(home / ".chatcli").hub()
    assert again.claim("telegram", "update-7", f"{os.getpid()}:second") == ANSWERED
    assert again.forget_deliveries(time.time() + 1) == 1
    assert again.claim("telegram", "update-7", f"{os.getpid()}:second") == NEW
    again.close()


def test_a_claim_of_another_live_process_is_busy_and_a_released_one_is_new(hub):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert hub.claim("webhook", "alice/m-1", f"{sleeper.pid}:other") == NEW
        assert hub.claim("webhook", "alice/m-1", f"{os.getpid()}:mine") == BUSY
        hub.release("webhook", "alice/m-1")  # its turn failed: a retry answers it
        assert hub.claim("webhook", "alice/m-1", f"{os.getpid()}:mine") == NEW
    finally:
        sleeper.kill()
        sleeper.wait()


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
