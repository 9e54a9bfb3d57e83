"""A lock one process holds for as long as it does a job no second process may do beside it (a
gateway serving a spool, an import): an exclusive `flock` on a file, never waited for."""

from __future__ import annotations

import os
from pathlib import Path

from chatcli.store.atomic import PRIVATE_FILE, ensure_private_dir


class Held:
    """The lock, held until `close` (or the process ends)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Held:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def hold(path: Path) -> Held | None:
    """Take the lock of file `path` (made, private, in a private directory); None when another
    process holds it."""
    import fcntl

    ensure_private_dir(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, PRIVATE_FILE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return Held(fd)
