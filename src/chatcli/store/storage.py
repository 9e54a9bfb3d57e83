"""Every local store under $CHATCLI_HOME, what it holds, and the plan that prunes it (SPEC §10).

A `Plan` is computed once from what is on disk; `apply` removes exactly the files the plan
lists, each only if it is still the file the plan saw (same mtime and size, and for a
session under its lock), so a session another surface wrote in the meantime survives.

| store           | what (store.home says where)            | rule                                          |
|-----------------|-----------------------------------------|-----------------------------------------------|
| sessions        | session files and their lock files      | machine sessions: TTL, count backstop; test   |
|                 |                                         | bursts and orphan lock files on demand. A     |
|                 |                                         | file whose name chatcli cannot use (Go's      |
|                 |                                         | rules differ) is counted, never removed       |
| transcripts     | journals                                | kept while a session refers to one (a file    |
|                 |                                         | chatcli cannot name too, and one that another |
|                 |                                         | program wrote back without the journal's      |
|                 |                                         | name: store.catalog remembers it); else the   |
|                 |                                         | session TTL; orphans on demand                |
| recall store    | recall entries                          | its own TTL and size cap, on demand only.     |
|                 |                                         | Go ChatCLI's `.ccr` entries: counted, never   |
|                 |                                         | removed (Go prunes them by its own rules)     |
| cost snapshots  | the requests' tokens and costs          | on demand: test bursts (4+ in a minute of at  |
|                 |                                         | most 2 requests each)                         |
| memory          | the global memory's notes               | yours: never pruned (/memory forget)          |
| contexts        | the /context snapshots                  | yours: never pruned (/context delete)         |
| scheduler       | the /schedule jobs (schedule.json)      | yours: never pruned (/schedule remove)        |
| prompt history  | HISTORY_FILE                            | trimmed when written; never pruned here       |
| search index    | the index files, the listing caches     | rebuilt when missing; never pruned            |
| conversation hub| hub.db rows (the chat gateway)          | on demand only: unbound senders unseen for    |
|                 |                                         | the session TTL, their mirror gone; delivery  |
|                 |                                         | records past DELIVERY_KEEP. Bindings stay     |
| logs            | the servers' logs and their rotated     | never pruned: each log is rotated as it is    |
|                 | copies (engine.upkeep)                  | written, past CHATCLI_LOG_MAX_SIZE, keeping   |
|                 |                                         | LOG_BACKUPS older copies                      |
| temporary files | .*.tmp left by interrupted atomic writes | start-up and on demand, once their writer is  |
|                 |                                         | gone (or after an hour)                       |
"""

from __future__ import annotations

import os
import stat
import time
from collections import namedtuple
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from chatcli.config.settings import Settings
from chatcli.core import retention
from chatcli.core.errors import ChatcliError
from chatcli.core.names import is_valid_name
from chatcli.core.retention import DELIVERY_KEEP, human_size
from chatcli.core.session import SessionData
from chatcli.core.terminal import printable
from chatcli.store import home
from chatcli.store.atomic import TEMP_RE, process_alive
from chatcli.store.home import Home
from chatcli.store.session_file import read_regular
from chatcli.store.sessions import SessionError

TYPE_CHECKING = False
if TYPE_CHECKING:  # hub.db (and sqlite3) is opened only by a plan that looks at it, not at start-up
    from chatcli.store.hub import Principal

STORES = ("sessions", "transcripts", "recall", "hub", "costs", "memory", "contexts", "schedule", "history", "index",
          "logs", "temp")
LABELS = {
    "sessions": "sessions",
    "transcripts": "transcripts",
    "recall": "recall store",
    "history": "prompt history",
    "index": "search index",
    "hub": "conversation hub",
    "costs": "cost snapshots",
    "memory": "memory",
    "contexts": "contexts",
    "schedule": "scheduler",
    "logs": "logs",
    "temp": "temporary files",
}
_ALIASES = {"session": "sessions", "transcript": "transcripts", "journals": "transcripts", "ccr": "recall",
            "recall-store": "recall", "prompt-history": "history", "search": "index", "search-index": "index",
            "tmp": "temp", "temporary": "temp",
            "hub.db": "hub", "gateway": "hub", "conversation-hub": "hub", "threads": "hub",
            "notes": "memory", "cost": "costs", "cost-snapshots": "costs", "scheduler": "schedule",
            "schedules": "schedule", "log": "logs", "server-logs": "logs"}
NEVER_PRUNED = ("memory", "contexts", "schedule", "history", "index", "logs")

# A journal no session refers to is an orphan only once nothing has written it for this long:
# an unsaved conversation writes its journal before any session names it.
ORPHAN_GRACE = retention.DAY
# A lock file of a missing session, or a temporary file whose writer is gone, must also be
# at least this old (a writer may be between creating it and using it).
SETTLE = 60.0
# A temporary file this old is lost whoever made it: an atomic write takes seconds at most.
TEMP_MAX_AGE = 3600.0


