"""Cost snapshots: `costs/<ref>.jsonl`, one fsync'd line per request a conversation
made (time, session, provider, model, tokens in and out, whether they were estimated, cost).
A session names its snapshot (`cost_ref`); a fork keeps the reference, so the lineage's cost
stays in one place while each line says which session made it. Lines hold no conversation
text; the files are 0600.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from chatcli.store import home
from chatcli.store.places import Files, place_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from chatcli.store.pg_places import ServerFiles

REF_RE = re.compile(r"[0-9a-f]{12}")


@dataclass(frozen=True)
class Line:
    time: float
    session: str
    provider: str
    model: str
    input_tokens: int
    output_tokens: int
    estimated: bool
    cost: float | None


class CostStore:
    """The snapshots are files in a directory, or on the sessions' server (`place`: store.places)."""

    def __init__(self, place: Path | Files | ServerFiles) -> None:
        self.place = place_of(place)

    def add(self, ref: str, line: Line) -> None:
        record = {"t": round(line.time, 3), "s": line.session, "p": line.provider, "m": line.model,
                  "in": line.input_tokens, "out": line.output_tokens, "est": line.estimated, "usd": line.cost}
        self.place.append(home.cost_file(ref), json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n")

    def lines(self, ref: str) -> list[Line]:
        """The snapshot's lines; a damaged one (a crash mid-line) is skipped."""
        try:
            raw = self.place.read(home.cost_file(ref))
        except OSError:
            return []
        found = []
        for text in raw.splitlines():
            try:
                item = json.loads(text)
                found.append(Line(float(item["t"]), str(item.get("s", "")), str(item.get("p", "")),
                                  str(item.get("m", "")), int(item["in"]), int(item["out"]), bool(item.get("est")),
                                  None if item.get("usd") is None else float(item["usd"])))
            except (ValueError, KeyError, TypeError):
                continue
        return found


def cost_refs(costs: Path) -> list[tuple[str, os.stat_result]]:
    """The snapshots of a directory and their stat: what retention plans with (files only)."""
    try:
        entries = list(os.scandir(costs))
    except OSError:
        return []
    found = []
    for entry in entries:
        ref = home.cost_named(entry.name) or ""
        if REF_RE.fullmatch(ref):
            try:
                found.append((ref, entry.stat(follow_symlinks=False)))
            except OSError:
                continue
    return found


__all__ = ["CostStore", "Line", "REF_RE", "cost_refs"]
