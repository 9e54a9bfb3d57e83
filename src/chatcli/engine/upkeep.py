"""Start-up upkeep shared by the REPL and the servers: the retention sweep (SPEC §10), and the
servers' logs, size-capped and rotated.

The sweep runs in a daemon thread so that it never delays a prompt or a server's first
answer; each removal is one unlink under the session's lock, so stopping mid-way (the
process exiting) leaves nothing half-done, and the next start carries on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from chatcli.config.settings import Settings

TYPE_CHECKING = False
if TYPE_CHECKING:
    import logging
    from pathlib import Path


def sweep(settings: Settings) -> None:
    """Remove what the start-up rules (TTL, count backstop, lost temporary files) remove now."""
    from chatcli.store.storage import Storage

    Storage(settings).sweep()


def start_sweep(settings: Settings, on_error: Callable[[BaseException], None] | None = None) -> threading.Thread:
    """Sweep in the background. Failures are not the user's concern at start-up (`/storage`
    shows what could not be removed); `on_error` sees them, for --debug."""

    def run() -> None:
        try:
            sweep(settings)
        except Exception as exc:  # noqa: BLE001 - a sweep that fails must not disturb the session
            if on_error is not None:
                on_error(exc)

    thread = threading.Thread(target=run, name="chatcli-sweep", daemon=True)
    thread.start()
    return thread


def log_to_file(settings: Settings, filename: str, logger: str) -> None:
    """The servers' logging (stdout is their protocol): `$CHATCLI_HOME/logs/<filename>`, 0600,
    rotated past CHATCLI_LOG_MAX_SIZE into LOG_BACKUPS older copies (`<filename>.1` the newest),
    so that no flood of requests fills the disk. The SDKs log at WARNING (their INFO lines may
    carry requests); chatcli's own at INFO. A log that cannot be opened or written never stops
    the server nor raises into it: that is said once on stderr, and each record tries again."""
    import logging

    from chatcli.store.home import LOG_BACKUPS, Home

    handler = _private_rotating_log(Home.of(settings).logs_dir / filename, settings.log_max_size, LOG_BACKUPS)
    logging.basicConfig(handlers=[handler], level=logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    logging.getLogger(logger).setLevel(logging.INFO)


def _private_rotating_log(path: Path, max_bytes: int, backups: int) -> logging.Handler:
    """A `RotatingFileHandler` for `path`, opened now, that

    - creates the log 0600 and never writes through a link or a FIFO planted at its name
      (store.atomic.open_in_home), so neither it nor a rotated copy is anyone else's to read;
    - shares the log with other processes (two MCP servers): a rotation is done under an flock
      on the log by the first process to find it full, and a process whose file was rotated away
      (or deleted) writes to the new one at its next record, rather than to a copy;
    - on a failure, says one line on stderr once, not logging's traceback (which would quote the
      record, beside a protocol or on a user's terminal), and reopens the file at the next record.

    Defined here, on first use: logging.handlers imports socket, pickle and queue, which only a
    server that opens a log should pay for."""
    import fcntl
    import os
    import stat
    import sys
    from logging.handlers import RotatingFileHandler

    from chatcli.store.atomic import PRIVATE_FILE, ensure_private_dir, open_in_home, os_cause

    class PrivateRotatingLog(RotatingFileHandler):
        def __init__(self) -> None:
            super().__init__(path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8", delay=True)
            self.warned = False
            try:
                self.stream = self._open()
            except OSError as exc:
                self.warn(exc)

        def _open(self):
            ensure_private_dir(path.parent)
            fd = open_in_home(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE)
            try:
                if stat.S_IMODE(os.fstat(fd).st_mode) != PRIVATE_FILE:
                    os.fchmod(fd, PRIVATE_FILE)  # the umask's doing, or a log made before this rule
                return open(fd, "a", encoding=self.encoding, errors=self.errors)
            except BaseException:
                os.close(fd)
                raise

        def is_the_log(self, stream) -> bool:
            """Whether `stream` is still the file at the log's name."""
            try:
                here = os.fstat(stream.fileno())
                there = os.stat(self.baseFilename, follow_symlinks=False)
            except (OSError, ValueError):
                return False
            return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)

        def drop_stream(self) -> None:
            stream, self.stream = self.stream, None
            _close_quietly(stream)

        def shouldRollover(self, record: logging.LogRecord) -> bool:
            if self.stream is not None and not self.is_the_log(self.stream):
                self.drop_stream()
            if self.stream is None:
                self.stream = self._open()
            size = self.stream.seek(0, os.SEEK_END)
            line = len(self.format(record).encode(self.encoding, "replace")) + 1
            # A record longer than the cap fills a file alone: an empty file is never rotated.
            return 0 < size and size + line > self.maxBytes

        def doRollover(self) -> None:
            """`<log>.2` → `.3`, `.1` → `.2`, the log → `.1` (os.replace: a link at a copy's name is
            replaced, never followed), under an flock on the log, so that of several processes
            finding it full only the first rotates it; the others find the new file there."""
            stream, self.stream = self.stream, None
            try:
                if stream is not None:
                    fcntl.flock(stream.fileno(), fcntl.LOCK_EX)
                if stream is None or self.is_the_log(stream):
                    names = [self.baseFilename, *(f"{self.baseFilename}.{n}" for n in range(1, self.backupCount + 1))]
                    for older, newer in reversed(list(zip(names, names[1:]))):
                        if os.path.lexists(older):
                            os.replace(older, newer)
            except OSError as exc:  # a copy could not be renamed: go on writing the log past its cap
                self.warn(exc)
            finally:
                if stream is not None:
                    _close_quietly(stream)  # and the lock with it
            self.stream = self._open()

        def handleError(self, record: logging.LogRecord) -> None:
            exc = sys.exc_info()[1]
            if self.stream is not None:
                self.drop_stream()
            self.warn(exc)

        def warn(self, exc: BaseException | None) -> None:
            if self.warned:
                return
            self.warned = True
            why = os_cause(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"
            try:
                sys.stderr.write(f"chatcli: warning: cannot write the log {self.baseFilename}: {why}; "
                                 "going on without it until it can be written\n")
                sys.stderr.flush()
            except (AttributeError, OSError, ValueError):  # no stderr, or a closed one
                pass

    return PrivateRotatingLog()


def _close_quietly(stream) -> None:
    try:
        stream.close()
    except (OSError, ValueError):
        pass  # what it still held could not be written (a full disk): the next file carries on
