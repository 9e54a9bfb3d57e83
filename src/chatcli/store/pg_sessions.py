"""The session store on a PostgreSQL server (CHATCLI_STORE=postgresql://…): SessionStore's
promises, kept by the server instead of a directory, for several machines sharing sessions.

A session is held as the file store would hold its file, so that both read it with one
implementation (SessionStore.decode: the v2 document, its checks, its sealed envelope):
- `snapshot`: what a whole write puts in the file, the v2 document, or with a key its sealed
  envelope (the server then holds no word of it);
- `chatcli_session_turns`: each turn appended since, as the file store appends it: the
  messages' JSON objects (spliced into the history when read), or with a key one sealed record,
  bound to its offset as in a file.
A whole write replaces both in one transaction and takes a new `generation` (a file's inode);
an append adds one row and moves `size` on. The stamp (changed_ns, size, generation) is what a
file's (mtime, size, inode) is to the engine: any write elsewhere changes it, and an append
alone keeps the generation, so another surface reads only the turns added (`appended_since`).

The per-session lock is a PostgreSQL advisory lock held on a connection of its own for the
read-merge-write, so two machines exclude each other as two processes on one disk do; a
holder that dies (or loses the server) lets it go with its connection.

The listing is a query (`PgCatalog`): names, times, sizes, and without a key the message count
and title, kept by every write in the same transaction.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from chatcli.core.names import validate_name
from chatcli.store.catalog import SessionInfo
from chatcli.store.listing_cache import newest_first
from chatcli.store.pg import Database, NOW as _NOW, SESSION_LOCKS
from chatcli.store.seal import CHECK_TEXT, NONCE, SESSION_HEADER, SealError, is_sealed, sealer_for, session_layout
from chatcli.store.session_file import SessionError, SessionNotFound
from chatcli.store.sessions import SessionStore, Stamp, _document, _json, turn_body

TYPE_CHECKING = False
if TYPE_CHECKING:
    from chatcli.core.messages import Message
    from chatcli.core.session import SessionData
    from chatcli.store.session_ends import Ends

_LOAD = ("SELECT s.snapshot, s.changed_ns, s.size, s.generation, ARRAY(SELECT t.part FROM chatcli_session_turns t"
         " WHERE t.name = s.name AND t.generation = s.generation ORDER BY t.at) FROM chatcli_sessions s"
         " WHERE s.name = %s")


def _text(value: str | None) -> str | None:
    """A title as PostgreSQL's text holds it: no NUL, no lone surrogate (the document itself,
    in bytes, keeps both)."""
    if value is None:
        return None
    return value.replace("\0", "").encode("utf-8", "replace").decode("utf-8")


def spliced(snapshot: bytes, parts: list[bytes]) -> bytes:
    """The session's bytes as one file would hold them: sealed records follow their snapshot;
    plaintext turns (messages' JSON objects, comma-joined) go inside the history, last in it."""
    if not parts:
        return snapshot
    if is_sealed(snapshot):
        return snapshot + b"".join(parts)
    body = snapshot[:-2].rstrip()  # the history's end: "]" then "}"
    comma = b"" if body.endswith(b"[") else b","
    return body + comma + b",".join(parts) + b"]}"


def check_server_key(dsn: str, key: bytes | None) -> None:
    """As the file store's key check (store.seal.check_store_key), kept on the server, where
    every machine sharing it meets it: a key the store was not sealed with, or no key for a
    store that is sealed, is refused before anything is read or written. The first start with a
    key leaves the check, unless the newest sealed sessions do not open with that key; two
    machines starting at once with different keys: the second finds the first's check."""
    import base64

    database = Database.of(dsn)
    wrong_key = SealError(f"CHATCLI_ENCRYPTION_KEY is not the key the session store at {database.where} is sealed "
                          "with; nothing was read or written")
    with database.connection() as conn:
        row = conn.execute("SELECT value FROM chatcli_meta WHERE key = 'seal-check'").fetchone()
        if key is None:
            if row is not None:
                raise SealError(f"the session store at {database.where} is encrypted: set CHATCLI_ENCRYPTION_KEY to "
                                "its key (nothing was read or written)")
            return
        sealer = sealer_for(key)
        if row is None:
            newest = conn.execute("SELECT name, snapshot FROM chatcli_sessions ORDER BY changed_ns DESC LIMIT 8")
            sealed = [(name, bytes(snapshot)) for name, snapshot in newest if is_sealed(bytes(snapshot))]
            if sealed and not any(_opens(sealer, name, snapshot) for name, snapshot in sealed[:3]):
                raise wrong_key
            check = base64.b64encode(sealer.seal(CHECK_TEXT, "check", "session-store")).decode()
            conn.execute("INSERT INTO chatcli_meta VALUES ('seal-check', %s) ON CONFLICT (key) DO NOTHING", (check,))
            row = conn.execute("SELECT value FROM chatcli_meta WHERE key = 'seal-check'").fetchone()
    try:
        sealer.open(base64.b64decode(row[0]), "check", "session-store", "the session store's key check")
    except (SealError, ValueError):
        raise wrong_key from None


def _opens(sealer, name: str, snapshot: bytes) -> bool:
    try:
        sealer.open_session(snapshot, name, f"session '{name}'")
    except SealError:
        return False
    return True


class PgSessionStore(SessionStore):
    def __init__(self, dsn: str, key: bytes | None = None) -> None:
        self.root = None  # no directory: nothing here is a file
        self.key = key
        self._checked_mode = True
        self.locked_out = False
        self.db = Database.of(dsn)
        self.catalog = PgCatalog(self)
        # Writes whose answer was lost (the server went away during the commit): {name: (token,
        # the messages the session held once it was written)}; see `landed`.
        self._unanswered: dict[str, tuple[str, int]] = {}
        # The stamps `watched_stamp` read or this process wrote, and the listener's mark then:
        # {name: (stamp, mark)}, shared by every store of the process on this server (one
        # conversation's write is what another's next check compares with).
        self._watched: dict[str, tuple[Stamp | None, tuple[int, int]]] = self.db.watched

    @property
    def location(self) -> str:
        return self.db.where

    def where(self, name: str) -> str:
        return f"{self.db.where}, session {name}"

    def path(self, name: str):
        raise SessionError(f"session '{name}' is kept at {self.db.where}, not in a file")

    # -- reading ---------------------------------------------------------------------------
    def stamp(self, name: str) -> Stamp | None:
        validate_name(name)
        with self.db.connection() as conn:
            row = conn.execute("SELECT changed_ns, size, generation FROM chatcli_sessions WHERE name = %s",
                               (name,)).fetchone()
        return None if row is None else Stamp(*row)

    def watched_stamp(self, name: str) -> Stamp | None:
        """As `stamp`, for the check before a turn: from the second one on, the server's
        announcements (pg.Listener) say whether the session changed since the last one, and
        while they say it has not, no query is made. Never for a decision under the lock."""
        asked = self._watched.get(name)
        if asked is None:  # a process that asks once (a one-shot) does not listen
            self._watched[name] = (None, (0, 0))
            return self.stamp(name)
        listener = self.db.listener()
        if asked[0] is not None and listener.unchanged(name, asked[1]):
            return asked[0]
        mark = listener.mark(name)  # before the query: a change announced meanwhile is asked for again
        wrote = self.db.wrote.get(name, 0)  # and a write of this process meanwhile (it is not announced)
        stamp = self.stamp(name)
        if self.db.wrote.get(name, 0) == wrote:
            self._watched[name] = (stamp, mark)
        return stamp

    def _mark(self, name: str) -> tuple[int, int] | None:
        """Before a write: the listener's mark, when this process listens (see `_wrote`)."""
        listener = self.db._listener
        return None if listener is None else listener.mark(name)

    def _wrote(self, name: str, stamp: Stamp | None, mark: tuple[int, int] | None) -> None:
        """After a write of this process (whose announcement is left out): the stamp it made is
        the one to compare with, as of the mark taken before it (a change by another process
        since is announced, and asked for)."""
        self.db.wrote[name] = self.db.wrote.get(name, 0) + 1
        if name in self._watched:  # (None: asked for at the next check)
            self._watched[name] = (stamp, mark) if mark is not None and stamp is not None else (None, (0, 0))

    def _raw(self, name: str) -> tuple[bytes, Stamp] | None:
        validate_name(name)
        with self.db.connection() as conn:
            row = conn.execute(_LOAD, (name,), binary=True).fetchone()  # bytes as they are, not in hex
        if row is None:
            return None
        snapshot, changed, size, generation, parts = row
        return spliced(bytes(snapshot), [bytes(part) for part in parts]), Stamp(changed, size, generation)

    def raw(self, name: str) -> tuple[bytes, Stamp] | None:
        return self._raw(name)

    def _listed(self, data: SessionData) -> tuple:
        """(messages, title, journal id) as the listing keeps them: nothing of them with a key."""
        if self.private:
            return None, None, None
        return len(data.history), _text(data.title), data.transcript_id

    def put_raw(self, name: str, raw: bytes, changed_ns: int, data: SessionData) -> Stamp:
        """As the file store's: a sealed session's bytes split back into its snapshot and the
        records after it (each at its offset, as appended), a plaintext one kept whole."""
        validate_name(name)
        snapshot, parts = raw, []
        layout = session_layout(raw[:SESSION_HEADER]) if is_sealed(raw) else None
        if layout is not None and layout < len(raw):
            snapshot, at = raw[:layout], layout
            while at < len(raw):
                end = min(len(raw), at + 4 + NONCE + int.from_bytes(raw[at:at + 4], "big"))
                parts.append((at, raw[at:end]))
                at = end
        private = self.private
        with self.db.connection("cannot be written") as conn, conn.transaction():
            if data.title is None:
                data.title = _document().make_title(data.history)
            generation = conn.execute(
                "INSERT INTO chatcli_sessions VALUES (%s, nextval('chatcli_generations'), %s, %s, %s, %s, %s, %s, NULL,"
                " %s, %s, NULL) RETURNING generation",
                (name, len(raw), changed_ns, snapshot, *self._listed(data), snapshot[:SESSION_HEADER],
                 len(snapshot))).fetchone()[0]
            for at, part in parts:
                conn.execute("INSERT INTO chatcli_session_turns VALUES (%s, %s, %s, %s, NULL)",
                             (name, generation, at, part))
            if data.transcript_id and not private:
                conn.execute("INSERT INTO chatcli_session_journals VALUES (%s, %s) ON CONFLICT (name) DO UPDATE"
                             " SET transcript = EXCLUDED.transcript", (name, data.transcript_id))
        self._wrote(name, None, None)
        return Stamp(changed_ns, len(raw), generation)

    def load(self, name: str, *, mend: bool = True) -> tuple[SessionData, Stamp]:
        found = self._raw(name)
        if found is None:
            raise SessionNotFound(f"session '{name}' not found")
        raw, stamp = found
        return self.decode(name, raw), stamp

    def open_ends(self, name: str, tail_bytes: int) -> tuple[Ends, Stamp, None, Stamp] | None:
        """As the file store's: a large plaintext session's ends, read from the server without
        the rest (its snapshot's first bytes, which PostgreSQL decompresses alone, and its last
        ones with the turns appended since), and its stamp, for `load_opened`. One transaction,
        so both ends are of the same version. None when it is not such a session."""
        from chatcli.store.session_ends import FRONT, read_ends

        if self.key is not None:
            return None
        need = tail_bytes + 64  # what read_ends asks of the end, and a little more
        validate_name(name)
        with self.db.connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            row = conn.execute("SELECT changed_ns, size, generation, snapshot_size FROM chatcli_sessions"
                               " WHERE name = %s", (name,)).fetchone()
            if row is None or row[3] < FRONT + need:
                return None  # small: read whole
            changed, size, generation, snapshot_size = row
            stamp = Stamp(changed, size, generation)
            parts, held = [], 0
            for (part,) in conn.execute("SELECT part FROM chatcli_session_turns WHERE name = %s AND generation = %s"
                                        " ORDER BY at DESC", (name, generation), binary=True):
                if held >= need:
                    break
                parts.append(bytes(part))
                held += len(part) + 1
            parts.reverse()
            front, end = conn.execute(
                "SELECT substring(snapshot FROM 1 FOR %s), substring(snapshot FROM %s) FROM chatcli_sessions"
                " WHERE name = %s", (FRONT, max(1, snapshot_size - max(0, need - held) - 64), name),
                binary=True).fetchone()
        front, end = bytes(front), bytes(end)
        if end[-2:] != b"]}" or end[-3:-2].isspace():
            return None  # not as this version writes it: read whole
        # The document's last bytes, as `spliced` makes them: the snapshot's history, then the turns.
        body = end[:-2]
        last = body + (b"," if parts else b"") + b",".join(parts) + b"]}"
        last_at = size - len(last)

        def read(length: int, offset: int) -> bytes:
            if offset + length <= len(front):
                return front[offset:offset + length]
            if offset >= last_at and offset + length <= size:
                return last[offset - last_at:offset - last_at + length]
            raise OSError(f"bytes {offset}-{offset + length} of session '{name}' were not read")

        try:
            ends = read_ends(read, size, tail_bytes)
        except OSError:
            return None
        return (ends, stamp, None, stamp) if ends is not None else None

    def load_opened(self, name: str, fd: None, st: Stamp) -> SessionData:
        """The whole session as `open_ends` saw it (`st`): its snapshot and the turns appended
        before that, whatever was appended since. A session written whole meanwhile (its
        snapshot replaced) cannot be read as it was: SessionError."""
        with self.db.connection() as conn:
            row = conn.execute("SELECT s.snapshot, ARRAY(SELECT t.part FROM chatcli_session_turns t WHERE t.name = s.name"
                               " AND t.generation = s.generation AND t.at < %s ORDER BY t.at) FROM chatcli_sessions s"
                               " WHERE s.name = %s AND s.generation = %s", (st.size, name, st.inode),
                               binary=True).fetchone()
        if row is None:
            raise SessionError(f"session '{name}' was written whole by another surface while it was being read")
        raw = spliced(bytes(row[0]), [bytes(part) for part in row[1]])
        if len(raw) != st.size:
            raise SessionError(f"session '{name}' does not read back at the size it had")
        return self.decode(name, raw)

    @staticmethod
    def close_opened(fd: None) -> None:
        """Nothing is held open on the server."""

    def fields(self, name: str, reach: int = 65536) -> dict:
        data, _ = self.load(name)
        return _document().encode_head(data)

    def mend(self, name: str) -> bool:
        return False  # a turn is appended in one transaction: never cut short

    def protected(self, name: str) -> str | None:
        return None

    def appended_since(self, name: str, inode: int, size: int) -> tuple[list[Message], int, int] | None:
        if self.key is not None:
            return None
        validate_name(name)
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT s.size, s.generation, ARRAY(SELECT t.at FROM chatcli_session_turns t WHERE t.name = s.name"
                " AND t.generation = s.generation AND t.at >= %s ORDER BY t.at), ARRAY(SELECT t.part FROM"
                " chatcli_session_turns t WHERE t.name = s.name AND t.generation = s.generation AND t.at >= %s"
                " ORDER BY t.at) FROM chatcli_sessions s WHERE s.name = %s", (size, size, name), binary=True).fetchone()
        if row is None or row[1] != inode or row[0] < size or (row[0] > size and (not row[2] or row[2][0] != size)):
            return None
        message = _document().Message.from_dict
        try:
            added = [message(item) for part in row[3] for item in _json().loads(b"[" + bytes(part) + b"]")]
        except (ValueError, TypeError):
            return None
        return added, row[1], row[0]

    # -- writing ---------------------------------------------------------------------------
    def date(self, name: str, when: float | None) -> None:
        if when is None:
            return
        with self.db.connection("cannot be written") as conn:
            conn.execute(f"UPDATE chatcli_sessions SET changed_ns = %s WHERE name = %s AND %s < {_NOW}",
                         (int(when * 1e9), name, int(when * 1e9)))
        self._wrote(name, None, None)

    def write(self, name: str, data: SessionData, *, latest: bool = True) -> Stamp:
        validate_name(name)
        session = _document()
        if data.title is None:
            data.title = session.make_title(data.history)
        payload = self._payload(name, session.encode_session(data))
        private = self.private
        token = self._sending(name, len(data.history))
        mark = self._mark(name)
        with self.db.connection("cannot be written") as conn, conn.transaction():
            conn.execute("DELETE FROM chatcli_session_turns WHERE name = %s", (name,))
            changed, generation = conn.execute(
                "INSERT INTO chatcli_sessions AS s VALUES (%s, nextval('chatcli_generations'), %s, " + _NOW +
                ", %s, %s, %s, %s, NULL, %s, %s, %s) ON CONFLICT (name) DO UPDATE SET generation = EXCLUDED.generation,"
                " size = EXCLUDED.size, changed_ns = EXCLUDED.changed_ns, snapshot = EXCLUDED.snapshot,"
                " messages = EXCLUDED.messages, title = EXCLUDED.title, transcript = EXCLUDED.transcript,"
                " problem = NULL, header = EXCLUDED.header, snapshot_size = EXCLUDED.snapshot_size,"
                " writer = EXCLUDED.writer RETURNING changed_ns, generation",
                (name, len(payload), payload, *self._listed(data), payload[:SESSION_HEADER], len(payload),
                 token)).fetchone()
            if data.transcript_id and not private:  # as the file store: with a key, no such cache
                conn.execute("INSERT INTO chatcli_session_journals VALUES (%s, %s) ON CONFLICT (name) DO UPDATE"
                             " SET transcript = EXCLUDED.transcript", (name, data.transcript_id))
            if latest and data.history:
                self.catalog.note_latest_in(conn, name)
        self._unanswered.pop(name, None)
        data.appendable = True
        self._wrote(name, Stamp(changed, len(payload), generation), mark)
        return Stamp(changed, len(payload), generation)

    def _sending(self, name: str, count: int) -> str:
        import os

        token = os.urandom(12).hex()
        self._unanswered[name] = (token, count)  # until the server answers
        return token

    def landed(self, name: str) -> int | None:
        """After a write of this store to session `name` whose answer was lost (the server went
        away during its commit): how many messages the session held once written, when that
        write is in it after all (its snapshot, or one of its turns); None otherwise. Asked once:
        engine.binding then counts those messages as written, instead of taking them back from
        the session as another surface's."""
        sent = self._unanswered.get(name)
        if sent is None:
            return None
        with self.db.connection() as conn:
            found = conn.execute(
                "SELECT EXISTS(SELECT 1 FROM chatcli_sessions s WHERE s.name = %s AND (s.writer = %s OR EXISTS("
                "SELECT 1 FROM chatcli_session_turns t WHERE t.name = s.name AND t.generation = s.generation"
                " AND t.writer = %s)))", (name, sent[0], sent[0])).fetchone()[0]
        del self._unanswered[name]
        return sent[1] if found else None

    def append(self, name: str, messages: Sequence[Message], count: int, expect: Stamp) -> Stamp | None:
        """As the file store's: the turn as one row, in one transaction, when the session is
        still `expect`; None when the caller must write it whole (not the one expected, or, with
        a key, its records outweighing its snapshot)."""
        body = turn_body(messages)
        if body is None:
            return None
        mark = self._mark(name)
        with self.db.connection("cannot be written") as conn, conn.transaction():
            row = conn.execute("SELECT changed_ns, size, generation, header, messages, snapshot_size"
                               " FROM chatcli_sessions WHERE name = %s FOR UPDATE", (name,)).fetchone()
            if row is None or Stamp(*row[:3]) != expect:
                return None
            _changed, size, generation, header, known, snapshot = row
            if (size - snapshot) + len(body) > snapshot:
                return None  # the turns would outweigh the snapshot: written whole, so a load reads at most twice it
            if self.key is not None:
                if session_layout(bytes(header)) is None:
                    return None
                part = sealer_for(self.key).append_record(bytes(header), name, size, body)
                grown = size + len(part)
            else:
                if is_sealed(bytes(header)):
                    return None
                part, grown = body, size + len(body) + (1 if count else 0)  # the comma before it, if any
            token = self._sending(name, count + len(messages))
            conn.execute("INSERT INTO chatcli_session_turns VALUES (%s, %s, %s, %s, %s)",
                         (name, generation, size, part, token))
            changed = conn.execute(f"UPDATE chatcli_sessions SET size = %s, changed_ns = {_NOW}, messages = %s"
                                   " WHERE name = %s RETURNING changed_ns",
                                   (grown, None if self.private else count + len(messages), name)).fetchone()[0]
            self.catalog.note_latest_in(conn, name)
        self._unanswered.pop(name, None)
        self._wrote(name, Stamp(changed, grown, generation), mark)
        return Stamp(changed, grown, generation)

    def delete(self, name: str) -> None:
        with self.lock(name, drop=True), self.db.connection("cannot be written") as conn, conn.transaction():
            conn.execute("DELETE FROM chatcli_session_turns WHERE name = %s", (name,))
            if conn.execute("DELETE FROM chatcli_sessions WHERE name = %s", (name,)).rowcount == 0:
                raise SessionNotFound(f"session '{name}' not found")
        self._wrote(name, None, None)

    def remove_if_unchanged(self, name: str, mtime_ns: int, size: int, inode: int) -> bool:
        with self.lock(name, drop=True), self.db.connection("cannot be written") as conn, conn.transaction():
            gone = conn.execute("DELETE FROM chatcli_sessions WHERE name = %s AND changed_ns = %s AND size = %s"
                                " AND generation = %s", (name, mtime_ns, size, inode)).rowcount
            if gone:
                conn.execute("DELETE FROM chatcli_session_turns WHERE name = %s", (name,))
        self._wrote(name, None, None)
        return bool(gone)

    @contextlib.contextmanager
    def lock(self, name: str, *, drop: bool = False, wait: bool = True) -> Iterator[bool]:
        """The session's advisory lock (per schema: stores sharing a database do not contend), on
        the connection every operation of this thread uses until the block ends (Database.held):
        a connection the server dropped loses the lock and fails the writes it guarded. With
        `wait=False` a lock someone holds is not waited for: the block runs with False."""
        validate_name(name)
        key = (SESSION_LOCKS, name)
        locked = "SELECT {}(%s, hashtext(current_schema() || '/' || %s))"
        with self.db.held() as conn:
            try:
                if wait:
                    conn.execute(locked.format("pg_advisory_lock"), key)
                    got = True
                else:
                    got = conn.execute(locked.format("pg_try_advisory_lock"), key).fetchone()[0]
            except BaseException:
                # Interrupted (Ctrl-C) while the lock was being granted: whether it was is unknown,
                # so the connection goes (the pool drops a closed one) and the lock with it.
                conn.close()
                raise
            try:
                yield got
            finally:
                if got and not conn.closed:  # a connection the server closed took its lock with it
                    import psycopg

                    # What failed inside the block is the error to see; a lock that cannot be let go
                    # here is let go when the pool takes the connection back (its reset).
                    with contextlib.suppress(psycopg.Error):
                        conn.execute(locked.format("pg_advisory_unlock"), key)

    def lock_path(self, name: str):
        raise SessionError(f"session '{name}' is locked at {self.db.where}, not by a file")

    def remove_orphan_lock(self, lock_path, mtime_ns: int) -> bool:
        return False


class PgCatalog:
    """The listing of a PostgreSQL store: its rows in the file catalog's shape ({name: [mtime_ns,
    size, messages, title, problem, transcript id, ctime_ns, inode]}), from one query."""

    def __init__(self, store: PgSessionStore) -> None:
        self.store = store

    def entries(self, fresh: bool = False, record: bool = True, reveal: bool = False, scanned=None) -> dict[str, list]:
        with self.store.db.connection() as conn:
            rows = conn.execute("SELECT name, changed_ns, size, messages, title, problem, transcript, generation"
                                " FROM chatcli_sessions ORDER BY name").fetchall()
        # As the file catalog's rows: "" for no title, problem or journal; with a key, no journal
        # either unless revealed (storage's retention needs it).
        shown = reveal or not self.store.private
        return {name: [changed, size, messages, title or "", problem or "", (transcript or "") if shown else "", 0,
                       generation]
                for name, changed, size, messages, title, problem, transcript, generation in rows}

    def list(self, fresh: bool = False, scanned=None) -> list[SessionInfo]:
        return newest_first(self.entries(fresh))

    @staticmethod
    def infos(rows: dict[str, list]) -> list[SessionInfo]:
        return newest_first(rows)

    def note_latest_in(self, conn, name: str) -> None:
        conn.execute("INSERT INTO chatcli_meta VALUES ('latest', %s) ON CONFLICT (key) DO UPDATE"
                     " SET value = EXCLUDED.value", (name,))

    def latest(self) -> SessionInfo | None:
        with self.store.db.connection() as conn:
            row = conn.execute("SELECT s.name, s.messages, s.changed_ns, s.size FROM chatcli_sessions s"
                               " JOIN chatcli_meta m ON m.key = 'latest' AND m.value = s.name").fetchone()
        return None if row is None else SessionInfo(row[0], row[1], row[2] / 1e9, row[3], "")

    # Kept by the writes themselves, in their transactions.
    def note_latest(self, name: str, mtime_ns: int, messages: int | None) -> None:
        pass

    def note_appended(self, name: str, stamp: Stamp, messages: int | None) -> None:
        pass

    def note_journal(self, name: str, transcript_id: str | None) -> None:
        pass

    def save_rendered(self, key: str, text: str) -> None:
        pass

    def remembered_journals(self) -> dict[str, str]:
        with self.store.db.connection() as conn:
            return dict(conn.execute("SELECT name, transcript FROM chatcli_session_journals").fetchall())

    def remembered_journal(self, name: str) -> str | None:
        with self.store.db.connection() as conn:
            row = conn.execute("SELECT transcript FROM chatcli_session_journals WHERE name = %s", (name,)).fetchone()
        return None if row is None else row[0]

    def forget_journals(self, names: list[str]) -> None:
        with self.store.db.connection("cannot be written") as conn:
            conn.execute("DELETE FROM chatcli_session_journals WHERE name = ANY(%s)", (list(names),))
