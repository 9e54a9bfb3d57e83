"""Every local store under $CHATCLI_HOME, what it holds, and the plan that prunes it (SPEC §10).

A `Plan` is computed once from what is on disk; `apply` removes exactly the files the plan
lists, each only if it is still the file the plan saw (same mtime and size, and for a
session under its lock), so a session another surface wrote in the meantime survives.

| store           | where                                   | rule                                          |
|-----------------|-----------------------------------------|-----------------------------------------------|
| sessions        | sessions/*.json                         | machine sessions: TTL, count backstop; test   |
|                 |                                         | bursts and orphan lock files on demand        |
| transcripts     | transcripts/*.jsonl                     | kept while a session refers to one; else the  |
|                 |                                         | session TTL; orphans on demand                |
| recall store    | ccr/                                    | its own TTL and size cap                      |
| prompt history  | HISTORY_FILE                            | trimmed when written; never pruned here       |
| search index    | index/, the listing caches              | rebuilt when missing; never pruned            |
| temporary files | .*.tmp left by interrupted atomic writes | on demand, once their writer is gone          |
"""

from __future__ import annotations

import os
import time
from collections import namedtuple
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from chatcli.config.settings import Settings
from chatcli.core import retention
from chatcli.core.errors import UsageError
from chatcli.core.names import NAME_RE
from chatcli.store.atomic import TEMP_RE
from chatcli.store.sessions import LOCK_SUFFIX, SUFFIX, SessionError, SessionStore

STORES = ("sessions", "transcripts", "recall", "history", "index", "temp")
LABELS = {
    "sessions": "sessions",
    "transcripts": "transcripts",
    "recall": "recall store",
    "history": "prompt history",
    "index": "search index",
    "temp": "temporary files",
}
_ALIASES = {"session": "sessions", "transcript": "transcripts", "journals": "transcripts", "ccr": "recall",
            "recall-store": "recall", "prompt-history": "history", "search": "index", "search-index": "index",
            "tmp": "temp", "temporary": "temp"}
NEVER_PRUNED = ("history", "index")

JOURNAL_SUFFIX = ".jsonl"
# A journal no session refers to is an orphan only once nothing has written it for this long:
# an unsaved conversation writes its journal before any session names it.
ORPHAN_GRACE = retention.DAY
# A lock file of a missing session, or a temporary file whose writer is gone, must also be
# at least this old (a writer may be between creating it and using it).
SETTLE = 60.0
# A temporary file this old is lost whoever made it: an atomic write takes seconds at most.
TEMP_MAX_AGE = 3600.0


class Removal(namedtuple("Removal", "store path size mtime_ns reason session")):
    """One file a plan removes; `session` is the session name for a session file, else ''."""

    __slots__ = ()


@dataclass
class Plan:
    removals: list[Removal]
    # Why some rule was not applied (a store that could not be read, say): one line each.
    notes: list[str] = field(default_factory=list)

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


_Sessions = namedtuple("_Sessions", "removed journal_refs unreadable")


@dataclass(frozen=True)
class Usage:
    store: str
    files: int
    size: int
    rule: str


def store_key(text: str) -> str:
    """A store as the user names it ('sessions', 'ccr', 'tmp'…) → its key; UsageError otherwise."""
    key = text.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in STORES:
        raise UsageError(f"unknown store '{text}' (choose from: {', '.join(STORES)})")
    return key


