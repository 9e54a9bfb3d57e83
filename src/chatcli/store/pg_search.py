"""Full-text search on the PostgreSQL server (CHATCLI_STORE=postgresql://…): the session and
transcript search of a store whose sessions and journals live there, kept beside them, shared by
every machine using the store: one machine indexes a turn, every other finds it.

The same interface as store.search.SearchIndex (the engine does not know which it has), the
same rules: a source (a journal, a session) is numbered, a message's id is that number in the
high 32 bits and its position in the low ones; journals are indexed as their syncs write them and
caught up from the offset indexed, sessions from the turns appended since; every word of the
query first, then any (`store.search.ranked`, one implementation for both indexes).

How a message is indexed: a `tsvector` column with a GIN index. Its lexemes are made here, not
by a PostgreSQL text search configuration, so that a word is what the SQLite index calls a word
(unicode61 with remove_diacritics 2: runs of letters and digits, "_" between words, case and
Latin accents folded: `fold61`), whatever the server's locale or extensions (folding
accents there needs `unaccent`, which an ordinary user cannot install): the same query finds the
same messages on both stores, which a test compares. Each lexeme keeps its positions (a word
written with "_", "foo_bar", is the phrase foo <-> bar, as FTS5 reads it; and how often a word
occurs counts in its rank). Ranking: `ts_rank` with the length normalisation, each query word
weighted by its BM25 inverse document frequency (a rare word outranks a common one, as BM25
ranks in the SQLite index); lower scores first, as bm25() gives them.

With a key (CHATCLI_ENCRYPTION_KEY) the server never sees a word: the lexemes are the keyed
hashes of the sealed SQLite index (store.search.Terms, `\\w+` words) and each message's role and
text are sealed (AES-GCM, bound to their source and position), opened only for the snippets of
the hits shown.

What PostgreSQL cannot hold is said here, not met at run time: a lexeme is at most 2,047 bytes
(longer words are not indexed), positions stop at 16,383 and at 256 per word (a message longer
than that still matches each of its words; only phrase matches past that point are lost) and a
tsvector is at most 1 MB (a message whose words would exceed it is indexed by its distinct
words alone, without positions). Text is stored as UTF-8 without NUL (a NUL or a lone surrogate,
from another program's file, is stored as U+FFFD).

The index is a cache, rebuilt when its kind changes (plaintext, or sealed under another key:
`identity`); the tables live in the store's schema (store.pg)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from typing import NamedTuple

from chatcli.store.pg import SEARCH_LOCKS, Database
from chatcli.store.search import (_AROUND, POSITION_BITS, UNOPENED, Hit, SearchError, Terms, _words,
                                  ranked, snippet)
from chatcli.store.session_file import SessionError, StoreUnavailable

LEXEME_BYTES = 2046  # PostgreSQL's limit on one word ("word is too long" past it)
LAST_POSITION = 16383
POSITIONS_PER_LEXEME = 256
VECTOR_BUDGET = 900_000  # bytes of a tsvector's text kept under its 1 MB limit
BATCH_ROWS = 20_000  # messages indexed in one transaction (a long first build commits as it goes)
_TABLES = {"s": "chatcli_search_session_entries", "j": "chatcli_search_journal_entries"}


class Match(NamedTuple):
    """A query as the server reads it: the whole tsquery, and each of its words' (for weights)."""

    query: str
    words: tuple[str, ...]


