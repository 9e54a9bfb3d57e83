"""What the journal is read for (SPEC §7): export, transcript search/show/stats, and search
across every saved session (SPEC §5 [beyond]). Each is written once; the /session commands,
`chatcli session export|search` and the servers call these.

Every transcript operation reads the journal when there is one, and otherwise falls back to
the live history and says so.
"""

from __future__ import annotations

import contextlib
import datetime
import itertools
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from chatcli.config.settings import Settings
from chatcli.core import journal as rules
from chatcli.core.errors import UsageError
from chatcli.core.export import Entry, call_names, local_time, plain_block, to_markdown, to_trajectory, trajectory
from chatcli.core.messages import Message
from chatcli.core.search_hits import SessionHits, elided, format_session_hits, grouped
from chatcli.core.session import SessionData
from chatcli.store.atomic import atomic_write, os_cause
from chatcli.store.home import Home
from chatcli.store.journal import ID_RE, Journal, JournalError
from chatcli.store.search import SearchError, SearchIndex, session_stamp
from chatcli.store.sessions import SessionStore

FORMATS = ("md", "jsonl")


def search_index(settings: Settings, wait: float = 30) -> SearchIndex:
    """The search index on disk (Home.search_index: the sealed one with encryption on). `wait`:
    how long to wait for another process writing it."""
    return Home.of(settings).search_index(wait)


class Record:
    """The complete record of a conversation: its journal, or (without one) its live history.
    `source` says which, in words for the user; the entries are read only when asked for
    (a search reads nothing but what its index lacks)."""

    def __init__(self, source: str, journal: Journal | None, history: Sequence[Message] = ()) -> None:
        self.source = source
        self.journal = journal
        self._history = history
        self._entries: list[Entry] | None = None
        self.reading = None
        self.caveat = ""  # what the record may lack (a journal that could not be brought up to date)

    @property
    def described(self) -> str:
        return f"{self.source} ({self.caveat})" if self.caveat else self.source

    @property
    def entries(self) -> list[Entry]:
        if self._entries is None:
            if self.journal is None:
                self._entries = [Entry(i, m, said_at(m) or "") for i, m in enumerate(self._history, 1)]
            else:
                self.reading = self.journal.read()
                self._entries = _entries(self.reading.events)
        return self._entries


def _entries(events: list[dict]) -> list[Entry]:
    entries: list[Entry] = []
    positions: dict[str, int] = {}  # hash → position of its first recording
    pos = 0
    for event in events:
        if event["type"] == rules.MESSAGE:
            pos += 1
            positions.setdefault(event["hash"], pos)
            message = Message.from_dict(event["message"])
            entries.append(Entry(pos, message, said_at(message) or event.get("time", "")))
        elif event["type"] == rules.REWRITE:
            entries.append(Entry(None, None, event.get("time", ""), [positions.get(h) for h in event["hashes"]],
                                 str(event.get("reason") or "")))
    return entries


def said_at(message: Message) -> str | None:
    """When a message was said, when it carries that itself (`timestamp`, ISO 8601: one imported
    from another tool, or read from an older file): what its record shows rather than when its
    journal line was written (the line's own time stays the sync's: a sync's lines share one)."""
    value = message.extra.get("timestamp") if message._extra else None
    if value is None:
        return None
    from chatcli.core.imported import moment  # here: `session search` imports this module, not that one

    when = moment(value)
    if when is None:
        return None
    # A time written without its zone is UTC (llm's `datetime_utc`), as the import dates it: said so,
    # or it would be shown as local time.
    return value if when.tzinfo is not None else f"{value}+00:00"


def record(settings: Settings, data: SessionData, transcript_id: str | None) -> Record:
    """The record of a conversation: its journal when there is one, else its live history."""
    if not settings.session_transcript:
        return Record("the live history (the journal is off: CHATCLI_SESSION_TRANSCRIPT)", None, data.history)
    if not transcript_id or not ID_RE.fullmatch(transcript_id):
        return Record("the live history (this conversation has no journal yet)", None, data.history)
    journal = Home.of(settings).journal(transcript_id)
    if not journal.exists():
        return Record(f"the live history (its journal {transcript_id} is missing)", None, data.history)
    return Record(f"journal {transcript_id}", journal)


