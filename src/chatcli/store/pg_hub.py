"""The Conversation Hub's state on a PostgreSQL store (CHATCLI_STORE=postgresql://…): what
store/hub.py keeps in hub.db — principals, their bindings and threads, refusals, and each
channel's delivery state — in the server's tables, so that gateway replicas on several hosts
share one hub. Same methods, same answers: the gateway does not know which one it has.

A delivery claim across hosts. `claim` is one transaction on the message's row: the first
replica to insert it answers it, and every other one (a retry the load balancer sent elsewhere,
Telegram or Slack redelivering to another replica) sees it taken. Who owns a claim is a token of
the running hub, and the owner is alive while it holds an advisory lock on that token: each hub
holds one, on a connection of its own, from its first claim until it is closed. `pg_locks` says
whether a lock is held, from any host. A replica that dies loses its lock with its connection,
and a message it was answering is answered by the next delivery of it, as a killed daemon's is
with hub.db:

- a process killed or crashed: its connection closes and the server drops the lock at once;
- a host that stops answering: the server's keepalives on that connection (set here, ~60 s)
  find it gone, and then the lock goes.

Until then its claims are BUSY (a 409 to a webhook client, which retries).

The hub's token is new for every hub, drawn again until its lock is free, and the lock's key is a
64-bit hash of it and the schema: a dead owner is taken for a live one only if their tokens hash
alike, one chance in 2^64. A hub whose lock the server dropped (a restart, a failover, its connection cut) takes a new
one before its next claim; a message it was answering meanwhile may then be answered by another
replica as well, and `answered` leaves that replica's claim alone.

A server that is down or refuses is a HubError naming the server (never its password): the
gateway answers it as a failed turn, and the message is not marked answered.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import astuple

from chatcli.store.hub import _COLUMNS, ANSWERED, BUSY, NEW, HubError, Principal
from chatcli.store.pg import CONNECT_TIMEOUT, Database
from chatcli.store.session_file import SessionError

# The server's TCP keepalives on the connection that holds a hub's lock: a host that stops
# answering is found after idle + interval × count seconds, and its claims can be taken over.
_KEEPALIVES = {"tcp_keepalives_idle": 30, "tcp_keepalives_interval": 10, "tcp_keepalives_count": 3}

# A hub's lock: a 64-bit key made from the schema and its token (the one-key form of advisory
# locks, apart from the two-key locks of sessions, journals and the index); pg_locks shows it
# as its high and low halves.
_LOCK_KEY = "hashtextextended(current_schema() || '/hub/' || {}, 0)"
_ALIVE = ("SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1"
          " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
          " AND classid = ((key >> 32) & 4294967295)::oid AND objid = (key & 4294967295)::oid)"
          f" FROM (SELECT {_LOCK_KEY.format('%s')} AS key) AS hub")

_PRINCIPAL = f"SELECT {_COLUMNS} FROM chatcli_hub_principals WHERE channel = %s AND sender = %s"


def _kept(text: str) -> str:
    """A display name as the server can keep it (PostgreSQL's text holds no NUL)."""
    return text.replace("\0", "\ufffd").encode("utf-8", "replace").decode("utf-8")


def _key(*parts: str) -> None:
    """Ids are never altered (two would become one): one the server cannot keep is refused."""
    for part in parts:
        try:
            part.encode("utf-8")
        except UnicodeEncodeError:
            part = "\0"
        if "\0" in part:
            raise HubError("an id with a NUL character or a lone surrogate cannot be kept on the server")


def _hub_error(line: str) -> HubError:
    """The store's one line (StoreUnavailable's), said of the hub."""
    return HubError(line.replace("the session store at", "the gateway's hub at", 1))


class PgHub:
    """hub.db's interface (store.hub.Hub) on the server `dsn` names."""

    def __init__(self, dsn: str, *, readonly: bool = False) -> None:
        self.database = Database.of(dsn)
        self.readonly = readonly  # nothing is written by the methods a reader calls (/storage)
        self._lock = threading.RLock()
        self._owner_conn = None  # the connection holding this hub's lock (its liveness)
        self._token: str | None = None
        self._claims: dict[tuple[str, str], str] = {}  # what this hub claimed, as whom

    @property
    def path(self) -> str:
        """Where it is, as the user may be shown it."""
        return f"the hub at {self.database.where}"

    @contextlib.contextmanager
    def _server(self) -> Iterator[object]:
        """A connection; the server's failures as one HubError line."""
        try:
            with self.database.connection() as conn:
                yield conn
        except SessionError as exc:  # StoreUnavailable among them
            raise _hub_error(str(exc)) from None

    def close(self) -> None:
        """Drops this hub's lock: its claims are no longer a live process's."""
        with self._lock:
            conn, self._owner_conn, self._token = self._owner_conn, None, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    # -- principals -------------------------------------------------------------------------
    def principal(self, channel: str, sender: str, display: str = "") -> Principal:
        _key(channel, sender)
        now = time.time()
        with self._server() as conn:
            row = conn.execute(
                "INSERT INTO chatcli_hub_principals (channel, sender, display, first_seen, last_seen)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (channel, sender) DO UPDATE SET"
                " last_seen = EXCLUDED.last_seen, display = CASE WHEN EXCLUDED.display <> ''"
                " THEN EXCLUDED.display ELSE chatcli_hub_principals.display END"
                f" RETURNING {_COLUMNS}", (channel, sender, _kept(display), now, now)).fetchone()
        return Principal(*row)

    def get(self, channel: str, sender: str) -> Principal | None:
        _key(channel, sender)
        with self._server() as conn:
            row = conn.execute(_PRINCIPAL, (channel, sender)).fetchone()
        return Principal(*row) if row else None

    def principals(self) -> list[Principal]:
        with self._server() as conn:
            rows = conn.execute(f"SELECT {_COLUMNS} FROM chatcli_hub_principals ORDER BY last_seen DESC").fetchall()
        return [Principal(*row) for row in rows]

    def bind(self, channel: str, sender: str, session: str | None) -> None:
        _key(channel, sender)
        with self._server() as conn:
            conn.execute("UPDATE chatcli_hub_principals SET session = %s WHERE channel = %s AND sender = %s",
                         (session, channel, sender))

    def rotate(self, channel: str, sender: str) -> Principal | None:
        _key(channel, sender)
        with self._server() as conn:
            row = conn.execute("UPDATE chatcli_hub_principals SET generation = generation + 1"
                               f" WHERE channel = %s AND sender = %s RETURNING {_COLUMNS}",
                               (channel, sender)).fetchone()
        return Principal(*row) if row else None

    def refuse(self, channel: str, sender: str, display: str = "") -> bool:
        self.principal(channel, sender, display)
        with self._server() as conn:
            row = conn.execute("UPDATE chatcli_hub_principals SET refused = refused + 1"
                               " WHERE channel = %s AND sender = %s RETURNING refused", (channel, sender)).fetchone()
        return row is not None and row[0] == 1

    # -- delivery state ---------------------------------------------------------------------
    def _mine(self) -> str:
        """This hub's token, its lock taken (on a connection of its own) the first time, and
        again whenever the server no longer holds it (a restart, a failover, the connection cut):
        a claim never names a token no one holds."""
        with self._lock:
            if self._owner_conn is not None and not self._owner_conn.closed:
                with self._server() as conn:
                    if conn.execute(_ALIVE, (self._token,)).fetchone()[0]:
                        return self._token
                with contextlib.suppress(Exception):
                    self._owner_conn.close()
            import psycopg

            try:
                conn = psycopg.connect(self.database.dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
            except psycopg.Error as exc:
                raise _hub_error(str(self.database.failure(exc, "cannot be reached"))) from None
            try:
                for setting, value in _KEEPALIVES.items():
                    conn.execute(f"SET {setting} = {int(value)}")
                while True:  # a token another live hub holds (never, in practice) is drawn again
                    token = secrets.token_hex(8)
                    if conn.execute(f"SELECT pg_try_advisory_lock({_LOCK_KEY.format('%s')})", (token,)).fetchone()[0]:
                        break
            except psycopg.Error as exc:
                conn.close()
                raise _hub_error(str(self.database.failure(exc, "cannot be locked"))) from None
            self._owner_conn, self._token = conn, token
            return token

    def claim(self, channel: str, message: str, owner: str) -> str:
        """As Hub.claim: NEW (answer it), ANSWERED, or BUSY (a live hub, on any host, is answering
        it). `owner` names the running gateway (its process), kept with this hub's token."""
        _key(channel, message, owner)
        mine = f"{owner} {self._mine()}"
        with self._server() as conn, conn.transaction():
            taken = conn.execute("INSERT INTO chatcli_hub_delivered (channel, message, at, owner)"
                                 " VALUES (%s, %s, %s, %s) ON CONFLICT (channel, message) DO NOTHING RETURNING 1",
                                 (channel, message, time.time(), mine)).fetchone()
            if taken:
                self._claims[(channel, message)] = mine
                return NEW
            row = conn.execute("SELECT owner FROM chatcli_hub_delivered WHERE channel = %s AND message = %s"
                               " FOR UPDATE", (channel, message)).fetchone()
            if row is not None:
                if row[0] is None:
                    return ANSWERED
                if row[0] == mine or conn.execute(_ALIVE, (row[0].rpartition(" ")[2],)).fetchone()[0]:
                    return BUSY
            # Its owner is gone (or it was released meanwhile): this hub answers it.
            conn.execute("INSERT INTO chatcli_hub_delivered (channel, message, at, owner) VALUES (%s, %s, %s, %s)"
                         " ON CONFLICT (channel, message) DO UPDATE SET owner = EXCLUDED.owner, at = EXCLUDED.at",
                         (channel, message, time.time(), mine))
        self._claims[(channel, message)] = mine
        return NEW

    def answered(self, channel: str, message: str) -> None:
        """As Hub.answered, for a message this hub claimed and still holds: one another replica
        took over meanwhile (this hub's lock was lost) is left to it."""
        _key(channel, message)
        mine = self._claims.pop((channel, message), None)
        with self._server() as conn:
            conn.execute("UPDATE chatcli_hub_delivered SET owner = NULL, at = %s WHERE channel = %s AND message = %s"
                         " AND owner = %s", (time.time(), channel, message, mine))

    def release(self, channel: str, message: str) -> None:
        _key(channel, message)
        mine = self._claims.pop((channel, message), None)
        with self._server() as conn:
            conn.execute("DELETE FROM chatcli_hub_delivered WHERE channel = %s AND message = %s AND owner = %s",
                         (channel, message, mine))

    def deliveries(self, older_than: float | None = None) -> int:
        with self._server() as conn:
            if older_than is None:
                return conn.execute("SELECT count(*) FROM chatcli_hub_delivered").fetchone()[0]
            return conn.execute("SELECT count(*) FROM chatcli_hub_delivered WHERE at < %s", (older_than,)).fetchone()[0]

    def forget_deliveries(self, older_than: float) -> int:
        with self._server() as conn:
            return conn.execute("DELETE FROM chatcli_hub_delivered WHERE at < %s", (older_than,)).rowcount

    # -- storage migrate ----------------------------------------------------------------------
    def snapshot(self) -> tuple[list[Principal], list[tuple[str, str, float]]]:
        with self._server() as conn:
            principals = [Principal(*row) for row in
                          conn.execute(f"SELECT {_COLUMNS} FROM chatcli_hub_principals").fetchall()]
            delivered = conn.execute("SELECT channel, message, at FROM chatcli_hub_delivered"
                                     " WHERE owner IS NULL").fetchall()
        return principals, [tuple(row) for row in delivered]

    def merge(self, principals: list[Principal], delivered: list[tuple[str, str, float]]) -> int:
        for p in principals:
            _key(p.channel, p.sender)
        for channel, message, _at in delivered:
            _key(channel, message)
        with self._server() as conn, conn.transaction():
            added = 0
            for p in principals:
                added += conn.execute(f"INSERT INTO chatcli_hub_principals ({_COLUMNS}) VALUES"
                                      " (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                                      (*astuple(p)[:-1], _kept(p.display))).rowcount
            with conn.cursor() as cursor:
                cursor.executemany("INSERT INTO chatcli_hub_delivered (channel, message, at, owner)"
                                   " VALUES (%s, %s, %s, NULL) ON CONFLICT DO NOTHING", delivered)
        return added

    # -- /storage -----------------------------------------------------------------------------
    def stale(self, older_than: float) -> list[Principal]:
        with self._server() as conn:
            rows = conn.execute(f"SELECT {_COLUMNS} FROM chatcli_hub_principals WHERE session IS NULL"
                                " AND last_seen < %s", (older_than,)).fetchall()
        return [Principal(*row) for row in rows]

    def forget(self, principals: list[Principal]) -> list[Principal]:
        forgotten = []
        with self._server() as conn, conn.transaction():
            for p in principals:
                gone = conn.execute("DELETE FROM chatcli_hub_principals WHERE channel = %s AND sender = %s"
                                    " AND session IS NULL AND last_seen = %s AND generation = %s",
                                    (p.channel, p.sender, p.last_seen, p.generation)).rowcount
                if gone:
                    forgotten.append(p)
        return forgotten


__all__ = ["PgHub"]
