"""A chat gateway's spool: the messages a channel handed over that are not answered yet, and
the answers not sent yet, one file each in `spool/<channel>/` (store.home).

A channel that delivers by webhook and forgets what it was told was received (WhatsApp's
Cloud API) needs it: a message is written here, durably, before the delivery is acknowledged,
and its file is removed only once its answer was sent, so a kill, a restart or an outage of
the channel's API loses neither. Files are named by arrival (nanoseconds, then a digest of
the message id), so a restart takes them up in the order they came. With
CHATCLI_ENCRYPTION_KEY each file is sealed, bound to its name, like a session file.

A file chatcli cannot read (another key, altered bytes) is left where it is, never
overwritten, and said in one line; the others go on. One process at a time serves a spool
(`hold`): two would each send, and remove, what the other is sending.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from chatcli.core.errors import ChatcliError
from chatcli.store.atomic import atomic_write, ensure_private_dir, fsync_dir, os_cause
from chatcli.store.held import Held, hold
from chatcli.store.seal import SealError, dump_json, load_json

KIND = "spool"
SUFFIX = ".json"


class SpoolBusy(ChatcliError):
    """Another process serves this spool."""


class Spool:
    def __init__(self, root: Path, key: bytes | None = None, lock: Path | None = None) -> None:
        """`lock`: the file `hold` locks (store.home names it; it is in `root`, a dot file)."""
        self.root, self.key, self.lock = root, key, lock

    def hold(self) -> Held:
        """Take the spool for this process; SpoolBusy when another one serves it."""
        held = hold(self.lock)
        if held is None:
            raise SpoolBusy(f"another chatcli gateway serves {self.root} (one process per CHATCLI_HOME and "
                            "channel)")
        return held

    def put(self, item: dict, message_id: str) -> str:
        """Write a new item durably; its name (the order it is taken up in)."""
        digest = hashlib.sha256(message_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        name = f"{time.time_ns():020d}-{digest}"
        self.update(name, item)
        return name

    def update(self, name: str, item: dict) -> None:
        """Replace an item (atomically, durably)."""
        atomic_write(self.root / (name + SUFFIX), dump_json(item, self.key, KIND, name))

    def remove(self, name: str) -> None:
        try:
            os.unlink(self.root / (name + SUFFIX))
        except FileNotFoundError:
            return
        fsync_dir(self.root)

    def pending(self) -> tuple[list[tuple[str, dict]], list[str]]:
        """([(name, item)] in arrival order, [one line for each file that cannot be read])."""
        try:
            ensure_private_dir(self.root)
            names = sorted(entry.name for entry in os.scandir(self.root)
                           if entry.name.endswith(SUFFIX) and not entry.name.startswith("."))
        except OSError as exc:
            return [], [f"{self.root} cannot be read ({os_cause(exc)})"]
        items, problems = [], []
        for filename in names:
            path, name = self.root / filename, filename.removesuffix(SUFFIX)
            try:
                item = load_json(path.read_bytes(), self.key, KIND, name, str(path))
            except (OSError, SealError, ValueError) as exc:
                problems.append(f"{path} cannot be read, and is left as it is: {exc}")
                continue
            if isinstance(item, dict):
                items.append((name, item))
            else:
                problems.append(f"{path} is not a spooled message, and is left as it is")
        return items, problems


__all__ = ["Spool"]
