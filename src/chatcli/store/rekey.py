"""`chatcli storage rekey` (SPEC §9): re-seal every session, journal, recall entry, memory note and
context snapshot under a new key.

Each file is replaced atomically (temporary file, fsync, rename) with its modification time
kept, so retention sees the same ages. A file that already opens with the new key is left as it
is, so a rekey interrupted at any point (a crash, a kill) is finished by running it again.
Plaintext files are sealed on the way. A file that opens with neither key is named and left
untouched; the command then exits 1.

Each file is re-sealed under the lock its writers take. Still, run it while no chatcli is
running: a running chatcli holds the old key. The store's key check is re-sealed last.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from chatcli.core.errors import ChatcliError
from chatcli.core.names import is_valid_name
from chatcli.store import home as layout
from chatcli.store.atomic import atomic_write, os_cause
from chatcli.store.home import Home
from chatcli.store.seal import CHECK_TEXT, LINE_PREFIX, SealError, is_sealed, sealer_for
from chatcli.store.search import discard_index
from chatcli.store.spool import KIND, SpoolBusy


@dataclass
class Rekeyed:
    resealed: dict[str, int] = field(default_factory=lambda: {"sessions": 0, "transcripts": 0, "recall": 0,
                                                              "memory": 0, "contexts": 0, "spool": 0})
    already: int = 0  # files that opened with the new key already
    failed: list[str] = field(default_factory=list)  # one line each
    damaged: int = 0  # journal lines no key opens (while others do): kept as they are


def rekey(home: Home, new: bytes) -> Rekeyed:
    """Re-seal `home`'s files, sealed with its key (or plaintext), under `new`."""
    done = Rekeyed()
    old, check = home.key, home.key_check_path
    if check.exists():  # the store's key check: the old key, or the new one (a rekey run before)
        raw = check.read_bytes()
        keys = [k for k in (old, new) if k is not None]
        if not any(_opens(raw, key, check) for key in keys):
            done.failed.append(f"{check}: neither CHATCLI_ENCRYPTION_KEY nor CHATCLI_NEW_ENCRYPTION_KEY is the key "
                               "this store is sealed with; nothing was changed")
            return done
    stores = home.sessions()  # for its locks only: the files are opened here, with both keys
    spool, held = home.spool("whatsapp"), None
    try:
        if spool.root.is_dir():
            held = spool.hold()  # a gateway serving it would go on with the old key
    except SpoolBusy as exc:
        held = None
        done.failed.append(f"{exc}: stop it, then run this again to re-seal its messages")
    except OSError:
        held = None  # no spool, and none can be made: nothing to re-seal
    for kind, path, name in _files(home):
        if kind == "spool" and held is None:
            continue
        try:
            # Under the lock its writers take: nothing is appended or written meanwhile.
            with (stores.lock(name) if kind == "sessions" else _flocked(path)):
                raw = path.read_bytes()
                if kind == "transcripts":
                    payload = _journal(raw, name, old, new, done)
                else:
                    payload = _whole(raw, _SEALED_AS[kind], name, old, new)
                if payload is None:
                    done.already += 1
                    continue
                _replace(path, payload, os.stat(path))
            done.resealed[kind] += 1
        except (ChatcliError, SealError) as exc:
            done.failed.append(f"{path}: {exc}")
        except OSError as exc:
            done.failed.append(f"{path}: {os_cause(exc)}")
    if held is not None:
        held.close()
    plain, sealed = home.index_paths
    discard_index(plain)  # a plaintext index from before any key
    discard_index(sealed)  # its hashes and seals are the old key's
    if not done.failed:  # last: while it opens with the old key, the rekey is not finished
        atomic_write(check, sealer_for(new).seal(CHECK_TEXT, "check", check.name))
    return done


def _opens(raw: bytes, key: bytes, check: Path) -> bool:
    try:
        sealer_for(key).open(raw, "check", check.name, "the store's key check")
        return True
    except SealError:
        return False


