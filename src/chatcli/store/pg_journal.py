"""Transcript journals on a PostgreSQL server (CHATCLI_STORE), beside the sessions that name them:
every machine continuing a conversation appends to the one journal, so what a compaction or a
rewind replaced, and the checkpoints' messages, are there for all of them.

A journal is held as its file's bytes: each append is one row (`at`, the byte offset it lands at,
and the whole lines it adds), so the journal reads as the concatenation of its rows, parsed by
store.journal's one reader, and sealed lines are bound to their offsets as in a file. Appends
are made under the journal's advisory lock, on the connection that holds it, each in one
transaction: a server stopped mid-append leaves the journal as it was, never a torn line.
`chatcli_journals` gives each journal its generation, which a journal made again under the same
id (a fork seeded anew) changes: its `identity`, as a file's inode.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from chatcli.core.journal import fork_line
from chatcli.store.journal import ID_RE, WRITE_CHUNK, JournalError, Reading, encode_lines, last_whole_event, parse
from chatcli.store.pg import Database, JOURNAL_LOCKS, NOW as _NOW
from chatcli.store.session_file import SessionError

_LOCK = "SELECT {}(%s, hashtext(current_schema() || '/' || %s))"


def origin(data: bytes) -> str:
    """A digest of a journal's first line (the first 64 KiB of it), as Journal.lineage reads it."""
    import hashlib

    first = data.split(b"\n", 1)[0] + b"\n" if data else b""
    return hashlib.sha256(first[:65536]).hexdigest()[:16]


