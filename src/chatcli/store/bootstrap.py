"""Reads the bootstrap files (AGENTS.md, SOUL.md, …) from the directories config names."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from chatcli.core.bootstrap import BOOTSTRAP_FILES


def read_bootstrap(dirs: Sequence[Path]) -> tuple[list[tuple[str, str]], list[str]]:
    """Each bootstrap file from the first directory that has it.

    Returns the (name, text) pairs in composition order and one warning per file that
    exists but cannot be read (it is skipped, never fatal).
    """
    found: list[tuple[str, str]] = []
    warnings: list[str] = []
    for name in BOOTSTRAP_FILES:
        for directory in dirs:
            path = directory / name
            if not path.is_file():
                continue
            try:
                found.append((name, path.read_text(encoding="utf-8", errors="replace")))
            except OSError as exc:
                warnings.append(f"cannot read {path}: {exc.strerror or exc}; skipped")
            break
    return found, warnings
