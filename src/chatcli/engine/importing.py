"""`chatcli import` and `/session import`: another tool's conversations made into sessions.

Each conversation a source reader finds (store/sources) becomes a named session with its journal,
searchable at once: `session search`, `transcript`, export, `/session load` and `-c` work on it
like on any other. The session records where it came from (core/imported.Record, in its
`imported` field), which makes importing again safe: a conversation already imported is left
as it is, one that grew gets its new messages appended to its session, one edited at its source
before its end is left and named. Nothing is written over: a new session takes a free name.

Conversations are written one at a time, oldest first, as they are read: a 100,000-message
archive is never held in memory whole, and an import stopped half-way keeps what it wrote (the
next run adds the rest). The search index is brought up to date at the end."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from chatcli.config.settings import Settings
from chatcli.core.errors import ChatcliError
from chatcli.core import imported as rules
from chatcli.core.imported import CHANGED, GROWN, NEW, SAME, Found, Record, Tally
from chatcli.core.journal import history_hashes
from chatcli.core.messages import Message
from chatcli.core.session import SessionData, make_title
from chatcli.engine import records
from chatcli.engine.transcript import TranscriptSync, now_text
from chatcli.store import sources
from chatcli.store.home import Home
from chatcli.store.session_file import SessionError, SessionExists, read_regular
from chatcli.store.sessions import SessionStore


@dataclass
class Outcome:
    """What the import did with one conversation."""

    action: str  # core/imported NEW, GROWN, SAME or CHANGED
    name: str  # its session
    messages: int  # the messages the session holds of it
    added: int  # messages written by this import
    left_out: dict[str, int]
    where: str
    note: str = ""
    replaced: int = 0  # unsettled messages of an earlier import taken back (the tool changed them)
    was: str = ""  # its name in the other tool, when that one is taken here


@dataclass
class Report:
    source: str
    label: str
    root: str
    dry_run: bool
    outcomes: list[Outcome] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # one line per damaged file
    failed: list[str] = field(default_factory=list)  # one line per conversation not written
    notes: list[str] = field(default_factory=list)
    empty: int = 0  # conversations without a message, passed over
    stopped: str = ""  # interrupted (Ctrl-C) while "reading" (what the report lists was written) or "indexing"

    def count(self, action: str) -> int:
        return sum(1 for outcome in self.outcomes if outcome.action == action)

    def text(self) -> str:
        return "\n".join(report_lines(self))


# progress(files read, files in all, conversations, messages): called after each file and
# every PROGRESS_EVERY conversations within one (a single export file holds thousands).
Progress = Callable[[int, int, int, int], None]
PROGRESS_EVERY = 50


def run_import(settings: Settings, source_name: str, path: str | None, *, dry_run: bool = False,
               progress: Progress | None = None, env: Mapping[str, str] | None = None) -> Report:
    reader = sources.source(source_name)
    env = os.environ if env is None else env
    root = Path(path).expanduser() if path else reader.default(env, Path(env.get("HOME") or Path.home()))
    root = root.absolute()
    _refuse_own_home(settings, root)
    files = reader.files(root)
    home = Home.of(settings)
    try:
        held = None if dry_run else home.import_lock()
    except OSError as exc:
        raise ChatcliError(f"cannot take the import lock in {sources.shown(settings.home)}: "
                           f"{exc.strerror or exc}") from None
    if held is None and not dry_run:
        raise ChatcliError("another chatcli import is running in this CHATCLI_HOME; wait for it to end")
    with held or contextlib.nullcontext():
        return _run(settings, home, reader, root, files, dry_run, progress)


def _run(settings: Settings, home: Home, reader, root: Path, files: list[Path], dry_run: bool,
         progress: Progress | None) -> Report:
    store = home.sessions()
    report = Report(reader.NAME, reader.LABEL, sources.shown(root), dry_run)
    try:
        bringer = _Bringer(settings, store, reader.NAME, dry_run, report)
        _read_all(reader, files, bringer, report, progress)
        _adopt_recall(home, reader, root, report)
    except KeyboardInterrupt:  # Ctrl-C: what was written stays (and is said); a next run adds the rest
        report.stopped = "reading"
        return report
    if bringer.written:
        try:
            with contextlib.suppress(Exception):  # a cache: the next search reads what it lacks
                records.warm_index(settings, None, store)
        except KeyboardInterrupt:
            report.stopped = "indexing"
    return report


def _read_all(reader, files: list[Path], bringer: _Bringer, report: Report, progress: Progress | None) -> None:
    conversations = messages = 0
    for done, file in enumerate(files, 1):
        tally = Tally(sources.shown(file))
        try:
            for found in reader.read(file, tally):
                try:
                    bringer.bring(found)
                except (ChatcliError, OSError) as exc:  # writing it failed: said, and the others go on
                    report.failed.append(f"{found.where}: not imported: {getattr(exc, 'strerror', None) or exc}")
                conversations += 1
                messages += len(found.messages)
                if progress is not None and conversations % PROGRESS_EVERY == 0:
                    progress(done - 1, len(files), conversations, messages)
        except OSError as exc:
            report.skipped.append(f"{tally.where}: could not be read ({exc.strerror or exc})")
        except Exception as exc:  # noqa: BLE001 - one file a reader could not make sense of: said, not fatal
            report.skipped.append(f"{tally.where}: could not be read ({type(exc).__name__}: {exc})")
        if tally:
            report.skipped.append(tally.line())
        if progress is not None:
            progress(done, len(files), conversations, messages)


def _adopt_recall(home: Home, reader, root: Path, report: Report) -> None:
    """Copy the source's recall entries (another ChatCLI home's `ccr/`), which the compaction
    summaries of its sessions name: copied, already here, or left out with the reason."""
    entries = getattr(reader, "recall_entries", None)
    if entries is None or not root.is_dir():
        return
    outcomes: dict[str, int] = {}
    recall = home.recall()
    for filename, path in entries(root):
        try:
            raw, _stat = read_regular(path)  # a link or a FIFO planted there is not followed
            outcome = recall.adopt(filename, raw, dry_run=report.dry_run)
        except OSError as exc:
            outcome = f"could not be read ({exc.strerror or exc})"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    for outcome, count in outcomes.items():
        what = f"{count} recall entr{'y' if count == 1 else 'ies'}"
        if outcome == "had":
            report.notes.append(f"{what} already here")
        elif outcome in ("copied", "would be copied"):  # "would be copied": a dry run's
            report.notes.append(f"{what} {outcome}")
        else:
            report.notes.append(f"{what} not copied: {outcome}")


def sources_table(settings: Settings, env: Mapping[str, str] | None = None) -> str:
    """Each source, what it reads and where it looks by default, and whether that is here:
    `chatcli import` and `/session import` without a source."""
    env = os.environ if env is None else env
    home = Path(env.get("HOME") or Path.home())
    lines = ["Sources (chatcli import SOURCE [PATH]):"]
    for name in sources.SOURCES:
        reader = sources.source(name)
        where = reader.default(env, home)
        here = "found" if where.exists() else "not found"
        if _is_own_home(settings, where):
            here = "this chatcli's own home: give the path of another"
        lines.append(f"  {name:<12} {reader.LABEL}: {sources.shown(where)} ({here})")
    return "\n".join(lines)


def _is_own_home(settings: Settings, root: Path) -> bool:
    own, root = Path(os.path.realpath(settings.home)), Path(os.path.realpath(root))
    return root == own or own in root.parents


def _refuse_own_home(settings: Settings, root: Path) -> None:
    if _is_own_home(settings, root):
        raise sources.SourceError(f"{sources.shown(root)} is this chatcli's own home (CHATCLI_HOME): "
                                  "there is nothing to import from it")


class _Bringer:
    """Brings conversations into one store, one at a time: the sessions this source imported
    before are found once (by their names, then their import records) and kept up to date."""

    def __init__(self, settings: Settings, store: SessionStore, source: str, dry_run: bool, report: Report) -> None:
        self.settings = settings
        self.store = store
        self.key = store.key
        self.source = source
        self.dry_run = dry_run
        self.report = report
        self.written = 0
        self.names = set(store.entries())
        self.made: set[str] = set()  # names taken in this run (a dry run writes none)
        self.known: dict[str, Record] = {}  # source id → the record of the session that holds it
        for name in self.names:  # its sessions are named `<source>-…` (or kept their own: see `bring`)
            if name.startswith(f"{source}-"):
                self._learn(name)

    def _learn(self, name: str) -> None:
        try:
            record = Record.of_meta(self.store.fields(name, reach=16384).get(rules.META_KEY))
        except SessionError:
            return  # unreadable: not ours to update, and its name stays taken
        if record is not None and record.source == self.source and record.name == name:
            self.known[record.id] = record

    def taken(self, name: str) -> bool:
        return name in self.names or name in self.made or self.store.exists(name)

    def bring(self, found: Found) -> None:
        if not found.messages:
            self.report.empty += 1
            return
        rules.well_paired(found)
        if found.name and found.id not in self.known and found.name in self.names:
            self._learn(found.name)  # a session that kept its name in the other tool may be this one
        record = self.known.get(found.id)
        action, start = rules.decide(found, record)
        if action == NEW:
            self._new(found)
        elif action == GROWN:
            self._grown(found, record, start)
        else:
            note = "" if action == SAME else (
                "an earlier message changed at the source since it was imported (edited there); left as it was")
            self.report.outcomes.append(Outcome(action, record.name, record.count, 0, record.left_out,
                                                found.where, note))

    def _tag(self, found: Found) -> str:
        """A short hash of the conversation's id: its name's last part when the title gives
        none, and always in a sealed store (keyed there: the name tells nothing of the id)."""
        text = f"{self.source}\0{found.id}".encode()
        if self.key is not None:
            return hmac.new(self.key, b"chatcli import name\0" + text, hashlib.sha256).hexdigest()[:10]
        return hashlib.sha256(text).hexdigest()[:10]

    def _name(self, found: Found, kept: str | None) -> str:
        title = None if self.key is not None else (found.title or make_title(found.messages))
        return rules.session_name(self.source, found.started, title, self.taken, kept=kept, tag=self._tag(found))

    def _new(self, found: Found) -> None:
        name = self._name(found, found.name)
        was = found.name if found.name and found.name != name else ""
        outcome = Outcome(NEW, name, len(found.messages), len(found.messages), found.left_out, found.where, was=was)
        hashes = history_hashes(found.messages)  # hashed once: for the journal and the import record
        record = self._record(found, name, len(found.messages), hashes)
        if self.dry_run:  # as if made: the same conversation again in this run is not made twice
            self.made.add(name)
            self.known[found.id] = record
            self.report.outcomes.append(outcome)
            return
        sync = TranscriptSync(self.settings)
        try:
            notes = sync.sync(found.messages, hashes=hashes)
            data = SessionData(history=found.messages, title=_titled(found.title), transcript_id=sync.id,
                               extra={rules.META_KEY: record.to_meta()})
            while True:
                try:
                    self.store.create(name, data, latest=False)
                    break
                except SessionExists:  # made meanwhile by someone else: the next free name
                    self.made.add(name)
                    name = self._name(found, None)
                    record.name = outcome.name = name
                    data.extra[rules.META_KEY] = record.to_meta()
        except BaseException:  # not made (an error, Ctrl-C): its journal is not left behind
            if self.store.stamp(name) is None:  # (but the journal of a session written is its own)
                sync.discard(sync.id)
            raise
        self.store.date(name, rules.last_time(found))
        self.made.add(name)
        self.known[found.id] = record
        self.written += 1
        self.report.outcomes.append(outcome)
        self.report.notes.extend(notes)

    def _grown(self, found: Found, record: Record, start: int) -> None:
        """Add what the conversation has beyond what its session holds; from `start` below
        `record.count`, first take back the unsettled messages the import wrote (the tool changed
        them since), when nothing was added to the session after them."""
        added = found.messages[start:]
        replaced = record.count - start
        note = ""
        try:
            with self.store.lock(record.name):
                data, stamp = self.store.load(record.name)
                current = Record.of_meta(data.extra.get(rules.META_KEY))
                if current != record:  # changed since it was read at the start: read again next run
                    raise SessionError(f"session '{record.name}' changed during the import; run it again")
                if data.left_out:  # a turn a crash cut short, which chatcli takes back from the journal at a load
                    raise SessionError(f"session '{record.name}' has a turn a crash cut short: open it in chatcli "
                                       "once (it takes the turn back), then import again")
                held = data.history[:record.held]
                if len(held) < record.held or rules.digest(held) != record.held_digest:
                    raise _Left("its messages were changed here since its import (a rewind, a compaction); "
                                "left as it was")
                after = len(data.history) - record.held  # turns made in chatcli since
                if replaced:
                    if after or replaced > record.run:
                        last = "its last message" if replaced == 1 else f"its last {replaced} messages"
                        raise _Left(f"{last} changed at the source after turns were made here; left as it was")
                    del data.history[len(data.history) - replaced:]
                    run = record.run - replaced + len(added)
                elif after:
                    note = "after the turns made in chatcli since its import"
                    run = len(added)
                else:
                    run = record.run + len(added)
                data.history.extend(added)
                if self.dry_run:  # what the import would do, checked as it checks it: nothing written
                    self.report.outcomes.append(Outcome(GROWN, record.name, len(data.history), len(added) - replaced,
                                                        found.left_out, found.where, note, replaced))
                    return
                sync = TranscriptSync(self.settings)
                sync.attach(data.transcript_id)
                hashes = history_hashes(data.history)
                self.report.notes.extend(sync.sync(data.history, hashes=hashes))
                data.transcript_id = data.transcript_id or sync.id
                updated = self._record(found, record.name, len(found.messages))
                updated.held, updated.held_digest, updated.run = len(data.history), rules.digest((), hashes), run
                data.extra[rules.META_KEY] = updated.to_meta()
                self.store.write(record.name, data, latest=False)
                # Its last change: the source's last message, or a turn made here since, if later.
                self.store.date(record.name, max(stamp.mtime_ns / 1e9, rules.last_time(found) or 0))
        except _Left as left:
            self.report.outcomes.append(Outcome(CHANGED, record.name, record.count, 0, record.left_out,
                                                found.where, str(left)))
            return
        except SessionError as exc:
            self.report.failed.append(f"{found.where}: not updated: {exc}")
            return
        self.known[found.id] = updated
        self.written += 1
        self.report.outcomes.append(Outcome(GROWN, record.name, len(data.history), len(added) - replaced,
                                            found.left_out, found.where, note, replaced))

    def _record(self, found: Found, name: str, count: int, hashes: list[str] | None = None) -> Record:
        """The record of a session holding the conversation's first `count` messages, as they
        are (`held`, `run`: the caller says otherwise when turns made here stand among them)."""
        hashes = history_hashes(found.messages[:count]) if hashes is None else hashes
        firm = rules.settled(found.messages[:count])
        whole = rules.digest((), hashes[:count])
        return Record(self.source, found.id, name, count, whole, now_text(), found.where, dict(found.left_out),
                      dict(found.details), firm, rules.digest((), hashes[:firm]), count, whole, count)


class _Left(Exception):
    """A conversation whose session cannot take what changed at its source: left, and why."""


def _titled(title: str | None) -> str | None:
    """A source's title as a session's (SPEC §4): whitespace collapsed, at most TITLE_MAX characters."""
    if not title or not title.strip():
        return None
    return make_title([Message("user", title)])


def report_lines(report: Report) -> list[str]:
    """What an import says: a summary line, one line per session made, grown or left, the
    conversations already imported as a count, then what was skipped."""
    made, grown, same, changed = (report.count(a) for a in (NEW, GROWN, SAME, CHANGED))
    dry = report.dry_run
    written = sum(o.added + o.replaced for o in report.outcomes if o.action in (NEW, GROWN))
    left = f"; {changed} left as {'it was' if changed == 1 else 'they were'}" if changed else ""
    lines = [f"{'Would import' if dry else 'Imported'} from {report.label} ({report.root}): {made} new "
             f"session{_s(made)}, {grown} grown, {_count(written, 'message')}{'' if dry else ' written'}; "
             f"{same} already imported and unchanged{left}."]
    for outcome in report.outcomes:
        now = _count(outcome.messages, "message")
        if outcome.action == NEW:
            head = f"  {'would make' if dry else 'new'} '{outcome.name}': {now}"
            if outcome.was:
                head += f" ('{outcome.was}' there: that name is taken here)"
            if outcome.left_out:
                head += f"; left out: {rules.described(outcome.left_out)}"
        elif outcome.action == GROWN and outcome.replaced:
            head = (f"  {'would update' if dry else 'updated'} '{outcome.name}' (now {now}): "
                    f"{_count(outcome.replaced, 'message')} replaced as the source now has "
                    f"{'it' if outcome.replaced == 1 else 'them'}, {max(outcome.added, 0)} added")
        elif outcome.action == GROWN:
            after = f", {outcome.note}" if outcome.note else ""
            head = f"  {'would add' if dry else 'added'} {_count(outcome.added, 'message')} to '{outcome.name}' " \
                   f"(now {now}{after})"
        elif outcome.action == CHANGED:
            head = f"  left '{outcome.name}': {outcome.note}"
        else:
            continue
        lines.append(head)
    if report.empty:
        lines.append(f"  {_count(report.empty, 'conversation')} without a message passed over")
    lines.extend(f"  {line}" for line in report.skipped)
    lines.extend(f"  {line}" for line in report.failed)
    lines.extend(f"  {note}" for note in dict.fromkeys(report.notes))
    if report.stopped == "reading":
        lines.append("Stopped before the end: the sessions above are written; run the import again to add the rest.")
    elif report.stopped:
        lines.append("Stopped while indexing: every session is written; the next search indexes what is left.")
    return lines


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{_s(number)}"


def _s(count: int) -> str:
    return "" if count == 1 else "s"
