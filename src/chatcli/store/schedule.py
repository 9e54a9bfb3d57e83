"""The /schedule jobs: `schedule.json` (0600, written atomically; a row on the sessions' server
with a server store), a list of jobs, each a cron expression, a slash command, and when it last
ran and what it said. Every running REPL and gateway daemon runs the due jobs, and a job runs
once per time it is due whoever notices first (on any machine, with a server store): a run is
claimed under `.schedule.lock` (an advisory lock on the server) by writing its time before it
starts.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import asdict, dataclass, replace

from chatcli.core.errors import ChatcliError, UsageError
from chatcli.store.atomic import os_cause

TYPE_CHECKING = False
if TYPE_CHECKING:
    from chatcli.store.pg_places import ServerFiles
    from chatcli.store.places import Files

VERSION = 1


class ScheduleError(ChatcliError):
    pass


@dataclass(frozen=True)
class Job:
    id: str
    cron: str
    command: str
    created: float
    last_run: float = 0.0  # when its last run was claimed (0: never)
    last_result: str = ""  # the first line of what it said


class ScheduleStore:
    """`filename` in `place` (a directory, or the sessions' server: store.places), rewritten under
    `lock_name`."""

    def __init__(self, place: Files | ServerFiles, filename: str, lock_name: str) -> None:
        self.place = place
        self.filename = filename
        self.lock_name = lock_name

    @property
    def where(self) -> str:
        return self.place.where(self.filename)

    @contextlib.contextmanager
    def _locked(self):
        try:
            with self.place.locked(self.lock_name):
                yield
        except OSError as exc:
            raise ScheduleError(f"schedule: cannot lock {self.where}: {os_cause(exc)}") from None

    def _raw(self) -> bytes | None:
        try:
            return self.place.read(self.filename)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ScheduleError(f"schedule: cannot read {self.where}: {os_cause(exc)}") from None

    def jobs(self) -> list[Job]:
        raw = self._raw()
        if raw is None:
            return []
        try:
            document = json.loads(raw)
            if document.get("version", 0) > VERSION:
                raise ScheduleError(f"{self.where} was written by a newer chatcli; it is left as it is")
            return [Job(**{key: item[key] for key in Job.__dataclass_fields__ if key in item})
                    for item in document["jobs"]]
        except (ValueError, KeyError, TypeError, AttributeError):
            raise ScheduleError(f"{self.where} cannot be read as a schedule; it is left as it is") from None

    def _last_id(self) -> int:
        try:
            return int(json.loads(self._raw() or b"{}").get("last_id", 0))
        except (ScheduleError, ValueError, TypeError, AttributeError):
            return 0

    def _write(self, jobs: list[Job]) -> None:
        last = max([self._last_id(), *(int(job.id) for job in jobs if job.id.isdigit())])
        try:
            self.place.write(self.filename, json.dumps({"version": VERSION, "last_id": last,
                                                        "jobs": [asdict(job) for job in jobs]},
                                                       ensure_ascii=False, indent=1).encode("utf-8"))
        except OSError as exc:
            raise ScheduleError(f"schedule: cannot write {self.where}: {os_cause(exc)}") from None

    def add(self, cron: str, command: str) -> Job:
        with self._locked():
            jobs = self.jobs()
            # Never an id used before (a stale "/schedule remove 2" must not remove another job).
            number = max([self._last_id(), *(int(job.id) for job in jobs if job.id.isdigit())]) + 1
            job = Job(str(number), cron, command, time.time())
            self._write([*jobs, job])
        return job

    def remove(self, job_id: str) -> Job:
        with self._locked():
            jobs = self.jobs()
            found = [job for job in jobs if job.id == job_id]
            if not found:
                raise UsageError(f"no scheduled job '{job_id}' (/schedule lists them)")
            self._write([job for job in jobs if job.id != job_id])
        return found[0]

    def claim(self, job_id: str, due: float, now: float | None = None) -> Job | None:
        """Take the run of job `job_id` due at `due` (a time): the job, now marked as run, or None
        when it is gone or that run was taken already (by another REPL, say)."""
        with self._locked():
            jobs = self.jobs()
            for index, job in enumerate(jobs):
                if job.id == job_id and job.last_run < due:
                    jobs[index] = replace(job, last_run=time.time() if now is None else now)
                    self._write(jobs)
                    return jobs[index]
        return None

    def note_result(self, job_id: str, result: str) -> None:
        with self._locked():
            jobs = self.jobs()
            self._write([replace(job, last_result=result[:200]) if job.id == job_id else job for job in jobs])


__all__ = ["Job", "ScheduleError", "ScheduleStore"]
