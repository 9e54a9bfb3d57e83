"""`chatcli session list` over 10,000 sessions: warm, after one session changed, and cold, each
beside its floor, in one run.

Rows (each a whole `chatcli session list` process, stdout piped; median of BENCH_RUNS runs, default 9):
  warm                     nothing changed since the last listing; floor: a bare process that
                           scandirs the directory and stats every file (what noticing a file
                           rewritten in place costs at least)
  after a turn             one session took a turn: appended in place by chatcli to a session
                           past 256 KB (the directory does not change), or written whole to a
                           small one (a rename); compared with warm: goal ≤ 2×
  after a rewrite          one session rewritten in place by another program (open with O_TRUNC,
                           write: same name, same inode, same directory mtime); compared with
                           warm: goal ≤ 2×
  cold                     no cache (catalog, appends log and rendering deleted); floor: a bare
                           process that scandirs, reads and parses every file with orjson; goal ≤ 1.3×

Every listing after a change is checked to show it: a row marked STALE printed the count from
before the change. BENCH_SESSIONS changes the number of sessions; BENCH_PYTHONPATH runs the
listings on another copy of the source (say, the last commit's, extracted with `git archive`),
for a before/after comparison on the same machine at the same time. The listings run with
bytecode caches written and used, as an installed chatcli has them.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from common import print_floor_table  # noqa: E402

from chatcli.store import home as layout  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "9"))
SESSIONS = int(os.environ.get("BENCH_SESSIONS", "10000"))
PYTHON = ROOT / ".venv" / "bin" / "python"
CHATCLI = ROOT / ".venv" / "bin" / "chatcli"
APPENDED, WHOLE, REWRITTEN = "s00042", "s00055", "s00077"

FLOOR_STAT = """
import os, sys
for entry in os.scandir(sys.argv[1]):
    if entry.name.endswith(".json"):
        entry.stat()
"""
FLOOR_PARSE = """
import os, sys, orjson
for entry in os.scandir(sys.argv[1]):
    if entry.name.endswith(".json"):
        with open(entry.path, "rb") as handle:
            orjson.loads(handle.read())
