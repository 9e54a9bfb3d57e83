"""The listing's caches beside the sessions directory that `chatcli session list` reads before
anything else: the rendered listing, and the log of turns appended in place (see
SessionStore.append). Strings and `os` only: the fast path of `session list`
(cli/quick_list.py) imports this and little else, since on a cold page cache every module
read costs. Their names come from store.home:

  the rendered listing   "<directory token> <appends log size> <key>\\n" then the text
  the appends log        one line per append: ["<name>", mtime_ns, size, messages]
"""

from __future__ import annotations

import os
import time

from chatcli.store.home import appends_text, rendered_text

CATALOG_VERSION = 4
SETTLE_NS = 2_000_000_000  # a directory changed more recently than this is not trusted (coarse timestamps)

Appended = tuple  # (name, mtime_ns, size, messages or None)


def settled_token(root: str) -> tuple[str, int] | None:
    """Identifies the sessions directory's contents when it is settled, else None: the
    directory's part, and the size of the appends log (turns appended in place change the
    log, not the directory)."""
    try:
        directory = os.stat(root)
    except OSError:
        return None
    if time.time_ns() - directory.st_mtime_ns <= SETTLE_NS:
        return None
    try:
        appends = os.stat(appends_text(root)).st_size
    except OSError:
        appends = 0
    return f"{CATALOG_VERSION}:{directory.st_mtime_ns}:{directory.st_ino}", appends


def read_rendered(root: str, key: str) -> tuple[str, list[Appended]] | None:
    """The text saved under `key` while the directory has not changed since, with the turns
    appended in place since it was saved (the caller updates those rows); None when the listing
    must be made again."""
    token = settled_token(root)
    if token is None:
        return None
    directory, appends = token
    try:
        with open(rendered_text(root), encoding="utf-8") as handle:
            saved_directory, saved_appends, saved_key = handle.readline().rstrip("\n").split(" ", 2)
            if saved_directory != directory or saved_key != key or int(saved_appends) > appends:
                return None
            text = handle.read()
    except (OSError, ValueError):
        return None
    return text, appended_rows(root, int(saved_appends), appends)


def save_rendered(root: str, key: str, text: str) -> None:
    """Keep `text` (a formatted listing) for as long as the directory stays unchanged: written
    to a temporary file then renamed (a cache: not fsync'd; lost, it is made again)."""
    token = settled_token(root)
    if token is None:
        return
    target = rendered_text(root)
    temp = f"{os.path.dirname(target)}/.{os.path.basename(target)}.{os.getpid()}.{os.urandom(6).hex()}.tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, f"{token[0]} {token[1]} {key}\n{text}".encode("utf-8"))
        finally:
            os.close(fd)
        os.replace(temp, target)
    except OSError:
        try:
            os.unlink(temp)
        except OSError:
            pass


def appended_rows(root: str, start: int, end: int | None = None) -> list[Appended]:
    """The appends log's rows from byte `start` (to `end`); lines that do not parse are skipped."""
    try:
        with open(appends_text(root), "rb") as handle:
            handle.seek(start)
            data = handle.read(-1 if end is None else end - start)
    except OSError:
        return []
    return [row for row in map(parse_appended, data.split(b"\n")) if row is not None]


def appended_line(name: str, mtime_ns: int, size: int, messages: int | None) -> bytes:
    return f'["{name}", {mtime_ns}, {size}, {"null" if messages is None else messages}]\n'.encode()


def parse_appended(line: bytes) -> Appended | None:
    """One line of the log, or None. Session names need no JSON escapes (core.names)."""
    parts = line.strip().removeprefix(b"[").removesuffix(b"]").split(b", ")
    if len(parts) != 4 or len(parts[0]) < 3 or not parts[0].startswith(b'"') or not parts[0].endswith(b'"'):
        return None
    try:
        numbers = [int(part) for part in parts[1:3]]
        messages = None if parts[3] == b"null" else int(parts[3])
    except ValueError:
        return None
    return parts[0][1:-1].decode("utf-8", "replace"), numbers[0], numbers[1], messages


def note_appended(root: str, name: str, mtime_ns: int, size: int, messages: int | None) -> None:
    """One line to the log, in one write (O_APPEND: concurrent writers never interleave). A
    cache: a line that fails to be written leaves the row to the next scan."""
    try:
        fd = os.open(appends_text(root), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError:
        return
    try:
        os.write(fd, appended_line(name, mtime_ns, size, messages))
    except OSError:
        pass
    finally:
        os.close(fd)