class PgJournal:
    def __init__(self, dsn: str, transcript_id: str, key: bytes | None = None) -> None:
        if not ID_RE.fullmatch(transcript_id):
            raise JournalError(f"invalid transcript id {transcript_id!r}")
        self.db = Database.of(dsn)
        self.id = transcript_id
        self.key = key
        self.root = None  # no directory

    @property
    def where(self) -> str:
        return f"{self.db.where}, journal {self.id}"

    @contextlib.contextmanager
    def _said(self) -> Iterator[None]:
        """The server's failures as the journal's (JournalError), as a file's are."""
        try:
            yield
        except SessionError as exc:
            raise JournalError(f"transcript journal {self.id}: {exc}") from None

    def _identity(self, conn) -> tuple[int, int] | None:
        row = conn.execute("SELECT generation FROM chatcli_journals WHERE transcript = %s", (self.id,)).fetchone()
        return None if row is None else (0, row[0])

    def exists(self) -> bool:
        with self._said(), self.db.connection() as conn:
            return self._identity(conn) is not None

    def size(self) -> int:
        with self._said(), self.db.connection() as conn:
            return _size(conn, self.id)

    def stat(self) -> tuple[int, int, tuple[int, int]] | None:
        """(time of the last append in ns, size, identity): what a file's (mtime, size, (device,
        inode)) is to the search index; None when there is no journal (or no server)."""
        try:
            with self.db.connection() as conn:
                row = conn.execute("SELECT changed_ns, generation FROM chatcli_journals WHERE transcript = %s",
                                   (self.id,)).fetchone()
                return None if row is None else (row[0], _size(conn, self.id), (0, row[1]))
        except SessionError:
            return None

    def lineage(self) -> str:
        """As Journal.lineage: its generation and the digest of its first line, kept beside it."""
        with self._said(), self.db.connection() as conn:
            row = conn.execute("SELECT generation, origin FROM chatcli_journals WHERE transcript = %s",
                               (self.id,)).fetchone()
        if row is None:
            raise JournalError(f"transcript journal {self.id}: there is none at {self.db.where}")
        return f"pg:{row[0]}:{row[1]}"

    def _bytes(self, conn, offset: int) -> bytes:
        rows = conn.execute("SELECT at, part FROM chatcli_journal_parts WHERE transcript = %s"
                            " AND at + length(part) > %s ORDER BY at", (self.id, offset), binary=True).fetchall()
        if not rows:
            return b""
        data = b"".join(bytes(part) for _at, part in rows)
        return data[offset - rows[0][0]:] if rows[0][0] < offset else data

    def read(self, offset: int = 0) -> Reading:
        """Every event from byte `offset` on (a missing journal reads as empty)."""
        with self._said(), self.db.connection() as conn:
            identity = self._identity(conn)
            data = self._bytes(conn, offset) if identity is not None else b""
        if identity is None:
            return Reading(end=0)
        reading = parse(data, offset, self)
        reading.identity = identity
        return reading

    def read_bytes(self) -> bytes:
        with self._said(), self.db.connection() as conn:
            return self._bytes(conn, 0)

    def last_event(self, reach: int = 8192) -> tuple[dict, int, tuple[int, int]] | None:
        """As Journal.last_event: the last event, the size and the identity, from the last
        `reach` bytes; None when that is not one whole event of this journal."""
        try:
            with self.db.connection() as conn:
                identity = self._identity(conn)
                if identity is None:
                    return None
                size = _size(conn, self.id)
                start = max(0, size - reach)
                data = self._bytes(conn, start)
        except SessionError:
            return None  # as a file that cannot be read: the caller reads it whole, or says why
        event = last_whole_event(data, start, self)
        return None if event is None else (event, size, identity)

    @contextlib.contextmanager
    def appending(self, offset: int) -> Iterator[_PgAppend]:
        """As Journal.appending: the journal locked, what others appended since `offset` read,
        then the caller's `write`. One transaction, its lock a transaction lock: it ends at the
        commit, and a turn's append costs one commit (one flush of the server's log)."""
        with self._said(), self.db.held("cannot be written") as conn, conn.transaction():
            conn.execute(_LOCK.format("pg_advisory_xact_lock"), (JOURNAL_LOCKS, self.id))
            yield _PgAppend(self, conn, offset)

    def seed_fork(self, parent, time: str) -> None:
        """This journal made anew as a fork of `parent`: a fork line, then the parent's events."""
        reading = parent.read()
        payload = encode_lines([fork_line(parent.id, time), *reading.events], self)
        with self._said(), self.db.connection("cannot be written") as conn, conn.transaction():
            conn.execute("DELETE FROM chatcli_journal_parts WHERE transcript = %s", (self.id,))
            conn.execute(f"INSERT INTO chatcli_journals VALUES (%s, nextval('chatcli_generations'), {_NOW}, %s)"
                         " ON CONFLICT (transcript) DO UPDATE SET generation = EXCLUDED.generation,"
                         " changed_ns = EXCLUDED.changed_ns, origin = EXCLUDED.origin", (self.id, origin(payload)))
            conn.execute("INSERT INTO chatcli_journal_parts VALUES (%s, 0, %s)", (self.id, payload))

    def put_raw(self, raw: bytes) -> None:
        """Keep `raw` (another store's bytes of this journal) as this journal, which must not exist."""
        with self._said(), self.db.connection("cannot be written") as conn, conn.transaction():
            conn.execute(f"INSERT INTO chatcli_journals VALUES (%s, nextval('chatcli_generations'), {_NOW}, %s)",
                         (self.id, origin(raw)))
            if raw:
                conn.execute("INSERT INTO chatcli_journal_parts VALUES (%s, 0, %s)", (self.id, raw))

    def remove(self) -> bool:
        """Remove the journal (its session was deleted); False when there was none."""
        with self._said(), self.db.connection("cannot be written") as conn, conn.transaction():
            conn.execute(_LOCK.format("pg_advisory_xact_lock"), (JOURNAL_LOCKS, self.id))  # no append meanwhile
            conn.execute("DELETE FROM chatcli_journal_parts WHERE transcript = %s", (self.id,))
            return conn.execute("DELETE FROM chatcli_journals WHERE transcript = %s", (self.id,)).rowcount > 0


    def remove_if_unchanged(self, changed_ns: int, generation: int) -> bool:
        """Remove the journal only while it is as a plan saw it (nothing appended since)."""
        with self._said(), self.db.connection("cannot be written") as conn, conn.transaction():
            conn.execute(_LOCK.format("pg_advisory_xact_lock"), (JOURNAL_LOCKS, self.id))  # no append meanwhile
            if conn.execute("DELETE FROM chatcli_journals WHERE transcript = %s AND changed_ns = %s AND generation = %s",
                            (self.id, changed_ns, generation)).rowcount == 0:
                return False
            conn.execute("DELETE FROM chatcli_journal_parts WHERE transcript = %s", (self.id,))
            return True


