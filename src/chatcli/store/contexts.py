"""Named context snapshots (`/context`): files and directories read once, cut into
chunks, kept as `contexts/<name>.json` (0600, written atomically, sealed with the master key
when there is one). A snapshot has an id of its own: saving it again under its name keeps the
id (what was attached follows the new snapshot); deleting it and saving another under the same
name makes a new one (sessions attached to the old one skip it, with a note).

What is read: regular text files (UTF-8, no NUL byte), at most MAX_FILE bytes each, MAX_FILES
files and MAX_TOTAL bytes in all; directories are walked without following links, leaving out
hidden entries and the usual build and dependency directories. What was left out is counted.
"""

from __future__ import annotations

import datetime
import errno
import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from chatcli.core.errors import ChatcliError, UsageError
from chatcli.core.names import NAME_RE
from chatcli.store.atomic import os_cause
from chatcli.store.places import Files, place_of
from chatcli.store.seal import SealError, dump_json, load_json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from chatcli.store.pg_places import ServerFiles

VERSION = 1
SUFFIX = ".json"
CHUNK_LINES = 60  # lines of a chunk
CHUNK_CHARS = 4000  # characters of a chunk at most (long lines are cut there)
MAX_FILE = 512 * 1024
MAX_FILES = 2000
MAX_TOTAL = 8 * 1024 * 1024
SKIPPED_DIRS = frozenset({"node_modules", "__pycache__", "venv", "build", "dist", "target"})


class ContextError(ChatcliError):
    pass


@dataclass
class Chunk:
    n: int  # 1-based, across the snapshot
    file: str  # as given or found, relative to where it was read
    start: int  # first and last line (1-based)
    end: int
    text: str


@dataclass
class Context:
    id: str
    name: str
    created: str
    roots: list[str]
    files: list[dict] = field(default_factory=list)  # {path, size, lines, sha256}
    chunks: list[Chunk] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)  # why → how many

    @property
    def size(self) -> int:
        return sum(int(item.get("size", 0)) for item in self.files)


def validate(name: str) -> str:
    if not NAME_RE.fullmatch(name) or ".." in name:
        raise UsageError(f"invalid context name {name!r}: 1 to 128 letters, digits, '-', '_' and '.', starting "
                         "with a letter or digit")
    return name


