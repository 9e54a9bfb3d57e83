"""Writes confined to a directory at the moment they happen, not only when they were planned.

A coder-mode write is planned (its path resolved and checked to be in the workspace), shown
as a diff, and approved, maybe minutes later. Meanwhile a directory on the way may have been
swapped for a symbolic link: written by path, the approved file would land wherever the link
leads. Here the file's directory is reached from its allowed directory one name at a time,
each opened without following a link, and the file is read and replaced relative to it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path

_NO_FOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


class Moved(Exception):
    """A part of an approved write's path is not what it was when planned (now a link, or a file):
    written through, the write would land elsewhere. The text says which part."""


def open_parent(base: Path, path: Path, show: Callable[[Path], str], create: bool) -> int | None:
    """An fd of the directory holding `path` (resolved, inside `base`), reached from `base` one
    name at a time without following a link. A missing directory is made when `create`
    (mkdir's mode, 0777 less the umask), else the answer is None."""
    names = path.relative_to(base).parts[:-1]
    fd = os.open(base, _NO_FOLLOW_DIR)
    try:
        for depth, name in enumerate(names, 1):
            where = show(base.joinpath(*names[:depth]))
            try:
                inner = _open_dir(fd, name, where)
            except FileNotFoundError:
                if not create:
                    os.close(fd)
                    return None
                try:
                    os.mkdir(name, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass  # made meanwhile: opened, or refused, like any other
                inner = _open_dir(fd, name, where)
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_dir(fd: int, name: str, where: str) -> int:
    """The directory `name` in the directory `fd`, opened without following a link; a link or a
    file in its place is Moved."""
    try:
        return os.open(name, _NO_FOLLOW_DIR, dir_fd=fd)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
    link = stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
    raise Moved(f"{where}/ became {'a symbolic link' if link else 'a file'}")


def what_moved(show: Callable[[Path], str], path: Path) -> str:
    """Which part of a planned path became a link (the first), for the refusal."""
    for part in (*reversed(path.parents), path):
        if os.path.islink(part):
            return f"{show(part)}{'' if part == path else '/'} became a symbolic link"
    return f"{show(path)} no longer leads where it did"


def mode_if_unchanged(parent: int, path: Path, expected: bytes | None, show: Callable[[Path], str],
                      new_mode: int) -> int | None:
    """The mode the file's replacement gets (its own; a new file's `new_mode`) when the file still
    holds `expected` (None: there is none), read in `parent` without following a link; None when
    it changed. At most one byte past `expected` is read: more is a change anyway."""
    try:
        fd = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=parent)
    except FileNotFoundError:
        return new_mode if expected is None else None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Moved(f"{show(path)} became a symbolic link") from None
        return None
    try:
        info = os.fstat(fd)
        if expected is None or not stat.S_ISREG(info.st_mode):
            return None
        now, left = bytearray(), len(expected) + 1
        while left > 0 and (chunk := os.read(fd, left)):
            now += chunk
            left -= len(chunk)
        return info.st_mode & 0o7777 if now == expected else None
    finally:
        os.close(fd)
