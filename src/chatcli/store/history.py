"""The prompt history file (SPEC §12): what the user typed, secrets redacted, bounded in size."""

from __future__ import annotations

import datetime
import fcntl
import os
from pathlib import Path

from chatcli.core.redact import redact_secrets
from chatcli.store.atomic import append_line, atomic_write

# The format is prompt_toolkit's FileHistory format, so entries may span lines:
#   "\n# <timestamp>\n+<line>\n+<line>\n"
# Past the size cap the oldest entries are dropped down to TRIM_TO of the cap, so a full
# history is rewritten once per many prompts, not on every one.
TRIM_TO = 0.8


class PromptHistory:
    def __init__(self, path: Path, max_size: int) -> None:
        self.path = path
        self.max_size = max_size
        self._mode_checked = False

    def load(self) -> list[str]:
        """Entries oldest first. A missing file is an empty history; an unreadable one raises OSError."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        return [entry for _, entry in _parse(data.decode("utf-8", errors="replace"))]

    def append(self, text: str) -> None:
        """Record one prompt (redacted) durably, then drop the oldest entries if over the size cap."""
        text = redact_secrets(text)
        stamp = datetime.datetime.now().isoformat(sep=" ", timespec="milliseconds")
        block = f"\n# {stamp}\n" + "".join(f"+{line}\n" for line in text.split("\n"))
        append_line(self.path, block.encode("utf-8"), in_home=False)  # HISTORY_FILE is the user's: a link is theirs
        if not self._mode_checked:  # a history file made elsewhere (0644, say) is made private
            os.chmod(self.path, 0o600)
            self._mode_checked = True
        if os.stat(self.path).st_size > self.max_size:
            self._trim()

    def _trim(self) -> None:
        """Keep the newest entries that fit in TRIM_TO of the cap (always the newest one).

        Under an exclusive lock on a side file, and re-checked inside it, so two REPLs
        trimming at once do not drop each other's new entries twice over.
        """
        lock_path = self.path.with_name(self.path.name + ".lock")
        with open(lock_path, "a") as lock:
            os.chmod(lock_path, 0o600)
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = self.path.read_bytes()
            if len(data) <= self.max_size:
                return
            blocks = [block for block, _ in _parse(data.decode("utf-8", errors="replace"))]
            budget = int(self.max_size * TRIM_TO)
            kept: list[str] = []
            size = 0
            for block in reversed(blocks):
                size += len(block.encode("utf-8"))
                if size > budget and kept:
                    break
                kept.append(block)
            atomic_write(self.path, "".join(reversed(kept)).encode("utf-8"))


def _parse(data: str) -> list[tuple[str, str]]:
    """(raw block, entry text) pairs, oldest first."""
    out: list[tuple[str, str]] = []
    lines: list[str] = []
    raw: list[str] = []

    def flush() -> None:
        if lines:
            out.append(("\n" + "".join(raw), "\n".join(lines)))
            raw.clear()
        lines.clear()

    for line in data.splitlines(keepends=True):
        if line.startswith("+"):
            lines.append(line[1:].rstrip("\n"))
            raw.append(line)
        elif line.startswith("#"):
            flush()
            raw.append(line)
        elif not line.strip():
            continue
    flush()
    return out