class ContextStore:
    """The snapshots' files are in a directory, or on the sessions' server (`place`: store.places)."""

    def __init__(self, place: Path | Files | ServerFiles, key: bytes | None = None) -> None:
        self.place = place_of(place)
        self.key = key

    @staticmethod
    def filename(name: str) -> str:
        return validate(name) + SUFFIX

    # -- making one -------------------------------------------------------------------------
    def save(self, name: str, paths: list[str], cwd: Path) -> tuple[Context, bool]:
        """Read `paths` (files or directories, relative to `cwd`) into the snapshot `name`;
        (it, whether it replaced an older one)."""
        validate(name)
        if not paths:
            raise UsageError("usage: /context save NAME PATH… (files or directories)")
        old = self._read_if_any(name)
        context = Context(old.id if old else os.urandom(6).hex(), name,
                          datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), list(paths))
        total = 0
        seen: set[tuple[int, int]] = set()  # (device, inode): a file given twice is kept once
        for given in paths:
            target = (cwd / os.path.expanduser(given)).resolve()
            try:
                st = os.stat(target)
            except OSError as exc:
                raise UsageError(f"{given}: {os_cause(exc)} (nothing was saved)") from None
            for path in (_walk(target, context.skipped) if stat.S_ISDIR(st.st_mode) else [target]):
                if len(context.files) >= MAX_FILES:
                    _count(context.skipped, f"over {MAX_FILES} files")
                    continue
                if total >= MAX_TOTAL:  # full: the rest is counted, not read
                    _count(context.skipped, f"over {MAX_TOTAL // (1024 * 1024)} MB in all")
                    continue
                text = _text(path, context.skipped, seen)
                if text is None:
                    continue
                if not text.strip():
                    _count(context.skipped, "empty files")
                    continue
                if total + len(text) > MAX_TOTAL:
                    _count(context.skipped, f"over {MAX_TOTAL // (1024 * 1024)} MB in all")
                    continue
                total += len(text)
                shown = _shown(path, target, given, stat.S_ISDIR(st.st_mode))
                lines = text.splitlines()
                context.files.append({"path": shown, "size": len(text.encode("utf-8")), "lines": len(lines),
                                      "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()})
                for start, end, piece in _cut(lines):
                    context.chunks.append(Chunk(len(context.chunks) + 1, shown, start, end, piece))
        if not context.files:
            why = ", ".join(f"{count} {reason}" for reason, count in context.skipped.items()) or "nothing found"
            raise UsageError(f"no text file to keep in {', '.join(paths)} ({why}); nothing was saved")
        self._write(context)
        return context, old is not None

    def _write(self, context: Context) -> None:
        document = {"version": VERSION, "id": context.id, "name": context.name, "created": context.created,
                    "roots": context.roots, "files": context.files, "skipped": context.skipped,
                    "chunks": [[c.n, c.file, c.start, c.end, c.text] for c in context.chunks]}
        payload = dump_json(document, self.key, "context", context.name)
        filename = self.filename(context.name)
        try:
            self.place.write(filename, payload)
        except OSError as exc:
            raise ContextError(f"contexts: cannot write {self.place.where(filename)}: {os_cause(exc)}") from None

    # -- reading ----------------------------------------------------------------------------
    def load(self, name: str) -> Context:
        context = self._read_if_any(name)
        if context is None:
            raise UsageError(f"no context named '{name}' (/context list shows them)")
        return context

    def _read_if_any(self, name: str) -> Context | None:
        filename = self.filename(name)
        try:
            raw = self.place.read(filename)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ContextError(f"contexts: cannot read {self.place.where(filename)}: {os_cause(exc)}") from None
        try:
            document = load_json(raw, self.key, "context", name, f"context '{name}'")
            if document.get("version", 0) > VERSION:
                raise ContextError(f"context '{name}' was written by a newer chatcli; it is left as it is")
            return Context(str(document["id"]), name, str(document.get("created", "")), list(document.get("roots", [])),
                           list(document.get("files", [])),
                           [Chunk(*item) for item in document.get("chunks", [])], dict(document.get("skipped", {})))
        except SealError as exc:
            raise ContextError(str(exc)) from None
        except (ValueError, KeyError, TypeError):
            raise ContextError(f"context '{name}' is damaged; the file was left untouched") from None

    def names(self) -> list[str]:
        try:
            found = [filename[:-len(SUFFIX)] for filename in self.place.filenames() if filename.endswith(SUFFIX)]
        except OSError as exc:
            raise ContextError(f"contexts: cannot list {self.place.where('')}: {os_cause(exc)}") from None
        return sorted(name for name in found if NAME_RE.fullmatch(name) and ".." not in name)

    def stamp(self, name: str) -> tuple[int, int, int] | None:
        return self.place.stamp(self.filename(name))

    def delete(self, name: str) -> None:
        filename = self.filename(name)
        try:
            removed = self.place.remove(filename)
        except OSError as exc:
            raise ContextError(f"contexts: cannot remove {self.place.where(filename)}: {os_cause(exc)}") from None
        if not removed:
            raise UsageError(f"no context named '{name}' (/context list shows them)")


def _count(skipped: dict[str, int], reason: str) -> None:
    skipped[reason] = skipped.get(reason, 0) + 1


def _walk(root: Path, skipped: dict[str, int]) -> list[Path]:
    found: list[Path] = []
    for directory, dirs, files in os.walk(root, followlinks=False):
        kept = []
        for name in sorted(dirs):
            if name.startswith(".") or name in SKIPPED_DIRS:
                _count(skipped, "hidden or build directories")
            else:
                kept.append(name)
        dirs[:] = kept
        for name in sorted(files):
            if name.startswith("."):
                _count(skipped, "hidden files")
            else:
                found.append(Path(directory) / name)
    return found


def _text(path: Path, skipped: dict[str, int], seen: set[tuple[int, int]]) -> str | None:
    """The file's text: opened without following a link or waiting on a FIFO, checked as opened
    (a regular file, not too large) and read no further than the limit."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        _count(skipped, "links" if exc.errno == errno.ELOOP else "unreadable files")
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            _count(skipped, "not regular files")
            return None
        if (st.st_dev, st.st_ino) in seen:
            _count(skipped, "files given twice")
            return None
        seen.add((st.st_dev, st.st_ino))
        if st.st_size > MAX_FILE:
            _count(skipped, f"files over {MAX_FILE // 1024} KB")
            return None
        data = os.read(fd, MAX_FILE + 1)
    except OSError:
        _count(skipped, "unreadable files")
        return None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE:
        _count(skipped, f"files over {MAX_FILE // 1024} KB")
        return None
    if b"\0" in data[:8192]:
        _count(skipped, "binary files")
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        _count(skipped, "files not in UTF-8")
        return None


def _shown(path: Path, target: Path, given: str, walked: bool) -> str:
    if not walked:
        return given
    return str(Path(given) / path.relative_to(target))


def _cut(lines: list[str]) -> list[tuple[int, int, str]]:
    """(first line, last line, text) pieces of at most CHUNK_LINES lines and CHUNK_CHARS characters."""
    pieces = []
    start = 0
    while start < len(lines):
        end, size = start, 0
        while end < len(lines) and end - start < CHUNK_LINES and (size + len(lines[end]) <= CHUNK_CHARS or end == start):
            size += len(lines[end]) + 1
            end += 1
        pieces.append((start + 1, end, "\n".join(lines[start:end])[:CHUNK_CHARS]))
        start = end
    return pieces or [(1, 1, "")]


__all__ = ["Chunk", "Context", "ContextError", "ContextStore", "validate"]
