"""A turn on a 100,000-message session with automatic compaction off: what the request carries
(its size, as the fake server received it), the whole process's wall time and peak RSS, beside
the same turn with compaction at its default (a session just resumed is not compacted on its
first turn: it sends its latest messages) and beside bench/scale.py's parse floor.

    .venv/bin/python bench/scale_window.py

A request never exceeds the model's context window (128,000 tokens for the openai provider
unless CHATCLI_CONTEXT_WINDOW says otherwise), whatever CHATCLI_AUTO_COMPACT says: with it off,
the turn should cost what it costs with it on. BENCH_COUNT sets the session's messages (default
100,000), BENCH_RUNS the runs per figure (default 5). Run with PYTHONPATH pointing at another
checkout's src to measure that code instead (the figures before a change).
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from common import print_floor_table  # noqa: E402
from fakes import FakeModelServer  # noqa: E402
from scale import CHATCLI, PYTHON, build_session, peak_rss, whole  # noqa: E402

COUNT = int(os.environ.get("BENCH_COUNT", "100000"))
RUNS = int(os.environ.get("BENCH_RUNS", "5"))


def turns(envs: dict[str, dict], server: FakeModelServer) -> dict[str, tuple[float, int, int, int]]:
    """For each setting: the median wall time (ms) of `chatcli --session big -p hi`, its peak
    RSS, and the request's size in bytes and in messages. The settings take turns run by run,
    so that a busy machine slows them alike."""
    command = [str(CHATCLI), "--session", "big", "-p", "hi"]
    times: dict[str, list[float]] = {name: [] for name in envs}
    sizes: dict[str, tuple[int, int]] = {}
    for _ in range(RUNS):
        for name, env in envs.items():
            times[name].append(whole(command, env)[0])
            seen = server.requests[-1]
            sizes[name] = int(seen.headers.get("content-length", 0)), len(seen.body["messages"])
            server.requests.clear()  # a whole history's body is ~100 MB: keep none
    figures = {}
    for name, env in envs.items():
        rss = peak_rss(command, env)
        server.requests.clear()
        figures[name] = (statistics.median(times[name]), rss, *sizes[name])
    return figures


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="chatcli-bench-window-"))
    try:
        with FakeModelServer("openai") as server:
            base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "CHATCLI_"))}
            env = dict(base, HOME=str(scratch), CHATCLI_HOME=str(scratch / "home"), LLM_PROVIDER="openai",
                       OPENAI_API_KEY="x", OPENAI_BASE_URL=server.base_url, OPENAI_MODEL="m")
            path = build_session(env, "big", COUNT)
            parse = [str(PYTHON), "-c", "import orjson, sys; orjson.loads(open(sys.argv[1], 'rb').read())", str(path)]
            floor = statistics.median(whole(parse, env)[0] for _ in range(RUNS))
            figures = turns({"off": dict(env, CHATCLI_AUTO_COMPACT="off"), "on": env}, server)
            off, on = figures["off"], figures["on"]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    def row(label: str, figures: tuple[float, int, int, int]) -> str:
        took, rss, size, messages = figures
        return (f"{label}, {COUNT:,} msgs (request {size / 1e6:.2f} MB, {messages:,} messages; "
                f"peak RSS {rss / 1e6:.0f} MB)")

    rows = [(row("turn, CHATCLI_AUTO_COMPACT=off", off), off[0], "same turn, compaction on", on[0], "≤ 1.1×"),
            (row("turn, CHATCLI_AUTO_COMPACT=off", off), off[0], "parse floor", floor, ""),
            (row("turn, compaction on (default)", on), on[0], "parse floor", floor, "")]
    print_floor_table("Request window (`bench/scale_window.py`)", rows)
    print(f"\npeak RSS, off vs on: {off[1] / on[1]:.2f}×; request bytes, off vs on: {off[2] / max(on[2], 1):.2f}×")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
