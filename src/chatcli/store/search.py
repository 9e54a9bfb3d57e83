"""Full-text search over journals and saved sessions: SQLite FTS5 with BM25 (standard library).

The index, `$CHATCLI_HOME/index/search.sqlite`, is a cache: it is brought up to date at each
search from what changed (a journal's new lines since the offset indexed; sessions whose mtime
or size changed) and rebuilt from scratch when deleted. Text is case- and accent-folded by the
`unicode61 remove_diacritics 2` tokenizer, so "cafe" finds "Café".
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

SCHEMA_VERSION = 1
_WORD = re.compile(r"\w+", re.UNICODE)
SNIPPET_TOKENS = 12

Hit = namedtuple("Hit", "source pos role snippet score")


class SearchError(ChatcliError):
    pass


def fts_query(text: str) -> str:
    """The user's words as an FTS5 query: any of them (BM25 ranks messages with more, rarer ones
    first). Quoted, so nothing the user types is FTS syntax."""
    words = _WORD.findall(text)
    if not words:
        raise UsageError("nothing to search for: give one or more words")
    return " OR ".join(f'"{word}"' for word in words)


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
                " pos UNINDEXED, role UNINDEXED, tokenize='unicode61 remove_diacritics 2')",
                "CREATE VIRTUAL TABLE IF NOT EXISTS session_entries USING fts5(body, source UNINDEXED,"
                " pos UNINDEXED, role UNINDEXED, tokenize='unicode61 remove_diacritics 2')",
                "CREATE TABLE IF NOT EXISTS sources(kind TEXT, source TEXT, stamp TEXT, offset INTEGER,"
                " count INTEGER, PRIMARY KEY(kind, source))",
                f"PRAGMA user_version={SCHEMA_VERSION}",
            ):
                db.execute(statement)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:  # not when BEGIN itself failed: its cause is the error to see
            db.execute("ROLLBACK")
        raise


class SearchIndex:
    def __init__(self, path: Path | None) -> None:
        self.path = path  # None: in memory

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
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
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

    # -- one journal ---------------------------------------------------------------------
    def search_journal(self, source: str, stamp: str, read: Callable[[int], tuple[list[tuple[str, str]], int]],
                       query: str, limit: int = 10) -> list[Hit]:
        """Best `limit` messages of journal `source` for `query`. `read(offset)` returns the
        (role, text) of each message recorded from that byte offset on, and the new offset;
        `stamp` changes when the file is replaced (its inode), which re-indexes it."""
        match = fts_query(query)

        def work(db):
            self._update_journal(db, source, stamp, read)
            return db.execute(
                "SELECT source, pos, role, snippet(journal_entries, 0, '', '', '…', ?), bm25(journal_entries) AS s"
                " FROM journal_entries WHERE journal_entries MATCH ? AND source = ? ORDER BY s LIMIT ?",
                (SNIPPET_TOKENS, match, source, limit)).fetchall()

        return [Hit._make(row) for row in self._with_db(work)]

    def update_journal(self, source: str, stamp: str, read: Callable[[int], tuple[list[tuple[str, str]], int]]) -> None:
        """Index what journal `source` recorded since it was last indexed (ahead of a search)."""
        self._with_db(lambda db: self._update_journal(db, source, stamp, read))

    def forget_journals(self, sources: list[str]) -> None:
        def work(db):
            db.execute("BEGIN IMMEDIATE")
            db.executemany("DELETE FROM journal_entries WHERE source=?", ((s,) for s in sources))
            db.executemany("DELETE FROM sources WHERE kind='j' AND source=?", ((s,) for s in sources))
            db.execute("COMMIT")

        self._with_db(work)

    @staticmethod
    def _update_journal(db, source: str, stamp: str, read) -> None:
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
            db.executemany("INSERT INTO journal_entries(body, source, pos, role) VALUES (?,?,?,?)",
                           ((text, source, count + i, role) for i, (role, text) in enumerate(messages, 1)))
            db.execute("INSERT OR REPLACE INTO sources VALUES ('j', ?, ?, ?, ?)",
                       (source, stamp, end, count + len(messages)))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    # -- every saved session -------------------------------------------------------------
    def search_sessions(self, current: dict[str, str], read: Callable[[str], Iterable[tuple[int, str, str]]],
                        query: str, sessions: int = 10, per_session: int = 3) -> list[Hit]:
        """The best `per_session` messages of the best `sessions` matching sessions, best first.
        `current` is {name: stamp} of the sessions that exist now; `read(name)` yields (position, role, text) of a session's messages (not
        its system prompts) and is called only for sessions new or changed since indexed."""
        match = fts_query(query)

        def work(db):
            db.execute("BEGIN IMMEDIATE")
            try:
                indexed = dict(db.execute("SELECT source, stamp FROM sources WHERE kind='s'").fetchall())
                for name in indexed.keys() - current.keys():
                    db.execute("DELETE FROM session_entries WHERE source=?", (name,))
                    db.execute("DELETE FROM sources WHERE kind='s' AND source=?", (name,))
                for name, stamp in current.items():
                    if indexed.get(name) == stamp:
                        continue
                    if name in indexed:
                        db.execute("DELETE FROM session_entries WHERE source=?", (name,))
                    db.executemany("INSERT INTO session_entries(body, source, pos, role) VALUES (?,?,?,?)",
                                   ((text, name, pos, role) for pos, role, text in read(name)))
                    db.execute("INSERT OR REPLACE INTO sources VALUES ('s', ?, ?, 0, 0)", (name, stamp))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            # The best `per_session` messages of every matching session (not the best N overall,
            # which one long session could fill); snippets only for the sessions shown.
            # (bm25() cannot be used inside a window: rank the matches first, materialised.)
            best = db.execute(
                "WITH m AS MATERIALIZED (SELECT rowid AS id, source, bm25(session_entries) AS s"
                " FROM session_entries WHERE session_entries MATCH ?)"
                " SELECT id, source, s FROM (SELECT id, source, s, ROW_NUMBER() OVER (PARTITION BY source ORDER BY s)"
                " AS r FROM m) WHERE r <= ? ORDER BY s",
                (match, per_session)).fetchall()
            chosen: dict[str, None] = {}
            scores = {}
            for rowid, source, score in best:
                if source not in chosen and len(chosen) >= sessions:
                    continue
                chosen.setdefault(source)
                scores[rowid] = score
            rows = db.execute(
                "SELECT rowid, source, pos, role, snippet(session_entries, 0, '', '', '…', ?) FROM session_entries"
                f" WHERE session_entries MATCH ? AND rowid IN ({','.join('?' * len(scores))})",
                (SNIPPET_TOKENS, match, *scores)).fetchall() if scores else []
            return rows, scores

        rows, scores = self._with_db(work)
        hits = [Hit(source, pos, role, snippet, scores[rowid]) for rowid, source, pos, role, snippet in rows]
        return sorted(hits, key=lambda hit: hit.score)


__all__ = ["Hit", "SearchIndex", "fts_query"]
