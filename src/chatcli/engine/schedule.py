"""/schedule: slash commands run on a cron schedule while a REPL or the gateway daemon
runs (store/schedule.py keeps the jobs; core/cron.py reads the times). Each running process
looks every TICK seconds, and a due run is claimed before it starts, so it runs once however
many processes notice it. A run missed while nothing ran is made once, when one next looks.

Only commands that stand apart from the conversation they are typed in may be scheduled
(SCHEDULABLE): the storage commands, and refreshing a /context snapshot.
"""

from __future__ import annotations

import datetime
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from chatcli.config.settings import Settings
from chatcli.core import cron as crontab
from chatcli.core.errors import ChatcliError, UsageError
from chatcli.store.home import Home
from chatcli.store.schedule import Job

TICK = 20.0
# command → the first words its arguments may start with (None: any)
SCHEDULABLE: dict[str, tuple[str, ...] | None] = {"storage": None, "context": ("save",)}


def check_command(command: str, cwd: Path | None = None) -> str:
    """The command as it will run: refused unless SCHEDULABLE; the paths of a /context save made
    absolute against `cwd` (where it was scheduled), since whichever chatcli runs it may have
    started somewhere else (without `cwd`, as when a run checks schedule.json again, a relative
    path is refused)."""
    command = command.strip()
    name, _, args = command.partition(" ")
    name = name.lower().removeprefix("/")
    if not command.startswith("/") or name not in SCHEDULABLE:
        raise UsageError(f"'{command}' cannot be scheduled; what can: /storage …, /context save NAME PATH…")
    allowed = SCHEDULABLE[name]
    words = args.split()
    if allowed is not None and (words[0].lower() if words else "") not in allowed:
        raise UsageError(f"only /{name} {' | '.join(allowed)} … can be scheduled")
    if name == "context":
        if len(words) < 3:
            raise UsageError("usage: /schedule CRON /context save NAME PATH…")
        if cwd is None and not all(os.path.isabs(os.path.expanduser(path)) for path in words[2:]):
            raise UsageError(f"'{command}': a scheduled /context save names absolute paths")
        base = cwd or Path("/")
        paths = [str((base / os.path.expanduser(path)).resolve()) for path in words[2:]]
        if any(" " in path for path in paths):
            raise UsageError("a scheduled /context save takes paths without spaces")
        return " ".join([f"/{name}", words[0].lower(), words[1], *paths])
    return command


def split(args: str) -> tuple[str, str]:
    """'0 3 * * * /storage prune --apply' or '@daily /storage …' → (cron, command)."""
    words = args.split()
    count = 1 if words and words[0].startswith("@") else 5
    if len(words) <= count:
        raise UsageError("usage: /schedule CRON /COMMAND (such as /schedule 0 3 * * * /storage prune --apply)")
    return " ".join(words[:count]), " ".join(words[count:])


def due(job: Job, now: float) -> float | None:
    """When the run of `job` now due was due, or None when none is."""
    try:
        parsed = crontab.parse(job.cron)
    except UsageError:
        return None
    after = datetime.datetime.fromtimestamp(max(job.last_run, job.created))
    upcoming = parsed.next_after(after)
    return upcoming.timestamp() if upcoming is not None and upcoming.timestamp() <= now else None


def upcoming(job: Job) -> str:
    try:
        when = crontab.parse(job.cron).next_after(datetime.datetime.fromtimestamp(max(job.last_run, time.time())))
    except UsageError as exc:
        return str(exc)
    return when.strftime("%Y-%m-%d %H:%M") if when else "never"


# -- /schedule --------------------------------------------------------------------------------
def add(settings: Settings, args: str, cwd: Path | None = None) -> str:
    cron_text, command = split(args)
    parsed = crontab.parse(cron_text)
    job = Home.of(settings).schedule().add(parsed.text, check_command(command, cwd))
    return (f"Scheduled job {job.id}: {job.command} at '{job.cron}' (next {upcoming(job)}), while a chatcli REPL or "
            f"gateway runs. /schedule remove {job.id} stops it.")


def listing(settings: Settings) -> str:
    jobs = Home.of(settings).schedule().jobs()
    if not jobs:
        return "No scheduled commands. /schedule CRON /COMMAND adds one (such as /schedule @daily /storage prune --apply)."
    lines = ["Scheduled commands (run while a chatcli REPL or gateway runs):"]
    for job in jobs:
        last = (f"; last ran {datetime.datetime.fromtimestamp(job.last_run):%Y-%m-%d %H:%M}"
                + (f": {job.last_result}" if job.last_result else "")) if job.last_run else ""
        lines.append(f"  {job.id}. '{job.cron}'  {job.command}  (next {upcoming(job)}{last})")
    return "\n".join(lines)


def remove(settings: Settings, job_id: str) -> str:
    job = Home.of(settings).schedule().remove(job_id.strip())
    return f"Removed scheduled job {job.id} ({job.command})."


# -- running ----------------------------------------------------------------------------------
class Scheduler:
    """Runs the due jobs of `settings`' home: `run(command)` gives (text, error); `report(line)`
    tells the user what a run said."""

    def __init__(self, settings: Settings, run: Callable[[str], tuple[str, bool]],
                 report: Callable[[str], None], tick: float = TICK) -> None:
        self.store = Home.of(settings).schedule()
        self.run, self.report, self.tick_every = run, report, tick
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._loop, name="chatcli-schedule", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()

    def _loop(self) -> None:
        while not self.stopping.is_set():
            try:
                self.tick()
            except ChatcliError as exc:
                self.report(f"[schedule] {exc}")
                self.stopping.wait(self.tick_every * 15)  # said once in a while, not every tick
            self.stopping.wait(self.tick_every)

    def tick(self, now: float | None = None) -> list[str]:
        """Run what is due now; the lines said."""
        now = time.time() if now is None else now
        said = []
        for job in self.store.jobs():
            when = due(job, now)
            if when is None or self.store.claim(job.id, when, now) is None:
                continue
            try:
                check_command(job.command)  # schedule.json is a file: what it says is checked again
                text, error = self.run(job.command)
            except Exception as exc:  # noqa: BLE001 - a failed run is said, the schedule goes on
                text, error = f"{type(exc).__name__}: {exc}", True
            first = (text.strip().splitlines() or [""])[0]
            self.store.note_result(job.id, ("error: " if error else "") + first)
            line = f"[schedule {job.id}: {job.command}] {'error: ' if error else ''}{text.strip()}"
            said.append(line)
            self.report(line)
        return said


__all__ = ["SCHEDULABLE", "Scheduler", "add", "check_command", "due", "listing", "remove", "split"]