def _size(conn, transcript_id: str) -> int:
    return conn.execute("SELECT coalesce(max(at + length(part)), 0) FROM chatcli_journal_parts WHERE transcript = %s",
                        (transcript_id,)).fetchone()[0]


def journal_stats(dsn: str) -> dict[str, tuple[int, int, int]]:
    """{transcript id: (time of its last append in ns, its size, its generation)} of every journal
    on the server: what retention plans with."""
    with Database.of(dsn).connection() as conn:
        return {transcript: (changed, size, generation) for transcript, changed, generation, size in conn.execute(
            "SELECT j.transcript, j.changed_ns, j.generation, (SELECT coalesce(max(p.at + length(p.part)), 0)"
            " FROM chatcli_journal_parts p WHERE p.transcript = j.transcript) FROM chatcli_journals j")}


def journal_names(dsn: str) -> list[str]:
    with Database.of(dsn).connection() as conn:
        return [row[0] for row in conn.execute("SELECT transcript FROM chatcli_journals ORDER BY transcript")]


class _PgAppend:
    def __init__(self, journal: PgJournal, conn, offset: int) -> None:
        self.journal, self.conn = journal, conn
        generation, self.size = conn.execute(
            "SELECT (SELECT generation FROM chatcli_journals WHERE transcript = %s), (SELECT coalesce(max(at +"
            " length(part)), 0) FROM chatcli_journal_parts WHERE transcript = %s)", (journal.id, journal.id)).fetchone()
        self.identity = None if generation is None else (0, generation)
        self.replaced = offset > self.size  # shorter than what we read before: made anew under us
        self.new = self._read(0 if self.replaced else offset)
        self.written = 0

    def _read(self, offset: int) -> Reading:
        data = self.journal._bytes(self.conn, offset) if self.size > offset else b""
        return parse(data, offset, self.journal)

    def reread(self) -> None:
        self.new = self._read(0)

    def write(self, events: list[dict], durable: bool = True) -> None:
        """Append `events`: one row per WRITE_CHUNK events, in the append's transaction (durable
        once it commits, as the block ends: `durable` is the file's business)."""
        if not events:
            return
        parts = []
        size = self.size
        if self.new.torn:  # a journal moved here from a file with a line a crash cut short: ended first
            parts.append((size, b"\n"))
            size += 1
        for start in range(0, len(events), WRITE_CHUNK):
            payload = encode_lines(events[start:start + WRITE_CHUNK], self.journal, size)
            parts.append((size, payload))
            size += len(payload)
        if self.identity is None:  # a new journal
            generation = self.conn.execute(
                f"INSERT INTO chatcli_journals VALUES (%s, nextval('chatcli_generations'), {_NOW}, %s)"
                " RETURNING generation", (self.journal.id, origin(parts[0][1]))).fetchone()[0]
            self.identity = (0, generation)
        else:
            self.conn.execute(f"UPDATE chatcli_journals SET changed_ns = {_NOW} WHERE transcript = %s",
                              (self.journal.id,))
        self.conn.cursor().executemany("INSERT INTO chatcli_journal_parts VALUES (%s, %s, %s)",
                                       [(self.journal.id, at, payload) for at, payload in parts])
        self.written += size - self.size
        self.size = size
