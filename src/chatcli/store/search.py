"""Full-text search over journals and saved sessions: SQLite FTS5 with BM25 (standard library).

The index (its file is named by store.home) is a cache: kept up to date as journals are
written (each sync adds its messages, `append_journal`), brought up to date at each search from
what it still lacks (a journal's lines since the offset indexed; sessions changed since: only
the turns appended to a file that grew in place), and rebuilt from scratch when deleted. Text
is case- and accent-folded by the `unicode61 remove_diacritics 2` tokenizer, so "cafe" finds
"Café".

With encryption on (SPEC §9) the index is a file of its own and holds no plaintext: each
word is indexed as a keyed hash of its folded form (`Terms`, a key derived from the master key),
and each message's text is sealed beside it, opened only for the snippets of the hits shown.
BM25 ranks the hashes as it would the words. What the file reveals without the key is which
messages share words, not what the words are.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections import namedtuple
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from chatcli.core.errors import ChatcliError, UsageError
from chatcli.store.atomic import ensure_private_dir

SCHEMA_VERSION = 2
_WORD = re.compile(r"\w+", re.UNICODE)
SNIPPET_TOKENS = 12
# Session search ranks the messages that have every word of the query first (BM25 over a few
# hundred rows at a million messages, not over every row with any of the words): the messages
# with only some of the words are ranked only when those do not fill the results.
RANKED_ROWS = 500

Hit = namedtuple("Hit", "source pos role snippet score")


class SearchError(ChatcliError):
    pass


def fts_query(text: str, every: bool = False) -> str:
    """The user's words as an FTS5 query: any of them (BM25 ranks messages with more, rarer ones
    first), or with `every` all of them. Quoted, so nothing the user types is FTS syntax."""
    return _joined([f'"{word}"' for word in _words(text)], every)


def _words(text: str) -> list[str]:
    words = _WORD.findall(text)
    if not words:
        raise UsageError("nothing to search for: give one or more words")
    return words


def _joined(terms: list[str], every: bool) -> str:
    return (" AND " if every else " OR ").join(dict.fromkeys(terms))


def fold(word: str) -> str:
    """A word as the index compares it: case- and accent-folded (what unicode61 with
    remove_diacritics 2 does for the plaintext index)."""
    import unicodedata

    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


class Terms:
    """The sealed index's words: a keyed hash (BLAKE2b, 8 bytes) of each folded word, so the
    index file holds no word of a conversation; and the messages' text, sealed (AES-GCM) with a
    key derived for the index, bound to where it belongs (source and position)."""

    def __init__(self, hash_key: bytes, cipher) -> None:
        self._key = hash_key
        self._cipher = cipher
        self._cache: dict[str, str] = {}

    def term(self, word: str) -> str:
        token = self._cache.get(word)
        if token is None:
            import hashlib

            token = "t" + hashlib.blake2b(fold(word).encode("utf-8", "surrogatepass"), key=self._key,
                                          digest_size=8).hexdigest()
            if len(self._cache) > 200_000:
                self._cache.clear()
            self._cache[word] = token
        return token

    def body(self, text: str) -> str:
        return " ".join(map(self.term, _WORD.findall(text)))

    def query(self, text: str, every: bool = False) -> str:
        return _joined([self.term(word) for word in _words(text)], every)

    def seal(self, text: str, source: str, pos: int) -> bytes:
        nonce = os.urandom(12)
        return nonce + self._cipher.encrypt(nonce, text.encode("utf-8", "surrogatepass"), f"{source}/{pos}".encode())

    def open(self, blob: bytes, source: str, pos: int) -> str:
        from cryptography.exceptions import InvalidTag

        try:
            return self._cipher.decrypt(blob[:12], blob[12:], f"{source}/{pos}".encode()).decode("utf-8", "replace")
        except InvalidTag:
            return "(this message's text in the index cannot be opened)"


def snippet(text: str, query: str, tokens: int = SNIPPET_TOKENS) -> str:
    """About `tokens` words of `text` around the first word of `query` in it (what FTS5's
    snippet() gives the plaintext index)."""
    wanted = {fold(word) for word in _WORD.findall(query)}
    spans = [match.span() for match in _WORD.finditer(text)]
    first = next((i for i, (a, b) in enumerate(spans) if fold(text[a:b]) in wanted), 0)
    start = max(0, min(first - tokens // 2, len(spans) - tokens))
    chosen = spans[start:start + tokens]
    if not chosen:
        return ""
    piece = text[chosen[0][0]:chosen[-1][1]]
    return ("…" if start > 0 else "") + piece + ("…" if start + tokens < len(spans) else "")


def forget_journal_text(path: Path, journal_ids: list[str]) -> None:
    """Drop removed journals' text from the index file at `path`, if there is one: nothing of
    them stays behind. Never raises (a cache: rebuilt when it cannot be opened)."""
    if journal_ids and path.exists():
        with contextlib.suppress(Exception):
            SearchIndex(path).forget_journals(journal_ids)


def discard_index(path: Path) -> None:
    """Remove an index file and its WAL companions (a cache: it is rebuilt when needed)."""
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{path}{suffix}")


def _wal(db) -> None:
    """Put the index in WAL mode (it stays so). Switching takes an exclusive lock for which
    SQLite does not wait (its busy timeout does not apply): several processes opening a new
    index at once retry, briefly, instead of failing with "database is locked"."""
    import sqlite3
    import time

    for attempt in range(200):
        try:
            if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == 199:
                raise
            time.sleep(0.01)


def _create_schema(db) -> None:
    """(Re)create the tables, once, whoever else starts at the same moment: the background
    indexer and a search of a new index both get here. `BEGIN IMMEDIATE` takes the write lock
    first, then the version is checked again inside the transaction, so the second comer finds
    the work done; `IF NOT EXISTS` covers an index some other tool half made."""
    db.execute("BEGIN IMMEDIATE")
    try:
        if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            for statement in (
                "DROP TABLE IF EXISTS journal_entries", "DROP TABLE IF EXISTS session_entries",
                "DROP TABLE IF EXISTS sources",
                "CREATE VIRTUAL TABLE IF NOT EXISTS journal_entries USING fts5(body, source UNINDEXED,"
                " pos UNINDEXED, role UNINDEXED, sealed UNINDEXED, tokenize='unicode61 remove_diacritics 2')",
                "CREATE VIRTUAL TABLE IF NOT EXISTS session_entries USING fts5(body, source UNINDEXED,"
                " pos UNINDEXED, role UNINDEXED, sealed UNINDEXED, tokenize='unicode61 remove_diacritics 2')",
                "CREATE TABLE IF NOT EXISTS sources(kind TEXT, source TEXT, stamp TEXT, offset INTEGER,"
                " count INTEGER, inode INTEGER, PRIMARY KEY(kind, source))",
                f"PRAGMA user_version={SCHEMA_VERSION}",
            ):
                db.execute(statement)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:  # not when BEGIN itself failed: its cause is the error to see
            db.execute("ROLLBACK")
        raise


class SearchIndex:
    def __init__(self, path: Path | None, terms: Terms | None = None, wait: float = 30) -> None:
        self.path = path  # None: in memory
        self.terms = terms  # a sealed store's index (see Terms)
        self.wait = wait  # seconds to wait for another process's write (a turn's own update: none)

    def _with_db(self, work: Callable):
        """`work(connection)`. An index file SQLite cannot read (after a crash, say: it is not
        fsync'd) is deleted and rebuilt, once; any other SQLite failure is one line."""
        import sqlite3  # only searches pay for it

        for attempt in (1, 2):
            try:
                with self._connect() as db:
                    return work(db)
            except sqlite3.DatabaseError as exc:
                damaged = "not a database" in str(exc) or "malformed" in str(exc)
                if self.path is None or not damaged or attempt == 2:
                    raise SearchError(f"search index {self.path or '(memory)'}: {exc}") from None
                discard_index(self.path)
        return None

    @contextlib.contextmanager
    def _connect(self) -> Iterator:
        import sqlite3

        if self.path is None:  # a throw-away index in memory (a history with no journal)
            db = sqlite3.connect(":memory:", isolation_level=None)
        else:
            ensure_private_dir(self.path.parent)
            fresh = not self.path.exists()
            db = sqlite3.connect(self.path, timeout=self.wait, isolation_level=None)
            if fresh:
                os.chmod(self.path, 0o600)
        try:
            _wal(db)
            db.execute("PRAGMA synchronous=OFF")  # a cache: rebuilt when lost
            if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                _create_schema(db)
            yield db
        finally:
            db.close()

    # -- what goes in, what a query is --------------------------------------------------------
    def _rows(self, source: str, rows: Iterable[tuple[int, str, str]]) -> Iterator[tuple]:
        """(body, source, pos, role, sealed) of each (pos, role, text)."""
        terms = self.terms
        if terms is None:
            for pos, role, text in rows:
                yield text, source, pos, role, None
        else:
            for pos, role, text in rows:
                yield terms.body(text), source, pos, role, terms.seal(text, source, pos)

    def _match(self, query: str, every: bool = False) -> str:
        return fts_query(query, every) if self.terms is None else self.terms.query(query, every)

    def _snippets(self, db, table: str, rowids: list[int], match: str, query: str) -> list[tuple]:
        """(rowid, source, pos, role, snippet) of the given rows."""
        if not rowids:
            return []
        marks = ",".join("?" * len(rowids))
        if self.terms is None:
            return db.execute(f"SELECT rowid, source, pos, role, snippet({table}, 0, '', '', '…', ?) FROM {table}"
                              f" WHERE {table} MATCH ? AND rowid IN ({marks})",
                              (SNIPPET_TOKENS, match, *rowids)).fetchall()
        rows = db.execute(f"SELECT rowid, source, pos, role, sealed FROM {table} WHERE rowid IN ({marks})",
                          rowids).fetchall()
        return [(rowid, source, pos, role, snippet(self.terms.open(sealed, source, pos), query))
                for rowid, source, pos, role, sealed in rows]

    _INSERT = "INSERT INTO {}(body, source, pos, role, sealed) VALUES (?,?,?,?,?)"

    # -- one journal ---------------------------------------------------------------------
    def search_journal(self, source: str, stamp: str, read: Callable[[int], tuple[list[tuple[str, str]], int]],
                       query: str, limit: int = 10) -> list[Hit]:
        """Best `limit` messages of journal `source` for `query`. `read(offset)` returns the
        (role, text) of each message recorded from that byte offset on, and the new offset;
        `stamp` changes when the file is replaced (its inode), which re-indexes it."""
        match = self._match(query)

        def work(db):
            self._update_journal(db, source, stamp, read)
            best = db.execute("SELECT rowid, bm25(journal_entries) AS s FROM journal_entries"
                              " WHERE journal_entries MATCH ? AND source = ? ORDER BY s LIMIT ?",
                              (match, source, limit)).fetchall()
            scores = dict(best)
            rows = self._snippets(db, "journal_entries", list(scores), match, query)
            return sorted((Hit(source_, pos, role, text, scores[rowid]) for rowid, source_, pos, role, text in rows),
                          key=lambda hit: hit.score)

        return self._with_db(work)

    def update_journal(self, source: str, stamp: str, read: Callable[[int], tuple[list[tuple[str, str]], int]]) -> None:
        """Index what journal `source` recorded since it was last indexed (ahead of a search)."""
        self._with_db(lambda db: self._update_journal(db, source, stamp, read))

    def append_journal(self, source: str, stamp: str, recorded: int, end: int, messages: list[tuple[str, str]]) -> bool:
        """A sync just wrote `messages` (role, text) to journal `source`, after its first
        `recorded` messages, ending at byte `end`: index them, if the index holds exactly those
        `recorded` (lines between that are not messages do not matter). Otherwise nothing (the
        next search or warm-up reads what is missing). True when indexed."""
        def work(db):
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute("SELECT stamp, offset, count FROM sources WHERE kind='j' AND source=?",
                                 (source,)).fetchone()
                if (row is None and recorded == 0) or (row is not None and row[0] == stamp and row[2] == recorded
                                                        and row[1] <= end):
                    count = recorded
                else:
                    db.execute("ROLLBACK")
                    return False
                self._add_journal_rows(db, source, stamp, count, end, messages)
                db.execute("COMMIT")
                return True
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

        return self._with_db(work)

    def forget_journals(self, sources: list[str]) -> None:
        def work(db):
            db.execute("BEGIN IMMEDIATE")
            db.executemany("DELETE FROM journal_entries WHERE source=?", ((s,) for s in sources))
            db.executemany("DELETE FROM sources WHERE kind='j' AND source=?", ((s,) for s in sources))
            db.execute("COMMIT")

        self._with_db(work)

    def _add_journal_rows(self, db, source: str, stamp: str, count: int, end: int,
                          messages: list[tuple[str, str]]) -> None:
        """Index `messages` (role, text) of journal `source` after its first `count`, now indexed
        up to byte `end` (inside the caller's transaction)."""
        db.executemany(self._INSERT.format("journal_entries"), self._rows(
            source, ((count + i, role, text) for i, (role, text) in enumerate(messages, 1))))
        db.execute("INSERT OR REPLACE INTO sources VALUES ('j', ?, ?, ?, ?, 0)",
                   (source, stamp, end, count + len(messages)))

    def _update_journal(self, db, source: str, stamp: str, read) -> None:
        db.execute("BEGIN IMMEDIATE")
        try:
            row = db.execute("SELECT stamp, offset, count FROM sources WHERE kind='j' AND source=?",
                             (source,)).fetchone()
            offset, count = (row[1], row[2]) if row and row[0] == stamp else (0, 0)
            got = read(offset)
            if got is None:  # shorter than what was indexed: truncated, so not the same file
                offset, count = 0, 0
                got = read(0)
            if row and (row[0] != stamp or offset == 0):
                db.execute("DELETE FROM journal_entries WHERE source=?", (source,))
            messages, end = got
            self._add_journal_rows(db, source, stamp, count, end, messages)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    # -- every saved session -------------------------------------------------------------
    def update_sessions(self, current: dict[str, str], read: Callable) -> None:
        """Bring the session index up to date (see `search_sessions`); the REPL does it in the
        background at start, so that a first search finds it done."""
        self._with_db(lambda db: self._update_sessions(db, current, read))

    def _update_sessions(self, db, current: dict[str, str], read: Callable) -> None:
        """`current` is {name: stamp} of the sessions that exist now; `read(name, since)` gives
        (rows, inode, size, count, whole) for a session new or changed since indexed: rows are
        (position, role, text) of its messages (not its system prompts), all of them (`whole`)
        or, when `since` = (inode, size, count) of what was indexed still holds, only those
        appended since."""
        db.execute("BEGIN IMMEDIATE")
        try:
            indexed = {name: (stamp, offset, count, inode) for name, stamp, offset, count, inode in db.execute(
                "SELECT source, stamp, offset, count, inode FROM sources WHERE kind='s'").fetchall()}
            for name in indexed.keys() - current.keys():
                db.execute("DELETE FROM session_entries WHERE source=?", (name,))
                db.execute("DELETE FROM sources WHERE kind='s' AND source=?", (name,))
            for name, stamp in current.items():
                known = indexed.get(name)
                if known is not None and known[0] == stamp:
                    continue
                rows, inode, size, count, whole = read(name, None if known is None else (known[3], known[1], known[2]))
                if whole and known is not None:
                    db.execute("DELETE FROM session_entries WHERE source=?", (name,))
                db.executemany(self._INSERT.format("session_entries"), self._rows(name, rows))
                db.execute("INSERT OR REPLACE INTO sources VALUES ('s', ?, ?, ?, ?, ?)", (name, stamp, size, count, inode))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def search_sessions(self, current: dict[str, str], read: Callable, query: str, sessions: int = 10,
                        per_session: int = 3) -> list[Hit]:
        """The best `per_session` messages of the best `sessions` matching sessions, best first
        (see `_update_sessions` for `current` and `read`)."""
        every, any_word = self._match(query, every=True), self._match(query)

        def work(db):
            self._update_sessions(db, current, read)
            # The best `per_session` messages of every matching session (not the best N overall,
            # which one long session could fill); snippets only for the sessions shown. Messages
            # with every word first; then, if sessions are still missing, those with any.
            chosen: dict[str, list[int]] = {}
            scores: dict[int, float] = {}
            for match in ((every, any_word) if every != any_word else (any_word,)):
                for rowid, source, score in db.execute(
                        "SELECT rowid, source, bm25(session_entries) AS s FROM session_entries"
                        " WHERE session_entries MATCH ? ORDER BY s LIMIT ?", (match, RANKED_ROWS)):
                    picked = chosen.get(source)
                    if picked is None:
                        if len(chosen) >= sessions:
                            continue
                        picked = chosen[source] = []
                    if len(picked) < per_session and rowid not in scores:
                        picked.append(rowid)
                        scores[rowid] = score
                if len(chosen) >= sessions:
                    break
            return self._snippets(db, "session_entries", list(scores), any_word, query), scores

        rows, scores = self._with_db(work)
        hits = [Hit(source, pos, role, text, scores[rowid]) for rowid, source, pos, role, text in rows]
        return sorted(hits, key=lambda hit: hit.score)


__all__ = ["Hit", "SearchIndex", "Terms", "fts_query", "snippet"]
