"""What the benchmark scripts share: timing a call, and printing a table of figures beside floors."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

# One row: what was measured, its median (ms), the floor's name, the floor's median (ms), the target.
Row = tuple[str, float, str, float, str]


def once_ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def median_of_runs_ms(fn: Callable[[int], object], runs: int) -> float:
    """Median time of `fn(run)` over `runs` runs (the run number lets each run vary its input)."""
    return statistics.median(once_ms(lambda run=run: fn(run)) for run in range(runs))


def print_floor_table(title: str, rows: list[Row], digits: int = 1) -> None:
    print(f"\n{title}\n")
    print("| measurement | median | floor | floor median | ratio | target |")
    print("|---|---:|---|---:|---:|---|")
    for name, ms, floor_name, floor_ms, target in rows:
        print(f"| {name} | {ms:.{digits}f} ms | {floor_name} | {floor_ms:.{digits}f} ms | {ms / floor_ms:.2f}× "
              f"| {target} |")


def bare_fsynced_write(path: Path, data: bytes, *, append: bool = False) -> None:
    """The floor of a durable write: open, one write, fsync, close, nothing else."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC), 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


class Noted:
    """A model that answers "noted." at once (with token counts), for figures of what the
    conversation around it costs."""

    name = "bench"
    supports_tools = True

    def stream(self, _request):
        from chatcli.providers.base import Delta, Done

        yield Delta("noted.")
        yield Done("stop", 10, 2)


def noted_registry():
    """A provider registry in which "openai" is `Noted`."""
    from chatcli.providers.base import ProviderRegistry

    registry = ProviderRegistry()
    registry.register("openai", lambda _settings: Noted())
    return registry
