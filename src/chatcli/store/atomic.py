"""The one atomic-write helper every writer uses: temp in the same dir, fsync, rename, fsync dir."""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
# What `temp_name` makes: group 1 is the target's name, group 2 the writer's process id.
TEMP_RE = re.compile(r"\.(.+)\.(\d+)\.[0-9a-f]{12}\.tmp")


def os_cause(exc: OSError) -> str:
    """Why a file operation failed, in the few words every store uses in its one-line errors."""
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if exc.errno == errno.EROFS:
        return "read-only file system"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "disk full"
    return exc.strerror or str(exc)


def ensure_private_dir(path: Path) -> Path:
    """Create `path` and any missing parents; every directory chatcli creates is 0700."""
    if not path.is_dir():
        missing = []
        probe = path
        while not probe.exists() and probe != probe.parent:
            missing.append(probe)
            probe = probe.parent
        for directory in reversed(missing):
            try:
                directory.mkdir(mode=PRIVATE_DIR)
            except FileExistsError:
                pass
            os.chmod(directory, PRIVATE_DIR)  # mkdir's mode is reduced by the umask
    return path


def unwritable(directory: Path, create: bool = True) -> str | None:
    """Why nothing can be created in `directory`, in a few words, or None when something can: a
    read-only file system, no permission. A probe file is created and removed; a full disk may
    still accept it (its writes then fail, and say so, once). A missing `directory` is made, or
    with `create=False` (a check that writes nothing that stays) its nearest existing parent is
    probed instead."""
    if not create:
        while not directory.exists() and directory != directory.parent:
            directory = directory.parent
    probe = directory / temp_name("write-probe")
    try:
        if create:
            ensure_private_dir(directory)
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE))
        os.unlink(probe)
    except OSError as exc:
        return os_cause(exc)
    return None


class RefusedFile(OSError):
    """A path chatcli will not open in place: a symbolic link, a FIFO, a device (`open_in_home`)."""


def open_in_home(path: Path | str, flags: int, mode: int = PRIVATE_FILE) -> int:
    """An fd of a regular file chatcli reads or writes in place inside its home (a journal, a cost
    snapshot, a lock file), opened without following a symbolic link at `path`: followed, a link
    planted there would have chatcli append to, lock or create a file anywhere it may write.
    A link raises RefusedFile (ELOOP) saying where it leads; anything but a regular file (a FIFO,
    which O_NONBLOCK keeps from blocking the open, a device) raises RefusedFile too."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            try:
                target = f" (to {os.readlink(path)})"
            except OSError:
                target = ""
            raise RefusedFile(errno.ELOOP, f"a symbolic link{target}; chatcli does not follow links in its home "
                                           "(move the link away, or copy the file there instead)", str(path)) from None
        if exc.errno == errno.ENXIO:  # a FIFO opened to write, with no reader
            raise RefusedFile(errno.ENXIO, "not a regular file", str(path)) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RefusedFile(errno.EINVAL, "not a regular file", str(path))
    except BaseException:
        os.close(fd)
        raise
    return fd


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def process_alive(pid: int) -> bool:
    """Whether process `pid` still runs (the writer a temporary name carries, the daemon that
    claimed a message): a process we may not signal runs; a pid out of range does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:
        return False
    return True


def temp_name(target: str) -> str:
    """The name of the temporary file beside `target` that an atomic write renames into place:
    `.<target>.<pid>.<12 hex>.tmp`. One that outlives its writer is a lost temporary file
    (see TEMP_RE), which `/storage prune` removes."""
    return f".{target}.{os.getpid()}.{os.urandom(6).hex()}.tmp"


def atomic_write(path: Path, data: bytes | Iterable[bytes], mode: int = PRIVATE_FILE, durable: bool = True,
                 times_ns: tuple[int, int] | None = None, dir_fd: int | None = None) -> None:
    """Replace `path` with `data` so that a crash leaves the old file or the new one, never a torn one.
    `data` may be bytes or pieces of them, made as they are written (an exception while making
    them leaves the old file).

    `durable=False` skips both fsyncs, for hints and caches that may be lost but never torn.
    `times_ns` (access, modification) are set before the rename, so the new file never has others.
    With `dir_fd`, `path` is a bare name in that open directory, which is neither made nor looked up
    by path again: a writer that reached the directory without following links stays there."""
    if dir_fd is None:
        ensure_private_dir(path.parent)
    # A unique name beside the target (what tempfile.mkstemp does, without its import cost).
    tmp = path.with_name(temp_name(path.name))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode, dir_fd=dir_fd)
    try:
        os.fchmod(fd, mode)
        for part in (data,) if isinstance(data, bytes) else data:
            view = memoryview(part)
            while view:
                written = os.write(fd, view)
                view = view[written:]
        if times_ns is not None:
            os.utime(fd, ns=times_ns)
        if durable:
            os.fsync(fd)
        os.close(fd)
        fd = -1
        if dir_fd is None:
            os.replace(tmp, path)
        else:
            os.replace(tmp, path, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        raise
    if durable:
        if dir_fd is None:
            fsync_dir(path.parent)
        else:
            os.fsync(dir_fd)


def append_line(path: Path, data: bytes, mode: int = PRIVATE_FILE, in_home: bool = True) -> None:
    """Append `data` in one write(2) with O_APPEND, then fsync: concurrent writers never interleave.
    A symbolic link or a FIFO at `path` is refused (`open_in_home`), unless the file is the user's
    own outside CHATCLI_HOME (`in_home=False`: the prompt history, which a user may keep as a link
    into a dotfiles repository)."""
    ensure_private_dir(path.parent)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
    fd = open_in_home(path, flags, mode) if in_home else os.open(path, flags, mode)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
