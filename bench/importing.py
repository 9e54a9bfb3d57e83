"""`chatcli import` benchmarks: a Claude Code archive of 100, 10,000 and 100,000 messages.

  first import     the whole `chatcli import claude-code PATH` process into an empty home:
                   read, sessions and journals written, the search index built
  import again     the same command once everything is imported (nothing new: each session's
                   import record read, each conversation compared)
  search after     `chatcli session search` of a mid-frequency word right after the import (the
                   index is already built: no catch-up)

The archive: sessions of 1,000 messages (fewer at 100), ~1,000 characters of Zipf-like text a
message, a fifth of them tool calls and results, the assistant's responses a content block a
line as Claude Code writes them.

Floors, measured in the same run:
  start + parse    a bare interpreter start (`python -c pass`), plus orjson over every line of
                   the archive in process: the least any importing process does
  start + writes   the same start, plus the archive's bytes written twice (a session file and a
                   journal), one file each with an fsync, as the import writes them
  bare start       the interpreter start alone (for the search, which reads only the index)
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import median_of_runs_ms, print_floor_table

import orjson

RUNS = int(os.environ.get("BENCH_RUNS", "15"))
SIZES = tuple(int(s) for s in os.environ.get("BENCH_SIZES", "100,10000,100000").split(","))
PER_SESSION = 1000
CHATCLI = str(Path(sys.executable).parent / "chatcli")
WORDS = [f"w{n}" for n in range(5000)]


def text(rng: random.Random, size: int = 1000) -> str:
    words = rng.choices(WORDS, weights=[1 / (n + 1) for n in range(len(WORDS))], k=size // 6)
    return " ".join(words)[:size]


def archive(root: Path, messages: int) -> Path:
    """A Claude Code projects directory holding `messages` messages."""
    rng = random.Random(messages)
    projects = root / "projects" / "-home-bench-proj"
    projects.mkdir(parents=True)
    left, number = messages, 0
    while left > 0:
        count = min(PER_SESSION, left)
        left -= count
        number += 1
        lines, parent = [], None
        for index in range(count):
            uuid = f"{number:08d}-0000-4000-8000-{index:012d}"
            base = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/home/bench/proj",
                    "sessionId": f"s{number}", "version": "1.0.80", "uuid": uuid,
                    "timestamp": f"2025-08-{1 + number % 28:02d}T10:{index // 60 % 60:02d}:{index % 60:02d}.000Z"}
            parent = uuid
            turn = index % 10
            if turn in (0, 4, 8):
                lines.append({**base, "type": "user", "message": {"role": "user", "content": text(rng)}})
            elif turn == 5:  # a tool call, then its result
                lines.append({**base, "type": "assistant", "message": {
                    "id": f"m{number}-{index}", "role": "assistant", "model": "claude", "content": [
                        {"type": "tool_use", "id": f"t{number}-{index}", "name": "Bash",
                         "input": {"command": text(rng, 80)}}]}})
            elif turn == 6:
                lines.append({**base, "type": "user", "message": {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": f"t{number}-{index - 1}", "content": text(rng)}]}})
            else:
                lines.append({**base, "type": "assistant", "message": {
                    "id": f"m{number}-{index}", "role": "assistant", "model": "claude",
                    "content": [{"type": "text", "text": text(rng)}]}})
        (projects / f"s{number}.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return root / "projects"


def run(args: list[str], env: dict) -> None:
    result = subprocess.run([CHATCLI, *args], env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"chatcli {' '.join(args)} failed: {result.stderr}")


def main() -> None:
    scratch = Path(tempfile.mkdtemp(prefix="chatcli-bench-import-"))
    rows = []
    try:
        for size in SIZES:
            source = archive(scratch / f"src-{size}", size)
            raw = [path.read_bytes() for path in sorted(source.rglob("*.jsonl"))]
            runs = RUNS if size <= 10_000 else max(3, RUNS // 5)
            parse = median_of_runs_ms(lambda _r: [orjson.loads(line) for data in raw for line in data.splitlines()],
                                      runs)

            def writes(_r: int) -> None:
                target = scratch / "writes"
                target.mkdir(exist_ok=True)
                for index, data in enumerate(raw):
                    for kind in ("session", "journal"):
                        with open(target / f"{kind}-{index}", "wb") as handle:
                            handle.write(data)
                            handle.flush()
                            os.fsync(handle.fileno())
                shutil.rmtree(target)

            written = median_of_runs_ms(writes, runs)
            bare = median_of_runs_ms(lambda _r: subprocess.run([sys.executable, "-c", "pass"], check=True), runs)
            homes: list[Path] = []

            def first(run_number: int) -> None:
                home = scratch / f"home-{size}-{run_number}"
                homes.append(home)
                env = {**os.environ, "HOME": str(scratch), "CHATCLI_HOME": str(home)}
                run(["import", "claude-code", str(source)], env)

            first_ms = median_of_runs_ms(first, runs)
            env = {**os.environ, "HOME": str(scratch), "CHATCLI_HOME": str(homes[-1])}
            again_ms = median_of_runs_ms(lambda _r: run(["import", "claude-code", str(source)], env), runs)
            search_ms = median_of_runs_ms(lambda _r: run(["session", "search", "w40"], env), runs)
            for home in homes:
                shutil.rmtree(home, ignore_errors=True)
            label = f"{size:,} messages"
            rows.append((f"first import, {label}", first_ms, "start + parse", bare + parse, "< 30 s at 100,000"))
            rows.append((f"first import, {label}", first_ms, "start + writes", bare + written, "measured"))
            rows.append((f"import again (nothing new), {label}", again_ms, "start + parse", bare + parse, "measured"))
            rows.append((f"session search after it, {label}", search_ms, "bare start", bare, "measured"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print_floor_table("chatcli import claude-code (bench/importing.py)", rows)


if __name__ == "__main__":
    main()
