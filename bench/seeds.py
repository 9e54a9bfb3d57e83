"""What memory, attached contexts, cost tracking and microcompact cost a turn, at 100, 10,000 and 100,000 messages, each beside the
same turn with them off, measured in the same run.

A turn here is `Conversation.send` on a bound, journaled session loaded from disk, the model
fake in process. "With everything" adds: ten /memory notes, two attached /context snapshots
(about 40 KB of files), a cost line per request (an fsync'd append; on in both), and
microcompact (CHATCLI_MICROCOMPACT_TURNS=10) over a history whose every tenth turn holds a
2 KB tool result. The first turn after a load is measured apart: microcompact then stubs the
old results the request carries (up to 200, each kept in the recall store first) and the
session is written whole once.

Floors: the same turn with memory, contexts and microcompact off; and the same at 100.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from common import noted_registry, once_ms, print_floor_table

from chatcli.config.settings import Settings
from chatcli.core.messages import Message
from chatcli.engine import contexts, memory, sessions
from chatcli.engine.conversation import Conversation
from chatcli.store.home import Home

RUNS = int(os.environ.get("BENCH_RUNS", "15"))
SIZES = (100, 10_000, 100_000)


def settings_for(home: Path, on: bool) -> Settings:
    return Settings.load({"CHATCLI_HOME": str(home), "HOME": str(home.parent), "OPENAI_API_KEY": "x",
                          "LLM_PROVIDER": "openai", "CHATCLI_CHAT_TOOLS": "off",
                          "CHATCLI_MICROCOMPACT_TURNS": "10" if on else "0"})


def history(size: int) -> list[Message]:
    messages = []
    for i in range(size // 2):
        messages.append(Message("user", f"question {i}: " + "lorem ipsum dolor " * 8))
        if i % 10 == 0:
            messages[-1:] = [messages[-1], Message("assistant", "", tool_calls=[
                {"id": f"c{i}", "type": "function", "name": "read_file", "arguments": "{}"}]),
                Message("tool", "x" * 2000, tool_call_id=f"c{i}")]
        messages.append(Message("assistant", f"answer {i}: " + "sit amet " * 12))
    return messages[:size]


def build(scratch: Path, size: int) -> tuple[Settings, Settings]:
    home = scratch / f"home-{size}" / ".chatcli"
    on, off = settings_for(home, True), settings_for(home, False)
    conv = Conversation(off, journal=True)
    conv.history = history(size)
    sessions.save(conv, "big")
    for n in range(10):
        memory.save(on, f"note {n}: the user prefers short answers about topic {n}")
    files = scratch / f"files-{size}"
    files.mkdir()
    for n in range(20):
        (files / f"part{n}.md").write_text("".join(f"line {i} of part {n}\n" for i in range(120)))
    store = Home.of(on).contexts()
    store.save("docs", [str(files)], scratch)
    store.save("more", [str(files / "part1.md")], scratch)
    return on, off


def turns_ms(settings: Settings, attach: bool) -> tuple[float, float]:
    """(the first turn after a load, the median of the next RUNS turns)."""
    conv = Conversation(settings, registry=noted_registry(), journal=True)
    sessions.load(conv, "big")
    if attach:
        contexts.attach(conv, ["docs", "9"])
        contexts.attach(conv, ["more", "1", "all", "relevant"])
    else:
        conv.memory = False
    first = once_ms(lambda: conv.send("first after the load"))
    times = [once_ms(lambda run=run: conv.send(f"note {run}")) for run in range(RUNS)]
    if attach:
        contexts.detach(conv, "docs")
        contexts.detach(conv, "more")
    return first, statistics.median(times)


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="chatcli-bench-seeds-"))
    try:
        rows, plain, full = [], {}, {}
        for size in SIZES:
            on, off = build(scratch, size)
            plain[size] = turns_ms(off, attach=False)
            full[size] = turns_ms(on, attach=True)
        for size in SIZES:
            rows.append((f"turn with memory, 2 contexts, microcompact, {size:,} msgs", full[size][1],
                         "same turn, all off", plain[size][1], "≤ 1.5×"))
        for size in SIZES[1:]:
            rows.append((f"turn with everything, {size:,} vs 100 msgs", full[size][1], "same at 100",
                         full[SIZES[0]][1], "measured (the window check grows)"))
        for size in SIZES:
            rows.append((f"first turn after a load, everything on, {size:,} msgs", full[size][0],
                         "same turn, all off", plain[size][0], "measured (the first microcompact)"))
        print_floor_table(f"Memory, contexts, costs and microcompact in a turn (median of {RUNS} turns)", rows, digits=2)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
