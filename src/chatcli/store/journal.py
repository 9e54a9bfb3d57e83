"""Transcript journals on disk: `$CHATCLI_HOME/transcripts/<id>.jsonl` (SPEC §7; format in core.journal).

Appends are one write(2) of whole lines plus one fsync, under an exclusive lock on the journal
itself, so a crash leaves at most a torn last line and two writers never interleave. Reading
tolerates damage: a torn last line and foreign lines are skipped and counted. A journal is
never rewritten in place; a fork gets a new file.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from chatcli.core.errors import ChatcliError
from chatcli.core.journal import check_event, fork_line
from chatcli.store.atomic import PRIVATE_FILE, atomic_write, ensure_private_dir, fsync_dir, os_cause

SUFFIX = ".jsonl"
ID_RE = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_-]{0,127}")


class JournalError(ChatcliError):
    pass


def _json():
    import orjson

    return orjson


def encode_lines(events: list[dict]) -> bytes:
    orjson = _json()
    parts = []
    for event in events:
        try:
            parts.append(orjson.dumps(event))
        except TypeError:  # a value orjson refuses (a big integer in a foreign field, a lone surrogate)
            import json

            parts.append(json.dumps(event).encode("ascii"))  # \u escapes carry anything
    return b"\n".join(parts) + b"\n"


@dataclass
class Reading:
    """Events read from a journal, from some byte offset to the end of its last whole line."""

    events: list[dict] = field(default_factory=list)
    end: int = 0  # the offset just past the last whole line read
    foreign: int = 0  # whole lines that are not events of this version (garbage, other tools)
    torn: int = 0  # 1 when the file ends in a line without its newline (a crash mid-append)
    identity: tuple[int, int] | None = None  # (device, inode) of the file read, when read whole


def parse(data: bytes, offset: int = 0) -> Reading:
    orjson = _json()
    reading = Reading(end=offset)
    cut = data.rfind(b"\n") + 1
    if cut < len(data) and data[cut:].strip():
        reading.torn = 1
    for line in data[:cut].split(b"\n"):
        if not line.strip():
            continue
        try:
            event = check_event(orjson.loads(line))
        except orjson.JSONDecodeError:
            event = None
        if event is None:
            reading.foreign += 1
        else:
            reading.events.append(event)
    reading.end = offset + cut
    return reading


class Journal:
    def __init__(self, root: Path, transcript_id: str) -> None:
        if not ID_RE.fullmatch(transcript_id):
            raise JournalError(f"invalid transcript id {transcript_id!r}")
        self.root = root
        self.id = transcript_id
        self.path = root / (transcript_id + SUFFIX)

    def exists(self) -> bool:
        return self.path.exists()

    def size(self) -> int:
        try:
            return os.stat(self.path).st_size
        except FileNotFoundError:
            return 0

    def read(self, offset: int = 0) -> Reading:
        """Every event from byte `offset` on (a missing journal reads as empty)."""
        try:
            with open(self.path, "rb") as handle:
                st = os.fstat(handle.fileno())
                handle.seek(offset)
                data = handle.read()
        except FileNotFoundError:
            return Reading(end=0)
        except OSError as exc:
            raise self._error(exc) from None
        reading = parse(data, offset)
        reading.identity = (st.st_dev, st.st_ino)
        return reading

    @contextlib.contextmanager
    def appending(self, offset: int) -> Iterator[_Append]:
        """Lock the journal, read what others appended since `offset`, then let the caller append.

        The caller sees `new` (a Reading of the other writers' events) and calls `write(events)`
        at most once: one write, one fsync. A torn last line left by a crash is ended first, so
        the next event starts on a fresh line.
        """
        try:
            ensure_private_dir(self.root)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, PRIVATE_FILE)
        except OSError as exc:
            raise self._error(exc, writing=True) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            st = os.fstat(fd)
            if st.st_size == 0 and offset == 0:  # just created: make its name durable too
                fsync_dir(self.root)
            append = _Append(fd, offset, st)
            yield append
        except OSError as exc:
            raise self._error(exc, writing=True) from None
        finally:
            os.close(fd)

    def seed_fork(self, parent: Journal, time: str) -> None:
        """Create this journal as a fork of `parent`: a fork line, then the parent's events."""
        reading = parent.read()
        payload = encode_lines([fork_line(parent.id, time), *reading.events])
        try:
            atomic_write(self.path, payload)
        except OSError as exc:
            raise self._error(exc, writing=True) from None

    def _error(self, exc: OSError, writing: bool = False) -> JournalError:
        action = "cannot write" if writing else "cannot read"
        return JournalError(f"transcript journal {self.id}: {action} {self.path}: {os_cause(exc)}")


class _Append:
    def __init__(self, fd: int, offset: int, st: os.stat_result) -> None:
        self.fd = fd
        self.identity = (st.st_dev, st.st_ino)
        self.size = st.st_size  # the file's size when locked; after write(), its new size
        # Shorter than what we read before: truncated (or replaced) under us.
        self.replaced = offset > self.size
        self.new = self._read(0 if self.replaced else offset)  # what others appended since
        self.written = 0

    def _read(self, offset: int) -> Reading:
        data = os.pread(self.fd, self.size - offset, offset) if self.size > offset else b""
        return parse(data, offset)

    def reread(self) -> None:
        """Read the whole file (the caller lost track of it)."""
        self.new = self._read(0)

    def write(self, events: list[dict]) -> None:
        if not events:
            return
        payload = encode_lines(events)
        if self.new.torn or (self.size and os.pread(self.fd, 1, self.size - 1) != b"\n"):
            payload = b"\n" + payload  # end a torn line: it becomes one skipped foreign line
        view = memoryview(payload)
        while view:
            view = view[os.write(self.fd, view):]
        os.fsync(self.fd)
        self.size += len(payload)
        self.written += len(payload)


__all__ = ["ID_RE", "SUFFIX", "Journal", "JournalError", "Reading", "encode_lines", "parse"]
