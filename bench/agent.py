"""Agent-mode benchmarks, each beside its floor: what one agent step costs the
conversation at 100, 10,000 and 100,000 messages.

A step is what `engine/turn.py` does between two requests of an agent turn: the journal sync
at the start of the step (the previous batch's messages, fsync'd), building the request
(which tools to offer, the messages to send), and recording the batch (the assistant message
holding the call and the tool's result). The tool is `list_dir` on a directory of three files,
so the figure is the conversation's cost, not the tool's. The session is bound and journaled,
loaded from disk as `chatcli -c` would. Only the model is fake: in one turn it calls the tool
five times, then answers; in the other it answers at once. A step costs the difference over
five: what every turn does once (the checkpoint, the window check, the write-through) cancels.

Floors, measured in the same run:
  fsync'd append   one open/write/fsync/close of the bytes of a step's two journal lines: the
                   least a durable step costs
  same at 100      the same step on a 100-message session (shows how it grows with size)
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from common import bare_fsynced_write, median_of_runs_ms, once_ms, print_floor_table

from chatcli.config.settings import Settings
from chatcli.core.messages import Message
from chatcli.engine import sessions
from chatcli.engine.conversation import Conversation
from chatcli.providers.base import Delta, Done, ProviderRegistry, ToolCall

RUNS = int(os.environ.get("BENCH_RUNS", "15"))
SIZES = (100, 10_000, 100_000)
STEPS = 5


class StepModel:
    """Calls list_dir `steps` times in a turn, then answers."""

    name = "bench"
    supports_tools = True

    def __init__(self) -> None:
        self.steps = self.left = 0
        self.calls = 0

    def turn(self, steps: int) -> None:
        self.steps = self.left = steps

    def stream(self, request):
        if request.tool_choice == "auto" and self.left:
            self.left -= 1
            self.calls += 1
            yield ToolCall(f"call_{self.calls}", "list_dir", json.dumps({"path": "."}))
            yield Done("tool_calls")
            return
        yield Delta("Listed it.")
        yield Done("stop")


def registry(model: StepModel) -> ProviderRegistry:
    registry = ProviderRegistry()
    registry.register("openai", lambda _settings: model)
    return registry


def build(home: Path, size: int) -> Settings:
    settings = Settings.load({"CHATCLI_HOME": str(home), "HOME": str(home.parent), "OPENAI_API_KEY": "x",
                              "LLM_PROVIDER": "openai"})
    conv = Conversation(settings, journal=True)
    conv.history = [Message("user" if i % 2 == 0 else "assistant", f"message {i}: " + "lorem ipsum dolor " * 8)
                    for i in range(size)]
    sessions.save(conv, "big")
    return settings


def step_ms(settings: Settings, workdir: Path) -> tuple[float, float]:
    """(the cost of one step, of a turn without tools): medians over RUNS turns of each kind,
    alternating, on the loaded session."""
    model = StepModel()
    conv = Conversation(settings, registry=registry(model), journal=True)
    sessions.load(conv, "big")
    conv.agent.root = workdir
    conv.agent.switch("agent", conv)
    conv.send("warm up")  # the first turn after a load reads the journal whole: not a step's cost
    with_steps, without = [], []
    for run in range(RUNS):
        for steps, times in ((STEPS, with_steps), (0, without)):
            model.turn(steps)
            times.append(once_ms(lambda: conv.send(f"list it, run {run}")))
    return (statistics.median(with_steps) - statistics.median(without)) / STEPS, statistics.median(without)


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="chatcli-bench-agent-"))
    try:
        workdir = scratch / "work"
        workdir.mkdir()
        for name in ("a.txt", "b.txt", "c.txt"):
            (workdir / name).write_text(name)
        line = json.dumps({"type": "message", "hash": "0" * 32, "message": {
            "role": "tool", "content": "./ (3 entries)\na.txt  (5 bytes)\nb.txt  (5 bytes)\nc.txt  (5 bytes)",
            "tool_call_id": "call_1", "meta": {"mode": "agent"}}}).encode() + b"\n"
        target = scratch / "bare.jsonl"
        bare = median_of_runs_ms(lambda _run: bare_fsynced_write(target, line * 2, append=True), RUNS * 4)
        figures, turns = {}, {}
        for size in SIZES:
            home = scratch / f"home-{size}" / ".chatcli"
            settings = build(home, size)
            figures[size], turns[size] = step_ms(settings, workdir)
        rows = []
        for size in SIZES:
            rows.append((f"one agent step (sync + request + batch), {size:,} msgs", figures[size],
                         "fsync'd append", bare, "measured"))
        for size in SIZES[1:]:
            rows.append((f"one agent step, {size:,} msgs", figures[size], "same at 100", figures[SIZES[0]],
                         "≤ 2× (flat)"))
        for size in SIZES:
            rows.append((f"an agent turn without tools (for scale), {size:,} msgs", turns[size], "fsync'd append",
                         bare, "measured"))
        print_floor_table(f"Agent steps ({STEPS} list_dir calls a turn, median of {RUNS} turns)", rows, digits=2)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
