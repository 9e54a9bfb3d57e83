"""Rewind benchmarks, each beside its floor.

Every figure is the real engine call on a conversation freshly loaded from its session file, as
a user's first /rewind after `chatcli -c` would be: the journal is read from disk. Only the
model is fake (it writes the compaction summary).

Floors, measured in the same run:
  parse journal    reading the journal file and parsing every line with orjson, nothing else
  same at 100      the same operation on a 100-message history (shows how it grows with size)
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from common import median_of_runs_ms, once_ms, print_floor_table

from chatcli.config.settings import Settings
from chatcli.core.messages import Message
from chatcli.engine import compaction, rewind, sessions
from chatcli.engine.conversation import Conversation
from chatcli.providers.base import Delta, Done, ProviderRegistry

RUNS = int(os.environ.get("BENCH_RUNS", "15"))
SIZE = 10_000


class SummaryModel:
    """The only fake: a model that answers every request with a short summary."""

    name = "bench"

    def __init__(self, _settings) -> None:
        pass

    def stream(self, _request):
        yield Delta("Briefing: the earlier messages discussed items one to many.")
        yield Done("stop")


def registry() -> ProviderRegistry:
    registry = ProviderRegistry()
    registry.register("openai", SummaryModel)
    return registry


def messages(count: int, start: int = 0) -> list[Message]:
    return [Message("user" if i % 2 == 0 else "assistant", f"message {i}: " + "lorem ipsum dolor sit amet " * 6)
            for i in range(start, start + count)]


def conversation(settings: Settings) -> Conversation:
    return Conversation(settings, registry=registry(), journal=True)


def build(home: Path, size: int, checkpoints: int = 0) -> Settings:
    """A session 'big' of `size` messages, journaled: compacted, or with `checkpoints` checkpoints
    over its last turns. The state the measured calls start from."""
    settings = Settings.load({"CHATCLI_HOME": str(home), "HOME": str(home.parent), "OPENAI_API_KEY": "x",
                              "LLM_PROVIDER": "openai"})
    conv = conversation(settings)
    conv.history = messages(size - 2 * checkpoints)
    sessions.save(conv, "big")
    for turn in range(checkpoints):
        conv.checkpoint(f"turn {turn}")
        conv.history.extend(messages(2, len(conv.history)))
        conv.sync_transcript()
    conv.binding.write_through()
    if not checkpoints:
        compaction.compact(conv)
    return settings


def loaded(settings: Settings) -> Conversation:
    conv = conversation(settings)
    sessions.load(conv, "big")
    return conv


def timed_on_copies(pristine: Path, work: Path, settings: Settings, call) -> float:
    """Median time of `call(conversation)` on a fresh copy of the pristine store each run."""
    times = []
    for _ in range(RUNS):
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(pristine, work)
        conv = loaded(settings)
        times.append(once_ms(lambda conv=conv: call(conv)))
    times.sort()
    return times[len(times) // 2]


def parse_floor(home: Path) -> float:
    import orjson

    [journal] = (home / "transcripts").glob("*.jsonl")

    def parse(_run: int) -> None:
        for line in journal.read_bytes().splitlines():
            orjson.loads(line)

    return median_of_runs_ms(parse, RUNS)


def case(scratch: Path, name: str, size: int, checkpoints: int, call) -> tuple[float, float, int]:
    pristine = scratch / f"{name}-{size}"
    pristine.mkdir()
    build(pristine / ".chatcli", size, checkpoints)
    work = scratch / f"{name}-{size}-work"
    settings = Settings.load({"CHATCLI_HOME": str(work / ".chatcli"), "HOME": str(work), "OPENAI_API_KEY": "x",
                              "LLM_PROVIDER": "openai"})
    ms = timed_on_copies(pristine, work, settings, call)
    check = loaded(settings)
    call(check)  # what the measured call does, verified once
    return ms, parse_floor(pristine / ".chatcli"), len(check.history)


def checkpoint_ms(scratch: Path, size: int) -> float:
    """What every turn now adds: the checkpoint taken before it (a journal sync that finds
    nothing new, and the history's hash list as a delta on the previous checkpoint)."""
    home = scratch / f"turns-{size}" / ".chatcli"
    settings = Settings.load({"CHATCLI_HOME": str(home), "HOME": str(home.parent), "OPENAI_API_KEY": "x",
                              "LLM_PROVIDER": "openai"})
    conv = conversation(settings)
    conv.history = messages(size)
    sessions.save(conv, "turns")
    conv.checkpoint("first")

    def turn(run: int) -> None:
        conv.checkpoint(f"turn {run}")

    def grow(run: int) -> None:  # untimed: the turn's two messages, recorded as a turn would
        conv.history.extend(messages(2, len(conv.history)))
        conv.sync_transcript()

    times = []
    for run in range(RUNS):
        grow(run)
        times.append(once_ms(lambda run=run: turn(run)))
    times.sort()
    return times[len(times) // 2]


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="chatcli-bench-rewind-"))
    try:
        uncompact = lambda conv: rewind.uncompact(conv)  # noqa: E731
        back = lambda conv: rewind.rewind(conv, 50)  # noqa: E731
        big, floor, restored = case(scratch, "uncompact", SIZE, 0, uncompact)
        assert restored == SIZE, restored
        small, _, _ = case(scratch, "uncompact", 100, 0, uncompact)
        far, rewind_floor, _ = case(scratch, "rewind", SIZE, 100, back)
        near, _, _ = case(scratch, "rewind", 100, 40, lambda conv: rewind.rewind(conv, 20))
        per_turn = {size: checkpoint_ms(scratch, size) for size in (100, 10_000, 100_000)}
        rows = [
            (f"/rewind compact, {SIZE:,}-message journal", big, "parse journal", floor, "< 200 ms"),
            (f"/rewind compact, {SIZE:,} vs 100 messages", big, "same at 100", small, "measured"),
            (f"/rewind 50 of 100 checkpoints, {SIZE:,} messages", far, "parse journal", rewind_floor, "measured"),
            ("/rewind 20 of 40 checkpoints, 10,000 vs 100 messages", far, "same at 100", near, "measured"),
            ("checkpoint before a turn, 10,000 messages", per_turn[10_000], "same at 100", per_turn[100], "measured"),
            ("checkpoint before a turn, 100,000 messages", per_turn[100_000], "same at 100", per_turn[100],
             "measured"),
        ]
        print_floor_table(f"rewind — median of {RUNS} runs, {os.cpu_count()} cores, Python "
                          f"{sys.version.split()[0]}", rows)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
