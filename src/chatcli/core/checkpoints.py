"""Rewind checkpoints (SPEC §8), pure: what a checkpoint is, and how a session file stores them.

A checkpoint is the live history as it was just before a turn (or before a /rewind or
/compact): its ordered message hashes (the journal's, `core.journal`), the time, and the first
words of what came next. Restoring one needs the messages: the process that took it keeps them;
any other process finds them in the journal by hash.

Stored in the session file's `checkpoints` list, oldest first, each as

    {"time": ISO-8601, "label": "first words…", "keep": n, "hashes": [H, …]}

meaning: the first `n` hashes of the checkpoint before it, then `hashes`. A checkpoint taken
before a command rather than a turn (/rewind, /compact) has `"command": true` and the command
as its label. Histories mostly grow
between turns, so each entry holds only what changed and a session keeps many checkpoints for
about the size of one hash list. Items in any other shape (another tool's) are kept as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from chatcli.core.messages import Message

# The newest checkpoints a conversation keeps; older ones are forgotten (the journal still
# holds every message).
MAX_CHECKPOINTS = 100
LABEL_CHARS = 48


@dataclass(eq=False)
class Checkpoint:
    time: str
    label: str
    # This process's copy of the history (None for a checkpoint read from a file).
    messages: tuple[Message, ...] | None = None
    # The hash list, as a delta on `base`: base's first `keep` hashes, then `tail`. A tail of
    # None means no hash list (the journal is off): the checkpoint lives in this process only.
    base: Checkpoint | None = None
    keep: int = 0
    tail: tuple[str, ...] | None = None
    _full: tuple[str, ...] | None = field(default=None, repr=False)
    command: bool = False  # taken before a command (its label), not before a turn
    # The checkpoints the rewind that took this one dropped: restoring this one (undoing that
    # rewind) brings them back. This process only.
    later: tuple[Checkpoint, ...] = ()

    @property
    def persistent(self) -> bool:
        return self.tail is not None

    def hashes(self) -> tuple[str, ...] | None:
        """The whole ordered hash list (built from the chain of deltas)."""
        if self.tail is None:
            return None
        if self._full is not None:
            return self._full
        chain, node = [], self
        while node is not None and node._full is None:
            chain.append(node)
            node = node.base if node.keep else None
        full = node._full if node is not None else ()
        for link in reversed(chain):
            full = full[: link.keep] + link.tail
        return full

    @property
    def size(self) -> int:
        """How many messages the checkpoint's history has."""
        if self.messages is not None:
            return len(self.messages)
        return self.keep + len(self.tail or ())


def label_of(text: str) -> str:
    words = " ".join(text.split())
    return words if len(words) <= LABEL_CHARS else words[: LABEL_CHARS - 1].rstrip() + "…"


def common_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    """The length of the longest common prefix (slices compare in C: a binary search is fast)."""
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    while lo < hi:  # a[:lo] == b[:lo] holds; a[:hi] == b[:hi] does not
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def take(time: str, label: str, messages: Sequence[Message], hashes: Sequence[str] | None,
         previous: Sequence[Checkpoint], command: bool = False) -> Checkpoint:
    """A new checkpoint after `previous` (oldest first), its hash list stored as a delta on the
    newest persistent one."""
    checkpoint = Checkpoint(time, label, tuple(messages), command=command)
    if hashes is None:
        return checkpoint
    full = tuple(hashes)
    base = next((c for c in reversed(previous) if c.persistent), None)
    if base is not None:
        keep = common_prefix(base.hashes(), full)
        checkpoint.base, checkpoint.keep = (base, keep) if keep else (None, 0)
        base._full = None  # only the newest keeps its whole list at hand
    checkpoint.tail = full[checkpoint.keep:]
    checkpoint._full = full
    return checkpoint


def capped(checkpoints: list[Checkpoint], limit: int = MAX_CHECKPOINTS) -> list[Checkpoint]:
    """The newest `limit`; a kept one whose delta base is forgotten gets its whole list."""
    if len(checkpoints) <= limit:
        return checkpoints
    kept = checkpoints[-limit:]
    gone = set(map(id, checkpoints[:-limit]))
    for checkpoint in kept:
        if checkpoint.base is not None and id(checkpoint.base) in gone:
            full = checkpoint.hashes()
            checkpoint.base, checkpoint.keep, checkpoint.tail = None, 0, full
    return kept


