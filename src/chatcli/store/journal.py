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
from chatcli.store.seal import LINE_PREFIX, SealError, sealer_for

SUFFIX = ".jsonl"
ID_RE = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_-]{0,127}")


class JournalError(ChatcliError):
    pass


def _json():
    import orjson

    return orjson


def encode_lines(events: list[dict], journal: Journal | None = None, offset: int = 0) -> bytes:
    """Events as JSON lines; sealed when `journal` has a key, each line bound to the byte
    offset it will have in that journal (the payload goes at `offset`)."""
    orjson = _json()
    parts = []
    for event in events:
        try:
            parts.append(orjson.dumps(event))
        except TypeError:  # a value orjson refuses (a big integer in a foreign field, a lone surrogate)
            import json

            parts.append(json.dumps(event).encode("ascii"))  # \u escapes carry anything
    if journal is not None and journal.key is not None:
        sealer = sealer_for(journal.key)
        sealed = []
        for part in parts:
            sealed.append(sealer.seal_line(part, journal.id, offset))
            offset += len(sealed[-1]) + 1
        parts = sealed
    return b"\n".join(parts) + b"\n"


@dataclass
class Reading:
    """Events read from a journal, from some byte offset to the end of its last whole line."""

    events: list[dict] = field(default_factory=list)
    end: int = 0  # the offset just past the last whole line read
    foreign: int = 0  # whole lines that are not events of this version (garbage, other tools)
    torn: int = 0  # 1 when the file ends in a line without its newline (a crash mid-append)
    identity: tuple[int, int] | None = None  # (device, inode) of the file read, when read whole


def parse(data: bytes, offset: int = 0, journal: Journal | None = None) -> Reading:
    """The events of `data`, which starts at byte `offset` of `journal`. A sealed line is opened
    with the journal's key; one that cannot be is an error (a key problem, not damage)."""
    orjson = _json()
    reading = Reading(end=offset)
    cut = data.rfind(b"\n") + 1
    if cut < len(data) and data[cut:].strip():
        reading.torn = 1
    position, sealed = offset, False
    for line in data[:cut].split(b"\n"):
        at, position = position, position + len(line) + 1
        if not line.strip():
            continue
        if line.startswith(LINE_PREFIX):
            line, sealed = _open_line(line, journal, at), True
        elif sealed:  # chatcli never writes plaintext after sealed lines: someone slipped it in
            name = journal.id if journal is not None else "?"
            raise JournalError(f"transcript journal {name}: a plaintext line at byte {at} follows sealed ones; "
                               "the journal was altered")
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


def _open_line(line: bytes, journal: Journal | None, at: int) -> bytes:
    name = journal.id if journal is not None else "?"
    if journal is None or journal.key is None:
        raise JournalError(f"transcript journal {name} is encrypted: set CHATCLI_ENCRYPTION_KEY to the key that "
                           "sealed it")
    try:
        return sealer_for(journal.key).open_line(line, journal.id, at)
    except SealError as exc:
        raise JournalError(str(exc)) from None


class Journal:
    def __init__(self, root: Path, transcript_id: str, key: bytes | None = None) -> None:
        if not ID_RE.fullmatch(transcript_id):
            raise JournalError(f"invalid transcript id {transcript_id!r}")
        self.root = root
        self.id = transcript_id
        self.key = key  # CHATCLI_ENCRYPTION_KEY: lines are sealed (store.seal)
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
        reading = parse(data, offset, self)
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
            fd = self._locked()
        except OSError as exc:
            raise self._error(exc, writing=True) from None
        try:
            st = os.fstat(fd)
            if st.st_size == 0 and offset == 0:  # just created: make its name durable too
                fsync_dir(self.root)
            append = _Append(fd, offset, st, self)
            yield append
        except OSError as exc:
            raise self._error(exc, writing=True) from None
        finally:
            os.close(fd)

    def _locked(self) -> int:
        """An fd of the journal, exclusively locked, that is still the file at its path (a rekey
        may have replaced it while we waited for the lock)."""
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, PRIVATE_FILE)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                held, current = os.fstat(fd), os.stat(self.path)
            except FileNotFoundError:
                os.close(fd)
                continue
            except BaseException:
                os.close(fd)
                raise
            if (held.st_dev, held.st_ino) == (current.st_dev, current.st_ino):
                return fd
            os.close(fd)

    def seed_fork(self, parent: Journal, time: str) -> None:
        """Create this journal as a fork of `parent`: a fork line, then the parent's events."""
        reading = parent.read()
        payload = encode_lines([fork_line(parent.id, time), *reading.events], self)
        try:
            atomic_write(self.path, payload)
        except OSError as exc:
            raise self._error(exc, writing=True) from None

    def _error(self, exc: OSError, writing: bool = False) -> JournalError:
        action = "cannot write" if writing else "cannot read"
        return JournalError(f"transcript journal {self.id}: {action} {self.path}: {os_cause(exc)}")


class _Append:
    def __init__(self, fd: int, offset: int, st: os.stat_result, journal: Journal) -> None:
        self.fd = fd
        self.journal = journal
        self.identity = (st.st_dev, st.st_ino)
        self.size = st.st_size  # the file's size when locked; after write(), its new size
        # Shorter than what we read before: truncated (or replaced) under us.
        self.replaced = offset > self.size
        self.new = self._read(0 if self.replaced else offset)  # what others appended since
        self.written = 0

    def _read(self, offset: int) -> Reading:
        data = os.pread(self.fd, self.size - offset, offset) if self.size > offset else b""
        return parse(data, offset, self.journal)

    def _cut_sealed_fragment(self) -> bool:
        """A sealed line torn by a crash cannot be ended like a plaintext one (it would read as a
        line that fails to open, for good): it is cut off, back to the last whole line. It held
        nothing that was ever recorded."""
        window = min(self.size, 1 << 20)
        tail = os.pread(self.fd, window, self.size - window)
        start = tail.rfind(b"\n") + 1
        if not tail[start:].startswith(LINE_PREFIX[: len(tail) - start]) or (start == 0 and window < self.size):
            return False
        os.ftruncate(self.fd, self.size - window + start)
        self.size = self.size - window + start
        return True

    def reread(self) -> None:
        """Read the whole file (the caller lost track of it)."""
        self.new = self._read(0)

    def write(self, events: list[dict]) -> None:
        if not events:
            return
        torn = self.new.torn or (self.size and os.pread(self.fd, 1, self.size - 1) != b"\n")
        if torn and self._cut_sealed_fragment():
            torn = False
        # A torn plaintext line is ended first (it becomes one skipped foreign line); sealed
        # lines are bound to the offsets they land at, which the lock on the journal makes certain.
        payload = encode_lines(events, self.journal, self.size + (1 if torn else 0))
        if torn:
            payload = b"\n" + payload
        view = memoryview(payload)
        while view:
            view = view[os.write(self.fd, view):]
        os.fsync(self.fd)
        self.size += len(payload)
        self.written += len(payload)


__all__ = ["ID_RE", "SUFFIX", "Journal", "JournalError", "Reading", "encode_lines", "parse"]
