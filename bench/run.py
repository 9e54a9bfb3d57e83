"""Start-up and one-shot benchmarks, each reported as a ratio to a bare interpreter start (run: make bench).

Everything is measured in one run on this machine, medians of repeated runs:
  bare         `.venv/bin/python -c pass` — the floor every figure is divided by
  --version    `chatcli --version`
  prompt       time until the REPL prompt is drawn (pexpect, pseudo-terminal), local provider
  one-shot     `chatcli -p hi` against a fake OpenAI-compatible server on 127.0.0.1
and, for comparison, the Python peer `llm` from a scratch venv (.bench-venv):
  llm --version, and `llm -m echo hi` (the llm-echo plugin, a zero-cost model).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fakes import FakeModelServer  # noqa: E402

VENV_BIN = ROOT / ".venv" / "bin"
PEER_VENV = ROOT / ".bench-venv"
RUNS = int(os.environ.get("BENCH_RUNS", "15"))


def median_ms(fn, runs: int = RUNS) -> float:
    """Median wall time of `fn()`; a function that returns a number has timed itself (seconds)."""
    fn()  # warm the page cache
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        own = fn()
        samples.append((own if own is not None else time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def command(args: list[str], env: dict[str, str]):
    def run() -> None:
        subprocess.run(args, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, check=True)

    return run


def prompt_drawn(env: dict[str, str], model: str):
    import re

    import pexpect

    pattern = re.escape(model) + r"(?:\x1b\[[0-9;]*m)*>"

    def run() -> float:
        start = time.perf_counter()
        child = pexpect.spawn(str(VENV_BIN / "chatcli"), env=env, encoding="utf-8", timeout=20)
        child.expect(pattern)
        elapsed = time.perf_counter() - start  # not counting the teardown below
        child.terminate(force=True)
        child.close()
        return elapsed

    return run


def ensure_peer() -> Path | None:
    llm = PEER_VENV / "bin" / "llm"
    if not llm.exists():
        print("setting up the peer `llm` in .bench-venv …", file=sys.stderr)
        try:
            subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
            subprocess.run([str(PEER_VENV / "bin" / "pip"), "install", "--quiet", "llm", "llm-echo"], check=True)
        except subprocess.CalledProcessError:
            print("could not install llm; peer rows skipped", file=sys.stderr)
            return None
    return llm


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="chatcli-bench-"))
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "LLM_", "CHATCLI_"))}
    base.update(HOME=str(scratch), CHATCLI_HOME=str(scratch / ".chatcli"), PROMPT_TOOLKIT_NO_CPR="1",
                TERM="xterm", LLM_USER_PATH=str(scratch / "llm"))
    rows: list[tuple[str, float, str]] = []
    bare = median_ms(command([str(VENV_BIN / "python"), "-c", "pass"], base))
    rows.append(("bare `python -c pass` (floor)", bare, ""))
    rows.append(("`chatcli --version`", median_ms(command([str(VENV_BIN / "chatcli"), "--version"], base)),
                 "≤ 3×"))
    rows.append(("REPL prompt drawn (local model)", median_ms(prompt_drawn(base, "SmolLM2-135M-Instruct.Q4_1")),
                 "≤ 400 ms"))
    with FakeModelServer("openai") as server:
        env = dict(base, LLM_PROVIDER="openai", OPENAI_API_KEY="x", OPENAI_BASE_URL=server.base_url,
                   OPENAI_MODEL="m")
        rows.append(("REPL prompt drawn (openai)", median_ms(prompt_drawn(env, "m")), "≤ 400 ms"))
        rows.append(("`chatcli -p hi` (fake server)", median_ms(command([str(VENV_BIN / "chatcli"), "-p", "hi"], env)),
                     "≤ 300 ms"))
    llm = ensure_peer()
    if llm:
        rows.append(("peer: `llm --version`", median_ms(command([str(llm), "--version"], base)), ""))
        rows.append(("peer: `llm -m echo hi`", median_ms(command([str(llm), "-m", "echo", "hi"], base)), ""))

    print(f"\nchatcli benchmarks — median of {RUNS} runs, {os.cpu_count()} cores, Python {sys.version.split()[0]}\n")
    print("| measurement | median | ratio to bare start | target |")
    print("|---|---:|---:|---|")
    for name, ms, target in rows:
        print(f"| {name} | {ms:.1f} ms | {ms / bare:.1f}× | {target} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
