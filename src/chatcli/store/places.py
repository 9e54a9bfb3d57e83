"""Where a small store keeps its files: a directory under CHATCLI_HOME (`Files`, the embedded
default), or the same files as rows on the sessions' PostgreSQL server (store.pg_places), which
every machine shares. The recall store, memory, contexts, cost snapshots and the schedule are
written once, against this interface, and do not know which one they have.

A place holds files by name (`0123abcd.json`): read whole, written whole and atomically,
appended to (a cost snapshot's lines), touched, removed, listed, and locked while a store reads
and rewrites one (the schedule). Failures are OSError (FileNotFoundError for a file that is not
there) here; a server's are its one line (StoreUnavailable), as every session operation's.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

from chatcli.store.atomic import PRIVATE_FILE, append_line, atomic_write, ensure_private_dir


class Files:
    """A directory of files (made private when first written)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, filename: str) -> Path:
        return self.root / filename

    def where(self, filename: str) -> str:
        """The file as the user is told of it."""
        return str(self.root / filename)

    def read(self, filename: str, regular: bool = False) -> bytes:
        """Its bytes. `regular`: only a regular file, never through a link (another program's
        file in a shared directory: a link could show anything, a FIFO would block)."""
        if not regular:
            return (self.root / filename).read_bytes()
        from chatcli.store.session_file import read_regular

        try:
            raw, _st = read_regular(self.root / filename)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # read_regular's words for a link speak of the sessions directory
                raise OSError(errno.ELOOP, "a symbolic link, which chatcli does not follow") from None
            raise
        return raw

    def write(self, filename: str, payload: bytes) -> None:
        atomic_write(self.root / filename, payload)

    def append(self, filename: str, line: bytes) -> None:
        """`line` added at the end, fsync'd (a crash leaves at most a torn last line)."""
        append_line(self.root / filename, line)

    def exists(self, filename: str) -> bool:
        return (self.root / filename).exists()

    def touch(self, filename: str) -> None:
        os.utime(self.root / filename)

    def remove(self, filename: str) -> bool:
        """False when it was not there (removed meanwhile by another surface)."""
        try:
            os.unlink(self.root / filename)
        except FileNotFoundError:
            return False
        return True

    def filenames(self) -> list[str]:
        """The regular files' names (none when the directory is not there yet)."""
        try:
            with os.scandir(self.root) as entries:
                return [entry.name for entry in entries if entry.is_file(follow_symlinks=False)]
        except FileNotFoundError:
            return []

    def stamp(self, filename: str | None = None) -> tuple | None:
        """What changes when the file (or, without one, any file of the place) is written or
        removed; None when it is not there."""
        try:
            st = os.stat(self.root if filename is None else self.root / filename)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size) if filename is None else (st.st_mtime_ns, st.st_size, st.st_ino)

    @contextlib.contextmanager
    def locked(self, lock_name: str) -> Iterator[None]:
        """Held while a store reads and rewrites its files: one process at a time."""
        import fcntl

        ensure_private_dir(self.root)
        fd = os.open(self.root / lock_name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, PRIVATE_FILE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def place_of(where: Files | Path | object) -> Files | object:
    """A store's place: a directory given as a path is its files there."""
    return Files(where) if isinstance(where, Path) else where


__all__ = ["Files", "place_of"]
