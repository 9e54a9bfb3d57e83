"""Transcript journal and search benchmarks, each beside its floor.

Floors, measured in the same run:
  fsync'd append   open(O_APPEND) + one write of the same bytes + fsync + close, nothing else
  bare start       `python -c pass`, for the searches (a user waits for the whole command)
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import bare_fsynced_write, median_of_runs_ms, once_ms, print_floor_table

from chatcli.config.settings import Settings
from chatcli.core.messages import Message
from chatcli.core.session import SessionData
from chatcli.engine import records
from chatcli.engine.conversation import Conversation
from chatcli.store.home import Home
from chatcli.store.sessions import SessionStore

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = ROOT / ".venv" / "bin"
SIZES = (100, 10_000, 100_000)
RUNS = int(os.environ.get("BENCH_RUNS", "15"))
# A synthetic vocabulary of 5,000 words drawn with a Zipf-like law, like natural text: a few
# words are everywhere, most are rare (searches for them must not rank all 100,000 messages).
_SYLLABLES = "ka lo mi re su ta ne vo pi da ge fu ri so ba le ko tu ma zi".split()
VOCABULARY = [a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES][:5_000]
_RNG = random.Random(7)
_CUMULATIVE = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(VOCABULARY))))


def text(i: int, words: int = 40) -> str:
    return " ".join(_RNG.choices(VOCABULARY, cum_weights=_CUMULATIVE, k=words)) + f" #{i}"


# Searched for: words of middling frequency (ranks 200 to 400).
QUERIES = [f"{VOCABULARY[200 + k]} {VOCABULARY[300 + k]}" for k in range(40)]


def bare_append(path: Path, data: bytes) -> None:
    bare_fsynced_write(path, data, append=True)


def journal_rows(scratch: Path, rows: list) -> None:
    for count in SIZES:
        home = scratch / f"j{count}"
        settings = Settings.load({"CHATCLI_HOME": str(home), "HOME": str(scratch)})
        conv = Conversation(settings, journal=True)
        conv.history = [Message("user" if i % 2 == 0 else "assistant", text(i)) for i in range(count)]
        conv.sync_transcript()  # the journal now has `count` lines
        path = conv.transcript.journal.path
        turn_samples, floor_samples = [], []
        for i in range(RUNS):
            conv.history.append(Message("user", text(count + 2 * i)))
            conv.history.append(Message("assistant", text(count + 2 * i + 1)))
            before = path.stat().st_size
            start = time.perf_counter()
            conv.sync_transcript()
            turn_samples.append(time.perf_counter() - start)
            written = path.read_bytes()[before:]
            start = time.perf_counter()
            bare_append(scratch / "floor.jsonl", written)
            floor_samples.append(time.perf_counter() - start)
        turn, floor = statistics.median(turn_samples) * 1000, statistics.median(floor_samples) * 1000
        rows.append((f"journal sync of one turn, {count:,} existing lines", turn, "fsync'd append", floor,
                     "≤ 2×"))


def search_rows(scratch: Path, rows: list, bare: float) -> None:
    count = 100_000
    home = scratch / "search"
    settings = Settings.load({"CHATCLI_HOME": str(home), "HOME": str(scratch)})
    conv = Conversation(settings, journal=True)
    conv.history = [Message("user" if i % 2 == 0 else "assistant", text(i, 25)) for i in range(count)]
    conv.sync_transcript()

    def search(run: int) -> None:
        rec = records.record(settings, conv.snapshot(), conv.transcript.id)
        records.search(settings, rec, QUERIES[run])

    cold = once_ms(lambda: search(0))
    warm = median_of_runs_ms(lambda run: search(1 + run), RUNS)
    rows.append(("transcript search, 100,000 messages (read journal + query)", warm, "bare start", bare,
                 "< 300 ms"))
    rows.append(("transcript search, 100,000 messages, first (builds the index)", cold, "bare start", bare, ""))


def session_search_rows(scratch: Path, rows: list, bare: float) -> None:
    home = scratch / "sessions"
    env = dict(os.environ, CHATCLI_HOME=str(home), HOME=str(scratch))
    settings = Settings.load(env)
    store = SessionStore(Home.of(settings).sessions_dir)
    for s in range(1_000):
        history = [Message("user" if i % 2 == 0 else "assistant", text(s * 100 + i, 25)) for i in range(100)]
        store.write(f"project-{s:04d}", SessionData(history=history))
    cold = once_ms(lambda: records.search_sessions(settings, store, QUERIES[0]))
    warm = median_of_runs_ms(lambda run: records.search_sessions(settings, store, QUERIES[1 + run]), RUNS)
    cli = median_of_runs_ms(lambda _run: subprocess.run(
        [str(VENV_BIN / "chatcli"), "session", "search", *QUERIES[-1].split()], env=env, check=True,
        stdout=subprocess.DEVNULL), max(3, RUNS // 3))
    rows.append(("session search, 1,000 sessions × 100 msgs (in-process)", warm, "bare start", bare, ""))
    rows.append(("`chatcli session search`, 1,000 × 100", cli, "bare start", bare, ""))
    rows.append(("session search, 1,000 × 100, first (builds the index)", cold, "bare start", bare, ""))


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="chatcli-bench-journal-"))
    rows: list[tuple[str, float, str, float, str]] = []
    try:
        bare = median_of_runs_ms(lambda _run: subprocess.run([str(VENV_BIN / "python"), "-c", "pass"], check=True),
                                 RUNS)
        journal_rows(scratch, rows)
        search_rows(scratch, rows, bare)
        session_search_rows(scratch, rows, bare)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print_floor_table(f"journal and search — median of {RUNS} runs, {os.cpu_count()} cores, "
                      f"Python {sys.version.split()[0]}", rows, digits=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
