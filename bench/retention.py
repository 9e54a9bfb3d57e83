"""Retention benchmarks: the start-up sweep must not show in the time to the prompt,
and a full prune of 10,000 expired machine sessions, each beside its floor.

Floors, measured in the same run:
  empty store      the time to the REPL prompt with an empty CHATCLI_HOME (target: within 10%)
  bare unlink      os.unlink of the same 10,000 files in one loop, nothing else
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from common import print_floor_table  # noqa: E402
from fakes import FakeModelServer  # noqa: E402

from chatcli.config.settings import Settings  # noqa: E402
from chatcli.store.storage import Storage  # noqa: E402

VENV_BIN = ROOT / ".venv" / "bin"
RUNS = int(os.environ.get("BENCH_RUNS", "15"))
EXPIRED = 10_000
PAYLOAD = json.dumps({"version": 2, "chat_history": [{"role": "user", "content": "hello"},
                                                     {"role": "assistant", "content": "hi"}]}).encode()


def expire(sessions: Path, count: int = EXPIRED) -> list[Path]:
    """`count` machine sessions (half autosave-, half mcp-) last modified 100 days ago."""
    sessions.mkdir(parents=True, exist_ok=True)
    old = time.time() - 100 * 86_400
    paths = []
    for i in range(count):
        name = f"autosave-20260801-{i:06d}" if i % 2 == 0 else f"mcp-{i:08x}"
        path = sessions / f"{name}.json"
        path.write_bytes(PAYLOAD)
        os.utime(path, (old, old))
        paths.append(path)
    return paths


def time_to_prompt(env: dict[str, str], before=None, answer: bool = False) -> float:
    """Median seconds from spawning the REPL until its prompt is drawn (with `answer`, until the
    first answer is on screen and the next prompt drawn: that turn runs while the sweep does).
    `before()` runs untimed before each run."""
    import pexpect

    pattern = re.escape("m") + r"(?:\x1b\[[0-9;]*m)*>"
    samples = []
    for i in range(RUNS + 1):
        if before is not None:
            before()
        start = time.perf_counter()
        child = pexpect.spawn(str(VENV_BIN / "chatcli"), env=env, encoding="utf-8", timeout=30)
        child.expect(pattern)
        if answer:
            child.send("hello\r")
            child.expect("You said: hello")
            child.expect(pattern)
        elapsed = time.perf_counter() - start
        child.terminate(force=True)
        child.close()
        if i:  # the first run warms the page cache
            samples.append(elapsed)
    return statistics.median(samples)


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="chatcli-bench-retention-"))
    rows: list[tuple[str, float, str, float, str]] = []
    try:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "LLM_", "CHATCLI_"))}
        home = scratch / "home"
        sessions = home / ".chatcli" / "sessions"
        with FakeModelServer("openai") as server:
            env = dict(base, HOME=str(home), CHATCLI_HOME=str(home / ".chatcli"), PROMPT_TOOLKIT_NO_CPR="1",
                       TERM="xterm", LLM_PROVIDER="openai", OPENAI_API_KEY="x", OPENAI_BASE_URL=server.base_url,
                       OPENAI_MODEL="m")
            home.mkdir()

            def empty() -> None:
                shutil.rmtree(home / ".chatcli", ignore_errors=True)

            floor = time_to_prompt(env, empty)
            full = time_to_prompt(env, lambda: (empty(), expire(sessions)))
            rows.append((f"REPL prompt drawn, {EXPIRED:,} expired machine sessions present", full * 1000,
                         "same, empty store", floor * 1000, "≤ 1.10×"))
            floor = time_to_prompt(env, empty, answer=True)
            full = time_to_prompt(env, lambda: (empty(), expire(sessions)), answer=True)
            rows.append((f"start + first answer, {EXPIRED:,} expired machine sessions (sweep running)",
                         full * 1000, "same, empty store", floor * 1000, ""))

            # A full prune of the 10,000: in-process (plan + apply), and `chatcli storage prune --apply`.
            settings = Settings.load(env)
            plan_apply, unlink, cli = [], [], []
            for _ in range(max(3, RUNS // 3)):
                empty()
                expire(sessions)
                start = time.perf_counter()
                storage = Storage(settings)
                applied = storage.apply(storage.plan(on_demand=False))
                plan_apply.append(time.perf_counter() - start)
                assert len(applied.removed) == EXPIRED, len(applied.removed)
                paths = expire(sessions)
                start = time.perf_counter()
                for path in paths:
                    os.unlink(path)
                unlink.append(time.perf_counter() - start)
                expire(sessions)
                start = time.perf_counter()
                subprocess.run([str(VENV_BIN / "chatcli"), "storage", "prune", "--apply"], env=env, check=True,
                               stdout=subprocess.DEVNULL)
                cli.append(time.perf_counter() - start)
                assert not any(sessions.glob("*.json"))
            bare = statistics.median(unlink) * 1000
            rows.append((f"sweep of {EXPIRED:,} expired sessions (plan + apply, in-process)",
                         statistics.median(plan_apply) * 1000, "bare unlink of the same files", bare, ""))
            rows.append((f"`chatcli storage prune --apply`, {EXPIRED:,} expired sessions",
                         statistics.median(cli) * 1000, "bare unlink of the same files", bare, ""))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print_floor_table(f"retention — median of {RUNS} runs (prune: {max(3, RUNS // 3)}), {os.cpu_count()} cores", rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