class Removal(namedtuple("Removal", "store path size mtime_ns inode reason session owners place",
                         defaults=("", (), None))):
    """One file a plan removes, as it was when planned (size, mtime, inode). `session` is the
    session name for a session file; `owners` are the sessions a journal goes with. `place`: the
    server's files (store.pg_places) it is a row of, with a server store (its `path` is then
    its kind and name, never a path here; `inode` its generation)."""

    __slots__ = ()


@dataclass
class HubPlan:
    """What a prune removes from hub.db: rows, not files. `stale`: unbound principals not seen
    within the session TTL whose thread's mirror is gone (or goes in the same plan); `deliveries`:
    how many delivery records are older than `before`."""

    stale: list[Principal] = field(default_factory=list)
    deliveries: int = 0
    before: float = 0.0
    where: str = "hub.db"  # as the user is told: hub.db, or the server's (a PostgreSQL store)

    def __bool__(self) -> bool:
        return bool(self.stale or self.deliveries)


@dataclass
class Plan:
    removals: list[Removal]
    # Why some rule was not applied (a store that could not be read, say): one line each.
    notes: list[str] = field(default_factory=list)
    hub: HubPlan = field(default_factory=HubPlan)

    def __bool__(self) -> bool:
        return bool(self.removals or self.hub)

    def by_reason(self) -> dict[str, list[Removal]]:
        groups: dict[str, list[Removal]] = {reason: [] for reason in retention.REASONS}
        for removal in self.removals:
            groups[removal.reason].append(removal)
        return {reason: items for reason, items in groups.items() if items}

    def size(self) -> int:
        return sum(removal.size for removal in self.removals)


@dataclass
class Applied:
    removed: list[Removal] = field(default_factory=list)
    # Planned but kept: the file changed or went away since the plan, or is in use.
    kept: list[tuple[Removal, str]] = field(default_factory=list)
    failed: list[tuple[Removal, str]] = field(default_factory=list)
    # Planned, but already removed by someone else (another prune, the start-up sweep).
    gone: list[Removal] = field(default_factory=list)
    # hub.db: the principals forgotten, those kept (seen again, bound, their mirror kept), the
    # delivery records dropped, and why the hub could not be written, if it could not.
    forgotten: list[Principal] = field(default_factory=list)
    hub_kept: list[tuple[Principal, str]] = field(default_factory=list)
    deliveries: int = 0
    hub_failed: str = ""


# What journals need to know about sessions: which go (name → reason), which journal each
# session refers to (id → names; a file chatcli cannot name refers too), and how many session
# files could not tell us (unreadable): while there are any, no journal is pruned.
_Sessions = namedtuple("_Sessions", "removed journal_refs unknown")

# A file name shown in a note is cut to this many characters (a name may be far longer).
_SHOWN_NAME = 48


@dataclass(frozen=True)
class Usage:
    store: str
    files: int
    size: int


# One log of the logs store: its name ("gateway.log"), its files (with the rotated copies), bytes.
LogUsage = namedtuple("LogUsage", "name files size")


def store_key(text: str) -> str | None:
    """A store as the user names it ('sessions', 'ccr', 'tmp'…) → its key, or None."""
    key = text.strip().lower()
    key = _ALIASES.get(key, key)
    return key if key in STORES else None