"""


def timed(command: list[str], env: dict) -> tuple[float, str]:
    """Wall time (ms) of a whole process, and what it printed."""
    start = time.perf_counter()
    done = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    elapsed = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr}")
    return elapsed, done.stdout


def shown_count(listing: str, name: str) -> int | None:
    """The message count `listing` shows for session `name`."""
    for line in listing.splitlines()[1:]:
        words = line.split()
        if words and words[0] == name and len(words) > 2 and words[2] in ("msg", "msgs"):
            return int(words[1])
    return None


def document(messages: int, title: str = "", padding: int = 0) -> bytes:
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} about the listing"
                + " and more" * padding} for i in range(messages)]
    return orjson.dumps({"version": 2, "title": title, "transcript_id": "", "chat_history": history})


def build(sessions: Path) -> None:
    sessions.mkdir(parents=True)
    small = document(2)
    for i in range(SESSIONS):
        (sessions / f"s{i:05d}.json").write_bytes(small)
    # Past store.sessions.WHOLE_BELOW (256 KB): its turns are appended in place.
    (sessions / f"{APPENDED}.json").write_bytes(document(300, "a long conversation", padding=100))
    os.chmod(sessions, 0o700)
    settle(sessions)


def settle(sessions: Path) -> None:
    """As if the last file was written a minute ago: a listing that trusts the directory's mtime
    (the one before every file was stat'ed) distrusts a directory changed in the last two
    seconds, so each is measured at its best."""
    past = time.time_ns() - 60 * 10**9
    os.utime(sessions, ns=(past, past))


def drop_listing_caches(sessions: Path) -> None:
    for path in (layout.catalog_path(sessions), layout.appends_path(sessions), layout.rendered_path(sessions)):
        path.unlink(missing_ok=True)


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="chatcli-bench-listing-"))
    # Bytecode caches written and used, as an installed chatcli has them.
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("OPENAI_", "ANTHROPIC_", "CHATCLI_")) and k != "PYTHONDONTWRITEBYTECODE"}
    env = dict(base, HOME=str(scratch), CHATCLI_HOME=str(scratch / "home"), LLM_PROVIDER="openai",
               OPENAI_API_KEY="x", OPENAI_MODEL="m")
    listing_env = dict(env)
    if os.environ.get("BENCH_PYTHONPATH"):
        listing_env["PYTHONPATH"] = os.environ["BENCH_PYTHONPATH"]
    sessions = scratch / "home" / "sessions"
    command = [str(CHATCLI), "session", "list"]
    try:
        build(sessions)
        timed(command, listing_env)  # the caches, as every later listing finds them
        warm = statistics.median(timed(command, listing_env)[0] for _ in range(RUNS))

        from chatcli.config.settings import Settings
        from chatcli.core.messages import Message
        from chatcli.engine import sessions as engine_sessions
        from chatcli.engine.conversation import Conversation

        def turns(name: str, in_place: bool) -> tuple[list[float], int]:
            """A turn to session `name` then a listing, RUNS times: (times, listings that missed the turn)."""
            conv = Conversation(Settings.load(env), journal=False)
            engine_sessions.load(conv, name)
            conv.history += [Message("user", "a first turn"), Message("assistant", "ok")]
            conv.binding.write_through()  # the first write after a load may be whole: not measured
            settle(sessions)
            timed(command, listing_env)
            times, stale = [], 0
            for run in range(RUNS):
                before = os.stat(sessions).st_mtime_ns
                conv.history += [Message("user", f"turn {run}"), Message("assistant", "ok")]
                conv.binding.write_through()
                assert (os.stat(sessions).st_mtime_ns == before) == in_place, "not written as expected"
                took, out = timed(command, listing_env)
                times.append(took)
                stale += shown_count(out, name) != len(conv.history)
                if not in_place:
                    settle(sessions)
            return times, stale

        appended, stale_appended = turns(APPENDED, True)
        whole, stale_whole = turns(WHOLE, False)

        rewritten, stale_rewritten = [], 0
        target = sessions / f"{REWRITTEN}.json"
        for run in range(RUNS):
            inode = os.stat(target).st_ino
            with open(target, "wb") as handle:  # O_TRUNC: the same inode, the directory unchanged
                handle.write(document(27 + run, f"rewritten by another program, pass {run}"))
            assert os.stat(target).st_ino == inode
            took, out = timed(command, listing_env)
            rewritten.append(took)
            stale_rewritten += shown_count(out, REWRITTEN) != 27 + run

        # The cold listing and its floor take turns, so that the machine's load moves both alike.
        cold, parse_floors = [], []
        for _ in range(RUNS):
            drop_listing_caches(sessions)
            cold.append(timed(command, listing_env)[0])
            parse_floors.append(timed([str(PYTHON), "-c", FLOOR_PARSE, str(sessions)], env)[0])
        parse_floor = statistics.median(parse_floors)

        stat_floor = statistics.median(timed([str(PYTHON), "-c", FLOOR_STAT, str(sessions)], env)[0]
                                       for _ in range(RUNS))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    def stale(count: int) -> str:
        return f" — STALE in {count} of {RUNS} runs" if count else ""

    label = f"{SESSIONS:,} sessions"
    rows = [
        (f"`chatcli session list`, {label}, warm (nothing changed)", warm, "scandir + stat every file", stat_floor,
         ""),
        (f"… after a turn appended in place to one (300 messages){stale(stale_appended)}",
         statistics.median(appended), "warm listing", warm, "≤ 2×"),
        (f"… after a turn written whole to one (a rename){stale(stale_whole)}", statistics.median(whole),
         "warm listing", warm, "≤ 2×"),
        (f"… after one rewritten in place by another program{stale(stale_rewritten)}", statistics.median(rewritten),
         "warm listing", warm, "≤ 2×"),
        ("… cold (no catalog, appends log or rendering)", statistics.median(cold), "scandir + read + parse (orjson)",
         parse_floor, "≤ 1.3×"),
    ]
    source = os.environ.get("BENCH_PYTHONPATH") or "this checkout"
    print_floor_table(f"Session listing (`bench/scale_listing.py`, source: {source}, median of {RUNS})", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
