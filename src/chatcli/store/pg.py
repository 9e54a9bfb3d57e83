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
it is handed out, and replaced; a pool still pausing between reconnections when the server is
back is replaced (`_pooled`). A session's lock and the writes it guards share one connection
(`held`).
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Callable, Iterator

from chatcli.core.errors import ChatcliError
from chatcli.store.session_file import SessionError, StoreUnavailable

# Advisory lock keys: (a number naming what kind of thing is locked, which one).
SESSION_LOCKS = 0x63686174  # "chat": a session's lock, (this, hashtext of the schema and the name)
JOURNAL_LOCKS = 0x63686176  # a journal's lock, (this, hashtext of the schema and its id)
SCHEMA_LOCK = (0x63686175, 0)  # making the tables
SEARCH_LOCKS = 0x63686177  # the search index's: (this, hashtext of the schema and what is indexed)
PLACE_LOCKS = 0x63686179  # a small store's files (the schedule's): (this, hashtext of the schema, kind, name)
# (A running gateway hub's liveness takes the one-key form: a 64-bit hash of the schema and its token, store.pg_hub.)

NOW = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint * 1000"  # the server's time, in ns
CONNECT_TIMEOUT = 5  # seconds to wait for a connection (a server restarting) before saying it cannot be reached

# 4: the search index's tables; 5: the gateway hub's; 6: the small stores' files and the sessions'
# announcements (an older store gets what it lacks when first opened)
SCHEMA_VERSION = 6
SCHEMA = [
    "CREATE TABLE IF NOT EXISTS chatcli_meta(key text PRIMARY KEY, value text NOT NULL)",
    # A session: its document as the file store would hold it (the snapshot written whole, the v2
    # document or its sealed envelope, then the turns appended since: store.pg_sessions), and
    # the listing's columns (title and count are NULL in a sealed store: the server sees no
    # content), the snapshot's first bytes (`header`: a sealed one's salt and layout, which an
    # append needs; read from the snapshot itself, a big one would be decompressed whole) and
    # its length (turns that outweigh it are folded into a new snapshot). `generation` changes at every whole write (a file's inode), `size` is the bytes
    # of the document the parts make (a file's size), `changed_ns` the time of the last change.
    "CREATE TABLE IF NOT EXISTS chatcli_sessions(name text PRIMARY KEY, generation bigint NOT NULL,"
    " size bigint NOT NULL, changed_ns bigint NOT NULL, snapshot bytea NOT NULL, messages integer,"
    " title text, transcript text, problem text, header bytea NOT NULL, snapshot_size bigint NOT NULL,"
    " writer text)",
    "CREATE TABLE IF NOT EXISTS chatcli_session_turns(name text NOT NULL, generation bigint NOT NULL,"
    " at bigint NOT NULL, part bytea NOT NULL, writer text, PRIMARY KEY(name, generation, at))",
    # `writer`: a token of the process's write that made the snapshot, or the turn (`landed`).
    "CREATE SEQUENCE IF NOT EXISTS chatcli_generations",
    # Transcript journals (store.pg_journal): each append's whole lines at the offset they land at.
    "CREATE TABLE IF NOT EXISTS chatcli_journals(transcript text PRIMARY KEY, generation bigint NOT NULL,"
    " changed_ns bigint NOT NULL, origin text NOT NULL)",  # origin: a digest of its first line (lineage)
    "CREATE TABLE IF NOT EXISTS chatcli_journal_parts(transcript text NOT NULL, at bigint NOT NULL,"
    " part bytea NOT NULL, PRIMARY KEY(transcript, at))",
    # The journal each session named last (the file store's sessions.journals.json).
    "CREATE TABLE IF NOT EXISTS chatcli_session_journals(name text PRIMARY KEY, transcript text NOT NULL)",
    # The search index (store.pg_search), a cache: what is indexed of each journal ('j') and
    # session ('s'), as the SQLite index's `sources`, and their messages, a table for each kind.
    "CREATE TABLE IF NOT EXISTS chatcli_search_sources(kind text NOT NULL, source text NOT NULL,"
    " stamp text NOT NULL, at bigint NOT NULL, count bigint NOT NULL, inode bigint NOT NULL,"
    " number bigint NOT NULL, numbered text, PRIMARY KEY(kind, source))",
    "CREATE SEQUENCE IF NOT EXISTS chatcli_search_numbers MAXVALUE 2147483647",
    *(statement.format(kind=kind) for kind in ("session", "journal") for statement in (
        # role and body: NULL in a sealed store, whose rows hold `sealed` (the role and the text)
        "CREATE TABLE IF NOT EXISTS chatcli_search_{kind}_entries(id bigint PRIMARY KEY, role text, body text,"
        " sealed bytea, terms tsvector NOT NULL)",
        "CREATE INDEX IF NOT EXISTS chatcli_search_{kind}_terms ON chatcli_search_{kind}_entries USING gin(terms)")),
    # The gateway's hub (store.pg_hub): hub.db's two tables, shared by every replica.
    "CREATE TABLE IF NOT EXISTS chatcli_hub_principals(channel text NOT NULL, sender text NOT NULL,"
    " display text NOT NULL DEFAULT '', session text, generation integer NOT NULL DEFAULT 1,"
    " first_seen double precision NOT NULL, last_seen double precision NOT NULL,"
    " refused integer NOT NULL DEFAULT 0, PRIMARY KEY(channel, sender))",
    # owner: "<the gateway's process> <its hub's token>" while it is being answered, NULL once answered
    "CREATE TABLE IF NOT EXISTS chatcli_hub_delivered(channel text NOT NULL, message text NOT NULL,"
    " at double precision NOT NULL, owner text, PRIMARY KEY(channel, message))",
    "CREATE INDEX IF NOT EXISTS chatcli_hub_delivered_at ON chatcli_hub_delivered(at)",
    # The small stores' files (store.pg_places): recall entries, memory notes, contexts, cost
    # snapshots and the schedule, each as its file would be on disk (sealed with a key).
    # `generation` changes at every whole write (a file's inode).
    "CREATE TABLE IF NOT EXISTS chatcli_files(kind text NOT NULL, name text NOT NULL, body bytea NOT NULL,"
    " changed_ns bigint NOT NULL, generation bigint NOT NULL, PRIMARY KEY(kind, name))",
    # Every change of a session is announced on CHANGES ("<schema>/<name>", when it commits): a
    # process that listens (Listener) need not ask for a stamp that has not changed.
    # The payload ends with the writing process's token (chatcli.writer), after a unit separator.
    "CREATE OR REPLACE FUNCTION chatcli_session_changed() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    " PERFORM pg_notify('chatcli_sessions', TG_TABLE_SCHEMA || '/' || (CASE WHEN TG_OP = 'DELETE' THEN OLD.name"
    " ELSE NEW.name END) || chr(31) || coalesce(current_setting('chatcli.writer', true), ''));"
    " RETURN NULL; END $$",
    "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'chatcli_session_changed'"
    " AND tgrelid = 'chatcli_sessions'::regclass) THEN CREATE TRIGGER chatcli_session_changed AFTER INSERT OR UPDATE"
    " OR DELETE ON chatcli_sessions FOR EACH ROW EXECUTE FUNCTION chatcli_session_changed(); END IF; END $$",
]
CHANGES = "chatcli_sessions"  # the channel sessions' changes are announced on


class Listener:
    """The sessions' changes as the server announces them (LISTEN on CHANGES), on a connection
    of its own, read by a thread; those this process made itself are left out. `mark(name)`
    before asking for a stamp (or writing), `unchanged(name, mark)` later: True only while the
    same connection has listened all along and announced no change of `name` since. Anything else
    (not yet listening, the connection lost) says changed: the caller asks the server, as it
    would without it."""

    def __init__(self, dsn: str, own: str) -> None:
        self.dsn = dsn
        self.own = own  # this process's writer token (Database.writer): its own writes are not news
        self.epoch = 0  # the connection listening now; 0: none
        self.seen: dict[str, int] = {}  # name → changes announced in this epoch
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._listen, name="chatcli-listen", daemon=True)
        self._thread.start()

    def mark(self, name: str) -> tuple[int, int]:
        with self._lock:
            return self.epoch, self.seen.get(name, 0)

    def unchanged(self, name: str, mark: tuple[int, int]) -> bool:
        with self._lock:
            return mark[0] != 0 and mark == (self.epoch, self.seen.get(name, 0))

    def _listen(self) -> None:
        import psycopg

        number = 0
        while True:
            try:
                # Keepalives: a connection the network dropped silently (a failover) is found in
                # about a minute, not the system's two hours; until then changes go unannounced.
                with psycopg.connect(self.dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT, keepalives=1,
                                     keepalives_idle=30, keepalives_interval=10, keepalives_count=3) as conn:
                    schema = conn.execute("SELECT current_schema()").fetchone()[0] + "/"
                    conn.execute(f"LISTEN {CHANGES}")
                    number += 1
                    with self._lock:
                        self.epoch, self.seen = number, {}
                    for notice in conn.notifies():
                        changed, _, writer = notice.payload.rpartition("\x1f")
                        if changed.startswith(schema) and writer != self.own:
                            name = changed[len(schema):]
                            with self._lock:
                                self.seen[name] = self.seen.get(name, 0) + 1
            except Exception:  # noqa: BLE001 - a lost connection: every stamp is asked for until it is back
                pass
            with self._lock:
                self.epoch = 0
            time.sleep(CONNECT_TIMEOUT)


UNPARSED = "the PostgreSQL server (its address does not parse)"


def shown(dsn: str) -> str:
    """The address as shown to the user: user, host, port and database, never a password (in
    the user part, as a `password=` parameter, or anywhere libpq reads one). An address that
    does not parse cleanly is not shown at all (a password written unescaped could be read as
    its host or database)."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = {key: str(value) for key, value in conninfo_to_dict(dsn).items()}
    except Exception:  # noqa: BLE001 - not an address libpq reads
        return UNPARSED
    host, port, dbname, user = (parts.get(key, "") for key in ("host", "port", "dbname", "user"))
    if (port and not port.replace(",", "").isdigit()) or "@" in host \
            or any(c in f"{dbname}{user}" for c in "@:/?"):  # a password's pieces, read as something else
        return UNPARSED
    schema = re.fullmatch(r"-c\s*search_path=([\w$]+)", parts.get("options", "").strip())
    where = f"?options=-csearch_path%3D{schema.group(1)}" if schema else ""  # which store of the database
    return f"postgresql://{user + '@' if user else ''}{host}{':' + port if port else ''}/{dbname}{where}"


def _secrets(dsn: str) -> list[str]:
    """What of the address must never be echoed: its password, as written and as decoded."""
    found = []
    try:
        from urllib.parse import unquote, urlsplit

        from psycopg.conninfo import conninfo_to_dict

        password = conninfo_to_dict(dsn).get("password")
        if password:
            found.append(str(password))
        raw = urlsplit(dsn).password
        if raw:
            found += [raw, unquote(raw)]
    except Exception:  # noqa: BLE001 - an address that does not parse: libpq's message is not echoed
        found.append(dsn)
    return [secret for secret in found if secret]


def _prefer_lz4(conn) -> None:
    """Big values (a session's snapshot, its turns) compressed with lz4, where the server has it
    (PostgreSQL 14 and later, built with it, as Debian's is): a 100,000-message session decompresses
    several times faster than with the default pglz. Elsewhere the default stays."""
    import psycopg

    try:
        with conn.transaction():  # a savepoint: a server without lz4 refuses, and that is all
            for table, column in (("chatcli_sessions", "snapshot"), ("chatcli_session_turns", "part"),
                                  ("chatcli_journal_parts", "part"), ("chatcli_files", "body")):
                conn.execute(f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION lz4")
    except psycopg.Error:
        pass


# SQLSTATE classes of a server that is not there, or not now: a connection failure, a server
# shutting down or restarting (operator intervention), one out of resources.
_UNAVAILABLE = ("08", "57", "53")


def _unavailable(exc: BaseException) -> bool:
    """Whether a psycopg error says the server cannot be had (StoreUnavailable), rather than that
    it refused what was asked (a limit, a deadlock, a constraint: SessionError). A failure with
    no SQLSTATE happened on this side of the connection (none to be had, a pool's timeout)."""
    import psycopg

    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = getattr(exc, "sqlstate", None)
    return state is None or state[:2] in _UNAVAILABLE


def _make_schema(conn) -> None:
    """The schema the address's search_path names, made when it is not there yet (a store of its
    own in a shared database needs no step of its own; without the right to make it, the server's
    refusal is the one line)."""
    if conn.execute("SELECT current_schema()").fetchone()[0] is not None:
        return
    from psycopg import sql

    first = conn.execute("SELECT current_setting('search_path')").fetchone()[0].split(",")[0].strip()
    name = first[1:-1].replace('""', '"') if first.startswith('"') else first.lower()  # as the server reads it
    if name and not name.startswith("$"):
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(name)))


class Database:
    """A pool of connections to one server, shared by every store of this process on it."""

    _open: dict[str, Database] = {}
    _opening = threading.Lock()

    def __init__(self, dsn: str) -> None:
        import logging

        try:
            import psycopg  # noqa: F401
            import psycopg_pool  # noqa: F401
        except ImportError:
            from chatcli.core.errors import ConfigError

            raise ConfigError("CHATCLI_STORE names a PostgreSQL server, but its driver is not installed: "
                              "pip install 'chatcli[postgresql]'") from None

        # The pool's workers log each failed attempt to reconnect: the user gets one line
        # (StoreUnavailable) from the operation that needed the server, not a log on stderr.
        quiet = logging.getLogger("psycopg")
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False
        self.dsn = dsn
        self.where = shown(dsn)
        self._secrets = _secrets(dsn)
        # This process's token, on each of its connections (chatcli.writer): the sessions'
        # announcements name it, so that the listener leaves out what this process wrote.
        self.writer = os.urandom(8).hex()
        self.pool = self._new_pool()
        self._ready = False
        self._held = threading.local()  # see held()
        # Until when a server that could not be reached is asked directly (refused at once when it
        # is down) before the pool is waited for, and what it said: a turn's many store operations
        # wait once for it, not CONNECT_TIMEOUT each.
        self._unreachable: tuple[float, str] = (0.0, "")
        self._listener: Listener | None = None
        self._deferred: Callable[[], None] | None = None  # a check to pass before any operation (check_first)
        self._checking = threading.RLock()
        self.watched: dict = {}  # the sessions' stamps as last known with the listener (store.pg_sessions)
        self.wrote: dict[str, int] = {}  # writes of this process, by session (store.pg_sessions)

    def _new_pool(self):
        from psycopg_pool import ConnectionPool

        # check: a connection the server closed (a restart) is replaced before it is handed out
        # (one round trip; skipping it for connections given back a moment ago saved little and
        # failed the first operation after a quick restart).
        writer = self.writer

        def configure(conn) -> None:  # each new connection names its process (the announcements' writer)
            conn.execute("SELECT set_config('chatcli.writer', %s, false)", (writer,))

        return ConnectionPool(self.dsn, min_size=1, max_size=32, open=False, timeout=CONNECT_TIMEOUT,
                              kwargs={"autocommit": True, "keepalives": 1, "keepalives_idle": 30},
                              check=ConnectionPool.check_connection, configure=configure, name="chatcli")

    def check_first(self, check: Callable[[], None]) -> None:
        """`check` (the store's key check, when the server could not be reached at start) runs
        before the next operation on the server, and before every one until it passes: nothing
        is read or written there under a key the store was not sealed with."""
        self._deferred = check

    def listener(self) -> Listener:
        """The sessions' changes, announced (made the first time: one connection and one thread
        for the process's life)."""
        with self._opening:
            if self._listener is None:
                self._listener = Listener(self.dsn, self.writer)
            return self._listener

    @classmethod
    def of(cls, dsn: str) -> Database:
        with cls._opening:
            database = cls._open.get(dsn)
            if database is None:
                database = cls._open[dsn] = cls(dsn)
            return database

    def failure(self, exc: BaseException, doing: str) -> StoreUnavailable:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if self.where == UNPARSED:  # libpq's message would quote it
            first = "check CHATCLI_STORE (postgresql://user:password@host:port/database, its password %-escaped)"
        for secret in self._secrets:  # libpq echoes parts of an address it could not use
            first = first.replace(secret, "…")
        return StoreUnavailable(f"the session store at {self.where} {doing}: {first}")

    @contextlib.contextmanager
    def connection(self, doing: str = "cannot be reached") -> Iterator[object]:
        """A connection (autocommit; `with conn.transaction()` for a transaction), the tables
        made the first time; the server's failures as StoreUnavailable. Inside `held()` it is
        the held connection: what a lock holder does runs where its lock is."""
        import psycopg

        held = getattr(self._held, "conn", None)
        got = held is not None
        if held is None and self._deferred is not None and not getattr(self._held, "checking", False):
            with self._checking:  # other threads wait until it has passed; its own operations go through
                check = self._deferred
                if check is not None:
                    self._held.checking = True
                    try:
                        check()  # raises while it does not pass (the server still away, or the key refused)
                    except SessionError:
                        raise
                    except ChatcliError as exc:  # the key refused: a store that cannot be used, as every
                        raise SessionError(str(exc)) from None  # caller of a session operation handles one
                    finally:
                        self._held.checking = False
                    self._deferred = None
        try:
            if held is not None:
                yield held
                return
            if time.monotonic() < self._unreachable[0]:  # not there a moment ago: asked directly, not waited for
                if not self._server_answers():
                    self._unreachable = (time.monotonic() + CONNECT_TIMEOUT, self._unreachable[1])
                    raise StoreUnavailable(self._unreachable[1].replace("{doing}", doing))
                self._unreachable = (0.0, "")
                if self._ready:  # back: a pool still pausing between its reconnections is replaced
                    self._renew_pool(self.pool)
            if not self._ready:
                self._start()
            with self._pooled() as conn:
                got = True
                yield conn
        except psycopg.Error as exc:
            if _unavailable(exc):
                failure = self.failure(exc, doing)
                if not got and not self._server_answers():  # none to be had, and not only busy: the next
                    # operations, for a moment, ask the server directly instead of waiting for the pool
                    self._unreachable = (time.monotonic() + CONNECT_TIMEOUT,
                                         str(self.failure(exc, "{doing}")))
                raise failure from None
            raise SessionError(str(self.failure(exc, "refused an operation"))) from None

    @contextlib.contextmanager
    def held(self, doing: str = "cannot be locked") -> Iterator[object]:
        """A connection kept for this thread until the block ends: every `connection()` of the
        thread meanwhile is this one (nested: the outer one). A session lock is taken on it, so
        the lock and the writes it guards stand or fall together: a connection the server
        dropped loses the lock and fails the writes, never one without the other."""
        outer = getattr(self._held, "conn", None)
        if outer is not None:
            yield outer
            return
        with self.connection(doing) as conn:
            self._held.conn = conn
            try:
                yield conn
            finally:
                self._held.conn = None

    @contextlib.contextmanager
    def _pooled(self) -> Iterator[object]:
        """A connection of the pool. When none comes: the server is asked directly whether it is
        there; if it is (back after a restart, while the pool waits out its pause between
        reconnections), a new pool is made and asked once more."""
        from psycopg_pool import PoolClosed, PoolTimeout

        for attempt in (1, 2):
            pool = self.pool
            try:
                conn = pool.getconn()
            except (PoolTimeout, PoolClosed) as exc:
                # Renewed only when it holds no connection (pausing between reconnections): a pool
                # that is only busy is not replaced by another (each adds connections to the server).
                busy = isinstance(exc, PoolTimeout) and pool.get_stats().get("pool_size", 0) > 0
                if attempt == 2 or busy or not self._server_answers():
                    raise
                self._renew_pool(pool)
                continue
            try:
                yield conn
            finally:
                pool.putconn(conn)  # a broken or closed one is dropped, an open transaction rolled back
            return

    def _server_answers(self) -> bool:
        import psycopg

        try:
            psycopg.connect(self.dsn, connect_timeout=CONNECT_TIMEOUT).close()
        except psycopg.Error:
            return False
        return True

    def _renew_pool(self, stale) -> None:
        with self._opening:
            if self.pool is not stale:  # another thread did it
                return
            self.pool = self._new_pool()
            self.pool.open(wait=False)
        threading.Thread(target=stale.close, kwargs={"timeout": 1}, daemon=True).start()

    def _start(self) -> None:
        with self._opening:
            if self._ready:
                return
            import psycopg

            # The first connection is made here, not by the pool: a server that is not there
            # is said at once, not after the pool's wait.
            with psycopg.connect(self.dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT) as conn, \
                    conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", SCHEMA_LOCK)
                _make_schema(conn)
                exists = conn.execute("SELECT to_regclass('chatcli_meta')").fetchone()[0]
                version = None
                if exists is not None:
                    row = conn.execute("SELECT value FROM chatcli_meta WHERE key = 'schema'").fetchone()
                    version = None if row is None else int(row[0])
                if version is not None and version > SCHEMA_VERSION:
                    raise SessionError(f"the session store at {self.where} was made by a newer chatcli "
                                       f"(schema {version}, this one reads {SCHEMA_VERSION}); nothing was read or "
                                       "written")
                if version != SCHEMA_VERSION:  # a new store, or an older chatcli's: what it lacks is made
                    for statement in SCHEMA:
                        conn.execute(statement)
                    _prefer_lz4(conn)
                    conn.execute("INSERT INTO chatcli_meta VALUES ('schema', %s) ON CONFLICT (key) DO UPDATE"
                                 " SET value = EXCLUDED.value", (str(SCHEMA_VERSION),))
            self.pool.open(wait=False)
            self._ready = True