def messages(rec: Record) -> list[Entry]:
    return [entry for entry in rec.entries if entry.message is not None]


def export(rec: Record, fmt: str, label: str, path: str | None, cwd: Path | None = None) -> Path:
    """Write the record as Markdown or JSON lines (mode 0600); an existing file is never replaced."""
    fmt = fmt.lower()
    if fmt not in FORMATS:
        raise UsageError(f"unknown export format '{fmt}' (choose md or jsonl)")
    now = datetime.datetime.now()
    directory, named = (cwd or Path.cwd()), None
    if path:
        given = Path(os.path.expanduser(path))
        if given.is_dir():
            directory = given
        else:
            directory, named = given.parent, given
    if not directory.is_dir():  # never made on the way: a mistyped directory is said, not created
        raise UsageError(f"cannot write {named or directory}: the directory {directory} does not exist "
                         "(nothing was written)")
    if named is not None:
        target = named
        if target.exists():
            raise UsageError(f"{target} already exists; choose another path (nothing was written)")
    else:  # the default name: a second export within the same second gets the next free one
        stem = f"chatcli-{label}-{now:%Y%m%d-%H%M%S}"
        target = next(candidate for n in itertools.count(1)
                      if not (candidate := directory / f"{stem}{'' if n == 1 else f'-{n}'}.{fmt}").exists())
    count = len(messages(rec))
    if fmt == "md":
        facts = [f"session: {label}", f"messages: {count}", f"source: {rec.described}",
                 f"exported: {now.astimezone().isoformat(timespec='seconds')}"]
        if rec.reading is not None and rec.reading.skipped:
            facts.append(f"skipped: {rec.reading.describe_skipped()} of the journal")
        text = to_markdown(rec.entries, title=f"chatcli transcript: {label}", facts=facts)
    else:
        text = to_trajectory(rec.entries)
    try:
        atomic_write(target, text.encode("utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror or exc} (nothing was written)") from None
    return target


def search(settings: Settings, rec: Record, query: str, limit: int = 10) -> list[tuple[int, str, str]]:
    """(position, role, snippet) of the best messages of the record for `query`, BM25-ranked."""
    if rec.journal is None:  # no journal: rank the live history in an index kept in memory
        rows = [(entry.message.role, entry.message.content) for entry in messages(rec)]
        hits = SearchIndex(None).search_journal("live", "", lambda _o: (rows, 0), query, limit)
        return [(hit.pos, hit.role, hit.snippet) for hit in hits]
    hits = search_index(settings).search_journal(rec.journal.id, _stamp(rec.journal), _reader(rec.journal), query,
                                                 limit)
    return [(hit.pos, hit.role, hit.snippet) for hit in hits]


def warm_index(settings: Settings, transcript_id: str | None, store: SessionStore | None = None) -> None:
    """Bring the index up to date ahead of the first search (the REPL does this in the
    background: a 100,000-message journal takes seconds to index, a search of an indexed one
    milliseconds): the journal of `transcript_id`, and with `store` every saved session."""
    if settings.session_transcript and transcript_id and ID_RE.fullmatch(transcript_id):
        journal = Home.of(settings).journal(transcript_id)
        if journal.exists():
            search_index(settings).update_journal(journal.id, _stamp(journal), _reader(journal))
    if store is not None:
        current, read = _sessions_to_index(store, Home.of(settings))
        search_index(settings).update_sessions(current, read)


# A sync that records more messages than this at once (the first turn of a long session another
# program wrote, or an older chatcli: its whole history) leaves them to the next search, which
# reads what the index lacks (the REPL does that in the background): indexing costs about 35 µs
# a message, 3.5 s of a first turn at 100,000 messages, before its answer.
INDEX_AT_SYNC_MAX = 2_000


def index_recorded(settings: Settings, journal: Journal, recorded: int, end: int, events: list[dict]) -> None:
    """A sync wrote `events` to `journal`, after `recorded` message lines, ending at byte `end`:
    their messages go into the search index now, if it holds the journal's first `recorded`
    (see SearchIndex.append_journal), so a journal written by chatcli is searchable at once.
    A cache: any failure is left to the next search, which reads what the index lacks."""
    if not settings.session_transcript or \
            sum(1 for event in events if event["type"] == rules.MESSAGE) > INDEX_AT_SYNC_MAX:
        return
    messages = _message_rows(events)
    if not messages:
        return
    try:
        # Never waits: another process holding the index (a background catch-up) must not hold up
        # a turn; what is not indexed now is read by the next search.
        search_index(settings, wait=0).append_journal(journal.id, _stamp(journal), recorded, end, messages)
    except Exception:  # noqa: BLE001, S110 - the index is a cache; a search catches up
        pass


def remove_journal(settings: Settings, transcript_id: str) -> bool:
    """Remove a journal and its text from the search index (its session was deleted). False
    when there was none, or it could not be removed (it is then left to `storage prune`)."""
    if not ID_RE.fullmatch(transcript_id):
        return False
    home = Home.of(settings)
    try:
        if not home.journal(transcript_id).remove():
            return False
    except JournalError:
        return False
    home.forget_journals([transcript_id])
    return True


def _stamp(journal: Journal) -> str:
    """Which journal this is (Journal.lineage): appends never change it."""
    return journal.lineage()


def _message_rows(events: list[dict]) -> list[tuple[str, str]]:
    """(role, text) of each message event: what the index holds of a journal."""
    return [(e["message"].get("role", ""), Message.from_dict(e["message"]).content)
            for e in events if e["type"] == rules.MESSAGE]


def _reader(journal: Journal):
    def read(offset: int) -> tuple[list[tuple[str, str]], int] | None:
        if offset > journal.size():
            return None  # truncated since it was indexed
        reading = journal.read(offset)
        return _message_rows(reading.events), reading.end

    return read


def exported(rec: Record, path: Path, fmt: str = "md") -> str:
    """What an export says it did, every surface's reply: what it read ("source: journal" or
    "source: live history", SPEC §5) and what of the journal it skipped (SPEC §7: damage is
    skipped and counted, never silently included)."""
    count = f"{len(messages(rec))} messages"
    if fmt.lower() == "jsonl":
        turns = len(trajectory(rec.entries))
        count = f"{turns} turn{'s' if turns != 1 else ''} ({count})"
    source = "live history" if rec.journal is None else "journal"
    text = f"Exported {count} to {path} (source: {source})."
    skipped = rec.reading.describe_skipped() if rec.reading is not None else ""
    if skipped:
        text += f" Skipped {skipped} of journal {rec.journal.id} (damage, or lines that do not belong there)."
    return text


def stats(rec: Record) -> str:
    count = len(messages(rec))
    rewrites = sum(1 for entry in rec.entries if entry.message is None)
    lines = [f"Transcript: {count} messages, {rewrites} rewrite(s); source: {rec.described}."]
    if rec.journal is not None and rec.reading is not None:
        size = rec.journal.size()
        lines.append(f"Journal {rec.journal.id}: {rec.journal.where} ({size:,} bytes).")
        if rec.reading.skipped:
            lines.append(f"Skipped {rec.reading.describe_skipped()} (damage or other tools' lines; never fatal).")
    return "\n".join(lines)


def show_blocks(rec: Record, pos: int, count: int = 10) -> list[str]:
    """The record's messages from position `pos` on (at most `count`), each as `plain_block`
    prints it: /session transcript show, and the model's session_read tool on a saved session."""
    every = messages(rec)
    # Named over the whole record: a result's call may come before the first message shown.
    return [plain_block(entry.pos, entry.message, f" · {local_time(entry.time)}" if entry.time else "", name)
            for entry, name in zip(every, call_names([entry.message for entry in every]))
            if pos <= entry.pos < pos + count]


def show(rec: Record, pos: int, count: int = 10) -> str:
    if pos < 1:
        raise UsageError(f"positions start at 1 (the transcript has {len(messages(rec))} messages)")
    shown = show_blocks(rec, pos, count)
    if not shown:
        raise UsageError(f"no message at position {pos} (the transcript has {len(messages(rec))})")
    return "\n\n".join(shown)


def numbering(settings: Settings, transcript_id: str | None, count: int | None = None) -> Callable[[int], int]:
    """One numbering for a session's messages everywhere (search hits, `session show`,
    `/session transcript show`, the model's session tools): a message's number is its position
    in the session's journal, the complete record. The session file holds only the live
    history, whose positions drift from the journal's after a compaction or a /rewind; this
    maps a live position (1-based, as the file and its search index count) to the journal's.

    While the journal has recorded nothing but the live history (its last line a `synced` one
    with no dead hashes and the file's count: no compaction, rewind or damage yet, the common
    case), the two agree and nothing more is read. (Not quite always: two surfaces whose turns
    crossed can leave the journal's order of the same messages different from the file's, and
    their numbers then differ until the next rewrite of the history; rare, and only a label.) Otherwise the journal is replayed once; a live position the
    journal does not hold (it lags the file, or `count`, the file's message count, says they
    are out of step) keeps its own number, as the record would (it falls back to the file)."""
    if not settings.session_transcript:
        return _same
    return _numbering(Home.of(settings), transcript_id, count)[0]


def _same(pos: int) -> int:
    return pos


def _numbering(home: Home, transcript_id: str | None, count: int | None) -> tuple[Callable[[int], int], str | None]:
    """`numbering` with journals on, and what the search index records of it (`_by_file`)."""
    journal, mark = _by_file(home, transcript_id, count)
    if journal is None:
        return _same, mark
    try:
        reading = journal.read()
    except (JournalError, OSError):
        return _same, mark
    state = rules.Replay()
    state.apply(reading.events)
    if count is not None and count != len(state.live):
        return _same, mark
    live, positions = state.live, state.positions
    return (lambda pos: positions.get(live[pos - 1], pos) if 0 < pos <= len(live) else pos), mark


def _by_file(home: Home, transcript_id: str | None, count: int | None) -> tuple[Journal | None, str]:
    """(the journal to replay for the session's numbering, or None when the file's positions are
    its numbering; what the search index records of this, the session's `numbered`: see
    store.search.search_current): "-" without a journal; with it, its id, and the stamp at which
    its last line said it holds the file's history and nothing more. Reads the journal's last
    line only (a search index records this of every session it reads)."""
    if not transcript_id or not ID_RE.fullmatch(transcript_id):
        return None, "-"
    journal = home.journal(transcript_id)
    st = journal.stat()  # the stamp recorded: the one the last line was read at
    found = journal.last_event()
    if found is not None and found[0]["type"] == rules.SYNCED and found[0]["dead"] == 0 \
            and not rules.damage_said(found[0]) and (count is None or found[0]["count"] == count):
        same_file = st is not None and (st[1], st[2]) == found[1:]
        return None, f"{transcript_id} {st[0]} {st[1]} {st[2][1]}" if same_file else transcript_id
    return journal, transcript_id


def format_hits(hits: Sequence[tuple[int, str, str]]) -> str:
    return "\n".join(f"#{pos} {role} {elided(snippet)}" for pos, role, snippet in hits)


# -- every saved session ----------------------------------------------------------------------
def _sessions_to_index(store: SessionStore, home: Home, rows: dict[str, list] | None = None):
    """What the session index needs (SearchIndex._update_sessions): the readable sessions'
    stamps (from the catalog `rows`, read when not given), and how to read one: only the turns
    appended in place since it was indexed when the file grew that way, else all of it. Each
    read says how the session's hits are numbered (`_numbering` in a store with journals on,
    whatever this process's setting: the index serves every process)."""
    rows = store.entries() if rows is None else rows
    current = {name: session_stamp(row[0], row[1]) for name, row in rows.items() if row[4] == ""}

    def indexed(messages: list[Message], first: int) -> list[tuple[int, str, str]]:
        return [(pos, m.role, m.content) for pos, m in enumerate(messages, first) if m.role != "system"]

    def read(name: str, since: tuple[int, int, int, str | None] | None):
        if since is not None and since[0] and since[3] is not None:
            inode, size, count, numbered = since
            added = store.appended_since(name, inode, size)
            if added is not None:
                messages, inode, size = added
                count += len(messages)
                transcript_id = None if numbered == "-" else numbered.split(" ", 1)[0]
                return indexed(messages, count - len(messages) + 1), inode, size, count, False, \
                    _by_file(home, transcript_id, count)[1]
        got = store.index_rows(name)
        if got is None:
            return [], 0, 0, 0, True, None
        rows, inode, size, count, transcript_id = got
        return rows, inode, size, count, True, None if store.private else _by_file(home, transcript_id, count)[1]

    if store.private and store.root is not None:  # whole reads of files, which the index's helper can make itself
        read.whole_from = (str(store.root), store.key)
    return current, read


def search_sessions(settings: Settings, store: SessionStore, query: str, sessions: int = 10,
                    per_session: int = 3, hidden: Callable[[str], bool] | None = None,
                    notice: Callable[[str], None] = lambda _line: None) -> list[SessionHits]:
    """Ranked search across all saved sessions (not their system prompts): BM25 over messages,
    accent- and case-folded; grouped by session, best first, recent sessions breaking ties.
    `hidden`: sessions the searcher may not see (Conversation.hidden), left out of the hits (the
    index itself covers every session, whoever searches). The index is a cache: when it cannot
    be opened or written (a read-only home), every session is read and ranked in memory, slower,
    and `notice` is told so in one line. The hits' numbering, read from their journals, is
    recorded in the index for `chatcli session search`'s fast path."""
    home = Home.of(settings)
    rows = store.entries()  # the catalog, read once: its stamps, then the hits' times
    current, read = _sessions_to_index(store, home, rows)
    wanted = sessions * 4 if hidden else sessions
    index = None
    try:
        index = search_index(settings)
        hits = index.search_sessions(current, read, query, wanted, per_session)
    except (SearchError, OSError) as exc:
        notice(f"the search index cannot be written ({_reason(exc)}): searching without it")
        index, hits = None, SearchIndex(None).search_sessions(current, read, query, wanted, per_session)
    mtimes = {name: row[0] / 1e9 for name, row in rows.items()}
    ranked = grouped(hits, mtimes, sessions, per_session, hidden)
    numbered = {}  # what the index is told of the hits' numbering (see _numbering)
    for group in ranked:  # numbered as `transcript show` numbers them (the index counts the file's)
        if not settings.session_transcript:
            break
        transcript_id, count = _journal_of(store, rows, group.name)
        number, mark = _numbering(home, transcript_id, count)
        group.hits[:] = [(number(pos), role, snippet) for pos, role, snippet in group.hits]
        if group.name in current and rows[group.name][2] is not None:  # the catalog's row of the file indexed
            numbered[group.name] = (current[group.name], mark)
    if index is not None and numbered and not store.private:
        # A cache: the fast path only waits for it. Never waited for: another writer holding the
        # index leaves it to the next search.
        with contextlib.suppress(SearchError, OSError):
            search_index(settings, wait=0).note_numbered(numbered)
    return ranked


def _journal_of(store: SessionStore, rows: dict[str, list], name: str) -> tuple[str | None, int | None]:
    """A session's transcript id and message count: from the catalog's row, or (encryption on:
    the catalog holds nothing from inside a session) from the session itself."""
    row = rows.get(name)
    if row is not None and row[2] is not None:
        return row[5] or None, row[2]
    try:
        data, _ = store.load(name)
    except Exception:  # noqa: BLE001 - unreadable now: its hits keep the index's numbers
        return None, None
    return data.transcript_id, len(data.history)


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError):
        return f"{exc.filename}: {os_cause(exc)}" if exc.filename else os_cause(exc)
    return str(exc).removeprefix("search index ")  # SearchError names the index first


__all__ = ["FORMATS", "Record", "SessionHits", "export", "exported", "format_hits", "format_session_hits", "messages", "record", "remove_journal", "search",
           "index_recorded", "search_index", "search_sessions", "show", "show_blocks", "stats", "warm_index"]