class Storage:
    def __init__(self, settings: Settings, now: float | None = None) -> None:
        self.settings = settings
        self.layout = Home.of(settings)
        self.home = self.layout.root
        self.sessions = self.layout.sessions()
        self.transcripts_dir = self.layout.transcripts_dir
        self.ccr_dir = self.layout.recall_dir
        self.index_dir = self.layout.index_dir
        self.now = time.time() if now is None else now

    # -- what is there ---------------------------------------------------------------------
    def usage(self) -> list[Usage]:
        """File count and bytes per store: under CHATCLI_HOME, and with a server store what the
        server holds too (each session, journal, note or entry counted as the file it would be)."""
        counts = {key: [0, 0] for key in STORES}
        for key, _path, st in self._files():
            counts[key][0] += 1
            counts[key][1] += st.st_size
        for key, (count, size) in self.server_usage().items():
            counts[key][0] += count
            counts[key][1] += size
        return [Usage(key, files, size) for key, (files, size) in counts.items()]

    def server_usage(self) -> dict[str, tuple[int, int]]:
        """{store: (count, bytes)} on the sessions' server; none without one, or while it cannot
        be reached (the plan's notes say so)."""
        if self.layout.store is None:
            return {}
        from chatcli.store.pg_usage import server_usage

        try:
            return server_usage(self.layout.store)[1]
        except SessionError:
            return {}

    def go_recall_entries(self) -> Usage:
        """Go ChatCLI's entries in the recall store (counted in its usage, never pruned here)."""
        files = size = 0
        for entry in _scandir(self.ccr_dir):
            if home.go_entry_named(entry.name) is not None and entry.is_file(follow_symlinks=False) \
                    and (st := _stat(entry)) is not None:
                files, size = files + 1, size + st.st_size
        return Usage("recall", files, size)

    def logs(self) -> list[LogUsage]:
        """Each log under logs/ with its rotated copies (files, bytes), by name; any other file
        there under its own."""
        logs: dict[str, list[int]] = {}
        for path, st in self._log_files():
            counts = logs.setdefault(home.log_named(path.name) or path.name, [0, 0])
            counts[0] += 1
            counts[1] += st.st_size
        return [LogUsage(name, files, size) for name, (files, size) in sorted(logs.items())]

    # -- what the rules would remove -----------------------------------------------------
    def plan(self, *, on_demand: bool = True, only: str | None = None, record: bool = False) -> Plan:
        """Everything the rules remove now. At start-up (`on_demand=False`) only the sessions' and
        journals' TTL and count rules apply, and lost temporary files go (the same rule as on demand:
        a killed write leaves one, and nothing else would remove it); the recall store and the hub
        (which a sweep must open), orphans and test bursts wait for a request.
        Planning writes nothing unless `record` lets it refresh the listing catalog (a sweep
        does; a dry run must leave every byte as it was)."""
        plan = Plan([])
        wanted = STORES if only is None else (only,)
        if "sessions" in wanted or "transcripts" in wanted:
            sessions = self._plan_sessions(plan, on_demand=on_demand, keep_in_plan="sessions" in wanted,
                                           record=record)
            if "transcripts" in wanted and sessions is not None:
                self._plan_journals(plan, sessions, on_demand=on_demand)
        if "recall" in wanted and on_demand:  # the seed sweeps the recall store on demand only
            self._plan_recall(plan)
        if "temp" in wanted:
            self._plan_temp(plan)
        if "hub" in wanted and on_demand:  # never at start-up (SPEC §10: the hub is swept on demand)
            self._plan_hub(plan)
        if "costs" in wanted and on_demand:
            self._plan_costs(plan)
        return plan

    def _plan_sessions(self, plan: Plan, *, on_demand: bool, keep_in_plan: bool, record: bool) -> _Sessions | None:
        """Adds the session removals to `plan` (when asked) and returns what journals need to
        know: when sessions are not part of this plan, none of them goes."""
        settings = self.settings
        if self.sessions.root is None:  # on a server (CHATCLI_STORE)
            self._plan_server_sessions(plan, on_demand=on_demand, keep_in_plan=keep_in_plan)
            return None
        try:
            stats, misnamed = self._stat_sessions()
            contents: dict[str, list] = {}
            # Message counts (bursts) and journal ids. With encryption on that means opening every
            # session: done on demand only (the start-up sweep leaves journals alone then).
            reading = (on_demand or self._has_journals()) and (on_demand or not self.sessions.private)
            if reading:
                contents = self.sessions.entries(fresh=True, record=record, reveal=True)
        except (OSError, SessionError) as exc:
            reason = exc if isinstance(exc, SessionError) else (exc.strerror or exc)
            plan.notes.append(f"sessions were not examined: cannot list {self.sessions.root}: {reason}")
            return None
        rows: dict[str, tuple] = {}  # name → (stat, messages or None, transcript id, readable)
        for name, st in stats.items():
            row = contents.get(name)
            if row is not None and row[0] == st.st_mtime_ns and row[1] == st.st_size:
                rows[name] = (st, row[2], row[5], not row[4])
            else:  # not read (a start-up sweep without journals), or changed since it was
                rows[name] = (st, None, "", not contents)
        refs: dict[str, list[str]] = {}
        for name, (_st, _messages, transcript, _readable) in rows.items():
            if transcript:
                refs.setdefault(transcript, []).append(name)
        # A file chatcli cannot name (Go's name rules differ, or renamed by hand) is nobody's
        # machine session: never removed. It may still refer to a journal, which then stays.
        unreadable = 0
        if misnamed and reading:
            for name in misnamed:
                data = self._read_misnamed(name)
                if data is None:
                    unreadable += 1
                elif data.transcript_id:
                    refs.setdefault(data.transcript_id, []).append(name)
        for name, transcript in self.sessions.catalog.remembered_journals().items():
            # A journal chatcli named in a session's file that another program wrote back without
            # naming it (Go ChatCLI keeps no transcript_id): the session's still, while it exists.
            if name in rows and name not in refs.get(transcript, ()):
                refs.setdefault(transcript, []).append(name)
        if misnamed and on_demand:
            plan.notes.append(_misnamed_note(self.sessions.root, misnamed))
        decided = retention.machine_sessions(
            ((name, st.st_mtime, messages) for name, (st, messages, _t, _r) in rows.items()),
            now=self.now, ttl_days=settings.session_ttl_days, keep=settings.autosave_keep, on_demand=on_demand,
        )
        unknown = unreadable + sum(1 for row in rows.values() if not row[3])
        if not keep_in_plan:
            return _Sessions({}, refs, unknown)
        root = self.sessions.root
        for name, reason in sorted(decided.items(), key=lambda item: rows[item[0]][0].st_mtime_ns):
            st = rows[name][0]
            plan.removals.append(Removal("sessions", home.session_path(root, name), st.st_size, st.st_mtime_ns,
                                         st.st_ino, reason, name))
        if on_demand:
            self._plan_locks(plan, rows)
        return _Sessions(decided, refs, unknown)

    def _plan_server_sessions(self, plan: Plan, *, on_demand: bool, keep_in_plan: bool) -> None:
        """The machine sessions' rules on a server's sessions (their rows stand for files: the
        time of change, the size, the generation for an inode; a session written since the plan
        is kept, as a file would be), and the journals that go with them: a journal whose every
        session goes, and that no other session names (`_apply_journals` asks again)."""
        if not keep_in_plan:
            return
        try:
            rows = self.sessions.entries()
        except SessionError as exc:
            plan.notes.append(f"sessions were not examined: {exc}")
            return
        decided = retention.machine_sessions(
            ((name, row[0] / 1e9, row[2]) for name, row in rows.items()), now=self.now,
            ttl_days=self.settings.session_ttl_days, keep=self.settings.autosave_keep, on_demand=on_demand)
        for name, reason in sorted(decided.items(), key=lambda item: rows[item[0]][0]):
            changed, size, inode = rows[name][0], rows[name][1], rows[name][7]
            plan.removals.append(Removal("sessions", Path(name), size, changed, inode, reason, name))
        # With a key the journals' ids are in the sealed sessions: opened on demand only.
        # The journals: those only removed sessions name go with them; on demand, those no session
        # names (orphans) too. With a key the sessions are opened to know which they name: on
        # demand only, as with files.
        if not (on_demand or (decided and not self.sessions.private)):
            return
        named = self._server_journals(rows)
        if named is None:
            return
        owners: dict[str, list[str]] = {}
        for name, transcript in named.items():
            owners.setdefault(transcript, []).append(name)
        from chatcli.store.pg_journal import journal_stats

        place = _ServerJournals(self.layout)
        try:
            journals = journal_stats(self.layout.store)
        except SessionError as exc:
            plan.notes.append(f"the journals were not examined: {exc}")
            return
        for transcript, (changed, size, generation) in sorted(journals.items()):
            names = owners.get(transcript, [])
            if names and not all(name in decided for name in names):
                continue
            if not names and not on_demand:
                continue
            # Written within the grace, it may be a running conversation's, whose session is
            # written after its journal (a resumed autosave's question): kept, as a file's would be.
            if self.now - changed / 1e9 <= ORPHAN_GRACE:
                continue
            reason = decided[names[0]] if names else retention.ORPHAN
            plan.removals.append(Removal("transcripts", home.journal_path(self.transcripts_dir, transcript), size,
                                         changed, generation, reason, "", tuple(names), place))

    def _server_journals(self, rows: dict[str, list]) -> dict[str, str] | None:
        """{session: the journal it names} of a server's sessions (`rows`, their listing); None
        when one cannot be read (then no journal is known to be free)."""
        if not self.sessions.private:
            return {name: row[5] for name, row in rows.items() if row[5]}
        found = {}
        for name in rows:
            try:
                data, _stamp = self.sessions.load(name)
            except SessionError:
                return None
            if data.transcript_id:
                found[name] = data.transcript_id
        return found

    def _stat_sessions(self) -> tuple[dict[str, os.stat_result], dict[str, os.stat_result]]:
        """{name: stat} of every session file, and the same for the session files whose names
        chatcli cannot use. Raises OSError when the directory exists but cannot be listed (or the
        sessions are on a server: there is none)."""
        if self.sessions.root is None:
            raise OSError("the sessions are kept on a server (CHATCLI_STORE)")
        try:
            entries = list(os.scandir(self.sessions.root))
        except FileNotFoundError:
            return {}, {}
        stats: dict[str, os.stat_result] = {}
        misnamed: dict[str, os.stat_result] = {}
        for entry in entries:
            name = home.session_named(entry.name)
            if name is None:
                continue
            st = _stat(entry)
            if st is None or not stat.S_ISREG(st.st_mode):  # never a symlink, directory or FIFO
                continue
            if not is_valid_name(name):
                misnamed[name] = st
            else:
                stats[name] = st
        return stats, misnamed

    def _read_misnamed(self, name: str) -> SessionData | None:
        """The session in a file whose name chatcli cannot use, or None if it cannot be read.
        Read only, for the journal (and cost snapshot) it refers to: such a file is never written."""
        try:
            raw, _st = read_regular(home.session_path(self.sessions.root, name))
            return self.sessions.decode(name, raw)
        except (OSError, SessionError):
            return None

    def _plan_locks(self, plan: Plan, rows: dict[str, list]) -> None:
        """Lock files of sessions that no longer exist (left by a crash, or by an older chatcli)."""
        for entry in _scandir(self.sessions.root):
            session = home.locked_session(entry.name)
            if session is None:
                continue
            if session in rows or os.path.exists(home.session_text(os.path.dirname(entry.path), session)):
                continue
            st = _stat(entry)
            if st is not None and stat.S_ISREG(st.st_mode) and self.now - st.st_mtime > SETTLE:
                plan.removals.append(Removal("sessions", Path(entry.path), st.st_size, st.st_mtime_ns, st.st_ino,
                                             retention.ORPHAN))

    def _has_journals(self) -> bool:
        return any(home.journal_named(entry.name) is not None for entry in _scandir(self.transcripts_dir))

    def _plan_journals(self, plan: Plan, sessions: _Sessions, *, on_demand: bool) -> None:
        journals = [(transcript_id, entry) for entry in _scandir(self.transcripts_dir)
                    if (transcript_id := home.journal_named(entry.name)) is not None]
        if not journals:
            return
        if sessions.unknown:
            # An unreadable session (a newer format, a missing key) may refer to any journal.
            plan.notes.append(f"transcripts were not pruned: {sessions.unknown} session file(s) cannot be read, "
                              "so which journals they refer to is unknown")
            return
        refs, removed_sessions = sessions.journal_refs, sessions.removed
        ttl = self.settings.session_ttl_days
        for transcript_id, entry in journals:
            st = _stat(entry)
            if st is None or not stat.S_ISREG(st.st_mode):
                continue
            owners = tuple(refs.get(transcript_id, ()))
            if owners:
                if any(owner not in removed_sessions for owner in owners):
                    continue
                if self.now - st.st_mtime <= ORPHAN_GRACE:  # written lately: a REPL may still be using it
                    continue
                reason = removed_sessions[owners[0]]  # it goes with the session(s) it belonged to
            elif retention.expired(st.st_mtime, self.now, ttl):
                reason = retention.TTL
            elif on_demand and self.now - st.st_mtime > ORPHAN_GRACE:
                reason = retention.ORPHAN
            else:
                continue
            plan.removals.append(Removal("transcripts", Path(entry.path), st.st_size, st.st_mtime_ns, st.st_ino,
                                         reason, "", owners))

    def _server_files(self, store: str, place) -> list[Removal]:
        """A server store's files of one kind, as removals yet to be given a reason."""
        return [Removal(store, Path(place.kind) / name, size, changed_ns, generation, "", "", (), place)
                for name, changed_ns, size, generation in place.sizes()]

    def _plan_recall(self, plan: Plan) -> None:
        settings = self.settings
        if self.layout.store is not None:  # rows on the server: the same rules
            found = [r for r in self._server_files("recall", self.layout.recall().place)
                     if home.go_entry_named(r.path.name) is None]
            going = [r for r in found if retention.expired(r.mtime_ns / 1e9, self.now, settings.ccr_ttl_days)]
            plan.removals += [r._replace(reason=retention.TTL) for r in going]
            rest = {str(r.path): r for r in found if r not in going}
            capped = retention.over_cap([(r.mtime_ns / 1e9, r.size, key) for key, r in rest.items()],
                                        settings.ccr_max_size)
            plan.removals += [rest[key]._replace(reason=retention.SIZE_CAP) for key in capped]
            return
        survivors: list[tuple[float, int, str]] = []
        stats: dict[str, os.stat_result] = {}
        for entry in _scandir(self.ccr_dir):
            if entry.name.startswith(".") or not entry.is_file(follow_symlinks=False):
                continue
            # Go ChatCLI's own entries: Go prunes them by its own TTL. Removed here by chatcli's
            # (which the user may set otherwise) or counted against chatcli's cap, a Go summary
            # would lose its originals while Go still expects them.
            if home.go_entry_named(entry.name) is not None:
                continue
            st = _stat(entry)
            if st is None:
                continue
            if retention.expired(st.st_mtime, self.now, settings.ccr_ttl_days):
                plan.removals.append(Removal("recall", Path(entry.path), st.st_size, st.st_mtime_ns, st.st_ino,
                                             retention.TTL))
            else:
                stats[entry.path] = st
                survivors.append((st.st_mtime, st.st_size, entry.path))
        for path in retention.over_cap(survivors, settings.ccr_max_size):
            st = stats[path]
            plan.removals.append(Removal("recall", Path(path), st.st_size, st.st_mtime_ns, st.st_ino,
                                         retention.SIZE_CAP))

    def _plan_temp(self, plan: Plan) -> None:
        """A lost temporary file: its writer (the pid in its name) is gone, or it is too old for any
        write to still need it. A pid a live process holds counts as alive, whoever holds it."""
        for path, st, pid in self._temp_files():
            age = self.now - st.st_mtime
            if age > TEMP_MAX_AGE or (age > SETTLE and not process_alive(pid)):
                plan.removals.append(Removal("temp", path, st.st_size, st.st_mtime_ns, st.st_ino,
                                             retention.LOST_TEMP))

    def _plan_hub(self, plan: Plan) -> None:
        """The hub's stale principals and old delivery records: hub.db's, or the server's with a
        server store (every gateway replica's)."""
        if self.layout.store is None and not os.path.exists(self.layout.hub_path):
            return
        import sqlite3

        from chatcli.store.hub import HubError

        hub = self.layout.hub(readonly=True)
        if self.layout.store is not None:
            plan.hub.where = "the hub on the server"
        try:
            cutoff = self.now - self.settings.session_ttl_days * retention.DAY
            stale = hub.stale(cutoff) if self.settings.session_ttl_days else []
            plan.hub.before = self.now - DELIVERY_KEEP
            plan.hub.deliveries = hub.deliveries(plan.hub.before)
        except (HubError, sqlite3.DatabaseError) as exc:
            plan.notes.append(f"the conversation hub was not examined: {exc}")
            return
        finally:
            hub.close()
        going = {removal.session for removal in plan.removals if removal.session}
        plan.hub.stale = [p for p in stale if p.mirror in going or not self._session_exists(p.mirror)]

    def _plan_costs(self, plan: Plan) -> None:
        """Cost snapshots made in bursts (scripted runs): BURST_COUNT or more within BURST_WINDOW,
        each of at most BURST_MESSAGES requests made by no named session, and none a session
        file refers to (an autosave kept the conversation): the cost of what is kept stays."""
        from chatcli.store.costs import REF_RE, cost_refs

        costs = self.layout.costs()
        if self.layout.store is not None:  # rows on the server
            found = {home.cost_named(r.path.name): r for r in self._server_files("costs", costs.place)}
        else:
            found = {ref: Removal("costs", home.cost_path(self.layout.costs_dir, ref), st.st_size, st.st_mtime_ns,
                                  st.st_ino, "") for ref, st in cost_refs(self.layout.costs_dir)
                     if stat.S_ISREG(st.st_mode)}
        small = {}
        for ref, removal in found.items():
            if ref is None or not REF_RE.fullmatch(ref) or removal.size > 4096:
                continue
            lines = costs.lines(ref)
            if len(lines) <= retention.BURST_MESSAGES and not any(line.session for line in lines):
                small[ref] = removal
        burst = retention.bursts([(removal.mtime_ns / 1e9, ref) for ref, removal in small.items()])
        kept = self._cost_refs_kept(set(burst), [small[ref].mtime_ns / 1e9 for ref in burst])
        plan.removals += [small[ref]._replace(reason=retention.BURST) for ref in burst if ref not in kept]

    def _cost_refs_kept(self, refs: set[str], times: list[float]) -> set[str]:
        """Which of `refs` a session file names: those written around the snapshots' times are
        read (an autosave is written when its conversation ends, just after its last request)."""
        if not refs:
            return set()
        try:
            if self.sessions.root is None:  # on a server: its listing has each session's time
                written = {name: row[0] / 1e9 for name, row in self.sessions.entries().items()}
                misnamed = {}
            else:
                stats, misnamed = self._stat_sessions()
                written = {name: st.st_mtime for name, st in stats.items()}
        except (OSError, SessionError):
            return set(refs)  # the sessions cannot be read: keep every snapshot
        low, high = min(times) - 2 * retention.BURST_WINDOW, max(times) + 2 * retention.BURST_WINDOW
        kept = set()
        for name, when in written.items():
            if low <= when <= high:
                try:
                    data, _stamp = self.sessions.load(name)
                except SessionError:
                    return set(refs)  # one that cannot be read may name any of them
                if data.extra.get("cost_ref") in refs:
                    kept.add(data.extra["cost_ref"])
        for name, st in misnamed.items():
            if low <= st.st_mtime <= high:
                data = self._read_misnamed(name)
                if data is None:
                    return set(refs)
                if data.extra.get("cost_ref") in refs:
                    kept.add(data.extra["cost_ref"])
        return kept

    def _session_exists(self, name: str) -> bool:
        if self.sessions.root is None:
            return self.sessions.exists(name)  # on the server (StoreUnavailable: nothing is decided)
        return os.path.lexists(home.session_path(self.sessions.root, name))

    def _apply_hub(self, plan: HubPlan, applied: Applied) -> None:
        """Forget the planned principals whose mirror is gone now, each only if it is still as it
        was planned (Hub.forget), then the delivery records older than the plan's cutoff."""
        ready = []
        for principal in plan.stale:
            if self._session_exists(principal.mirror):
                applied.hub_kept.append((principal, f"its mirror {principal.mirror} was kept"))
            else:
                ready.append(principal)
        from chatcli.store.hub import HubError

        hub = self.layout.hub()
        try:
            applied.forgotten = hub.forget(ready)
            forgotten = set(applied.forgotten)
            applied.hub_kept += [(p, "seen or bound again since the plan") for p in ready if p not in forgotten]
            if plan.deliveries:
                applied.deliveries = hub.forget_deliveries(plan.before)
        except HubError as exc:
            applied.hub_failed = str(exc)
        finally:
            hub.close()

    # -- files per store -------------------------------------------------------------------
    def _temp_files(self) -> Iterator[tuple[Path, os.stat_result, int]]:
        history = self.settings.history_file
        places = [(self.home, None)]
        places += [(Path(entry.path), None) for entry in _scandir(self.home)
                   if entry.is_dir(follow_symlinks=False)]
        places.append((history.parent, history.name))
        seen: set[str] = set()
        for directory, target in places:
            for entry in _scandir(directory):
                match = TEMP_RE.fullmatch(entry.name)
                if not match or entry.path in seen or (target is not None and match.group(1) != target):
                    continue
                seen.add(entry.path)
                st = _stat(entry)
                if st is not None and stat.S_ISREG(st.st_mode):
                    yield Path(entry.path), st, int(match.group(2))

    def _log_files(self) -> Iterator[tuple[Path, os.stat_result]]:
        """The regular files of logs/: the logs, their rotated copies, whatever else is left there
        (a temporary file is the temp store's)."""
        for entry in _scandir(self.layout.logs_dir):
            if not TEMP_RE.fullmatch(entry.name) and (st := _stat(entry)) is not None and stat.S_ISREG(st.st_mode):
                yield Path(entry.path), st

    def _files(self) -> Iterator[tuple[str, Path, os.stat_result]]:
        try:
            stats, misnamed = self._stat_sessions()
        except OSError:  # the plan says why
            stats, misnamed = {}, {}
        for name, st in (*stats.items(), *misnamed.items()):  # the latter take room too, though never pruned
            yield "sessions", home.session_path(self.sessions.root, name), st
        for entry in _scandir(self.sessions.root):  # lock files are the store's too
            if home.locked_session(entry.name) is not None and (st := _stat(entry)):
                yield "sessions", Path(entry.path), st
        for entry in _scandir(self.transcripts_dir):
            if home.journal_named(entry.name) is not None and (st := _stat(entry)) is not None:
                yield "transcripts", Path(entry.path), st
        for entry in _scandir(self.ccr_dir):
            if not entry.name.startswith(".") and entry.is_file(follow_symlinks=False) and (st := _stat(entry)):
                yield "recall", Path(entry.path), st
        from chatcli.store.costs import cost_refs

        for ref, st in cost_refs(self.layout.costs_dir):
            yield "costs", home.cost_path(self.layout.costs_dir, ref), st
        try:
            yield "schedule", self.layout.schedule_path, os.stat(self.layout.schedule_path)
        except OSError:
            pass
        for store, directory in (("memory", self.layout.memory_dir), ("contexts", self.layout.contexts_dir)):
            for entry in _scandir(directory):
                if entry.name.endswith(".json") and (st := _stat(entry)) is not None and stat.S_ISREG(st.st_mode):
                    yield store, Path(entry.path), st
        try:
            yield "history", self.settings.history_file, os.stat(self.settings.history_file)
        except OSError:
            pass
        catalog = self.sessions.catalog
        caches = [] if self.sessions.root is None else [  # a server's listing is a query: no cache here
            catalog.path, catalog.appends_path, catalog.rendered_path, catalog.latest_path, catalog.journals_path]
        caches += [Path(entry.path) for entry in _scandir(self.index_dir)
                   if entry.is_file(follow_symlinks=False) and not TEMP_RE.fullmatch(entry.name)]
        for path in caches:
            try:
                yield "index", path, os.stat(path)
            except OSError:
                pass
        hub = self.layout.hub_path
        for path in (hub, hub.with_name(hub.name + "-wal"), hub.with_name(hub.name + "-shm")):
            try:
                yield "hub", path, os.stat(path)
            except OSError:
                pass
        for path, st in self._log_files():
            yield "logs", path, st
        for path, st, _pid in self._temp_files():
            yield "temp", path, st

    # -- removing exactly what was planned -------------------------------------------------
    def apply(self, plan: Plan) -> Applied:
        """Remove exactly the files `plan` lists, each only while it is the file that was planned
        (same inode, mtime and size; a session under its lock), then the hub.db rows it lists."""
        applied = Applied()
        journals = []
        for removal in plan.removals:
            if removal.store == "transcripts":
                journals.append(removal)  # after the sessions, which decide their fate
                continue
            self._remove(removal, applied)
        if journals:
            self._apply_journals(journals, applied)
        self.sessions.catalog.forget_journals([removal.session for removal in applied.removed if removal.session])
        if plan.hub:  # after the sessions: a principal goes once its mirror has
            self._apply_hub(plan.hub, applied)
        return applied

    def _apply_journals(self, journals: list[Removal], applied: Applied) -> None:
        """A journal goes only if every session it went with was removed and no session refers to it now."""
        removed = {removal.session for removal in applied.removed if removal.session}
        try:
            if self.sessions.root is None:  # on a server: the sessions left, asked again
                named = self._server_journals(self.sessions.entries(fresh=True))
                if named is None:
                    raise SessionError("one of them cannot be read")
                current, stats, misnamed = set(named.values()), {}, {}
            else:
                current = {row[5] for row in self.sessions.entries(fresh=True, reveal=True).values() if row[5]}
                stats, misnamed = self._stat_sessions()
        except (OSError, SessionError) as exc:
            why = exc if isinstance(exc, SessionError) else (exc.strerror or exc)
            applied.kept += [(removal, f"sessions could not be read again ({why})") for removal in journals]
            return
        for name in misnamed:  # the catalog does not open them: chatcli cannot use their names
            data = self._read_misnamed(name)
            if data is None:
                shown = _shown_name(home.session_path(self.sessions.root, name))
                applied.kept += [(removal, f"session file {shown} could not be read again") for removal in journals]
                return
            if data.transcript_id:
                current.add(data.transcript_id)
        if self.sessions.root is not None:
            current.update(transcript for name, transcript in self.sessions.catalog.remembered_journals().items()
                           if name in stats)
        for removal in journals:
            if any(owner not in removed for owner in removal.owners):
                applied.kept.append((removal, "its session was kept"))
            elif home.journal_named(removal.path.name) in current:
                applied.kept.append((removal, "a session refers to it now"))
            else:
                self._remove(removal, applied)
        self.layout.forget_journals([home.journal_named(r.path.name) for r in applied.removed
                                     if r.store == "transcripts"])

    def _remove(self, removal: Removal, applied: Applied) -> None:
        try:
            if removal.session:
                done = self.sessions.remove_if_unchanged(removal.session, removal.mtime_ns, removal.size,
                                                         removal.inode)
            elif removal.store == "sessions":  # an orphan lock file
                done = self.sessions.remove_orphan_lock(removal.path, removal.mtime_ns)
            else:
                done = _unlink_if_unchanged(removal.path, removal.mtime_ns, removal.size, removal.inode) \
                    if removal.place is None else \
                    removal.place.remove_if_unchanged(removal.path.name, removal.mtime_ns, removal.inode)
            there = done or (self.sessions.exists(removal.session) if removal.session and self.sessions.root is None
                             else os.path.lexists(removal.path) if removal.place is None
                             else removal.place.exists(removal.path.name))
        except OSError as exc:
            applied.failed.append((removal, exc.strerror or str(exc)))
            return
        except ChatcliError as exc:  # SessionError, JournalError: a server that went away meanwhile
            applied.failed.append((removal, str(exc)))
            return
        if done:
            applied.removed.append(removal)
        elif not there:
            applied.gone.append(removal)
        else:
            applied.kept.append((removal, "changed or in use since the plan"))

    def sweep(self) -> Applied:
        """The start-up sweep: TTL and count rules and lost temporary files, then a fresh pointer to the newest
        session (the REPL names it at start-up) if the one it had was removed."""
        applied = self.apply(self.plan(on_demand=False, record=True))
        if any(removal.session for removal in applied.removed) and self.sessions.latest() is None:
            if self.sessions.root is None:  # on a server the latest is a row of its own, kept by each write
                return applied
            stats, _misnamed = self._stat_sessions()  # only a usable name can be the latest
            if stats:
                name = max(stats, key=lambda key: stats[key].st_mtime_ns)
                self.sessions.catalog.note_latest(name, stats[name].st_mtime_ns, None)
        return applied