@contextlib.contextmanager
def _flocked(path: Path) -> Iterator[None]:
    """The journal's own lock (the one its appenders take)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


# What each store's whole files are sealed as (the kind the sealer binds them to).
_SEALED_AS = {"sessions": "session", "recall": "recall", "memory": "memory", "contexts": "context", "spool": KIND}


def _files(home: Home) -> Iterator[tuple[str, Path, str]]:
    for kind, root, named in (("sessions", home.sessions_dir, layout.session_named),
                              ("transcripts", home.transcripts_dir, layout.journal_named),
                              ("recall", home.recall_dir, layout.entry_named),
                              ("memory", home.memory_dir, layout.entry_named),
                              ("contexts", home.contexts_dir, layout.entry_named),
                              ("spool", home.spool("whatsapp").root, layout.entry_named)):
        try:
            entries = sorted(os.scandir(root), key=lambda e: e.name)
        except FileNotFoundError:
            continue
        for entry in entries:
            name = named(entry.name)
            if kind == "sessions" and name is not None and not is_valid_name(name):
                continue  # a file chatcli cannot load by name (Go ChatCLI's rules differ): not ours to seal
            if name is not None and not entry.name.startswith(".") and entry.is_file(follow_symlinks=False):
                yield kind, Path(entry.path), name


def _replace(path: Path, payload: bytes, st: os.stat_result) -> None:
    # The same age for the retention rules, set before the rename: a kill cannot leave it new.
    # Its mode too: a file its owner made read-only stays so.
    atomic_write(path, payload, mode=stat.S_IMODE(st.st_mode), times_ns=(st.st_atime_ns, st.st_mtime_ns))


def _whole(raw: bytes, kind: str, name: str, old: bytes | None, new: bytes) -> bytes | None:
    """A session file or recall entry sealed with the new key; None when it already is."""
    what = f"{kind} '{name}'"
    if is_sealed(raw):
        try:
            sealer_for(new).open(raw, kind, name, what)
            return None
        except SealError:
            pass
        if old is None:
            raise SealError(f"{what} is sealed and CHATCLI_ENCRYPTION_KEY (the old key) is not set")
        raw = sealer_for(old).open(raw, kind, name, what)
    return sealer_for(new).seal(raw, kind, name)


def _journal(raw: bytes, transcript_id: str, old: bytes | None, new: bytes, done: Rekeyed) -> bytes | None:
    """A journal with every line sealed with the new key (at its new offset); None when every
    line already is. A torn last line (a crash mid-append) is kept, sealed, as the foreign
    line it reads as. A damaged line (one that neither key opens while they open the others)
    cannot be re-sealed: it is kept as it is, where it is, and counted; readers skip it as
    they did before."""
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    position, plain, done_already, opened, damaged = 0, [], True, 0, 0
    for line in lines:
        at, position = position, position + len(line) + 1
        if not line.strip():
            continue
        if line.startswith(LINE_PREFIX):
            try:
                plain.append((sealer_for(new).open_line(line, transcript_id, at), False))
                opened += 1
                continue
            except SealError:
                if old is None:
                    raise SealError(f"transcript journal {transcript_id} has sealed lines and "
                                    "CHATCLI_ENCRYPTION_KEY (the old key) is not set") from None
                try:
                    line = sealer_for(old).open_line(line, transcript_id, at)
                    opened += 1
                except SealError:
                    damaged += 1
                    plain.append((line, True))
                    continue
        done_already = False
        plain.append((line, False))
    if damaged and not opened:
        raise SealError(f"transcript journal {transcript_id}: neither key opens any of its lines")
    done.damaged += damaged
    if done_already:
        return None
    sealer, out, offset = sealer_for(new), [], 0
    for line, as_is in plain:
        out.append(line if as_is else sealer.seal_line(line, transcript_id, offset))
        offset += len(out[-1]) + 1
    return b"\n".join(out) + b"\n" if out else b""


__all__ = ["Rekeyed", "rekey"]
