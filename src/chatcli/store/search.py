"""Full-text search over journals and saved sessions: SQLite FTS5 with BM25 (standard library).

The index (its file is named by store.home) is a cache: kept up to date as journals are
written (each sync adds its messages, `append_journal`), brought up to date at each search from
what it still lacks (a journal's lines since the offset indexed; sessions changed since: only
the turns appended to a file that grew in place), and rebuilt from scratch when deleted. Text
is case- and accent-folded by the `unicode61 remove_diacritics 2` tokenizer, so "cafe" finds
"Café".

Each journal or session indexed has a number (`sources.number`), and a message's row id is that
number in the high 32 bits and its position in the low ones: SQLite finds a source's rows by a
rowid range (a search of one journal, re-indexing or forgetting one source) and groups the hits
of a session search by `rowid >> 32`, without reading the rows' stored columns. BM25 ranking,
the choice of sessions and the cap of messages per session happen in SQLite (see RANKED_ROWS);
snippets are made only for the rows returned.

With encryption on (SPEC §9) the index is a file of its own and holds no plaintext: each
word is indexed as a keyed hash of its folded form (`Terms`, a key derived from the master key),
and the messages' roles and text are sealed beside them, a few dozen messages to a seal
(`sealed_texts`), opened only for the snippets of the hits shown.
BM25 ranks the hashes as it would the words. What the file reveals without the key is which
messages share words, not what the words are. Its FTS5 tables are contentless (`content=''`):
they keep the hashes' index and no copy of the hashed text, which is 2.5 times the size of the
text itself and took half the time of a first search (SQLite before 3.43 deletes a
contentless row only when told its text again: a sealed source is removed by opening its seals
and hashing its text once more, `_drop`).
"""

from __future__ import annotations

import itertools
import os
from collections import namedtuple

from chatcli.core.errors import ChatcliError, UsageError

TYPE_CHECKING = False  # `chatcli session search`'s fast path imports this module: nothing it does not need
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from pathlib import Path

SCHEMA_VERSION = 4
SEALED_SCHEMA_VERSION = 5  # a sealed index (contentless tables; roles in the seals)
SNIPPET_TOKENS = 12
POSITION_BITS = 32  # a row id: its source's number, then its position (under 2**32) in these bits
INSERT_CHUNK = 1_000  # rows made at a time before SQLite indexes them (see SearchIndex._insert)
# The words FTS5 keeps in memory before it writes them out (its default: 1 MB). A first search of
# 100,000 messages builds the plaintext index 15% faster with 8 MB (fewer, bigger segments to
# merge); a turn's few messages never fill it.
FTS_HASHSIZE = 8 << 20
SEAL_GROUP = 32  # messages sealed together in a sealed index (a snippet opens its group)
UNOPENED = "(this message's text in the index cannot be opened)"

Hit = namedtuple("Hit", "source pos role snippet score")


class SearchError(ChatcliError):
    pass


def fts_query(text: str, every: bool = False) -> str:
    """The user's words as an FTS5 query: any of them (BM25 ranks messages with more, rarer ones
    first), or with `every` all of them. Quoted, so nothing the user types is FTS syntax."""
    return _joined([f'"{word}"' for word in _words(text)], every)


def _words(text: str) -> list[str]:
    """The words of a query, as `_word_pattern` finds them in a text (a word character is one
    `str.isalnum` accepts, or "_": what `\\w` matches in a str pattern, for every code point, as
    a test checks), found without importing `re` for a few words."""
    words, word = [], []
    for char in text:
        if char.isalnum() or char == "_":
            word.append(char)
        elif word:
            words.append("".join(word))
            word.clear()
    if word:
        words.append("".join(word))
    if not words:
        raise UsageError("nothing to search for: give one or more words")
    return words


_WORD = None


def _word_pattern():
    """The words of a text (`\\w+`), for what reads many texts (a sealed index's hashing, snippets)."""
    global _WORD
    if _WORD is None:
        import re

        _WORD = re.compile(r"\w+")
    return _WORD


def _joined(terms: list[str], every: bool) -> str:
    return (" AND " if every else " OR ").join(dict.fromkeys(terms))


def fold(word: str) -> str:
    """A word as the index compares it: case- and accent-folded (what unicode61 with
    remove_diacritics 2 does for the plaintext index). A sealed index hashes it: a change here
    needs SEALED_SCHEMA_VERSION raised (see `_terms_identity`)."""
    if word.isascii():  # nothing to decompose: folding is lowering
        return word.lower()
    import unicodedata

    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


# What often stands around a word in a piece of text (no word character: see _Pieces).
_AROUND = "\"'#()[]{}<>*.,;:!?-/`"


class _Pieces(dict):
    """{piece of text between whitespace: the hashes of its words}, filled as pieces are met
    (bounded: cleared past 200,000)."""

    def __init__(self, term: Callable[[str], str]) -> None:
        super().__init__()
        self.term = term

    def __missing__(self, piece: str) -> str:
        if len(self) > 200_000:
            self.clear()
        core = piece.strip(_AROUND)
        if core.isalnum():  # one word: isalnum is \w but "_", and _AROUND holds no word character
            hashed = self[piece] = self.term(core)
        else:
            hashed = self[piece] = " ".join(map(self.term, _word_pattern().findall(piece)))
        return hashed


