"""The session store: `$CHATCLI_HOME/sessions/<name>.json` in the v2 format (SPEC §4).

Reads and writes whole documents atomically, never overwrites a file it could not read,
lists from a stat-keyed catalog instead of parsing every file, and offers a per-session
lock for the read-merge-write of concurrent surfaces.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from chatcli.core.errors import ChatcliError
from chatcli.core.names import validate_name
from chatcli.core.session import SessionData, SessionFormatError, decode_session, encode_session, make_title
from chatcli.store.atomic import PRIVATE_DIR, atomic_write, ensure_private_dir

SUFFIX = ".json"
CATALOG = ".catalog.json"


class SessionError(ChatcliError):
    """A session could not be read or written; the message names the session and the cause."""


class SessionNotFound(SessionError):
    pass


@dataclass(frozen=True)
class Stamp:
    """What a file looked like when we last read or wrote it; any write elsewhere changes it."""

    mtime_ns: int
    size: int
    inode: int

    @classmethod
    def of(cls, st: os.stat_result) -> "Stamp":
        return cls(st.st_mtime_ns, st.st_size, st.st_ino)


@dataclass(frozen=True)
class SessionInfo:
    name: str
    messages: int | None  # None when the file cannot be read
    mtime: float
    size: int
    title: str
    problem: str = ""


def _json():
    # orjson parses and, above all, serialises several times faster than the standard
    # library (a write-through rewrites the whole file every turn); imported only when used.
    import orjson

    return orjson


class SessionStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    # -- paths ---------------------------------------------------------------------------
    def path(self, name: str) -> Path:
        return self.root / (validate_name(name) + SUFFIX)

    def stamp(self, name: str) -> Stamp | None:
        try:
            return Stamp.of(os.stat(self.path(name)))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._error(name, exc) from None

    def exists(self, name: str) -> bool:
        return self.path(name).is_file()

    # -- read / write --------------------------------------------------------------------
    def load(self, name: str) -> tuple[SessionData, Stamp]:
        path = self.path(name)
        try:
            with open(path, "rb") as handle:
                stamp = Stamp.of(os.fstat(handle.fileno()))
                raw = handle.read()
        except FileNotFoundError:
            raise SessionNotFound(f"session '{name}' does not exist") from None
        except OSError as exc:
            raise self._error(name, exc) from None
        return self.decode(name, raw), stamp

    def decode(self, name: str, raw: bytes) -> SessionData:
        orjson = _json()
        try:
            document = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            where = f" (line {exc.lineno}, column {exc.colno})" if getattr(exc, "lineno", None) else ""
            kind = "is empty" if not raw.strip() else f"is not valid JSON{where}"
            raise SessionError(f"session '{name}' {kind}; the file was left untouched") from None
        try:
            return decode_session(document)
        except SessionFormatError as exc:
            raise SessionError(f"session '{name}': {exc}; the file was left untouched") from None

    def save(self, name: str, data: SessionData, *, check_existing: bool = True) -> Stamp:
        """Write `data` as session `name`. Unless told the caller has read the current file,
        an existing file that cannot be read is refused, never overwritten."""
        path = self.path(name)
        if check_existing and path.exists():
            try:
                self.load(name)
            except SessionError as exc:
                raise SessionError(f"{exc}; not overwriting it (delete it or choose another name)") from None
        if data.title is None:
            data.title = make_title(data.history)
        document = encode_session(data)
        try:
            payload = _json().dumps(document)
        except TypeError:  # a value orjson refuses (an integer past 64 bits in a foreign field)
            import json

            payload = json.dumps(document, ensure_ascii=False).encode("utf-8")
        try:
            ensure_private_dir(self.root)
            atomic_write(path, payload)
            return Stamp.of(os.stat(path))
        except OSError as exc:
            raise self._error(name, exc, writing=True) from None

    def delete(self, name: str) -> None:
        try:
            os.unlink(self.path(name))
        except FileNotFoundError:
            raise SessionNotFound(f"session '{name}' does not exist") from None
        except OSError as exc:
            raise self._error(name, exc, writing=True) from None
        with contextlib.suppress(OSError):
            os.unlink(self.root / f".{name}.lock")

    @contextlib.contextmanager
    def lock(self, name: str) -> Iterator[None]:
        """Exclusive per-session lock across processes (held only around read-merge-write)."""
        lock_path = self.root / f".{validate_name(name)}.lock"
        try:
            ensure_private_dir(self.root)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise self._error(name, exc, writing=True) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    # -- listing -------------------------------------------------------------------------
    def list(self) -> list[SessionInfo]:
        """Every session, newest first. Files unchanged since the catalog saw them (same
        mtime and size) are not opened; the catalog is a cache, rebuilt when missing."""
        try:
            entries = [e for e in os.scandir(self.root) if e.name.endswith(SUFFIX) and not e.name.startswith(".")]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise SessionError(f"cannot list sessions in {self.root}: {exc.strerror or exc}") from None
        catalog = self._read_catalog()
        fresh: dict[str, list] = {}
        infos: list[SessionInfo] = []
        changed = False
        for entry in entries:
            name = entry.name[: -len(SUFFIX)]
            try:
                st = entry.stat()
            except OSError:
                continue
            cached = catalog.get(name)
            if cached and cached[0] == st.st_mtime_ns and cached[1] == st.st_size:
                row = cached
            else:
                row = self._summarise(name, Path(entry.path), st)
                changed = True
            fresh[name] = row
            infos.append(SessionInfo(name, row[2], st.st_mtime, st.st_size, row[3], row[4] if len(row) > 4 else ""))
        if changed or len(fresh) != len(catalog):
            self._write_catalog(fresh)
        infos.sort(key=lambda info: info.mtime, reverse=True)
        return infos

    def _summarise(self, name: str, path: Path, st: os.stat_result) -> list:
        try:
            data = self.decode(name, path.read_bytes())
        except (SessionError, OSError) as exc:
            problem = str(exc) if isinstance(exc, SessionError) else (exc.strerror or str(exc))
            return [st.st_mtime_ns, st.st_size, None, "", problem]
        return [st.st_mtime_ns, st.st_size, len(data.history), data.title or make_title(data.history) or ""]

    def _read_catalog(self) -> dict[str, list]:
        try:
            value = _json().loads((self.root / CATALOG).read_bytes())
        except (OSError, ValueError):
            return {}
        entries = value.get("entries") if isinstance(value, dict) else None
        return entries if isinstance(entries, dict) else {}

    def _write_catalog(self, entries: dict[str, list]) -> None:
        try:  # a cache: failing to write it only costs the next listing some parsing
            atomic_write(self.root / CATALOG, _json().dumps({"version": 1, "entries": entries}))
        except OSError:
            pass

    # -- errors --------------------------------------------------------------------------
    def _error(self, name: str, exc: OSError, writing: bool = False) -> SessionError:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            cause = "permission denied" if exc.errno != errno.EROFS else "read-only file system"
        elif exc.errno in (errno.ENOSPC, errno.EDQUOT):
            cause = "disk full"
        else:
            cause = exc.strerror or str(exc)
        action = "cannot write" if writing else "cannot read"
        nothing = "; nothing was written" if writing else ""
        return SessionError(f"session '{name}': {action} {self.path(name)}: {cause}{nothing}")


__all__ = ["PRIVATE_DIR", "SessionError", "SessionInfo", "SessionNotFound", "SessionStore", "Stamp"]
