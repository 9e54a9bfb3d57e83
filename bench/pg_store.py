"""Sessions on PostgreSQL beside sessions in files: the same work, in the same run.

Rows (medians; the two stores take turns where they are whole processes):
  per-turn persistence, N msgs          one turn's journal lines and session write on a session of
                         N messages (100, 10,000, 100,000), loaded first, in this process (as
                         bench/scale.py measures the files), the two stores taking turns;
                         PostgreSQL against the files: goal ≤ 3×
  resume + one turn, 100,000 msgs        `chatcli --session big -p hi`, a whole process, against a
                         fake model on loopback: the time to the answer's first byte and to the end
  session search, 1M msgs                `chatcli session search WORD` (the index up to date) and
                         the first one (it builds the index from the store)

The server is Debian's PostgreSQL, a cluster made for the run (tests/pg_server.py) on loopback with
its durable defaults (fsync on, synchronous commit): what a turn costs when it is on disk, as the
files' fsync'd writes are. BENCH_SEARCH_MESSAGES (default 1,000,000) sizes the search store.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from common import print_floor_table  # noqa: E402
from fakes import FakeModelServer  # noqa: E402
from pg_server import Server  # noqa: E402
from scale import CHATCLI, append_floor, build_session, first_token, session_corpus, timed_turn, whole  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "7"))
SIZES = (100, 10_000, 100_000)
SEARCH_MESSAGES = int(os.environ.get("BENCH_SEARCH_MESSAGES", "1000000"))


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="chatcli-bench-pg-"))
    server = Server(durable=True).start()
    rows = []
    try:
        with FakeModelServer("openai") as model:
            base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "CHATCLI_"))}
            base.update(HOME=str(scratch), LLM_PROVIDER="openai", OPENAI_API_KEY="x", OPENAI_BASE_URL=model.base_url,
                        OPENAI_MODEL="m")
            files = dict(base, CHATCLI_HOME=str(scratch / "files"))
            pg = dict(base, CHATCLI_HOME=str(scratch / "pg"), CHATCLI_STORE=server.dsn)
            for count in SIZES:
                name = f"big{count}"
                for env in (files, pg):
                    build_session(env, name, count)
                file_turn, pg_turn, floor = turns_taking_turns(files, pg, name, count)
                rows.append((f"per-turn persistence, {count:,} msgs: files", file_turn, "fsync'd append", floor, ""))
                rows.append((f"per-turn persistence, {count:,} msgs: PostgreSQL", pg_turn, "files", file_turn,
                             "≤ 3×"))
            command = [str(CHATCLI), "--session", "big100000", "-p", "hi"]
            for env in (files, pg):
                whole(command, env)  # the first turn after the build: written whole once
            turns = {"files": [], "pg": []}
            for _ in range(max(3, RUNS // 2)):
                for label, env in (("files", files), ("pg", pg)):
                    turns[label].append(first_token(command, env))
            for part, label in ((0, "its first token"), (1, "the whole process")):
                at_files = statistics.median(t[part] for t in turns["files"])
                at_pg = statistics.median(t[part] for t in turns["pg"])
                rows.append((f"resume + one turn, 100,000 msgs, {label}: PostgreSQL", at_pg, "files", at_files, ""))
            search_rows(base, server, scratch, rows)
    finally:
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    print_floor_table(f"Sessions on PostgreSQL beside files (`bench/pg_store.py`, medians of {RUNS})", rows)
    return 0


def turns_taking_turns(files: dict, pg: dict, name: str, count: int) -> tuple[float, float, float]:
    """Medians of one turn's persistence on each store, the two taking turns (so that a busy
    moment of this machine hits both), and the fsync'd-append floor; as bench/scale.py's per_turn."""
    from chatcli.config.settings import Settings
    from chatcli.engine import sessions
    from chatcli.engine.conversation import Conversation

    convs = {}
    for label, env in (("files", files), ("pg", pg)):
        convs[label] = Conversation(Settings.load(env), journal=True)
        sessions.load(convs[label], name)
    samples = {"files": [], "pg": []}
    floors = []
    scratch = Path(files["CHATCLI_HOME"]) / "floor.bin"
    for run in range(RUNS + 1):
        for label, conv in convs.items():
            elapsed, turn = timed_turn(conv, run)
            if run:  # the first turn after the load is another row's business
                samples[label].append(elapsed)
        floors.append(append_floor(scratch, turn))
    return statistics.median(samples["files"]), statistics.median(samples["pg"]), statistics.median(floors[1:])


def search_rows(base: dict, server: Server, scratch: Path, rows: list) -> None:
    from journal import VOCABULARY

    sessions, per = max(1, SEARCH_MESSAGES // 1000), 1000
    files = dict(base, CHATCLI_HOME=str(scratch / "search-files"))
    pg = dict(base, CHATCLI_HOME=str(scratch / "search-pg"), CHATCLI_STORE=server.dsn + "?options=-csearch_path%3Dsearch")
    import psycopg

    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA search")
    for env in (files, pg):
        start = time.perf_counter()
        session_corpus(env, sessions, per)
        print(f"built {sessions:,} × {per:,} in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    word = VOCABULARY[4_000]
    command = [str(CHATCLI), "session", "search", word]
    first = {}
    for label, env in (("files", files), ("pg", pg)):
        start = time.perf_counter()
        subprocess.run(command, env=env, check=True, capture_output=True)
        first[label] = (time.perf_counter() - start) * 1000
    runs = {"files": [], "pg": []}
    for _ in range(RUNS):
        for label, env in (("files", files), ("pg", pg)):
            runs[label].append(whole(command, env)[0])
    total = sessions * per
    rows.append((f"first `session search`, {total:,} msgs (builds the index): PostgreSQL", first["pg"], "files",
                 first["files"], ""))
    rows.append((f"`session search`, {total:,} msgs, rare word: PostgreSQL", statistics.median(runs["pg"]), "files",
                 statistics.median(runs["files"]), ""))


if __name__ == "__main__":
    sys.exit(main())