class Terms:
    """The sealed index's words: a keyed hash (BLAKE2b, 8 bytes) of each folded word, so the index
    file holds no word of a conversation; and the messages' roles and text, sealed (AES-GCM) in
    groups with a key derived for the index, bound to where they belong (source and first
    position)."""

    def __init__(self, hash_key: bytes, cipher, text_key: bytes | None = None) -> None:
        import hashlib

        self._keyed = hashlib.blake2b(key=hash_key, digest_size=8)  # copied for each word: the key is hashed once
        self._cipher = cipher
        self._pieces = _Pieces(self.term)
        self.keys = (hash_key, text_key)  # for a helper process (store.index_hashing); cipher's key, if known

    def term(self, word: str) -> str:
        hashed = self._keyed.copy()
        hashed.update(fold(word).encode("utf-8", "surrogatepass"))
        return hashed.hexdigest()

    def body(self, text: str) -> str:
        """The text as the index holds it: the hash of each of its words, in order. Made from its
        whitespace-separated pieces, each hashed once per process (`_Pieces`): a word never spans
        whitespace, so the words of the text are those of its pieces, and most pieces recur."""
        return " ".join(map(self._pieces.__getitem__, text.split()))

    def query(self, text: str, every: bool = False) -> str:
        return _joined([f'"{self.term(word)}"' for word in _words(text)], every)

    def seal(self, rows: list[tuple[int, str, str]], source: str) -> bytes:
        """Messages' (position, role, text), sealed together: a seal has a cost of its own, so a
        few dozen messages to a seal index a store faster, and a snippet opens only its group."""
        import orjson

        nonce = os.urandom(12)
        try:
            payload = orjson.dumps(rows)
        except TypeError:  # a lone surrogate (text from another program's file): orjson refuses it
            import json

            payload = json.dumps(rows, ensure_ascii=False).encode("utf-8", "surrogatepass")
        return nonce + self._cipher.encrypt(nonce, payload, f"{source}/{rows[0][0]}".encode())

    def open(self, blob: bytes, source: str, first: int) -> dict[int, tuple[str, str]]:
        """{position: (role, text)} of a sealed group (none when it cannot be opened)."""
        import json

        from cryptography.exceptions import InvalidTag

        try:
            payload = self._cipher.decrypt(blob[:12], blob[12:], f"{source}/{first}".encode())
        except InvalidTag:
            return {}
        return {pos: (role, text) for pos, role, text in json.loads(payload.decode("utf-8", "surrogatepass"))}


