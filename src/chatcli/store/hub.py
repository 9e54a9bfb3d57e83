"""hub.db: the Conversation Hub's state, for the chat gateway. SQLite in WAL mode,
each change one transaction, synchronous=FULL: a daemon killed at any point restarts where it
was.

What it holds, per principal (a channel and a sender id in it):

- its **binding**: the saved session `/session attach|save|load` bound it to, or none;
- its **thread**: the id of the live conversation the gateway hosts for it (engine/hosted.py),
  whose machine mirror keeps an unbound conversation. `/session load` and `/session new`
  rotate it (a new generation), so old cross-channel backlog is not spliced onto the loaded
  session;
- when it was first and last seen, and whether it was refused (an unlisted sender gets one
  refusal line; every attempt is counted).

And per channel, its **delivery state**: each message id being answered (and by which running
process) or answered, so a redelivered or replayed message is answered once, and one whose
answer a killed daemon never finished is answered when the channel brings it again.

Nothing of a conversation's content is kept here: names, ids, times and counts only.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sqlite3
import threading
import time
from dataclasses import astuple, dataclass
from pathlib import Path

from chatcli.core.errors import ChatcliError
from chatcli.core.retention import DELIVERY_KEEP
from chatcli.core.names import GATEWAY_PREFIX
from chatcli.store.atomic import PRIVATE_FILE, ensure_private_dir, os_cause, process_alive

SCHEMA_VERSION = 2
_SCHEMA = """
CREATE TABLE IF NOT EXISTS principals (
    channel TEXT NOT NULL, sender TEXT NOT NULL, display TEXT NOT NULL DEFAULT '',
    session TEXT, generation INTEGER NOT NULL DEFAULT 1,
    first_seen REAL NOT NULL, last_seen REAL NOT NULL,
    refused INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (channel, sender)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS delivered (
    channel TEXT NOT NULL, message TEXT NOT NULL, at REAL NOT NULL, owner TEXT,
    PRIMARY KEY (channel, message)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS delivered_at ON delivered (at);
"""
# Schema 1 → 2: a delivery record says who is answering it (`owner`) until it is answered, and
# the unused cursors table goes (Telegram keeps the updates the gateway has not confirmed).
_MIGRATE_1 = "ALTER TABLE delivered ADD COLUMN owner TEXT; DROP TABLE IF EXISTS cursors;"
# What Hub.claim says of a message.
NEW, ANSWERED, BUSY = "new", "answered", "busy"


_COLUMNS = "channel, sender, session, generation, first_seen, last_seen, refused, display"


class HubError(ChatcliError):
    """hub.db cannot be opened or written."""


@dataclass(frozen=True)
class Principal:
    channel: str
    sender: str
    session: str | None  # the saved session it is bound to
    generation: int  # its thread's generation: rotated by /session load and /session new
    first_seen: float
    last_seen: float
    refused: int  # messages refused (an unlisted sender)
    display: str = ""  # the name the channel gave last (shown by /storage, never used to decide)

    @property
    def threads(self) -> str:
        """What the ids of its threads start with: channel and a digest of the sender (any string
        a channel uses becomes a valid session-name part)."""
        digest = hashlib.sha256(f"{self.channel}\0{self.sender}".encode()).hexdigest()[:12]
        return f"{self.channel}-{digest}-"

    @property
    def thread(self) -> str:
        """The id of its live conversation: its threads' prefix and the generation."""
        return f"{self.threads}{self.generation}"

    @property
    def mirrors(self) -> str:
        """The name prefix of its threads' mirrors, of every generation (and no one else's)."""
        return GATEWAY_PREFIX + self.threads

    @property
    def mirror(self) -> str:
        """The machine session that keeps its thread's conversation while it is unbound."""
        return GATEWAY_PREFIX + self.thread


def _serialised(method):
    """One call at a time on the connection: the gateway's adapters answer from several threads."""

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)

    return call


class Hub:
    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        """`readonly`: for looking only (/storage): the file must exist, and nothing is written
        to it (SQLite may still create its -wal and -shm companions to read a WAL database)."""
        self.path = path
        self.readonly = readonly
        self._db: sqlite3.Connection | None = None
        self._lock = threading.RLock()

    # -- the file ---------------------------------------------------------------------------
    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = self._open()
        return self._db

    def _open(self) -> sqlite3.Connection:
        if self.readonly:
            return self._open_readonly()
        deadline = time.monotonic() + 30
        while True:  # two gateways making it at once: switching it to WAL takes a lock no busy wait covers
            try:
                return self._open_once()
            except HubError as exc:
                if "database is locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _open_once(self) -> sqlite3.Connection:
        db = None
        try:
            ensure_private_dir(self.path.parent)
            if not self.path.exists():  # created private: it names the user's sessions and contacts
                try:
                    os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE))
                except FileExistsError:
                    pass  # another process (a second gateway starting) made it a moment ago
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                db.close()
                raise HubError(f"{self.path} was written by a newer chatcli (schema {version}); it is left as it is")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            if version == 1:
                db.executescript(f"BEGIN IMMEDIATE; {_MIGRATE_1} PRAGMA user_version={SCHEMA_VERSION}; COMMIT;")
            db.executescript(_SCHEMA)
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except sqlite3.DatabaseError as exc:
            if db is not None:
                db.close()
            raise HubError(f"{self.path} cannot be used: {exc}") from None
        except OSError as exc:
            raise HubError(f"{self.path} cannot be opened: {os_cause(exc)}") from None
        return db

    def _open_readonly(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(f"{self.path.as_uri()}?mode=ro", uri=True, timeout=30, isolation_level=None,
                                 check_same_thread=False)
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version != SCHEMA_VERSION:
                db.close()
                raise HubError(f"{self.path} was written by a newer chatcli (schema {version})" if version
                               else f"{self.path} holds no Conversation Hub yet")
        except sqlite3.DatabaseError as exc:
            raise HubError(f"{self.path} cannot be read: {exc}") from None
        return db

    @_serialised
    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def _write(self, sql: str, params: tuple) -> sqlite3.Cursor:
        try:
            return self.db.execute(sql, params)  # autocommit: one statement, one transaction
        except sqlite3.DatabaseError as exc:
            raise HubError(f"{self.path} cannot be written: {exc}") from None

    # -- principals -------------------------------------------------------------------------
    @_serialised
    def principal(self, channel: str, sender: str, display: str = "") -> Principal:
        """The principal, seen now (created at its first message)."""
        now = time.time()
        self._write("INSERT INTO principals (channel, sender, display, first_seen, last_seen) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (channel, sender) DO UPDATE SET last_seen = excluded.last_seen, "
                    "display = CASE WHEN excluded.display != '' THEN excluded.display ELSE display END",
                    (channel, sender, display, now, now))
        return self.get(channel, sender)

    @_serialised
    def get(self, channel: str, sender: str) -> Principal | None:
        row = self.db.execute(f"SELECT {_COLUMNS} "
                              "FROM principals WHERE channel = ? AND sender = ?", (channel, sender)).fetchone()
        return Principal(*row) if row else None

    @_serialised
    def principals(self) -> list[Principal]:
        rows = self.db.execute(f"SELECT {_COLUMNS} "
                               "FROM principals ORDER BY last_seen DESC").fetchall()
        return [Principal(*row) for row in rows]

    @_serialised
    def bind(self, channel: str, sender: str, session: str | None) -> None:
        """Persist the principal's binding (None: unbound)."""
        self._write("UPDATE principals SET session = ? WHERE channel = ? AND sender = ?", (session, channel, sender))

    @_serialised
    def rotate(self, channel: str, sender: str) -> Principal:
        """A new thread for the principal (/session load, /session new): the next generation."""
        self._write("UPDATE principals SET generation = generation + 1 WHERE channel = ? AND sender = ?",
                    (channel, sender))
        return self.get(channel, sender)

    @_serialised
    def refuse(self, channel: str, sender: str, display: str = "") -> bool:
        """Count a refused message of an unlisted sender; True for its first (the one that gets
        the refusal line: the others are only counted)."""
        self.principal(channel, sender, display)
        cursor = self._write("UPDATE principals SET refused = refused + 1 WHERE channel = ? AND sender = ? "
                             "RETURNING refused", (channel, sender))
        return cursor.fetchone()[0] == 1

    # -- delivery state ---------------------------------------------------------------------
    @_serialised
    def claim(self, channel: str, message: str, owner: str) -> str:
        """Take `message` of `channel` to answer it, as `owner` ("<pid>:<token>", one per running
        hub). NEW: answer it (first seen, or left half-answered by a process that is gone: a
        daemon killed during its turn); ANSWERED: it was (a redelivery, a replayed webhook);
        BUSY: a live process is answering it now (a retry that came too soon)."""
        try:
            with self.db:
                self.db.execute("BEGIN IMMEDIATE")
                row = self.db.execute("SELECT owner FROM delivered WHERE channel = ? AND message = ?",
                                      (channel, message)).fetchone()
                if row is not None and row[0] is None:
                    return ANSWERED
                if row is not None and (row[0] == owner or _running(row[0])):
                    return BUSY
                self.db.execute("INSERT INTO delivered (channel, message, at, owner) VALUES (?, ?, ?, ?) "
                                "ON CONFLICT (channel, message) DO UPDATE SET owner = excluded.owner, at = excluded.at",
                                (channel, message, time.time(), owner))
                return NEW
        except sqlite3.DatabaseError as exc:
            raise HubError(f"{self.path} cannot be written: {exc}") from None

    @_serialised
    def answered(self, channel: str, message: str) -> None:
        """The claimed message was answered (or refused): a redelivery gets no second answer."""
        self._write("UPDATE delivered SET owner = NULL, at = ? WHERE channel = ? AND message = ?",
                    (time.time(), channel, message))

    @_serialised
    def release(self, channel: str, message: str) -> None:
        """The claimed message could not be answered: a retry answers it."""
        self._write("DELETE FROM delivered WHERE channel = ? AND message = ? AND owner IS NOT NULL", (channel, message))

    @_serialised
    def deliveries(self, older_than: float | None = None) -> int:
        """How many delivery records there are (older than `older_than`, when given)."""
        sql, params = ("SELECT count(*) FROM delivered", ()) if older_than is None else \
            ("SELECT count(*) FROM delivered WHERE at < ?", (older_than,))
        return self.db.execute(sql, params).fetchone()[0]

    @_serialised
    def forget_deliveries(self, older_than: float) -> int:
        """Drop delivery records older than `older_than` (a time): what a replay window or a
        channel's redelivery can no longer bring back."""
        return self._write("DELETE FROM delivered WHERE at < ?", (older_than,)).rowcount

    # -- storage migrate ----------------------------------------------------------------------
    @_serialised
    def snapshot(self) -> tuple[list[Principal], list[tuple[str, str, float]]]:
        """Every principal, and the messages answered, as (channel, message, when): what `storage
        migrate` carries to another store (a replay after the move is still answered once)."""
        principals = [Principal(*row) for row in self.db.execute(f"SELECT {_COLUMNS} FROM principals").fetchall()]
        return principals, self.db.execute("SELECT channel, message, at FROM delivered WHERE owner IS NULL").fetchall()

    @_serialised
    def merge(self, principals: list[Principal], delivered: list[tuple[str, str, float]]) -> int:
        """Another hub's snapshot, added where this one holds none of it (a principal it has is
        kept as it is), in one transaction. Returns how many principals were added."""
        try:
            with self.db:
                self.db.execute("BEGIN IMMEDIATE")
                added = sum(self.db.execute(f"INSERT INTO principals ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                                            "ON CONFLICT DO NOTHING", astuple(p)).rowcount for p in principals)
                self.db.executemany("INSERT INTO delivered (channel, message, at, owner) VALUES (?, ?, ?, NULL) "
                                    "ON CONFLICT DO NOTHING", delivered)
        except sqlite3.DatabaseError as exc:
            raise HubError(f"{self.path} cannot be written: {exc}") from None
        return added

    # -- /storage -----------------------------------------------------------------------------
    @_serialised
    def stale(self, older_than: float) -> list[Principal]:
        """Unbound principals not seen since `older_than`: their threads are what a sweep may drop."""
        rows = self.db.execute(f"SELECT {_COLUMNS} "
                               "FROM principals WHERE session IS NULL AND last_seen < ?", (older_than,)).fetchall()
        return [Principal(*row) for row in rows]

    @_serialised
    def forget(self, principals: list[Principal]) -> list[Principal]:
        """Remove these principals (a sweep on demand: `storage prune`), each only if it is still
        as it was seen: unbound, not seen since, on the same thread. Returns those removed."""
        forgotten = []
        try:
            with self.db:
                self.db.execute("BEGIN IMMEDIATE")
                for p in principals:
                    gone = self.db.execute("DELETE FROM principals WHERE channel = ? AND sender = ? AND session IS NULL "
                                           "AND last_seen = ? AND generation = ?",
                                           (p.channel, p.sender, p.last_seen, p.generation)).rowcount
                    if gone:
                        forgotten.append(p)
        except sqlite3.DatabaseError as exc:
            raise HubError(f"{self.path} cannot be written: {exc}") from None
        return forgotten


def _running(owner: str) -> bool:
    """Whether the process that claimed a message ("<pid>:<token>") still runs. This process's
    own earlier hubs (another token) are not: their claims were left by a hub that closed."""
    pid, _, _token = owner.partition(":")
    try:
        number = int(pid)
    except ValueError:
        return False
    if number == os.getpid():
        return False  # the same token was checked by the caller
    return process_alive(number)


__all__ = ["ANSWERED", "BUSY", "DELIVERY_KEEP", "NEW", "Hub", "HubError", "Principal", "SCHEMA_VERSION"]
