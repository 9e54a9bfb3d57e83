"""Session store benchmarks: save, load, write-through and listing, each beside its floor.

Floors, measured in the same run on the same bytes:
  parse floor      orjson.loads of the session file (the fastest JSON parser available)
  serialise floor  orjson.dumps of the same document
  write floor      a bare write + fsync of a file of the same size
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

import orjson
from common import bare_fsynced_write, print_floor_table

from chatcli.config.settings import Settings
from chatcli.core.messages import Message
from chatcli.core.session import SessionData, encode_session
from chatcli.engine.conversation import Conversation
from chatcli.store.sessions import SessionStore

SIZES = (100, 10_000, 100_000)
LIST_SESSIONS = 10_000
ROOT = Path(__file__).resolve().parents[1]


def median_ms(fn, runs: int) -> float:
    fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def history(count: int) -> list[Message]:
    body = "lorem ipsum dolor sit amet, consectetur adipiscing elit " * 17  # ≈1 KB
    return [Message("user" if i % 2 == 0 else "assistant", f"{i}: {body}") for i in range(count)]


def bare_write(path: Path, data: bytes) -> None:
    bare_fsynced_write(path, data, append=False)


def run(rows: list[tuple[str, float, str, float, str]]) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="chatcli-bench-sessions-"))
    try:
        store = SessionStore(scratch / "sessions")
        for count in SIZES:
            runs = 15 if count <= 10_000 else 5
            data = SessionData(history=history(count))
            store.write("bench", data)
            raw = store.path("bench").read_bytes()
            document = encode_session(data)
            parse = median_ms(lambda raw=raw: orjson.loads(raw), runs)
            dump = median_ms(lambda document=document: orjson.dumps(document), runs)
            write = median_ms(lambda raw=raw: bare_write(scratch / "floor.bin", raw), runs)
            label = f"{count:,} msgs ({len(raw) / 1e6:.1f} MB)"
            load = median_ms(lambda: store.load("bench"), runs)
            save = median_ms(lambda data=data: store.write("bench", data), runs)
            rows.append((f"load {label}", load, "parse", parse, "≤ 2× and < 1 s" if count == 100_000 else ""))
            rows.append((f"save (write) {label}", save, "serialise + fsync'd write", dump + write, ""))
            rows.append((f"write-through of one turn, {label}", _write_through(scratch, count, runs),
                         "fsync'd write", write, ""))
        _listing(scratch, rows)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _write_through(scratch: Path, count: int, runs: int) -> float:
    env = {"HOME": str(scratch), "CHATCLI_HOME": str(scratch / "wt")}
    conv = Conversation(Settings.load(env))
    conv.history = history(count)
    from chatcli.engine import sessions

    sessions.attach(conv, f"turns-{count}")

    def one_turn() -> None:
        conv.history += [Message("user", "another question"), Message("assistant", "another answer")]
        conv.binding.write_through()

    return median_ms(one_turn, runs)


def _listing(scratch: Path, rows) -> None:
    home = scratch / "many"
    store = SessionStore(home / "sessions")
    small = SessionData(history=history(4))
    payload = orjson.dumps(encode_session(small))
    (home / "sessions").mkdir(parents=True)
    for index in range(LIST_SESSIONS):
        (home / "sessions" / f"session-{index:05d}.json").write_bytes(payload)
    env = dict(os.environ, HOME=str(scratch), CHATCLI_HOME=str(home))
    chatcli = str(ROOT / ".venv" / "bin" / "chatcli")
    python = str(ROOT / ".venv" / "bin" / "python")
    bare = median_ms(lambda: subprocess.run([python, "-c", "pass"], check=True), 15)

    def whole() -> None:
        subprocess.run([chatcli, "session", "list"], env=env, check=True, stdout=subprocess.DEVNULL)

    def first_listing() -> None:
        store.catalog.path.unlink(missing_ok=True)
        store.list()

    built = median_ms(first_listing, 3)  # no catalog yet: every file is opened once
    store.list()
    listing = median_ms(store.list, 15)  # the usual case: every file stat'ed, none opened
    rows.append((f"SessionStore.list(), {LIST_SESSIONS:,} sessions", listing, "bare start", bare, ""))
    rows.append((f"`chatcli session list`, {LIST_SESSIONS:,} sessions", median_ms(whole, 15), "bare start", bare,
                 "< 150 ms"))

    def whole_unrendered() -> None:  # the first listing after the rendering went stale
        store.catalog.rendered_path.unlink(missing_ok=True)
        whole()

    rows.append((f"`chatcli session list`, not yet rendered, {LIST_SESSIONS:,}", median_ms(whole_unrendered, 15),
                 "bare start", bare, ""))
    rows.append((f"first listing without a catalog, {LIST_SESSIONS:,} sessions", built, "bare start", bare, ""))


def main() -> int:
    rows: list[tuple[str, float, str, float, str]] = []
    run(rows)
    print_floor_table(f"session store — medians, {os.cpu_count()} cores, Python {sys.version.split()[0]}", rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
