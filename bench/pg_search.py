"""Search on a PostgreSQL store (its tsvector + GIN index, store.pg_search) beside the file
store's SQLite index, on the same sessions, in one process (the engine's session search, as
`session search` and /session search run it):

  first session search, N msgs      the index built from the store, then the query
  session search, N msgs, rare / mid-frequency word     the index up to date (medians)

N is 10,000 and BENCH_PG_SEARCH_MESSAGES (default 100,000), in sessions of 1,000 messages of
150 words drawn from the benchmarks' vocabulary. The server is a cluster made for the run
(tests/pg_server.py) with its durable defaults.
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from common import print_floor_table  # noqa: E402
from journal import VOCABULARY  # noqa: E402
from pg_server import Server  # noqa: E402

from chatcli.config.settings import Settings  # noqa: E402
from chatcli.core.messages import Message  # noqa: E402
from chatcli.core.session import SessionData  # noqa: E402
from chatcli.engine import records  # noqa: E402
from chatcli.store.home import Home  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "5"))
SIZES = (10_000, int(os.environ.get("BENCH_PG_SEARCH_MESSAGES", "100000")))
PER = 1_000


def main() -> int:
    server = Server(durable=True).start()
    scratch = Path(tempfile.mkdtemp(prefix="chatcli-bench-pg-search-"))
    rows = []
    try:
        import psycopg

        base = {k: v for k, v in os.environ.items() if not k.startswith("CHATCLI_")}
        rare, mid = VOCABULARY[4_000], VOCABULARY[50]
        for size in SIZES:
            schema = f"s{size}"
            with psycopg.connect(server.dsn, autocommit=True) as conn:
                conn.execute(f"CREATE SCHEMA {schema}")
            envs = {"files": dict(base, CHATCLI_HOME=str(scratch / f"files{size}")),
                    "PostgreSQL": dict(base, CHATCLI_HOME=str(scratch / f"pg{size}"),
                                       CHATCLI_STORE=f"{server.dsn}?options=-csearch_path%3D{schema}")}
            rng = random.Random(size)
            for n in range(size // PER):
                history = [Message("user" if i % 2 == 0 else "assistant", " ".join(rng.choices(VOCABULARY, k=150)))
                           for i in range(PER)]
                for env in envs.values():
                    Home.of(Settings.load(env)).sessions().create(f"s{n}", SessionData(history=history))
            measured = {}
            for label, env in envs.items():
                settings = Settings.load(env)
                store = Home.of(settings).sessions()
                start = time.perf_counter()
                records.search_sessions(settings, store, rare)
                first = (time.perf_counter() - start) * 1000
                medians = []
                for word in (rare, mid):
                    samples = []
                    for _ in range(RUNS):
                        start = time.perf_counter()
                        records.search_sessions(settings, store, word)
                        samples.append((time.perf_counter() - start) * 1000)
                    medians.append(statistics.median(samples))
                measured[label] = (first, *medians)
            for part, what in enumerate(("first session search (builds the index)", "session search, rare word",
                                         "session search, mid-frequency word")):
                rows.append((f"{what}, {size:,} msgs: PostgreSQL", measured["PostgreSQL"][part], "files",
                             measured["files"][part], ""))
    finally:
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    print_floor_table(f"Search on PostgreSQL beside files (`bench/pg_search.py`, medians of {RUNS})", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