class _ServerJournals:
    """A server store's journals, as the place a removal of one names (Removal.place)."""

    def __init__(self, layout: Home) -> None:
        self.layout = layout

    def remove_if_unchanged(self, filename: str, changed_ns: int, generation: int) -> bool:
        return self.layout.journal(home.journal_named(filename)).remove_if_unchanged(changed_ns, generation)

    def exists(self, filename: str) -> bool:
        return self.layout.journal(home.journal_named(filename)).exists()


def _shown_name(path: Path) -> str:
    """A file's name for a note: printable, and cut short when it is very long."""
    shown = printable(path.name)
    if len(shown) <= _SHOWN_NAME:
        return shown
    return f"{shown[:_SHOWN_NAME - 6]}…{shown[-5:]} ({len(path.name)} characters)"


def _misnamed_note(root: Path, misnamed: dict[str, os.stat_result]) -> str:
    names = sorted(misnamed)
    shown = ", ".join(_shown_name(home.session_path(root, name)) for name in names[:3])
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return (f"{len(names)} session file(s) have names chatcli cannot use (Go ChatCLI's rules differ, or renamed by "
            f"hand): {shown}{more}; never pruned, and the journals they refer to are kept")


def _scandir(path: Path | None) -> list[os.DirEntry]:
    if path is None:  # a store on a server has no directory here
        return []
    try:
        return list(os.scandir(path))
    except OSError:  # missing, or not ours to read: nothing to report or remove there
        return []


def _stat(entry: os.DirEntry) -> os.stat_result | None:
    try:
        return entry.stat(follow_symlinks=False)
    except OSError:
        return None


def _unlink_if_unchanged(path: Path, mtime_ns: int, size: int, inode: int) -> bool:
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if (st.st_mtime_ns, st.st_size, st.st_ino) != (mtime_ns, size, inode):
        return False
    os.unlink(path)
    return True


__all__ = ["DELIVERY_KEEP", "LABELS", "NEVER_PRUNED", "STORES", "Applied", "HubPlan", "LogUsage", "Plan", "Removal",
           "Storage", "Usage", "human_size", "store_key"]