def snippet(text: str, query: str, tokens: int = SNIPPET_TOKENS) -> str:
    """About `tokens` words of `text` around the first word of `query` in it (what FTS5's
    snippet() gives the plaintext index)."""
    words = _word_pattern()
    wanted = {fold(word) for word in words.findall(query)}
    spans = [match.span() for match in words.finditer(text)]
    first = next((i for i, (a, b) in enumerate(spans) if fold(text[a:b]) in wanted), 0)
    start = max(0, min(first - tokens // 2, len(spans) - tokens))
    chosen = spans[start:start + tokens]
    if not chosen:
        return ""
    piece = text[chosen[0][0]:chosen[-1][1]]
    return ("…" if start > 0 else "") + piece + ("…" if start + tokens < len(spans) else "")


def forget_journal_text(path: Path, journal_ids: list[str], terms: Terms | None = None) -> None:
    """Drop removed journals' text from the index file at `path` (a sealed one's with its
    `terms`), if there is one: nothing of them stays behind. Never raises: an index that cannot
    be opened or changed is deleted (a cache, rebuilt when needed)."""
    if journal_ids and path.exists():
        try:
            SearchIndex(path, terms).forget_journals(journal_ids)
        except Exception:  # noqa: BLE001 - see above
            try:
                discard_index(path)
            except OSError:
                pass


def discard_index(path: Path) -> None:
    """Remove an index file and its WAL companions (a cache: it is rebuilt when needed)."""
    for suffix in ("", "-wal", "-shm"):
        try:
            os.unlink(f"{path}{suffix}")
        except FileNotFoundError:
            pass


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


def _terms_identity() -> str:
    """What a sealed index's hashed words depend on besides the key: the way words are found
    and folded (`_WORD`, `fold`: change either, and raise SEALED_SCHEMA_VERSION) and Python's
    Unicode data. A contentless row is removed only by giving SQLite the same hashed text again
    (see `SearchIndex._drop`), so an index made under another of these is rebuilt."""
    import unicodedata

    return f"{SEALED_SCHEMA_VERSION}/unicode {unicodedata.unidata_version}"


def _current(db, sealed: bool) -> bool:
    """The index file is in this version's layout (and, sealed, was made with these terms)."""
    import sqlite3

    if db.execute("PRAGMA user_version").fetchone()[0] != (SEALED_SCHEMA_VERSION if sealed else SCHEMA_VERSION):
        return False
    if not sealed:
        return True
    try:
        row = db.execute("SELECT how FROM made").fetchone()
    except sqlite3.OperationalError:  # no such table
        return False
    return row is not None and row[0] == _terms_identity()


def _create_schema(db, sealed: bool) -> None:
    """(Re)create the tables, once, whoever else starts at the same moment: the background
    indexer and a search of a new index both get here. `BEGIN IMMEDIATE` takes the write lock
    first, then the version is checked again inside the transaction, so the second comer finds
    the work done; `IF NOT EXISTS` covers an index some other tool half made. A sealed index's
    tables hold the hashes' index alone (see the module's docstring), tokenized as ASCII (the
    hashes are hexadecimal)."""
    version = SEALED_SCHEMA_VERSION if sealed else SCHEMA_VERSION
    columns = ("body, content='', tokenize='ascii'" if sealed else
               "body, source UNINDEXED, pos UNINDEXED, role UNINDEXED, tokenize='unicode61 remove_diacritics 2'")
    db.execute("BEGIN IMMEDIATE")
    try:
        if not _current(db, sealed):
            for statement in (
                "DROP TABLE IF EXISTS journal_entries", "DROP TABLE IF EXISTS session_entries",
                "DROP TABLE IF EXISTS sources", "DROP TABLE IF EXISTS sealed_texts", "DROP TABLE IF EXISTS made",
                f"CREATE VIRTUAL TABLE IF NOT EXISTS journal_entries USING fts5({columns})",
                f"CREATE VIRTUAL TABLE IF NOT EXISTS session_entries USING fts5({columns})",
                # A session's `numbered`: see `search_current`.
                "CREATE TABLE IF NOT EXISTS sources(kind TEXT, source TEXT, stamp TEXT, offset INTEGER,"
                " count INTEGER, inode INTEGER, number INTEGER NOT NULL, numbered TEXT,"
                " PRIMARY KEY(kind, source))",
                # A sealed index's text: the messages of source `number` from position `first` on.
                "CREATE TABLE IF NOT EXISTS sealed_texts(number INTEGER, first INTEGER, blob BLOB,"
                " PRIMARY KEY(number, first)) WITHOUT ROWID",
                "CREATE TABLE made(how TEXT)",  # see _terms_identity
                *(f"INSERT INTO {table}({table}, rank) VALUES ('hashsize', {FTS_HASHSIZE})"
                  for table in ("journal_entries", "session_entries")),
                f"PRAGMA user_version={version}",
            ):
                db.execute(statement)
            if sealed:
                db.execute("INSERT INTO made VALUES (?)", (_terms_identity(),))
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:  # not when BEGIN itself failed: its cause is the error to see
            db.execute("ROLLBACK")
        raise


def hashed_chunk(terms: Terms, source: str, number: int, chunk: list[tuple[int, str, str]]) -> tuple[list, list]:
    """A sealed index's rows for a chunk of source `number`'s (pos, role, text): [(rowid, its
    words hashed)], and its seals [(number, first position, sealed text)], SEAL_GROUP messages
    to a seal. Made here, or by the helper process (store.index_hashing), which runs this."""
    base, body = number << POSITION_BITS, terms.body
    groups = (chunk[i:i + SEAL_GROUP] for i in range(0, len(chunk), SEAL_GROUP))
    return ([(base | pos, body(text)) for pos, _role, text in chunk],
            [(number, group[0][0], terms.seal(group, source)) for group in groups])


def _index_hashed(db, table: str, made: tuple[list, list]) -> None:
    rows, seals = made
    db.executemany(f"INSERT INTO {table}(rowid, body) VALUES (?,?)", rows)
    db.executemany("INSERT OR REPLACE INTO sealed_texts VALUES (?,?,?)", seals)


HELPER_FROM = 5_000  # messages an update hashes itself before it starts a helper process
HELPER_SESSIONS = 32  # sessions to index from which an update starts the helper at once
HELPER_AHEAD = 4  # chunks the helper is given before the first of them is indexed
HELPER_SESSIONS_AHEAD = 8  # sessions the helper is asked to read before the first of them is indexed
HELD_ROWS = 8 * INSERT_CHUNK  # messages made here while the helper works, at most, before they are indexed
_HERE = object()  # a session the helper was asked for and did not answer: read here (`index_sessions`)


class _Hashing:
    """Where a sealed index's chunks are hashed and sealed during one update: by a helper process
    (store.index_hashing) on another core, a few chunks ahead of SQLite indexing them here,
    started at once when HELPER_SESSIONS sessions or more are to be indexed (`helper_now`) and
    otherwise once HELPER_FROM messages were hashed here; here until it is ready. Small updates
    (a turn, a few sessions changed) never start one. Chunks are indexed in any order (their row ids say
    where they belong) within the update's transaction. A helper that cannot start, or fails,
    only costs speed: what it was given and everything after is hashed here."""

    def __init__(self, db, table: str, terms: Terms, helper_now: bool = False,
                 whole_from: tuple[str, bytes | None] | None = None) -> None:
        self.db, self.table, self.terms = db, table, terms
        self.whole_from = whole_from  # see index_sessions
        self.here = 0  # messages hashed here
        self.helper: _Helper | None = _Helper.start(terms.keys, whole_from) if helper_now else None
        self.tried = helper_now
        self.given: list[tuple[str, int, list]] = []  # chunks the helper has, oldest first

    def index_sessions(self, todo: list[tuple], read_here: Callable, begin: Callable, drop: Callable) -> None:
        """Index the sessions of `todo` [(name, stamp, what was indexed of it, its number)] when
        the helper can read them itself (`whole_from`: the sessions directory and its key, from
        which it reads a session whole as SessionStore.index_rows does): it reads, hashes and
        seals up to HELPER_SESSIONS_AHEAD sessions ahead, in order, while this process indexes
        what it sent. Until it is ready, this process reads sessions itself (`read_here(item)`,
        the update's `read`); and whenever the helper has not begun its next answer, this
        process reads, hashes and seals the next session itself, to be indexed in its turn,
        while the helper is kept HELPER_SESSIONS_AHEAD sessions ahead: the two then share the
        work (each alone was the other's wait). That needs the requests to reach the helper at
        once and its answers to wait in the pipe without stopping it (see `_Helper.send` and
        HELPER_PIPE), and the sessions to be indexed in order. For each session, `begin(item,
        got)` (what `read` gives, its rows aside) removes its old rows if it had any and records
        it, before its rows are indexed. A helper that fails midway: the session it was sending
        loses what of it was indexed (`drop(number)`), and it and the rest are read here."""
        from collections import deque

        # Sessions go into the index in the order of their numbers (their row ids): FTS5 writes
        # out what it holds whenever a row id lower than the last arrives.
        waiting = deque(sorted(todo, key=lambda item: item[3]))
        # In order: (item, None) asked of the helper, (item, (got, made)) made here, or (item,
        # _HERE) to read here (the helper failed before answering it).
        queue: deque = deque()
        asked = held = 0  # sessions asked of the helper; rows made here and not indexed yet

        def feed() -> None:
            nonlocal asked
            helper = self._helper()
            while helper is not None and waiting and asked < HELPER_SESSIONS_AHEAD:
                item = waiting.popleft()
                try:
                    helper.send(("session", item[0], item[3]))
                except Exception:  # noqa: BLE001 - see the class's docstring
                    waiting.appendleft(item)
                    self._lost()
                    return
                queue.append((item, None))
                asked += 1

        def give_back() -> None:
            """The helper failed: what it was asked is read here, in its place in the queue."""
            nonlocal asked
            for at, (item, made) in enumerate(queue):
                if made is None:
                    queue[at] = (item, _HERE)
            asked = 0

        def index_here(item: tuple, got: tuple, made: list) -> None:
            begin(item, got)
            for chunk in made:
                _index_hashed(self.db, self.table, chunk)

        def made_here(item: tuple) -> tuple[tuple, list]:
            got = read_here(item)
            rows = got[0]
            self.here += len(rows)
            return got, [hashed_chunk(self.terms, item[0], item[3], rows[at:at + INSERT_CHUNK])
                         for at in range(0, len(rows), INSERT_CHUNK)]

        while waiting or queue:
            feed()
            if asked and self.helper is None:
                give_back()
            if not queue:  # no helper (yet, or any more): read here, in order
                item = waiting.popleft()
                index_here(item, *made_here(item))
                continue
            item, made = queue[0]
            if made is None and waiting and held < HELD_ROWS and not self.helper.answered():
                # The helper is still at work on the next one: the next to ask it is made here
                # meanwhile (read, hashed, sealed), and indexed when its turn comes.
                item = waiting.popleft()
                made = made_here(item)
                queue.append((item, made))
                held += len(made[0][0])
                continue
            queue.popleft()
            if made is _HERE:
                index_here(item, *made_here(item))
            elif made is not None:
                held -= len(made[0][0])
                index_here(item, *made)
            else:
                asked -= 1
                if not self._take_session(item, begin, drop):
                    give_back()
                    queue.appendleft((item, _HERE))

    def _take_session(self, item: tuple, begin: Callable, drop: Callable) -> bool:
        """Index the session the helper read for `item`; False when the helper failed (it is
        stopped, and nothing of the session stays indexed)."""
        begun = False
        try:
            header = self.helper.receive_any()
            if not (isinstance(header, tuple) and len(header) == 3 and header[0] == "session"):
                raise ValueError("the index helper answered something else")
            meta, chunks = header[1], header[2]
            got = ([], 0, 0, 0, True, None) if meta is None else ([], *meta, True, None)
            begin(item, got)
            begun = True
            for _ in range(chunks):
                _index_hashed(self.db, self.table, self.helper.receive())
            return True
        except Exception:  # noqa: BLE001 - the helper failed: see the class's docstring
            self._lost()
            if begun:
                drop(item[3])
            return False

    def add(self, source: str, number: int, chunk: list[tuple[int, str, str]]) -> None:
        """Index a chunk: the helper's answers that are in are indexed first; then the chunk goes
        to the helper, unless it already has HELPER_AHEAD chunks to answer: then it is hashed
        here (so that neither side waits for the other while there is work)."""
        helper = self._helper()
        if helper is not None:
            while self.given and helper.answered():
                self._take()
            if self.helper is not None and len(self.given) < HELPER_AHEAD:
                try:
                    helper.send(("chunk", source, number, chunk))
                except Exception:  # noqa: BLE001 - see the class's docstring
                    self._lost()
                else:
                    self.given.append((source, number, chunk))
                    return
        _index_hashed(self.db, self.table, hashed_chunk(self.terms, source, number, chunk))
        self.here += len(chunk)

    def abandon(self) -> None:
        """Stop the helper without reading what it still has to say (the update failed)."""
        helper, self.helper, self.given = self.helper, None, []
        if helper is not None:
            helper.process.kill()
            helper.close()

    def finish(self) -> None:
        try:
            while self.given:
                self._take()
        finally:
            if self.helper is not None:
                self.helper.close()
                self.helper = None

    def _helper(self) -> _Helper | None:
        """The helper, once it is ready (it takes a moment to start: chunks are hashed here
        meanwhile); started the first time HELPER_FROM messages were hashed here."""
        if self.helper is None and not self.tried and self.here >= HELPER_FROM:
            self.tried = True
            self.helper = _Helper.start(self.terms.keys, self.whole_from)
        if self.helper is not None and not self.helper.ready():
            if self.helper.failed:
                self._lost()
            return None
        return self.helper

    def _take(self) -> None:
        chunk = self.given.pop(0)
        try:
            made = self.helper.receive()
        except Exception:  # noqa: BLE001 - the helper failed: see the class's docstring
            self._lost()
            made = hashed_chunk(self.terms, *chunk)
        _index_hashed(self.db, self.table, made)

    def _lost(self) -> None:
        """The helper failed: it is stopped, and what it was given is hashed here."""
        helper, self.helper = self.helper, None
        if helper is not None:
            helper.close()
        given, self.given = self.given, []
        for chunk in given:
            _index_hashed(self.db, self.table, hashed_chunk(self.terms, *chunk))


class _Helper:
    """The helper process (store.index_hashing), and a thread that writes what it is sent, so
    that neither side can block the other on a full pipe."""

    def __init__(self, process) -> None:
        import queue
        import threading

        self.process = process
        self.outbox: queue.Queue = queue.Queue()
        self.failed = self._ready = self.queued = False
        self.writer = threading.Thread(target=self._write, name="chatcli-index-helper", daemon=True)
        self.writer.start()

    @classmethod
    def start(cls, keys: tuple[bytes, bytes | None], whole_from: tuple[str, bytes | None] | None = None
              ) -> _Helper | None:
        hash_key, text_key = keys
        if text_key is None:
            return None
        import subprocess
        import sys

        # Its keys come through its input (the master key only when it reads sessions itself).
        env = {name: value for name, value in os.environ.items() if name != "CHATCLI_ENCRYPTION_KEY"}
        try:
            # -P: nothing of the working directory is imported by the process holding the keys.
            process = subprocess.Popen([sys.executable, "-P", "-m", "chatcli.store.index_hashing"], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        except OSError:
            return None
        from chatcli.store.index_hashing import HelperError

        _widen(process.stdout)
        helper = cls(process)
        try:
            helper.send((hash_key, text_key, whole_from))
        except HelperError:  # gone at once (not chatcli's, killed): `failed` says so, and it is let go
            pass
        return helper

    def _write(self) -> None:
        from chatcli.store.index_hashing import write_bytes

        fd = self.process.stdin.fileno()
        while (data := self.outbox.get()) is not None:
            try:
                write_bytes(fd, data)
            except OSError:
                self.failed = True
                return

    def send(self, value: object) -> None:
        """Give the helper `value`, framed here. A small frame while the writer thread was never
        needed is written here at once: a pipe takes it whole without waiting (few are ever
        unread: the keys, then requests for the sessions asked ahead), and the writer thread
        would first need the interpreter's lock, which it gets only every switch interval (5 ms)
        while this thread hashes (it made the helper wait for its requests). Once a frame went to
        the writer thread, every later one does, so that they arrive in order."""
        import select

        from chatcli.store.index_hashing import HelperError, frame, write_bytes

        if self.failed:
            raise HelperError("the index helper stopped")
        data = frame(value)
        fd = self.process.stdin.fileno()
        if not self.queued and len(data) <= select.PIPE_BUF and _has_room(fd):
            try:
                write_bytes(fd, data)
            except OSError as e:
                self.failed = True
                raise HelperError("the index helper stopped") from e
            return
        self.queued = True
        self.outbox.put(data)

    def ready(self) -> bool:
        """Whether the helper said it is ready (without waiting for it)."""
        if not self._ready and not self.failed:
            import select

            from chatcli.store.index_hashing import READY, read_frame

            try:
                if select.select([self.process.stdout], [], [], 0)[0]:
                    self._ready = read_frame(self.process.stdout.fileno()) == READY
                    self.failed = not self._ready
            except Exception:  # noqa: BLE001 - see _Hashing
                self.failed = True
        return self._ready

    def answered(self) -> bool:
        """Whether the helper has begun an answer (without waiting for one)."""
        import select

        try:
            return bool(select.select([self.process.stdout], [], [], 0)[0])
        except (OSError, ValueError):
            return True  # its answer is read, and the failure found there

    def receive_any(self) -> object:
        from chatcli.store.index_hashing import read_frame

        return read_frame(self.process.stdout.fileno())

    def receive(self) -> tuple[list, list]:
        made = self.receive_any()
        if not (isinstance(made, tuple) and len(made) == 2):
            from chatcli.store.index_hashing import HelperError

            raise HelperError("the index helper answered something else")
        return made

    def close(self) -> None:
        self.outbox.put(None)
        self.writer.join(timeout=5)
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            self.process.wait(timeout=5)
        except Exception:  # noqa: BLE001 - it does not end when its input does: it is stopped
            self.process.kill()
            self.process.wait()


def _has_room(fd: int) -> bool:
    """Whether pipe `fd` takes PIPE_BUF bytes without waiting (it has a page free: a pipe may
    have been given a single page, when the user's pipes hold much already)."""
    import select

    try:
        return bool(select.select([], [fd], [], 0)[1])
    except (OSError, ValueError):  # (a descriptor past select's reach): the writer thread writes
        return False


HELPER_PIPE = 1 << 20  # bytes the helper's answers may hold unread: the answers to the sessions asked ahead


def _widen(pipe) -> None:
    """Let `pipe` hold HELPER_PIPE bytes (Linux's pipes hold 64 KiB, under one session's answer
    of 100 messages: the helper would wait for this process to read each answer before making
    the next, and so for its hashing of a session too). Where it cannot be done (another system,
    a lower limit) the pipe stays as it is: only speed is lost."""
    import fcntl

    if hasattr(fcntl, "F_SETPIPE_SZ"):
        try:
            fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, HELPER_PIPE)
        except OSError:
            pass


def _span(number: int) -> tuple[int, int]:
    """The first and last row id a source numbered `number` can have."""
    return number << POSITION_BITS, ((number + 1) << POSITION_BITS) - 1


def _next_number(db) -> int:
    return db.execute("SELECT coalesce(max(number), 0) + 1 FROM sources").fetchone()[0]


# Session search ranks the best RANKED_ROWS messages for a MATCH by BM25 (row ids and scores only:
# no stored column read; SQLite keeps the best rows in a bounded sort). The first `sessions`
# sessions met there are the best sessions, each ranking by its best message (equal scores in
# the order SQLite gives: a second sort key costs a quarter more). The chosen sessions with fewer
# than `per` of their messages there get their best ones from one more pass over the match,
# ranking only those sessions' messages. (At a million messages, for a word in one message in
# a hundred, this takes 39 ms where ranking every match grouped by session, the statement below,
# takes 47: the grouping keeps every match in a table of its own and sorts it.)
RANKED_ROWS = 200
_TOP_MESSAGES = ("SELECT rowid, bm25(session_entries) AS score FROM session_entries"
                 " WHERE session_entries MATCH ? ORDER BY score LIMIT ?")
_BEST_OF_EACH = """
SELECT id, score FROM (
    SELECT id, score, row_number() OVER (PARTITION BY id >> {bits} ORDER BY score) AS n FROM (
        SELECT rowid AS id, bm25(session_entries) AS score FROM session_entries
        WHERE session_entries MATCH ? AND rowid >> {bits} IN ({{numbers}})))
WHERE n <= ? ORDER BY score
""".format(bits=POSITION_BITS)
# When fewer sessions than wanted fill those rows (a few long ones): every match ranked and
# grouped by session in one statement. The hits are computed once (the statement uses them
# twice, and SQLite, 3.35 on, keeps such a CTE's rows instead of running it again).
_BEST_OF_SESSIONS = """
WITH hits(id, score) AS (
    SELECT rowid, bm25(session_entries) FROM session_entries WHERE session_entries MATCH :match),
best(number) AS (
    SELECT id >> {bits} FROM hits GROUP BY 1 ORDER BY min(score) LIMIT :sessions),
picked(id, score, n) AS (
    SELECT id, score, row_number() OVER (PARTITION BY id >> {bits} ORDER BY score) FROM hits
    WHERE id >> {bits} IN best)
SELECT id, score FROM picked WHERE n <= :per ORDER BY score
""".format(bits=POSITION_BITS)
_EVERY_ROW = (0, (1 << 63) - 1)


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
                db = self._connect()
                try:
                    return work(db)
                finally:
                    db.close()
            except sqlite3.DatabaseError as exc:
                damaged = "not a database" in str(exc) or "malformed" in str(exc)
                if self.path is None or not damaged or attempt == 2:
                    raise SearchError(f"search index {self.path or '(memory)'}: {exc}") from None
                discard_index(self.path)
        return None

    def _connect(self):
        """The index, open, in this version's layout (made so when it is not)."""
        import sqlite3

        if self.path is None:  # a throw-away index in memory (a history with no journal)
            db = sqlite3.connect(":memory:", isolation_level=None)
        else:
            from chatcli.store.atomic import ensure_private_dir

            ensure_private_dir(self.path.parent)
            fresh = not self.path.exists()
            db = sqlite3.connect(self.path, timeout=self.wait, isolation_level=None)
            if fresh:
                os.chmod(self.path, 0o600)
        try:
            _wal(db)
            db.execute("PRAGMA synchronous=OFF")  # a cache: rebuilt when lost
            sealed = self.terms is not None
            if not _current(db, sealed):
                _create_schema(db, sealed)
        except BaseException:
            db.close()
            raise
        return db

    # -- what goes in, what a query is --------------------------------------------------------
    def _match(self, query: str, every: bool = False) -> str:
        return fts_query(query, every) if self.terms is None else self.terms.query(query, every)

    def _snippets(self, db, table: str, rowids: list[int], match: str, query: str,
                  span: tuple[int, int] = _EVERY_ROW) -> list[tuple]:
        """(rowid, source, pos, role, snippet) of the given rows (all within the rowid `span`)."""
        if not rowids:
            return []
        marks = ",".join("?" * len(rowids))
        if self.terms is None:
            # `+rowid IN`: one pass over the match, the rows kept by id (SQLite would otherwise run
            # the match again for each id, which costs more past a few hundred matching messages).
            return db.execute(f"SELECT rowid, source, pos, role, snippet({table}, 0, '', '', '…', ?) FROM {table}"
                              f" WHERE {table} MATCH ? AND rowid BETWEEN ? AND ? AND +rowid IN ({marks})",
                              (SNIPPET_TOKENS, match, *span, *rowids)).fetchall()
        # A contentless table keeps no column but the row id: the source is the one numbered
        # in its high bits, the position its low bits, the role and text in the row's seal.
        numbers = {rowid >> POSITION_BITS for rowid in rowids}
        names = dict(db.execute(f"SELECT number, source FROM sources WHERE number IN ({','.join('?' * len(numbers))})",
                                list(numbers)))
        opened: dict[tuple[int, int], dict[int, tuple[str, str]]] = {}
        found = []
        for rowid in rowids:
            number, pos = rowid >> POSITION_BITS, rowid & ((1 << POSITION_BITS) - 1)
            source = names.get(number)
            if source is None:
                continue
            group = db.execute("SELECT first, blob FROM sealed_texts WHERE number=? AND first<=?"
                               " ORDER BY first DESC LIMIT 1", (number, pos)).fetchone()
            role, text = "", None
            if group is not None:
                if (number, group[0]) not in opened:
                    opened[number, group[0]] = self.terms.open(group[1], source, group[0])
                role, text = opened[number, group[0]].get(pos, ("", None))
            found.append((rowid, source, pos, role, UNOPENED if text is None else snippet(text, query)))
        return found

    def _insert(self, db, table: str, source: str, number: int, rows: Iterable[tuple[int, str, str]],
                hashing: _Hashing | None = None) -> None:
        """Index (pos, role, text) rows of source `number`, a chunk at a time: each chunk made
        whole (hashed and sealed: `hashed_chunk`, here or by `hashing`'s helper) before SQLite
        indexes it, which is faster than handing rows over one by one (each side keeps its own
        data in the CPU's caches longer)."""
        terms, rows = self.terms, iter(rows)
        while chunk := list(itertools.islice(rows, INSERT_CHUNK)):
            if terms is None:
                base = number << POSITION_BITS
                db.executemany(f"INSERT INTO {table}(rowid, body, source, pos, role) VALUES (?,?,?,?,?)",
                               [(base | pos, text, source, pos, role) for pos, role, text in chunk])
            elif hashing is not None:
                hashing.add(source, number, chunk)
            else:
                _index_hashed(db, table, hashed_chunk(terms, source, number, chunk))

    def _drop(self, db, table: str, number: int) -> None:
        """Remove the rows of source `number` (and their sealed text). A sealed index's
        contentless table is told each row's hashed text again, from its seal (see the module's
        docstring); a seal that cannot be opened leaves the index unusable, and it is rebuilt."""
        if self.terms is None:
            db.execute(f"DELETE FROM {table} WHERE rowid BETWEEN ? AND ?", _span(number))
            return
        import sqlite3

        row = db.execute("SELECT source FROM sources WHERE number=?", (number,)).fetchone()
        base, body = number << POSITION_BITS, self.terms.body
        for first, blob in db.execute("SELECT first, blob FROM sealed_texts WHERE number=?", (number,)).fetchall():
            rows = self.terms.open(blob, row[0], first) if row is not None else {}
            if not rows:
                raise sqlite3.DatabaseError(f"database disk image is malformed: a seal of source {number} "
                                            "cannot be opened")
            db.executemany(f"INSERT INTO {table}({table}, rowid, body) VALUES ('delete', ?, ?)",
                           [(base | pos, body(text)) for pos, (_role, text) in rows.items()])
        db.execute("DELETE FROM sealed_texts WHERE number=?", (number,))

    # -- one journal ---------------------------------------------------------------------
    def search_journal(self, source: str, stamp: str, read: Callable[[int], tuple[list[tuple[str, str]], int]],
                       query: str, limit: int = 10) -> list[Hit]:
        """Best `limit` messages of journal `source` for `query`. `read(offset)` returns the
        (role, text) of each message recorded from that byte offset on, and the new offset;
        `stamp` changes when the file is replaced (its inode), which re-indexes it."""
        match = self._match(query)

        def work(db):
            self._update_journal(db, source, stamp, read)
            row = db.execute("SELECT number FROM sources WHERE kind='j' AND source=?", (source,)).fetchone()
            if row is None:
                return []
            span = _span(row[0])
            best = db.execute("SELECT rowid, bm25(journal_entries) AS s FROM journal_entries"
                              " WHERE journal_entries MATCH ? AND rowid BETWEEN ? AND ? ORDER BY s LIMIT ?",
                              (match, *span, limit)).fetchall()
            scores = dict(best)
            rows = self._snippets(db, "journal_entries", list(scores), match, query, span)
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
                row = db.execute("SELECT stamp, offset, count, number FROM sources WHERE kind='j' AND source=?",
                                 (source,)).fetchone()
                if row is None and recorded == 0:
                    number = _next_number(db)
                elif row is not None and row[0] == stamp and row[2] == recorded and row[1] <= end:
                    number = row[3]
                else:
                    db.execute("ROLLBACK")
                    return False
                self._add_journal_rows(db, source, number, stamp, recorded, end, messages)
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
            for source in sources:
                row = db.execute("SELECT number FROM sources WHERE kind='j' AND source=?", (source,)).fetchone()
                if row is not None:
                    self._forget(db, "journal_entries", "j", source, row[0])
            db.execute("COMMIT")

        self._with_db(work)

    def _forget(self, db, table: str, kind: str, source: str, number: int) -> None:
        """Remove a source's rows and its record (inside the caller's transaction)."""
        self._drop(db, table, number)
        db.execute("DELETE FROM sources WHERE kind=? AND source=?", (kind, source))

    def _add_journal_rows(self, db, source: str, number: int, stamp: str, count: int, end: int,
                          messages: list[tuple[str, str]]) -> None:
        """Index `messages` (role, text) of journal `source` (numbered `number`) after its first
        `count`, now indexed up to byte `end` (inside the caller's transaction)."""
        self._insert(db, "journal_entries", source, number,
                     ((count + i, role, text) for i, (role, text) in enumerate(messages, 1)))
        db.execute("INSERT OR REPLACE INTO sources(kind, source, stamp, offset, count, inode, number)"
                   " VALUES ('j', ?, ?, ?, ?, 0, ?)",
                   (source, stamp, end, count + len(messages), number))

    def _update_journal(self, db, source: str, stamp: str, read) -> None:
        db.execute("BEGIN IMMEDIATE")
        try:
            row = db.execute("SELECT stamp, offset, count, number FROM sources WHERE kind='j' AND source=?",
                             (source,)).fetchone()
            offset, count = (row[1], row[2]) if row and row[0] == stamp else (0, 0)
            got = read(offset)
            if got is None:  # shorter than what was indexed: truncated, so not the same file
                offset, count = 0, 0
                got = read(0)
            if row is None:
                number = _next_number(db)
            else:
                number = row[3]
                if row[0] != stamp or offset == 0:
                    self._drop(db, "journal_entries", number)
            messages, end = got
            self._add_journal_rows(db, source, number, stamp, count, end, messages)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    # -- every saved session -------------------------------------------------------------
    def update_sessions(self, current: dict[str, str], read: Callable) -> None:
        """Bring the session index up to date (see `search_sessions`); the REPL does it in the
        background at start, so that a first search finds it done."""
        self._with_db(lambda db: self._update_sessions(db, current, read))

    @staticmethod
    def _indexed_sessions(db) -> dict[str, tuple]:
        return {name: row for name, *row in db.execute(
            "SELECT source, stamp, offset, count, inode, number, numbered FROM sources WHERE kind='s'")}

    def _update_sessions(self, db, current: dict[str, str], read: Callable) -> None:
        """`current` is {name: stamp (`session_stamp`)} of the sessions that exist now;
        `read(name, since)` gives (rows, inode, size, count, whole, numbered) for a session new
        or changed since indexed: rows are (position, role, text) of its messages (not its
        system prompts), all of them (`whole`) or, when `since` = (inode, size, count, numbered)
        of what was indexed still holds, only those appended since; `numbered` is kept for
        `search_current`. A sealed store's `read` may carry `whole_from`, (its sessions
        directory, its key): its reads are then whole reads with no `numbered`, which the
        index's helper process may make itself (`_Hashing.index_sessions`). An index found up
        to date is only read: no write lock is taken."""
        if dict(db.execute("SELECT source, stamp FROM sources WHERE kind='s'")) == current:
            return
        db.execute("BEGIN IMMEDIATE")
        try:
            indexed = self._indexed_sessions(db)  # again, under the lock: another process may have done it
            number = _next_number(db)
            for name in indexed.keys() - current.keys():
                self._forget(db, "session_entries", "s", name, indexed[name][4])
            todo = []  # (name, stamp, what was indexed of it, its number)
            for name, stamp in current.items():
                known = indexed.get(name)
                if known is None:
                    todo.append((name, stamp, None, number))
                    number += 1
                elif known[0] != stamp:
                    todo.append((name, stamp, known, known[4]))

            def read_here(item: tuple) -> tuple:
                name, _stamp, known, _own = item
                return read(name, None if known is None else (known[3], known[1], known[2], known[5]))

            def begin(item: tuple, got: tuple) -> None:
                name, stamp, known, own = item
                _rows, inode, size, count, whole, numbered = got
                if known is not None and whole:
                    self._drop(db, "session_entries", own)
                db.execute("INSERT OR REPLACE INTO sources VALUES ('s', ?, ?, ?, ?, ?, ?, ?)",
                           (name, stamp, size, count, inode, own, numbered))

            whole_from = getattr(read, "whole_from", None)
            hashing = None if self.terms is None else _Hashing(
                db, "session_entries", self.terms, helper_now=len(todo) >= HELPER_SESSIONS, whole_from=whole_from)
            try:
                if hashing is not None and whole_from is not None:
                    hashing.index_sessions(todo, read_here, begin, lambda own: self._drop(db, "session_entries", own))
                else:
                    for item in todo:
                        got = read_here(item)
                        begin(item, got)
                        self._insert(db, "session_entries", item[0], item[3], got[0], hashing)
            except BaseException:
                if hashing is not None:
                    hashing.abandon()  # the helper's answers in flight are not waited for
                    hashing = None
                raise
            finally:
                if hashing is not None:
                    hashing.finish()
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def search_sessions(self, current: dict[str, str], read: Callable, query: str, sessions: int = 10,
                        per_session: int = 3) -> list[Hit]:
        """The best `per_session` messages of each of the best `sessions` matching sessions
        (a session ranks by its best message), best first (see `_update_sessions` for `current`
        and `read`). Messages with every word of the query come first: those with only some
        of them are ranked only when the first do not fill `sessions` sessions, and then fill
        the sessions already chosen up to `per_session`, and the sessions still missing."""
        def work(db):
            self._update_sessions(db, current, read)
            return self._ranked(db, query, sessions, per_session)

        return self._with_db(work)

    def note_numbered(self, numbered: dict[str, tuple[str, str | None]]) -> None:
        """Record sessions' `numbered` (see `search_current`), {name: (the stamp of the file it
        was found for, numbered)}, where it changed: a search that numbered its hits from their
        journals says what it found. Nothing is written when nothing changed."""
        def work(db):
            known = self._indexed_sessions(db)
            changed = [(value, name, stamp) for name, (stamp, value) in numbered.items()
                       if name in known and known[name][0] == stamp and known[name][5] != value]
            if not changed:
                return
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany("UPDATE sources SET numbered=? WHERE kind='s' AND source=? AND stamp=?", changed)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

        self._with_db(work)

    def _ranked(self, db, query: str, sessions: int, per_session: int) -> list[Hit]:
        """`search_sessions`'s hits from the index as it is."""
        return ranked(self._match(query, every=True), self._match(query),
                      lambda match, count, per: self._best_of_sessions(db, match, count, per),
                      lambda rowids, match: self._snippets(db, "session_entries", rowids, match, query),
                      sessions, per_session)

    @staticmethod
    def _best_of_sessions(db, match: str, sessions: int, per: int) -> dict[int, list[tuple[int, float]]]:
        """{session number: [(rowid, score) of its best `per` messages, best first]} of the best
        `sessions` sessions for `match`, best first (see RANKED_ROWS)."""
        top = db.execute(_TOP_MESSAGES, (match, RANKED_ROWS)).fetchall()
        chosen: dict[int, list[tuple[int, float]]] = {}
        for rowid, score in top:
            picked = chosen.get(rowid >> POSITION_BITS)
            if picked is None:
                if len(chosen) == sessions:
                    continue
                picked = chosen[rowid >> POSITION_BITS] = []
            if len(picked) < per:
                picked.append((rowid, score))
        if len(top) < RANKED_ROWS:  # every match was ranked
            return chosen
        if len(chosen) < sessions:
            chosen = {}
            for rowid, score in db.execute(_BEST_OF_SESSIONS, {"match": match, "sessions": sessions, "per": per}):
                chosen.setdefault(rowid >> POSITION_BITS, []).append((rowid, score))
            return chosen
        short = [number for number, picked in chosen.items() if len(picked) < per]
        if short:
            for picked in (chosen[number] for number in short):
                picked.clear()
            for rowid, score in db.execute(_BEST_OF_EACH.format(numbers=",".join("?" * len(short))),
                                           (match, *short, per)):
                chosen[rowid >> POSITION_BITS].append((rowid, score))
        return chosen


def ranked(every, any_word, best_of: Callable, snippets: Callable, sessions: int, per_session: int) -> list[Hit]:
    """A session search's hits, by one rule whichever index ranks them (this one, or the server's:
    store.pg_search): the best `sessions` sessions for the query with `every` word, each with
    its best `per_session` messages; when those are fewer than `sessions`, the query with
    `any_word` fills the chosen sessions up to `per_session` and adds the sessions missing.
    `best_of(match, sessions, per)` is {source number: [(rowid, score) best first]} of the best
    sessions for a match (lower scores rank first); `snippets(rowids, match)` is (rowid, source,
    pos, role, snippet) of the rows given."""
    chosen = best_of(every, sessions, per_session)
    if len(chosen) < sessions and every != any_word:
        # Enough of them ranked for the missing sessions, whichever the chosen ones take,
        # and enough messages each for those sessions' places not taken by the first.
        more = best_of(any_word, sessions + len(chosen), 2 * per_session)
        for number, found in more.items():
            picked = chosen.get(number)
            if picked is None:
                if len(chosen) >= sessions:
                    continue
                picked = chosen[number] = []
            have = {rowid for rowid, _score in picked}
            picked += [hit for hit in found if hit[0] not in have][:per_session - len(picked)]
    scores = {rowid: score for picked in chosen.values() for rowid, score in picked}
    rows = snippets(list(scores), any_word)
    found = {rowid: Hit(source, pos, role, text, scores[rowid]) for rowid, source, pos, role, text in rows}
    # Ranked order first (equal scores stay in it), then by score.
    return sorted((found[rowid] for rowid in scores if rowid in found), key=lambda hit: hit.score)


def session_stamp(mtime_ns: int, size: int) -> str:
    """What the index records of a session file to know it unchanged."""
    return f"{mtime_ns}:{size}"


def search_current(path: str, query: str, sessions: int = 10, per_session: int = 3
                   ) -> tuple[list[Hit], dict[str, str | None], dict[str, str]] | None:
    """SearchIndex.search_sessions's hits from the plaintext index file at `path` as it is, with
    each hit session's `numbered` and the stamp of every session indexed: the caller uses them
    only when those are its session files' stamps now (`session_stamp`: the index needs no
    update). None when the file is missing, in another layout, or cannot be read now. It only
    reads, in one read transaction (the hits and the stamps are of one moment).
    `chatcli session search` starts with this and runs the whole search when it cannot use it.

    A session's `numbered`, recorded when it was indexed and by each search that numbered its
    hits from their journals (engine.records), says how its hits are numbered (a journal's
    position for each live one): "-" by the file's own positions, whatever happens (it names no
    journal); "ID MTIME_NS SIZE INODE" by the file's positions while journal ID keeps that
    stamp; "ID" or None when only reading the journal can say."""
    import sqlite3

    if not os.path.isfile(path):
        return None
    uri = "file:" + path.replace("%", "%25").replace("?", "%3f").replace("#", "%23") + "?mode=rw"
    try:
        db = sqlite3.connect(uri, uri=True, isolation_level=None)
    except sqlite3.Error:
        return None
    try:
        db.execute("BEGIN")
        if not _current(db, sealed=False):
            return None
        stamps = dict(db.execute("SELECT source, stamp FROM sources WHERE kind='s'"))
        hits = SearchIndex(None)._ranked(db, query, sessions, per_session)
        names = list({hit.source: None for hit in hits})
        numbered = dict(db.execute("SELECT source, numbered FROM sources WHERE kind='s' AND source IN"
                                   f" ({','.join('?' * len(names))})", names)) if names else {}
        return hits, numbered, stamps
    except sqlite3.Error:
        return None
    finally:
        db.close()


__all__ = ["Hit", "SearchIndex", "Terms", "fts_query", "search_current", "session_stamp", "snippet"]
