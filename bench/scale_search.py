"""`chatcli session search` beside the bare FTS5 query it answers from, on a big store.

Rows (each a whole process, what a user waits for; medians of BENCH_RUNS runs, default 9, the
command and its floor taking turns):
  session search, rare / mid-frequency word   `chatcli session search WORD` over BENCH_MESSAGES
                         messages (default 1,000,000: sessions of 1,000), the index up to date;
                         floor: the same FTS5 query from Python in a new process (connect, the
                         BM25-ranked `MATCH … ORDER BY rank LIMIT` with snippets of the rows
                         shown, print them); goal ≤ 1.5× the floor
  first session search, sealed vs plain        `chatcli session search` with no index yet (it
                         builds it) over 100,000 messages (1,000 sessions × 100; fewer when
                         BENCH_MESSAGES is smaller), with CHATCLI_ENCRYPTION_KEY set, beside the
                         same in plaintext; goal ≤ 1.5×

BENCH_STORE names a directory to keep the stores in between runs (built once; they take minutes
at a million messages); without it they go to a temporary directory, removed at the end.
"""

from __future__ import annotations

import base64
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from common import print_floor_table  # noqa: E402
from journal import VOCABULARY  # noqa: E402
from scale import CHATCLI, PYTHON, session_corpus  # noqa: E402

MESSAGES = int(os.environ.get("BENCH_MESSAGES", "1000000"))
RUNS = int(os.environ.get("BENCH_RUNS", "9"))
PER_SESSION = 1_000
# The corpus draws its words with a Zipf-like law (bench/journal.py): the word of rank 4,000 is
# in about one message in 1,200, the word of rank 300 in about one in 90.
RARE, MID = VOCABULARY[4_000], VOCABULARY[300]
SHOWN = 30  # rows a search shows: 10 sessions × 3 hits

FLOOR = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("SELECT rowid, source, pos, role, snippet(session_entries, 0, '', '', '…', 12), rank"
                  " FROM session_entries WHERE session_entries MATCH ? ORDER BY rank LIMIT ?",
                  ('"' + sys.argv[2] + '"', int(sys.argv[3]))).fetchall()
assert rows, "nothing found"
sys.stdout.write("\\n".join(map(str, rows)) + "\\n")
"""


def timed(command: list[str], env: dict) -> float:
    """Wall time (ms) of a whole process, its output read as a terminal would."""
    start = time.perf_counter()
    done = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    elapsed = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr.decode()}")
    return elapsed


def medians(first: list[str], second: list[str], env: dict, before=lambda: None) -> tuple[float, float]:
    """Medians of RUNS runs of two commands, taking turns (so that a busy moment hits both)."""
    a, b = [], []
    for _ in range(RUNS):
        before()
        a.append(timed(first, env))
        before()
        b.append(timed(second, env))
    return statistics.median(a), statistics.median(b)


def environment(base: dict, home: Path, key: str | None = None) -> dict:
    env = dict(base, HOME=str(home.parent), CHATCLI_HOME=str(home))
    if key:
        env["CHATCLI_ENCRYPTION_KEY"] = key
    return env


def corpus(env: dict, sessions: int, per_session: int) -> None:
    """The store, built unless a kept one (BENCH_STORE) already holds it."""
    done = Path(env["CHATCLI_HOME"]) / "bench-built"
    if done.exists():
        return
    start = time.perf_counter()
    session_corpus(env, sessions, per_session)
    done.write_text(f"{sessions} × {per_session}\n")
    print(f"built {sessions:,} sessions × {per_session:,} in {time.perf_counter() - start:.0f} s", file=sys.stderr)


def matching(index: Path, word: str) -> int:
    with sqlite3.connect(index) as db:
        return db.execute("SELECT count(*) FROM session_entries WHERE session_entries MATCH ?",
                          (f'"{word}"',)).fetchone()[0]


def search_rows(base: dict, scratch: Path, rows: list) -> None:
    sessions = max(1, MESSAGES // PER_SESSION)
    env = environment(base, scratch / "search")
    corpus(env, sessions, PER_SESSION)
    start = time.perf_counter()
    timed([str(CHATCLI), "session", "search", RARE], env)  # brings the index up to date, if it is not
    print(f"index up to date in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    index = Path(env["CHATCLI_HOME"]) / "index" / "search.sqlite"
    for label, word in (("rare", RARE), ("mid-frequency", MID)):
        ms, floor = medians([str(CHATCLI), "session", "search", word],
                            [str(PYTHON), "-c", FLOOR, str(index), word, str(SHOWN)], env)
        rows.append((f"`chatcli session search`, {sessions * PER_SESSION:,} msgs, {label} word "
                     f"({matching(index, word):,} messages match)", ms, "same FTS5 query from Python", floor,
                     "≤ 1.5×"))


def first_search_rows(base: dict, scratch: Path, rows: list) -> None:
    count = min(100_000, MESSAGES)
    sessions, per_session = max(1, count // 100), 100
    key = base64.b64encode(os.urandom(32)).decode()
    key_file = scratch / "first-sealed.key"
    if key_file.exists():  # a kept sealed store opens only with its own key
        key = key_file.read_text().strip()
    else:
        scratch.mkdir(parents=True, exist_ok=True)
        key_file.write_text(key + "\n")
    plain = environment(base, scratch / "first-plain")
    sealed = environment(base, scratch / "first-sealed", key)
    for env in (plain, sealed):
        corpus(env, sessions, per_session)

    def no_index(env: dict):
        def remove() -> None:
            shutil.rmtree(Path(env["CHATCLI_HOME"]) / "index", ignore_errors=True)
        return remove

    # Each run starts without an index; the two stores take turns.
    plain_runs, sealed_runs = [], []
    for _ in range(RUNS):
        for env, runs in ((plain, plain_runs), (sealed, sealed_runs)):
            no_index(env)()
            runs.append(timed([str(CHATCLI), "session", "search", MID], env))
    plain_ms, sealed_ms = statistics.median(plain_runs), statistics.median(sealed_runs)
    rows.append((f"first `chatcli session search`, {sessions * per_session:,} msgs ({sessions:,} × {per_session}), "
                 "builds the index, sealed vs plain", sealed_ms, "same, plain", plain_ms, "≤ 1.5×"))


def main() -> int:
    kept = os.environ.get("BENCH_STORE")
    scratch = Path(kept) if kept else Path(tempfile.mkdtemp(prefix="chatcli-bench-search-"))
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "CHATCLI_", "LLM_"))}
    base.update(LLM_PROVIDER="openai", OPENAI_API_KEY="x", OPENAI_MODEL="m", OPENAI_BASE_URL="http://127.0.0.1:9")
    rows: list = []
    try:
        search_rows(base, scratch, rows)
        first_search_rows(base, scratch, rows)
    finally:
        if not kept:
            shutil.rmtree(scratch, ignore_errors=True)
    print_floor_table(f"Session search at scale (`bench/scale_search.py`, medians of {RUNS})", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
