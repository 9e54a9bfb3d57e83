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
from chatcli.store.atomic import append_line

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
    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, ref: str) -> Path:
        return home.cost_path(self.root, ref)

    def add(self, ref: str, line: Line) -> None:
        record = {"t": round(line.time, 3), "s": line.session, "p": line.provider, "m": line.model,
                  "in": line.input_tokens, "out": line.output_tokens, "est": line.estimated, "usd": line.cost}
        append_line(self.path(ref), json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n")

    def lines(self, ref: str) -> list[Line]:
        """The snapshot's lines; a damaged one (a crash mid-line) is skipped."""
        try:
            raw = self.path(ref).read_bytes()
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

    def refs(self) -> list[tuple[str, os.stat_result]]:
        try:
            entries = list(os.scandir(self.root))
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


__all__ = ["CostStore", "Line", "REF_RE"]