class Storage:
    def __init__(self, settings: Settings, now: float | None = None) -> None:
        self.settings = settings
        self.home = settings.home
        self.sessions = SessionStore(settings.sessions_dir)
        self.transcripts_dir = self.home / "transcripts"
        self.ccr_dir = self.home / "ccr"
        self.index_dir = self.home / "index"
        self.now = time.time() if now is None else now

    # -- what is there ---------------------------------------------------------------------
    def usage(self) -> list[Usage]:
        """One line of facts per store: file count, bytes, the rule that governs it."""
        counts = {key: [0, 0] for key in STORES}
        for key, _path, st in self._files():
            counts[key][0] += 1
            counts[key][1] += st.st_size
        return [Usage(key, files, size, self.rule(key)) for key, (files, size) in counts.items()]

    def rule(self, store: str) -> str:
        settings = self.settings
        ttl = retention.describe_days(settings.session_ttl_days)
        if store == "sessions":
            expiry = f"after {ttl}" if settings.session_ttl_days else "never (TTL 0)"
            return (f"autosave-/mcp- expire {expiry}, newest {settings.autosave_keep} per prefix kept; "
                    "named sessions never removed")
        if store == "transcripts":
            return f"kept while a session refers to one; otherwise removed after {ttl}"
        if store == "recall":
            return (f"entries expire after {retention.describe_days(settings.ccr_ttl_days)}, "
                    f"capped at {human_size(settings.ccr_max_size)}")
        if store == "history":
            return f"the oldest prompts are dropped past {human_size(settings.history_max_size)} as you type"
        if store == "index":
            return "caches, rebuilt when missing"
        return "removed on demand once their writer is gone"

    # -- what the rules would remove -----------------------------------------------------
    def plan(self, *, on_demand: bool = True, only: str | None = None) -> Plan:
        """Everything the rules remove now. At start-up (`on_demand=False`) only the TTL, count
        and size rules apply; orphans, test bursts and lost temporary files wait for a request."""
        plan = Plan([])
        wanted = STORES if only is None else (only,)
        if "sessions" in wanted or "transcripts" in wanted:
            sessions = self._plan_sessions(plan, on_demand=on_demand, keep_in_plan="sessions" in wanted)
            if "transcripts" in wanted and sessions is not None:
                self._plan_journals(plan, sessions, on_demand=on_demand)
        if "recall" in wanted:
            self._plan_recall(plan)
        if "temp" in wanted and on_demand:
            self._plan_temp(plan)
        return plan

    def _plan_sessions(self, plan: Plan, *, on_demand: bool, keep_in_plan: bool) -> _Sessions | None:
        """Adds the session removals to `plan` (when asked) and returns what journals need to
        know either way: which sessions go, and which journal each refers to."""
        settings = self.settings
        need_contents = on_demand or self._has_journals()
        try:
            if need_contents:  # message counts (bursts) and journal ids need the catalog
                rows = {name: row for name, row in self.sessions.entries(fresh=True, record=False).items()
                        if NAME_RE.fullmatch(name) and ".." not in name}
            else:  # the start-up sweep decides on names and times alone: one stat per file
                rows = {name: [st.st_mtime_ns, st.st_size, None, "", "", ""]
                        for name, st in self._stat_sessions()}
        except SessionError as exc:
            plan.notes.append(f"sessions were not examined: {exc}")
            return None
        refs: dict[str, list[str]] = {}
        for name, row in rows.items():
            if row[5]:
                refs.setdefault(row[5], []).append(name)
        decided = retention.machine_sessions(
            ((name, row[0] / 1e9, row[2]) for name, row in rows.items()),
            now=self.now, ttl_days=settings.session_ttl_days, keep=settings.autosave_keep, on_demand=on_demand,
        )
        if keep_in_plan:
            root = self.sessions.root
            for name, reason in sorted(decided.items(), key=lambda item: rows[item[0]][0]):
                row = rows[name]
                plan.removals.append(Removal("sessions", root / (name + SUFFIX), row[1], row[0], reason, name))
            if on_demand:
                self._plan_locks(plan, rows)
        return _Sessions(decided, refs, sum(1 for row in rows.values() if row[4]))

    def _stat_sessions(self) -> Iterator[tuple[str, os.stat_result]]:
        try:
            entries = list(os.scandir(self.sessions.root))
        except FileNotFoundError:
            return
        for entry in entries:
            name = entry.name
            if not name.endswith(SUFFIX) or name.startswith("."):
                continue
            name = name[: -len(SUFFIX)]
            if not NAME_RE.fullmatch(name) or ".." in name:
                continue
            try:
                yield name, entry.stat()
            except OSError:
                continue

    def _plan_locks(self, plan: Plan, rows: dict[str, list]) -> None:
        """Lock files of sessions that no longer exist (left by a crash, or by an older chatcli)."""
        for entry in _scandir(self.sessions.root):
            name = entry.name
            if not (name.startswith(".") and name.endswith(LOCK_SUFFIX)):
                continue
            session = name[1: -len(LOCK_SUFFIX)]
            if session in rows or os.path.exists(entry.path[: -len(name)] + session + SUFFIX):
                continue
            st = _stat(entry)
            if st is not None and self.now - st.st_mtime > SETTLE:
                plan.removals.append(Removal("sessions", Path(entry.path), st.st_size, st.st_mtime_ns,
                                             retention.ORPHAN, ""))

    def _has_journals(self) -> bool:
        return any(entry.name.endswith(JOURNAL_SUFFIX) for entry in _scandir(self.transcripts_dir))

    def _plan_journals(self, plan: Plan, sessions: _Sessions, *, on_demand: bool) -> None:
        journals = [entry for entry in _scandir(self.transcripts_dir) if entry.name.endswith(JOURNAL_SUFFIX)]
        if not journals:
            return
        if sessions.unreadable:
            # An unreadable session (a newer format, a missing key) may refer to any journal.
            plan.notes.append(f"transcripts were not pruned: {sessions.unreadable} session file(s) cannot be "
                              "read, so which journals they refer to is unknown")
            return
        refs, removed_sessions = sessions.journal_refs, sessions.removed
        ttl = self.settings.session_ttl_days
        for entry in journals:
            st = _stat(entry)
            if st is None:
                continue
            owners = refs.get(entry.name[: -len(JOURNAL_SUFFIX)], [])
            if owners:
                if any(owner not in removed_sessions for owner in owners):
                    continue
                reason = removed_sessions[owners[0]]  # it goes with the session(s) it belonged to
            elif retention.expired(st.st_mtime, self.now, ttl):
                reason = retention.TTL
            elif on_demand and self.now - st.st_mtime > ORPHAN_GRACE:
                reason = retention.ORPHAN
            else:
                continue
            plan.removals.append(Removal("transcripts", Path(entry.path), st.st_size, st.st_mtime_ns, reason, ""))

    def _plan_recall(self, plan: Plan) -> None:
        settings = self.settings
        survivors: list[tuple[float, int, str]] = []
        stats: dict[str, os.stat_result] = {}
        for entry in _scandir(self.ccr_dir):
            if entry.name.startswith(".") or not entry.is_file(follow_symlinks=False):
                continue
            st = _stat(entry)
            if st is None:
                continue
            if retention.expired(st.st_mtime, self.now, settings.ccr_ttl_days):
                plan.removals.append(Removal("recall", Path(entry.path), st.st_size, st.st_mtime_ns,
                                             retention.TTL, ""))
            else:
                stats[entry.path] = st
                survivors.append((st.st_mtime, st.st_size, entry.path))
        for path in retention.over_cap(survivors, settings.ccr_max_size):
            st = stats[path]
            plan.removals.append(Removal("recall", Path(path), st.st_size, st.st_mtime_ns, retention.SIZE_CAP, ""))

    def _plan_temp(self, plan: Plan) -> None:
        for path, st, pid in self._temp_files():
            age = self.now - st.st_mtime
            if age > TEMP_MAX_AGE or (age > SETTLE and not _alive(pid)):
                plan.removals.append(Removal("temp", path, st.st_size, st.st_mtime_ns, retention.LOST_TEMP, ""))

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
                if st is not None:
                    yield Path(entry.path), st, int(match.group(2))

    def _files(self) -> Iterator[tuple[str, Path, os.stat_result]]:
        for _name, st in self._stat_sessions():
            yield "sessions", self.sessions.root / (_name + SUFFIX), st
        for entry in _scandir(self.transcripts_dir):
            if entry.name.endswith(JOURNAL_SUFFIX) and (st := _stat(entry)) is not None:
                yield "transcripts", Path(entry.path), st
        for entry in _scandir(self.ccr_dir):
            if not entry.name.startswith(".") and entry.is_file(follow_symlinks=False) and (st := _stat(entry)):
                yield "recall", Path(entry.path), st
        try:
            yield "history", self.settings.history_file, os.stat(self.settings.history_file)
        except OSError:
            pass
        caches = [self.sessions.catalog_path, self.sessions.rendered_path, self.sessions.latest_path]
        caches += [Path(entry.path) for entry in _scandir(self.index_dir)
                   if entry.is_file(follow_symlinks=False) and not TEMP_RE.fullmatch(entry.name)]
        for path in caches:
            try:
                yield "index", path, os.stat(path)
            except OSError:
                pass
        for path, st, _pid in self._temp_files():
            yield "temp", path, st

    # -- removing exactly what was planned -------------------------------------------------
    def apply(self, plan: Plan) -> Applied:
        applied = Applied()
        for removal in plan.removals:
            try:
                if removal.session:
                    done = self.sessions.remove_if_unchanged(removal.session, removal.mtime_ns, removal.size)
                elif removal.store == "sessions":  # an orphan lock file
                    done = self.sessions.remove_orphan_lock(removal.path, removal.mtime_ns)
                else:
                    done = _unlink_if_unchanged(removal.path, removal.mtime_ns, removal.size)
            except (OSError, SessionError) as exc:
                applied.failed.append((removal, getattr(exc, "strerror", None) or str(exc)))
                continue
            if done:
                applied.removed.append(removal)
            else:
                applied.kept.append((removal, "changed, in use or gone since the plan"))
        return applied

    def sweep(self) -> Applied:
        """The start-up sweep: TTL, count and size rules only, then a fresh pointer to the newest
        session (the REPL names it at start-up)."""
        applied = self.apply(self.plan(on_demand=False))
        if applied.removed and self.sessions.latest() is None:
            newest = max(self._stat_sessions(), key=lambda item: item[1].st_mtime_ns, default=None)
            if newest is not None:
                self.sessions.note_latest(newest[0], newest[1].st_mtime_ns, None, "")
        return applied


def human_size(size: float) -> str:
    """1536 → '1.5 KB', 104857600 → '100 MB'."""
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            break
        size /= 1024
    shown = f"{size:.0f}" if unit == "B" else f"{size:.1f}".removesuffix(".0")
    return f"{shown} {unit}"


def _scandir(path: Path) -> list[os.DirEntry]:
    try:
        return list(os.scandir(path))
    except OSError:  # missing, or not ours to read: nothing to report or remove there
        return []


def _stat(entry: os.DirEntry) -> os.stat_result | None:
    try:
        return entry.stat(follow_symlinks=False)
    except OSError:
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _unlink_if_unchanged(path: Path, mtime_ns: int, size: int) -> bool:
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if (st.st_mtime_ns, st.st_size) != (mtime_ns, size):
        return False
    os.unlink(path)
    return True


__all__ = ["LABELS", "NEVER_PRUNED", "STORES", "Applied", "Plan", "Removal", "Storage", "Usage", "human_size",
           "store_key"]
