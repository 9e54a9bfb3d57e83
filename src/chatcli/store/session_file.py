"""A session file at the file boundary: reading one safely, and the errors the session store
and its listing (store.sessions, store.catalog) raise."""

from __future__ import annotations

import errno
import os
import stat

from chatcli.core.errors import ChatcliError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path


class SessionError(ChatcliError):
    """A session could not be read or written; the message names the session and the cause."""


class SessionNotFound(SessionError):
    pass


class StoreUnavailable(SessionError):
    """The store cannot be reached now (a server down or restarting): nothing was read or
    written, and the same operation may succeed later."""


class SessionExists(SessionError):
    pass


def read_regular(path: Path, chunked_from: int | None = None) -> tuple[bytes | int, os.stat_result]:
    """The bytes of a regular file and its stat. Anything else (a FIFO, a device, a directory)
    raises OSError without blocking: a FIFO opened for reading would wait for a writer forever.

    A session file that is a symbolic link is refused, wherever it leads: read through, it would
    show another file's contents (another user's, /etc); written, the atomic rename would replace
    the link by a file of its own, so a link to another session would fork it silently."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise OSError(errno.ELOOP, f"a symbolic link (to {os.readlink(path)}); chatcli does not follow links in "
                                   "the sessions directory (copy the file there instead)") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if chunked_from is not None and st.st_size >= chunked_from:
            fd, kept = -1, fd
            return kept, st  # the caller reads it (see SessionStore.load)
        with open(fd, "rb", closefd=False) as handle:  # exactly what the stamp says (an append may be landing)
            return handle.read(st.st_size), st
    finally:
        if fd >= 0:
            os.close(fd)


__all__ = ["SessionError", "SessionExists", "SessionNotFound", "StoreUnavailable", "read_regular"]