def encode(checkpoints: Sequence[Checkpoint]) -> list[dict[str, Any]]:
    """The persistent checkpoints as session-file items, oldest first."""
    out: list[dict[str, Any]] = []
    previous: Checkpoint | None = None
    for checkpoint in checkpoints:
        if not checkpoint.persistent:
            continue
        if checkpoint.keep == 0 or checkpoint.base is previous:
            keep, tail = checkpoint.keep, checkpoint.tail
        else:  # its base is not the entry written before it: re-express the delta
            full = checkpoint.hashes()
            keep = common_prefix(previous.hashes(), full) if previous is not None else 0
            tail = full[keep:]
        item = {"time": checkpoint.time, "label": checkpoint.label, "keep": keep, "hashes": list(tail)}
        if checkpoint.command:
            item["command"] = True
        out.append(item)
        previous = checkpoint
    return out


def is_ours(item: Any) -> bool:
    """A session-file checkpoint item in this version's shape (anything else is kept as it is)."""
    return isinstance(item, dict) and "hashes" in item and "keep" in item


def decode(items: Sequence[Any]) -> tuple[list[Checkpoint], list[Any], int]:
    """Session-file items → (checkpoints oldest first, items in another shape kept as they are,
    how many of ours were unreadable — dropped, with any that build on them)."""
    checkpoints: list[Checkpoint] = []
    foreign: list[Any] = []
    broken = 0
    previous: Checkpoint | None = None
    for item in items:
        if not is_ours(item):
            foreign.append(item)
            continue
        keep, tail = item.get("keep"), item.get("hashes")
        ok = (isinstance(keep, int) and not isinstance(keep, bool) and keep >= 0 and isinstance(tail, list)
              and all(isinstance(h, str) for h in tail) and isinstance(item.get("time", ""), str)
              and isinstance(item.get("label", ""), str))
        if ok and keep:
            ok = previous is not None and keep <= previous.size
        if not ok:
            broken += 1
            previous = None  # what builds on it cannot be read either
            continue
        checkpoint = Checkpoint(item.get("time", ""), item.get("label", ""), None,
                                previous if keep else None, keep, tuple(tail), command=item.get("command") is True)
        checkpoints.append(checkpoint)
        previous = checkpoint
    return checkpoints, foreign, broken


def from_journal(events: Iterable[dict], initial: Sequence[Checkpoint] = ()) -> list[Checkpoint]:
    """The checkpoints a journal's events leave, after `initial` (those of the session file: an
    older version's, or those a whole write stored, which the journal's own lines replace):
    each `checkpoint` event adds the live history as of that line (or, with `count`, its first
    `count` messages as recorded after the line; one whose messages never were is left out),
    each `checkpoints` event replaces the list. The newest MAX_CHECKPOINTS are
    built, each as a delta on the one before it while the history only grew in between."""
    from chatcli.core.journal import CHECKPOINT, CHECKPOINTS, MESSAGE, REWRITE

    # A record: (time, label, command, live list, its length), or a Checkpoint already built.
    # The live list object changes only at a rewrite: records on one list are prefixes of it.
    records: list = list(initial)
    # A file written whole holds the checkpoints its journal holds too: the journal's line stands.
    from_file = {(point.time, point.label): point for point in initial}
    live: list[str] = []
    for event in events:
        kind = event["type"]
        if kind == MESSAGE:
            live.append(event["hash"])
        elif kind == REWRITE:
            live = list(event["hashes"])
        elif kind == CHECKPOINT:
            copy = from_file.pop((event["time"], event["label"]), None)
            if copy is not None and any(record is copy for record in records):
                records = [record for record in records if record is not copy]
            records.append((event["time"], event["label"], event.get("command") is True, live,
                            event.get("count", len(live))))
        elif kind == CHECKPOINTS:
            records = list(decode(event["items"])[0])
    out: list[Checkpoint] = []
    previous = None
    records = [record for record in records if isinstance(record, Checkpoint) or record[4] <= len(record[3])]
    for record in records[-MAX_CHECKPOINTS:]:
        if isinstance(record, Checkpoint):
            point = record
        else:
            time, label, command, hashes, size = record
            if previous is not None and previous[0] is hashes and previous[1] <= size:
                point = Checkpoint(time, label, None, out[-1], previous[1], tuple(hashes[previous[1]:size]),
                                   command=command)
            else:
                point = Checkpoint(time, label, None, None, 0, tuple(hashes[:size]), command=command)
            previous = (hashes, size)
        if isinstance(record, Checkpoint):
            previous = None
        out.append(point)
    return capped(out)


__all__ = ["LABEL_CHARS", "MAX_CHECKPOINTS", "Checkpoint", "capped", "common_prefix", "decode", "encode", "from_journal", "is_ours",
           "label_of", "take"]