def _quoted(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def _storable(text: str) -> str:
    """Text PostgreSQL takes: UTF-8 with no NUL (see the module's docstring)."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-8", "replace").decode("utf-8")
    return text


# The combining marks unicode61 takes as part of a word and removes (remove_diacritics 2); any
# other mark ends a word, as anything else that is not a letter or a digit does.
_MARKS = "\u0300-\u0304\u0306-\u030c\u030f\u0311\u031b\u0323-\u0328\u032d\u032e\u0330\u0331"
# A word as unicode61 finds it: a run of letters, digits (`\\w` but "_") and the marks above.
# (Compiled at import: this module is imported only with a server store, never at start-up.)
_LETTERS = re.compile(f"(?:[^\\W_]|[{_MARKS}])+")


def fold61(word: str) -> str:
    """A word as the SQLite index folds it (unicode61, remove_diacritics 2): each character
    lower-cased by itself ("ß" stays, "ﬁ" stays: no compatibility decomposition), a Latin letter
    with diacritics made its ASCII letter, the diacritic marks dropped. Characters newer than
    SQLite's Unicode tables may fold otherwise (store.search's `fold`, which the sealed indexes
    share, also folds ligatures and "ß")."""
    if word.isascii():
        return word.lower()
    import unicodedata

    folded = []
    for char in word:
        if "\u0300" <= char <= "\u0331" and _LETTERS.fullmatch(char):
            continue  # a diacritic unicode61 removes (its base is the letter before)
        lower = char.casefold()
        if len(lower) != 1:  # "ß", "İ", ligatures: unicode61 maps a character to one
            lower = char.lower()
        if not lower.isascii():
            parts = unicodedata.normalize("NFD", lower)
            if len(parts) > 1 and parts[0].isascii() and _LETTERS.fullmatch(parts) \
                    and all("\u0300" <= mark <= "\u0331" for mark in parts[1:]):
                lower = parts[0]
        folded.append(lower)
    return "".join(folded)


class _PlainPieces(dict):
    """{piece of text between whitespace: its folded words}, filled as pieces are met (bounded)."""

    def __missing__(self, piece: str) -> tuple[str, ...]:
        if len(self) > 200_000:
            self.clear()
        core = piece.strip(_AROUND)
        if core.isalnum():  # one word (isalnum: letters and digits, not "_")
            words = (fold61(core),)
        else:
            words = tuple(filter(None, map(fold61, _LETTERS.findall(piece))))
        self[piece] = words
        return words


def vector(words: Iterable[str]) -> str:
    """The tsvector (its text form) of a message's words, in order, each with its positions."""
    positions: dict[str, list[int]] = {}
    at = 0
    for at, word in enumerate(words, 1):
        held = positions.get(word)
        if held is None:
            positions[word] = [at]
        else:
            held.append(at)
    if at > LAST_POSITION or any(len(held) > POSITIONS_PER_LEXEME for held in positions.values()):
        for word, held in positions.items():
            positions[word] = sorted({min(p, LAST_POSITION) for p in held})[:POSITIONS_PER_LEXEME]
    fits = [word for word in positions if word.isascii() or _encodes(word)]
    if any(len(word) > LEXEME_BYTES // 4 for word in fits):
        fits = [word for word in fits if len(word.encode("utf-8")) <= LEXEME_BYTES]
    text = " ".join(f"{_quoted(word)}:{','.join(map(str, positions[word]))}" for word in fits)
    if len(text) * 4 <= VECTOR_BUDGET or len(text.encode("utf-8")) <= VECTOR_BUDGET:
        return text
    # Too big with positions (the literal's bytes bound what PostgreSQL keeps of lexemes and
    # positions, the part its limit is on): the distinct words alone, as many as fit.
    kept, size = [], 0
    for word in fits:
        size += len(word.encode("utf-8")) + 1
        if size > VECTOR_BUDGET:
            break
        kept.append(_quoted(word))
    return " ".join(kept)


def _encodes(word: str) -> bool:
    try:
        word.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _Words:
    """How messages and queries become lexemes: folded words in plaintext, keyed hashes sealed."""

    def __init__(self, terms: Terms | None) -> None:
        self.terms = terms
        self._pieces = _PlainPieces()

    def of(self, text: str) -> Iterable[str]:
        if self.terms is not None:
            return self.terms.body(text).split()
        pieces = self._pieces
        return [word for piece in text.split() for word in pieces[piece]]

    def match(self, text: str, every: bool) -> Match | None:
        """The query's words, each a lexeme or (a word with "_" in plaintext) a phrase; None
        when none of them can be a lexeme."""
        found = []
        for word in _words(text):
            if self.terms is not None:
                found.append(_quoted(self.terms.term(word)))
                continue
            parts = [_quoted(part) for part in map(fold61, _LETTERS.findall(word))
                     if part and _encodes(part) and len(part.encode("utf-8")) <= LEXEME_BYTES]
            if parts:
                found.append(parts[0] if len(parts) == 1 else "(" + " <-> ".join(parts) + ")")
        found = list(dict.fromkeys(found))
        if not found:
            return None
        return Match((" & " if every else " | ").join(found), tuple(found))


def identity(terms: Terms | None) -> str:
    """What the server's index was made as: plaintext, or sealed under one key (a hash of a fixed
    word under it: it says nothing of the key, and changes with it)."""
    return "plain 1" if terms is None else f"sealed 1 {terms.term('chatcli')}"


class PgSearchIndex:
    """store.search.SearchIndex's interface, on the server (see the module's docstring)."""

    _checked: set[tuple[str, str]] = set()  # (address, identity) found current by this process

    def __init__(self, dsn: str, terms: Terms | None = None, wait: float = 30) -> None:
        self.db = Database.of(dsn)
        self.terms = terms
        self.wait = wait
        self._words = _Words(terms)

    # -- the connection, the lock, the index's kind --------------------------------------
    def _run(self, work: Callable):
        """`work(conn)`, the index made current first; the server's refusals as SearchError
        (the caller searches without the index), its absence as StoreUnavailable."""
        try:
            with self.db.connection("cannot be searched") as conn:
                self._current(conn)
                return work(conn)
        except StoreUnavailable:
            raise
        except SessionError as exc:
            raise SearchError(f"search index on {exc}") from None

    def _current(self, conn) -> None:
        made = identity(self.terms)
        if (self.db.dsn, made) in self._checked:
            return
        with conn.transaction():
            if not self._lock(conn, "made", wait=max(self.wait, 0.001)):  # never waited for without end
                raise SearchError("the search index on the server is being made by another process")
            row = conn.execute("SELECT value FROM chatcli_meta WHERE key = 'search'").fetchone()
            if row is None or row[0] != made:
                conn.execute("TRUNCATE chatcli_search_sources, chatcli_search_session_entries,"
                             " chatcli_search_journal_entries")
                conn.execute("INSERT INTO chatcli_meta VALUES ('search', %s) ON CONFLICT (key)"
                             " DO UPDATE SET value = EXCLUDED.value", (made,))
        self._checked.add((self.db.dsn, made))

    def _lock(self, conn, what: str, wait: float | None = None) -> bool:
        """The index's lock for `what` (the sessions, or one journal), for this transaction (every
        write of the index starts with it), waited for `wait` seconds (the index's own by
        default; 0: not waited for). False when another process holds it that long."""
        import psycopg

        # A cache's write need not wait for the server's disk: a crash that loses its last
        # commits leaves the index where it was before them, and the next search catches up.
        conn.execute("SET LOCAL synchronous_commit = off")
        wait = self.wait if wait is None else wait
        if wait <= 0:
            return conn.execute("SELECT pg_try_advisory_xact_lock(%s, hashtext(current_schema() || '/' || %s))",
                                (SEARCH_LOCKS, what)).fetchone()[0]
        conn.execute(f"SET LOCAL lock_timeout = {max(1, int(wait * 1000))}")
        try:
            with conn.transaction():  # a savepoint: a timeout leaves the transaction usable
                conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(current_schema() || '/' || %s))",
                             (SEARCH_LOCKS, what))
        except psycopg.errors.LockNotAvailable:
            return False
        finally:
            conn.execute("SET LOCAL lock_timeout = 0")
        return True

    @staticmethod
    def _indexed(conn, kind: str, names: list[str] | None = None) -> dict[str, tuple]:
        """{source: (stamp, offset, count, inode, number, numbered)} of the sources of a kind."""
        sql = "SELECT source, stamp, at, count, inode, number, numbered FROM chatcli_search_sources WHERE kind = %s"
        if names is None:
            return {name: tuple(row) for name, *row in conn.execute(sql, (kind,))}
        return {name: tuple(row) for name, *row in conn.execute(sql + " AND source = ANY(%s)", (kind, names))}

    @staticmethod
    def _record(conn, kind: str, source: str, stamp: str, offset: int, count: int, inode: int, number: int,
                numbered: str | None = None) -> None:
        conn.execute("INSERT INTO chatcli_search_sources VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
                     " ON CONFLICT (kind, source) DO UPDATE SET stamp = EXCLUDED.stamp, at = EXCLUDED.at,"
                     " count = EXCLUDED.count, inode = EXCLUDED.inode, number = EXCLUDED.number,"
                     " numbered = EXCLUDED.numbered",
                     (kind, source, stamp, offset, count, inode, number, numbered))

    @staticmethod
    def _number(conn) -> int:
        return conn.execute("SELECT nextval('chatcli_search_numbers')").fetchone()[0]

    # -- what goes in ----------------------------------------------------------------------
    def _insert(self, conn, kind: str, source: str, number: int, rows: Iterable[tuple[int, str, str]]) -> int:
        """Index (pos, role, text) rows of source `number`; how many."""
        table, base, words, terms = _TABLES[kind], number << POSITION_BITS, self._words.of, self.terms
        count = 0
        with conn.cursor() as cursor, \
                cursor.copy(f"COPY {table} (id, role, body, sealed, terms) FROM STDIN") as copy:
            for pos, role, text in rows:
                if terms is None:
                    copy.write_row((base | pos, _storable(role), _storable(text), None, vector(words(text))))
                else:
                    copy.write_row((base | pos, None, None, terms.seal([(pos, role, text)], source),
                                    vector(words(text))))
                count += 1
        return count

    @staticmethod
    def _drop(conn, kind: str, number: int) -> None:
        conn.execute(f"DELETE FROM {_TABLES[kind]} WHERE id BETWEEN %s AND %s",
                     (number << POSITION_BITS, ((number + 1) << POSITION_BITS) - 1))

    def _forget(self, conn, kind: str, source: str, number: int) -> None:
        self._drop(conn, kind, number)
        conn.execute("DELETE FROM chatcli_search_sources WHERE kind = %s AND source = %s", (kind, source))

    # -- what comes out ----------------------------------------------------------------------
    def _match(self, query: str, every: bool = False) -> Match | None:
        return self._words.match(query, every)

    def _weights(self, conn, kind: str, match: Match, span: tuple[int, int] | None) -> list[float]:
        """Each query word's BM25 inverse document frequency (as FTS5 computes it), over the
        sources of `kind`, or one source's `span` of ids; one word needs none."""
        if len(match.words) == 1:
            return [1.0]
        table = _TABLES[kind]
        counts = ", ".join(f"count(*) FILTER (WHERE terms @@ %s::tsquery)" for _ in match.words)
        where, args = f"terms @@ %s::tsquery", [match.query.replace(" & ", " | ")]
        if span is not None:
            where, args = where + " AND id BETWEEN %s AND %s", args + list(span)
        found = conn.execute(f"SELECT {counts} FROM {table} WHERE {where}", (*match.words, *args)).fetchone()
        if span is None:
            total = conn.execute("SELECT coalesce(sum(count), 0) FROM chatcli_search_sources WHERE kind = %s",
                                 (kind,)).fetchone()[0]
        else:
            total = conn.execute(f"SELECT count(*) FROM {table} WHERE id BETWEEN %s AND %s", span).fetchone()[0]
        total = max(int(total), max(found), 1)
        return [max(1e-6, math.log((total - df + 0.5) / (df + 0.5))) for df in found]

    def _score(self, conn, kind: str, match: Match, span: tuple[int, int] | None) -> tuple[str, list]:
        """The SQL of a row's score (lower ranks first) and its arguments."""
        weights = self._weights(conn, kind, match, span)
        return ("-(" + " + ".join(f"{weight!r} * ts_rank(terms, %s::tsquery, 1)" for weight in weights) + ")",
                list(match.words))

    def _snippets(self, conn, kind: str, ids: list[int], query: str) -> list[tuple]:
        """(id, source, pos, role, snippet) of the given rows."""
        if not ids:
            return []
        numbers = sorted({rowid >> POSITION_BITS for rowid in ids})
        names = dict(conn.execute("SELECT number, source FROM chatcli_search_sources WHERE kind = %s"
                                  " AND number = ANY(%s)", (kind, numbers)).fetchall())
        found = []
        for rowid, role, body, sealed in conn.execute(f"SELECT id, role, body, sealed FROM {_TABLES[kind]}"
                                                      " WHERE id = ANY(%s)", (ids,)):
            source, pos = names.get(rowid >> POSITION_BITS), rowid & ((1 << POSITION_BITS) - 1)
            if source is None:
                continue
            if sealed is not None:
                role, body = self.terms.open(bytes(sealed), source, pos).get(pos, ("", None))
            found.append((rowid, source, pos, role, UNOPENED if body is None else snippet(body, query)))
        return found

    def _best_of_sessions(self, conn, match: Match | None, sessions: int, per: int) -> dict[int, list]:
        """{session number: [(id, score) of its best `per` messages]} of the best `sessions`."""
        if match is None:
            return {}
        score, args = self._score(conn, "s", match, None)
        chosen: dict[int, list] = {}
        for rowid, value in conn.execute(f"""
                WITH hits AS MATERIALIZED (
                    SELECT id, {score} AS score FROM chatcli_search_session_entries WHERE terms @@ %s::tsquery),
                best AS (SELECT id >> {POSITION_BITS} AS number FROM hits GROUP BY 1 ORDER BY min(score), 1 LIMIT %s),
                picked AS (SELECT id, score, row_number() OVER (PARTITION BY id >> {POSITION_BITS} ORDER BY score, id) AS n
                           FROM hits WHERE id >> {POSITION_BITS} IN (SELECT number FROM best))
                SELECT id, score FROM picked WHERE n <= %s ORDER BY score, id""",
                (*args, match.query, sessions, per)):
            chosen.setdefault(rowid >> POSITION_BITS, []).append((rowid, value))
        return chosen

    # -- one journal -------------------------------------------------------------------------
    def search_journal(self, source: str, stamp: str, read: Callable, query: str, limit: int = 10) -> list[Hit]:
        match = self._match(query)

        def work(conn):
            self._update_journal(conn, source, stamp, read)
            row = self._indexed(conn, "j", [source]).get(source)
            if row is None or match is None:
                return []
            span = (row[4] << POSITION_BITS, ((row[4] + 1) << POSITION_BITS) - 1)
            score, args = self._score(conn, "j", match, span)
            best = conn.execute(f"SELECT id, {score} AS score FROM chatcli_search_journal_entries"
                                " WHERE terms @@ %s::tsquery AND id BETWEEN %s AND %s ORDER BY score, id LIMIT %s",
                                (*args, match.query, *span, limit)).fetchall()
            scores = dict(best)
            rows = self._snippets(conn, "j", list(scores), query)
            return sorted((Hit(name, pos, role, text, scores[rowid]) for rowid, name, pos, role, text in rows),
                          key=lambda hit: hit.score)

        return self._run(work)

    def update_journal(self, source: str, stamp: str, read: Callable) -> None:
        self._run(lambda conn: self._update_journal(conn, source, stamp, read))

    def _update_journal(self, conn, source: str, stamp: str, read: Callable) -> None:
        with conn.transaction():
            if not self._lock(conn, "j/" + source):
                raise SearchError(f"the search index of journal {source} is busy: another process is indexing it")
            row = self._indexed(conn, "j", [source]).get(source)
            offset, count = (row[1], row[2]) if row and row[0] == stamp else (0, 0)
            got = read(offset)
            if got is None:  # shorter than what was indexed: not the same journal
                offset, count = 0, 0
                got = read(0)
            if row is None:
                number = self._number(conn)
            else:
                number = row[4]
                if row[0] != stamp or offset == 0:
                    self._drop(conn, "j", number)
            messages, end = got
            self._add_journal_rows(conn, source, number, stamp, count, end, messages)

    def _add_journal_rows(self, conn, source: str, number: int, stamp: str, count: int, end: int,
                          messages: list[tuple[str, str]]) -> None:
        self._insert(conn, "j", source, number, ((count + i, role, text) for i, (role, text) in enumerate(messages, 1)))
        self._record(conn, "j", source, stamp, end, count + len(messages), 0, number)

    def append_journal(self, source: str, stamp: str, recorded: int, end: int, messages: list[tuple[str, str]]) -> bool:
        """As SearchIndex.append_journal: indexed now when the index holds exactly the journal's
        first `recorded` messages, else left to the next search."""
        def work(conn):
            with conn.transaction():
                if not self._lock(conn, "j/" + source, self.wait):
                    return False
                row = self._indexed(conn, "j", [source]).get(source)
                if row is None and recorded == 0:
                    number = self._number(conn)
                elif row is not None and row[0] == stamp and row[2] == recorded and row[1] <= end:
                    number = row[4]
                else:
                    return False
                self._add_journal_rows(conn, source, number, stamp, recorded, end, messages)
                return True

        return self._run(work)

    def forget_journals(self, sources: list[str]) -> None:
        def work(conn):
            with conn.transaction():
                for source in sorted(sources):  # under each journal's lock: an update of it finishes first
                    self._lock(conn, "j/" + source, wait=max(self.wait, 30))
                for source, row in self._indexed(conn, "j", list(sources)).items():
                    self._forget(conn, "j", source, row[4])

        if sources:
            self._run(work)

    # -- every saved session ---------------------------------------------------------------
    def update_sessions(self, current: dict[str, str], read: Callable) -> None:
        self._run(lambda conn: self._update_sessions(conn, current, read))

    def _update_sessions(self, conn, current: dict[str, str], read: Callable) -> None:
        """As SearchIndex._update_sessions, in transactions of about BATCH_ROWS messages, each
        under the sessions' lock, each whole (what a session's rows are and what its source row
        says of them change together): a first build stopped half-way keeps what it committed."""
        indexed = self._indexed(conn, "s")
        if {name: row[0] for name, row in indexed.items()} == current:
            return
        gone = [name for name in indexed if name not in current]
        pending = [name for name, stamp in current.items() if name not in indexed or indexed[name][0] != stamp]
        while gone or pending:
            with conn.transaction():
                if not self._lock(conn, "s"):
                    raise SearchError("the session search index is busy: another process is indexing it")
                for name, row in self._indexed(conn, "s", gone).items():
                    self._forget(conn, "s", name, row[4])
                gone = []
                batch, rows = [], 0
                while pending and rows < BATCH_ROWS:
                    batch.append(pending.pop())
                    known = self._indexed(conn, "s", batch[-1:]).get(batch[-1])
                    rows += self._index_session(conn, batch[-1], current[batch[-1]], known, read)

    def _index_session(self, conn, name: str, stamp: str, known: tuple | None, read: Callable) -> int:
        """Index session `name` (what was indexed of it: `known`) up to `stamp`; messages read."""
        if known is not None and known[0] == stamp:
            return 0  # another process did it meanwhile
        since = None if known is None else (known[3], known[1], known[2], known[5])
        rows, inode, size, count, whole, numbered = read(name, since)
        number = self._number(conn) if known is None else known[4]
        if known is not None and whole:
            self._drop(conn, "s", number)
        self._record(conn, "s", name, stamp, size, count, inode, number, numbered)
        return self._insert(conn, "s", name, number, rows) + 1

    def search_sessions(self, current: dict[str, str], read: Callable, query: str, sessions: int = 10,
                        per_session: int = 3) -> list[Hit]:
        def work(conn):
            self._update_sessions(conn, current, read)
            return ranked(self._match(query, every=True), self._match(query),
                          lambda match, count, per: self._best_of_sessions(conn, match, count, per),
                          lambda ids, _match: self._snippets(conn, "s", ids, query),
                          sessions, per_session)

        return self._run(work)

    def note_numbered(self, numbered: dict[str, tuple[str, str | None]]) -> None:
        def work(conn):
            known = self._indexed(conn, "s", list(numbered))
            changed = [(value, name, stamp) for name, (stamp, value) in numbered.items()
                       if name in known and known[name][0] == stamp and known[name][5] != value]
            if changed:
                with conn.cursor() as cursor:
                    cursor.executemany("UPDATE chatcli_search_sources SET numbered = %s"
                                       " WHERE kind = 's' AND source = %s AND stamp = %s", changed)

        if numbered:
            self._run(work)


__all__ = ["Match", "PgSearchIndex", "identity", "vector"]
