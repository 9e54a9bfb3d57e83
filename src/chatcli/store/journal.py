"""Transcript journals on disk, one file per conversation (SPEC §7; format in core.journal).

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
from chatcli.core.journal import FORK, MESSAGE, check_event, fork_line, rekey_earlier_hashes
from chatcli.core.messages import dict_holds_inexact_number
from chatcli.store import home
from chatcli.store.atomic import atomic_write, ensure_private_dir, fsync_dir, open_in_home, os_cause
from chatcli.store.bulk import gc_paused
from chatcli.store.seal import LINE_PREFIX, SealError, sealer_for

STAMP_ID, STAMP_AT = "j", "at"  # a plaintext line's journal id and byte offset
ID_RE = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_-]{0,127}")


class JournalError(ChatcliError):
    pass


def _json():
    import orjson

    return orjson


def encode_lines(events: list[dict], journal: Journal | None = None, offset: int = 0) -> bytes:
    """Events as JSON lines for `journal`, the first landing at byte `offset`. A plaintext line
    is stamped with its journal's id and the offset it is written at (`"j"`, `"at"`): offsets
    only grow along a journal, so a reader can tell a line that belongs from one duplicated,
    moved back or spliced in from another journal. A sealed line carries no stamps: its seal
    binds it to both (store.seal)."""
    orjson = _json()
    sealer = sealer_for(journal.key) if journal is not None else None
    parts = []
    for event in events:
        if STAMP_AT in event or STAMP_ID in event:  # an event read from a journal (a fork's copy)
            event = {k: v for k, v in event.items() if k != STAMP_ID and k != STAMP_AT}
        if journal is not None and sealer is None:
            event = {**event, STAMP_ID: journal.id, STAMP_AT: offset}
        try:
            part = orjson.dumps(event)
        except TypeError:  # a value orjson refuses (a big integer in a foreign field, a lone surrogate)
            import json

            part = json.dumps(event).encode("ascii")  # \u escapes carry anything
        if sealer is not None:
            part = sealer.seal_line(part, journal.id, offset)
        parts.append(part)
        offset += len(part) + 1
    return b"\n".join(parts) + b"\n"


@dataclass
class Reading:
    """Events read from a journal, from some byte offset to the end of its last whole line.

    Lines that are not events are skipped and counted, never fatal (SPEC §7): `foreign` (not an
    event of this version: garbage, another tool's line), `torn` (a crash mid-append), `stray`
    (an event that does not belong where it is: stamped with another journal's id, or written
    before a line that precedes it, i.e. duplicated or moved back, or recording a message hash
    already recorded) and
    `damaged` (a sealed line that fails authentication while others open with the same key)."""

    events: list[dict] = field(default_factory=list)
    end: int = 0  # the offset just past the last whole line read
    foreign: int = 0
    torn: int = 0  # 1 when the file ends in a line without its newline
    stray: int = 0
    damaged: int = 0
    identity: tuple[int, int] | None = None  # (device, inode) of the file read, when read whole

    @property
    def skipped(self) -> int:
        return self.foreign + self.torn + self.stray + self.damaged

    def describe_skipped(self) -> str:
        """'2 damaged and 1 torn line(s)': what was skipped, in words ('' when nothing was)."""
        parts = [f"{count} {label}" for count, label in ((self.damaged, "damaged"), (self.stray, "out-of-place"),
                                                         (self.foreign, "foreign"), (self.torn, "torn")) if count]
        if not parts:
            return ""
        return (", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]) + " line(s)"


def parse(data: bytes, offset: int = 0, journal: Journal | None = None) -> Reading:
    """The events of `data`, which starts at byte `offset` of `journal`.

    A sealed line is opened with the journal's key. One that fails is damage (skipped, counted)
    when the key opens other lines of the journal; when it opens none of a whole journal, the
    key is wrong, and that is an error, not damage (SPEC §7). Plaintext lines that do not belong
    where they are are left out: one pass while their stamps are in order (always, but for
    damage), then a careful one (`_in_place`)."""
    with gc_paused():
        return _parse(data, offset, journal, careful=False) or _parse(data, offset, journal, careful=True)


def _parse(data: bytes, offset: int, journal: Journal | None, careful: bool) -> Reading | None:
    orjson = _json()
    reading = Reading(end=offset)
    cut = data.rfind(b"\n") + 1
    if cut < len(data) and data[cut:].strip():
        reading.torn = 1
    position, sealed, opened, failure = offset, False, 0, None
    name = journal.id if journal is not None else None
    parent = None  # a fork's parent journal (its first line says which)
    entries: list[tuple[int | None, dict, bytes]] = []  # careful: (stamped offset, event, line)
    seen: set[str] = set()  # message hashes, in the one-pass reading
    last = offset - 1  # stamps only grow; one read from `offset` on stamped before it is a copy
    for line in data[:cut].split(b"\n"):
        at, position = position, position + len(line) + 1
        if not line.strip():
            continue
        if line.startswith(LINE_PREFIX):
            sealed = True
            try:
                line = _open_line(line, journal, at)
            except SealError as exc:
                failure = failure or exc
                reading.damaged += 1
                continue
            opened += 1
        elif sealed:
            # chatcli never writes plaintext after sealed lines: a sealed line whose prefix was
            # damaged (or cut by a stray newline) is damage; a plaintext event slipped in does
            # not belong (tampering, detected and counted, never read as said).
            try:
                slipped = check_event(orjson.loads(line)) is not None
            except orjson.JSONDecodeError:
                slipped = False
            if slipped:
                reading.stray += 1
            else:
                reading.damaged += 1
            continue
        try:
            event = check_event(orjson.loads(line))
        except orjson.JSONDecodeError:
            event = None
        if event is None:
            reading.foreign += 1
            continue
        stamped = None if sealed else event.get(STAMP_AT)  # a sealed line's seal binds its place
        if stamped is not None and parent is not None and event.get(STAMP_ID) == parent:
            stamped = None  # copied as it was from the parent (an older version's fork): unchecked
        if event["type"] == FORK and not entries and not reading.events:
            parent = event["from"]
        if stamped is not None:
            if stamped.__class__ is not int or (name is not None and event.get(STAMP_ID, name) != name):
                reading.stray += 1  # another journal's line
                continue
            if careful:
                entries.append((stamped, event, line))
                continue
            if stamped <= last:
                return None  # out of order: read again, carefully
            last = stamped
        elif careful:
            entries.append((None, event, line))
            continue
        _add(reading, seen, event, line)
    if failure is not None and not opened and offset == 0:
        raise JournalError(str(failure))  # a whole journal the key opens nothing of: the wrong key
    if careful:
        kept = _in_place(entries, offset)
        reading.stray += len(entries) - len(kept)
        for _stamped, event, line in kept:
            _add(reading, seen, event, line)
    reading.end = offset + cut
    rekey_earlier_hashes(reading.events)
    return reading


def _add(reading: Reading, seen: set[str], event: dict, line: bytes) -> None:
    """Add an event that belongs where it is, unless it records a message already recorded."""
    if event["type"] == MESSAGE:
        digest = event["hash"]
        if digest in seen:  # recorded once per journal: a second copy does not belong
            reading.stray += 1
            return
        seen.add(digest)
        if len(event["message"]) > 2 and dict_holds_inexact_number(event["message"]):
            import json  # an integer past 64 bits: parse this line exactly

            event = check_event(json.loads(line)) or event
    reading.events.append(event)


def _in_place(entries: list, offset: int) -> list:
    """The entries that belong where they are, when the offsets plaintext lines were stamped with
    (the offsets they were written at, which only grow along a journal) are out of order: a line
    was duplicated, or moved. The longest run of lines whose stamps grow is kept, so a misplaced
    line costs itself, not the lines it was put before (and of a line and its copy, the one in
    its place stays). Lines read from `offset` on that were stamped before it are copies.
    Unstamped lines (older versions) are kept."""
    import bisect

    candidates = [index for index, entry in enumerate(entries) if entry[0] is not None and entry[0] >= offset]
    # Longest strictly increasing run of stamps (patience sorting, with back links).
    tails: list[int] = []  # stamps ending the best runs of each length
    ends: list[int] = []  # the candidate index ending them
    back: dict[int, int | None] = {}
    for index in candidates:
        stamped = entries[index][0]
        length = bisect.bisect_left(tails, stamped)
        back[index] = ends[length - 1] if length else None
        if length == len(tails):
            tails.append(stamped)
            ends.append(index)
        else:
            tails[length], ends[length] = stamped, index
    keep: set[int] = set()
    index = ends[-1] if ends else None
    while index is not None:
        keep.add(index)
        index = back[index]
    return [entry for i, entry in enumerate(entries) if entry[0] is None or i in keep]


def _open_line(line: bytes, journal: Journal | None, at: int) -> bytes:
    name = journal.id if journal is not None else "?"
    if journal is None or journal.key is None:
        raise JournalError(f"transcript journal {name} is encrypted: set CHATCLI_ENCRYPTION_KEY to the key that "
                           "sealed it")
    return sealer_for(journal.key).open_line(line, journal.id, at)


def last_whole_event(data: bytes, start: int, journal) -> dict | None:
    """The last line of `data` (a journal's bytes from `start` to its end) as one whole event of
    `journal`; None when it is not one (torn, foreign, or longer than `data`)."""
    if not data.endswith(b"\n"):
        return None
    cut = data.rfind(b"\n", 0, len(data) - 1) + 1
    if cut == 0 and start > 0:
        return None  # a line longer than what was read
    try:
        reading = parse(data[cut:], start + cut, journal)
    except (JournalError, SealError):
        return None
    if len(reading.events) != 1 or reading.skipped:
        return None
    return reading.events[0]


class Journal:
    def __init__(self, root: Path, transcript_id: str, key: bytes | None = None) -> None:
        if not ID_RE.fullmatch(transcript_id):
            raise JournalError(f"invalid transcript id {transcript_id!r}")
        self.root = root
        self.id = transcript_id
        self.key = key  # CHATCLI_ENCRYPTION_KEY: lines are sealed (store.seal)
        self.path = home.journal_path(root, transcript_id)

    @property
    def where(self) -> str:
        """Where the journal is kept, as the user is told."""
        return str(self.path)

    def exists(self) -> bool:
        return self.path.exists()

    def stat(self) -> tuple[int, int, tuple[int, int]] | None:
        """(mtime in ns, size, identity (device, inode)), or None when there is no journal."""
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size, (st.st_dev, st.st_ino)

    def lineage(self) -> str:
        """Which journal this is, for the search index: its identity and a digest of its first line
        (an inode can be reused by a new journal once the old one is deleted). Appends never
        change it."""
        import hashlib

        try:
            with open(open_in_home(self.path, os.O_RDONLY), "rb") as handle:
                st = os.fstat(handle.fileno())
                first = handle.readline(65536)
        except OSError as exc:
            raise self._error(exc) from None
        return f"{st.st_dev}:{st.st_ino}:{hashlib.sha256(first).hexdigest()[:16]}"

    def read_bytes(self) -> bytes:
        try:
            return self.path.read_bytes()
        except OSError as exc:
            raise self._error(exc) from None

    def put_raw(self, raw: bytes) -> None:
        """Keep `raw` (another store's bytes of this journal) as this journal."""
        try:
            ensure_private_dir(self.root)
            atomic_write(self.path, raw)
        except OSError as exc:
            raise self._error(exc, writing=True) from None

    def remove(self) -> bool:
        """Remove the journal (its session was deleted); False when there was none, or it could
        not be removed."""
        try:
            os.unlink(self.path)
        except OSError:
            return False
        return True

    def size(self) -> int:
        try:
            return os.stat(self.path).st_size
        except FileNotFoundError:
            return 0

    def read(self, offset: int = 0) -> Reading:
        """Every event from byte `offset` on (a missing journal reads as empty)."""
        try:
            with open(open_in_home(self.path, os.O_RDONLY), "rb") as handle:
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

    def last_event(self, reach: int = 8192) -> tuple[dict, int, tuple[int, int]] | None:
        """The journal's last event, the journal's size and its (device, inode), reading only its
        last `reach` bytes: None when that line is not a whole event of this journal."""
        try:
            with open(open_in_home(self.path, os.O_RDONLY), "rb") as handle:
                st = os.fstat(handle.fileno())
                start = max(0, st.st_size - reach)
                handle.seek(start)
                data = handle.read(st.st_size - start)
        except OSError:
            return None
        event = last_whole_event(data, start, self)
        return None if event is None else (event, st.st_size, (st.st_dev, st.st_ino))

    @contextlib.contextmanager
    def appending(self, offset: int) -> Iterator[_Append]:
        """Lock the journal, read what others appended since `offset`, then let the caller append.

        The caller sees `new` (a Reading of the other writers' events) and calls `write(events)`
        at most once: its events are written in chunks of WRITE_CHUNK lines (no buffer of the whole
        batch) and fsync'd once, when `durable`. A torn last line left by a crash is ended first, so
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
        may have replaced it while we waited for the lock). A link at its path is refused, never
        followed (`open_in_home`)."""
        while True:
            fd = open_in_home(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
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


WRITE_CHUNK = 1_000  # events encoded and written together by _Append.write


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

    def write(self, events: list[dict], durable: bool = True) -> None:
        """Append `events`, fsync'd unless `durable` is False (more follow in this append)."""
        if not events:
            return
        torn = self.new.torn or (self.size and os.pread(self.fd, 1, self.size - 1) != b"\n")
        if torn and self._cut_sealed_fragment():
            torn = False
        # A torn plaintext line is ended first (it becomes one skipped foreign line); sealed
        # lines are bound to the offsets they land at, which the lock on the journal makes certain.
        if torn:
            self._write_all(b"\n")
        # Encoded and written WRITE_CHUNK events at a time, fsync'd once: a whole history
        # recorded at once (100,000 messages) would otherwise hold every line twice over in
        # memory, and orjson's many buffers several times that. A crash between two chunks
        # leaves whole lines and no `synced` line after them, which the next sync completes.
        for start in range(0, len(events), WRITE_CHUNK):
            self._write_all(encode_lines(events[start:start + WRITE_CHUNK], self.journal, self.size))
        if durable:
            os.fsync(self.fd)

    def _write_all(self, payload: bytes) -> None:
        view = memoryview(payload)
        while view:
            view = view[os.write(self.fd, view):]
        self.size += len(payload)
        self.written += len(payload)


__all__ = ["ID_RE", "Journal", "JournalError", "Reading", "encode_lines", "parse"]
