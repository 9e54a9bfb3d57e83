"""The PostgreSQL server a store may live on (CHATCLI_STORE=postgresql://…): one connection pool
per address and process (psycopg 3 and psycopg-pool, imported only here, only when the setting
names a server), the tables made once, and the server's failures as one clear line.

The tables live in the schema the address's `search_path` chooses (`options=-csearch_path=…`),
`public` by default, so one database can hold several stores. Every table is made by
`ensure_schema` inside one transaction under an advisory lock: two processes starting on a new
database at once do not race to create them.

What a server being down, restarting or refusing costs: the operation raises StoreUnavailable
(a SessionError: every caller that handles a file it cannot write handles this too), with the
server's address (its password never) and psycopg's first line; nothing half-written stays (each
write is one transaction). A connection the server closed is found by the pool's check before
it is handed out, and replaced; after a failure the pool is replaced too (`_discard_pool`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from chatcli.store.session_file import SessionError, StoreUnavailable

# Advisory lock keys: (a number naming chatcli, what is locked). The second is a session name's
# hashtext for a session's lock (store.pg_sessions), or one of these.
CHATCLI_LOCKS = 0x63686174  # "chat"
SCHEMA_LOCK = 0

CONNECT_TIMEOUT = 5  # seconds to wait for a connection (a server restarting) before saying it cannot be reached

SCHEMA_VERSION = 1
SCHEMA = [
    "CREATE TABLE IF NOT EXISTS chatcli_meta(key text PRIMARY KEY, value text NOT NULL)",
    # A session: its document as the file store would hold it (the snapshot written whole, the v2
    # document or its sealed envelope, then the turns appended since: store.pg_sessions), and
    # the listing's columns (title and count are NULL in a sealed store: the server sees no
    # content), and the snapshot's first bytes (`header`: a sealed one's salt and layout, which an
    # append needs; read from the snapshot itself, a big one would be decompressed whole). `generation` changes at every whole write (a file's inode), `size` is the bytes
    # of the document the parts make (a file's size), `changed_ns` the time of the last change.
    "CREATE TABLE IF NOT EXISTS chatcli_sessions(name text PRIMARY KEY, generation bigint NOT NULL,"
    " size bigint NOT NULL, changed_ns bigint NOT NULL, snapshot bytea NOT NULL, messages integer,"
    " title text, transcript text, problem text, header bytea NOT NULL)",
    "CREATE TABLE IF NOT EXISTS chatcli_session_turns(name text NOT NULL, generation bigint NOT NULL,"
    " at bigint NOT NULL, part bytea NOT NULL, PRIMARY KEY(name, generation, at))",
    "CREATE SEQUENCE IF NOT EXISTS chatcli_generations",
    # The journal each session named last (the file store's sessions.journals.json).
    "CREATE TABLE IF NOT EXISTS chatcli_session_journals(name text PRIMARY KEY, transcript text NOT NULL)",
]


def shown(dsn: str) -> str:
    """The address as shown to the user: without its password."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(dsn)
        if parts.password is not None:
            host = parts.hostname or ""
            netloc = f"{parts.username}@{host}" + (f":{parts.port}" if parts.port else "")
            return urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        return "the PostgreSQL server"
    return dsn


def _prefer_lz4(conn) -> None:
    """Big values (a session's snapshot, its turns) compressed with lz4, where the server has it
    (PostgreSQL 14 and later, built with it, as Debian's is): a 100,000-message session decompresses
    several times faster than with the default pglz. Elsewhere the default stays."""
    import psycopg

    try:
        with conn.transaction():  # a savepoint: a server without lz4 refuses, and that is all
            for table, column in (("chatcli_sessions", "snapshot"), ("chatcli_session_turns", "part")):
                conn.execute(f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION lz4")
    except psycopg.Error:
        pass


class Database:
    """A pool of connections to one server, shared by every store of this process on it."""

    _open: dict[str, Database] = {}
    _opening = threading.Lock()

    def __init__(self, dsn: str) -> None:
        import logging

        # The pool's workers log each failed attempt to reconnect: the user gets one line
        # (StoreUnavailable) from the operation that needed the server, not a log on stderr.
        quiet = logging.getLogger("psycopg")
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False
        self.dsn = dsn
        self.where = shown(dsn)
        self.pool = self._new_pool()
        self._ready = False

    def _new_pool(self):
        from psycopg_pool import ConnectionPool

        # check: a connection the server closed (a restart) is replaced before it is handed out.
        return ConnectionPool(self.dsn, min_size=1, max_size=16, open=False, timeout=CONNECT_TIMEOUT,
                              kwargs={"autocommit": True}, check=ConnectionPool.check_connection, name="chatcli")

    @classmethod
    def of(cls, dsn: str) -> Database:
        with cls._opening:
            database = cls._open.get(dsn)
            if database is None:
                database = cls._open[dsn] = cls(dsn)
            return database

    def failure(self, exc: BaseException, doing: str) -> StoreUnavailable:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return StoreUnavailable(f"the session store at {self.where} {doing}: {first}")

    @contextlib.contextmanager
    def connection(self, doing: str = "cannot be reached") -> Iterator[object]:
        """A connection (autocommit; `with conn.transaction()` for a transaction), the tables
        made the first time; the server's failures as StoreUnavailable."""
        import psycopg
        from psycopg_pool import PoolTimeout

        try:
            if not self._ready:
                self._start()
            with self.pool.connection() as conn:
                yield conn
        except (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout) as exc:
            self._discard_pool()
            raise self.failure(exc, doing) from None
        except psycopg.Error as exc:
            raise SessionError(str(self.failure(exc, "refused an operation"))) from None

    def _discard_pool(self) -> None:
        """After a failure: the next operation starts over (`_start`: one connection made
        directly, refused at once while the server is down), rather than waiting on a pool
        that reconnects with growing pauses."""
        with self._opening:
            old, self.pool, self._ready = self.pool, self._new_pool(), False
        threading.Thread(target=old.close, kwargs={"timeout": 1}, daemon=True).start()

    def _start(self) -> None:
        with self._opening:
            if self._ready:
                return
            import psycopg

            # The first connection is made here, not by the pool: a server that is not there
            # is said at once, not after the pool's wait.
            with psycopg.connect(self.dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT) as conn, \
                    conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (CHATCLI_LOCKS, SCHEMA_LOCK))
                exists = conn.execute("SELECT to_regclass('chatcli_meta')").fetchone()[0]
                version = None
                if exists is not None:
                    row = conn.execute("SELECT value FROM chatcli_meta WHERE key = 'schema'").fetchone()
                    version = None if row is None else int(row[0])
                if version is not None and version > SCHEMA_VERSION:
                    raise SessionError(f"the session store at {self.where} was made by a newer chatcli "
                                       f"(schema {version}); nothing was read or written")
                if version != SCHEMA_VERSION:
                    for statement in SCHEMA:
                        conn.execute(statement)
                    _prefer_lz4(conn)
                    conn.execute("INSERT INTO chatcli_meta VALUES ('schema', %s) ON CONFLICT (key) DO UPDATE"
                                 " SET value = EXCLUDED.value", (str(SCHEMA_VERSION),))
            self.pool.open(wait=False)
            self._ready = True
