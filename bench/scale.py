"""Cost against size: every persistence and search path at 100, 10,000 and 100,000
messages, each figure beside a floor measured in the same run, and a plot of the growth.

Rows (whole processes where the figure is what a user waits for):
  per-turn persistence   one turn of a bound session in-process (checkpoint, two messages, journal
                         sync with its search-index update, write-through) on a session loaded
                         from disk; floor: a bare fsync'd append of the same bytes; goal: at
                         100,000 ≤ 2× the cost at 100; also with CHATCLI_ENCRYPTION_KEY set
  resume + one turn      `chatcli --session big -p hi` against a fake OpenAI-compatible server on
                         127.0.0.1, whole process; floor: a bare process that reads and parses the
                         session file with orjson (the parse floor); goal: < 1 s, ≤ 2× the floor,
                         peak RSS ≤ 3× the file; and its first token (the answer's first byte on
                         stdout, the fake answering at once): ≤ 300 ms at 100,000 messages
  first turn, foreign    `chatcli --session theirs -p hi` on a file another program wrote (no
                         journal yet): the answer's first token, and the whole process (which
                         records the journal after the answer); floor: `json.loads` of the file
                         in a process; goal: the answer ≤ 3× the floor, peak RSS ≤ 2× the file
  session list           `chatcli session list` over 10,000 sessions after one of them took a turn,
                         with the page cache dropped first (cold) when this machine lets us; floor:
                         a bare interpreter start, as cold; goal: < 100 ms
  transcript search      the first /transcript search in a new process on a journal chatcli wrote
                         turn by turn (indexed as it was written); floor: a bare start; < 300 ms
  session search         across 1,000 sessions × 100 messages, plain and sealed (goal: sealed
                         ≤ 1.5× plain), and across 1,000 × 1,000 (a million messages, goal < 50 ms)
                         once indexed; the first search, which builds the index (the REPL does that
                         in the background), is shown too

BENCH_RUNS sets the runs per figure (default 15; 5 at 100,000 messages). The plot goes to
bench/scale.png (skipped when matplotlib is missing).
"""

from __future__ import annotations

import base64
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
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from common import bare_fsynced_write, print_floor_table  # noqa: E402
from fakes import FakeModelServer  # noqa: E402

from chatcli.config.settings import Settings  # noqa: E402
from chatcli.core.messages import Message  # noqa: E402
from chatcli.engine import sessions  # noqa: E402
from chatcli.engine.conversation import Conversation  # noqa: E402
from chatcli.store.home import Home  # noqa: E402

SIZES = tuple(int(n) for n in os.environ.get("BENCH_SIZES", "100,10000,100000").split(","))
RUNS = int(os.environ.get("BENCH_RUNS", "15"))
# BENCH_PARTS=turns,list,search runs only those (all by default); window, listing and ranked add
# the tables of bench/scale_window.py, bench/scale_listing.py and bench/scale_search.py, so that
# this one run prints every row of the scale goals (the request window; `session list` after a
# change, and cold; ranked search at a million messages, and a first sealed search).
PARTS = set(os.environ.get("BENCH_PARTS", "turns,list,search,window,listing,ranked").split(","))
PYTHON = ROOT / ".venv" / "bin" / "python"
CHATCLI = ROOT / ".venv" / "bin" / "chatcli"
BODY = "lorem ipsum dolor sit amet, consectetur adipiscing elit " * 17  # ≈1 KB


def runs_for(count: int) -> int:
    return RUNS if count < 100_000 else max(3, RUNS // 3)


def build_session(env: dict, name: str, count: int) -> Path:
    """A bound session of `count` messages written the way chatcli writes one: journal and file."""
    conv = Conversation(Settings.load(env), journal=True)
    sessions.start(conv, name=name)
    from journal import text  # ≈1 KB of words drawn with a Zipf-like law, as real text is

    conv.history += [Message("user" if i % 2 == 0 else "assistant", text(i, 150)) for i in range(count)]
    conv.sync_transcript()
    conv.binding.write_through()
    return Home.of(Settings.load(env)).sessions_dir / f"{name}.json"


def per_turn(env: dict, name: str, count: int) -> tuple[float, float]:
    """Median of one turn's persistence on a session freshly loaded from disk, and its floor."""
    conv = Conversation(Settings.load(env), journal=True)
    sessions.load(conv, name)
    samples, floors = [], []
    scratch = Path(env["CHATCLI_HOME"]) / "floor.bin"
    for run in range(runs_for(count) + 1):
        elapsed, turn = timed_turn(conv, run)
        floor = append_floor(scratch, turn)
        if run:  # the first turn after the load is the next row's business
            samples.append(elapsed)
            floors.append(floor)
    return statistics.median(samples), statistics.median(floors)


def timed_turn(conv: Conversation, run: int) -> tuple[float, list[Message]]:
    """One turn's persistence as the REPL makes it (checkpoint, the two messages, journal sync,
    write-through): its time in ms, and its messages."""
    turn = [Message("user", f"question {run} {BODY}"), Message("assistant", f"answer {run}")]
    start = time.perf_counter()
    conv.checkpoint(f"question {run}")
    conv.history += turn
    conv.sync_transcript()
    notes = conv.binding.write_through()
    elapsed = (time.perf_counter() - start) * 1000
    assert conv.binding.unsynced == 0, notes
    return elapsed, turn


def append_floor(scratch: Path, turn: list[Message]) -> float:
    """The floor of a turn's persistence: its messages in one bare fsync'd append (ms)."""
    data = b"".join(orjson.dumps(message.to_dict()) for message in turn)
    begin = time.perf_counter()
    bare_fsynced_write(scratch, data, append=True)
    return (time.perf_counter() - begin) * 1000


def whole(command: list[str], env: dict) -> tuple[float, None]:
    """Wall time (ms) of a whole process."""
    start = time.perf_counter()
    done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr.decode()}")
    return elapsed, None


# Peak RSS is read by a small parent: a child forked from this process (which built the
# sessions) would count this process's pages until it execs.
PEAK = ("import resource, subprocess, sys; code = subprocess.run(sys.argv[1:]).returncode; "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024); sys.exit(code)")


def peak_rss(command: list[str], env: dict) -> int:
    out = subprocess.run([str(PYTHON), "-c", PEAK, *command], env=env, check=True, capture_output=True)
    return int(out.stdout.decode().split()[-1])


def first_token(command: list[str], env: dict) -> tuple[float, float]:
    """(ms to the answer's first byte on stdout, ms to the process's end): the fake server answers
    at once, so the first is when the request was made and its stream read."""
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.read(process.stdout.fileno(), 1)
    first = (time.perf_counter() - start) * 1000
    _, err = process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {err.decode()}")
    return first, (time.perf_counter() - start) * 1000


def resume_one_turn(env: dict, name: str, path: Path, count: int) -> tuple[float, float, float, int, int]:
    """A one-shot turn on a session chatcli wrote: (median ms to the first token, to the end, the
    parse floor), the peak RSS and the file's size."""
    parse = [str(PYTHON), "-c", "import orjson, sys; orjson.loads(open(sys.argv[1], 'rb').read())", str(path)]
    command = [str(CHATCLI), "--session", name, "-p", "hi"]
    runs = runs_for(count)
    whole(command, env)  # the first turn after the build names the cost record: written whole once
    turns = [first_token(command, env) for _ in range(runs)]
    floor = [whole(parse, env)[0] for _ in range(runs)]
    return (statistics.median(t[0] for t in turns), statistics.median(t[1] for t in turns), statistics.median(floor),
            peak_rss(command, env), path.stat().st_size)


def foreign_first_turn(env: dict, count: int) -> tuple[float, float, float, int, int, int]:
    """The first turn on a session another program wrote (Go ChatCLI, an import, an older
    chatcli): a file with no journal named in it. Each run starts from the same file in a new
    home (nothing recorded, nothing indexed). Floor: `json.loads` of the file in a process, as
    the issue that set the goal measured it. Returns the medians (ms) of the answer's first
    token, of the whole process (which records the journal after the answer) and of the floor,
    the peak RSS of the turn and of the floor, and the file's size."""
    from journal import text

    home = Path(env["CHATCLI_HOME"]).parent / "foreign"
    source = home.parent / "foreign.json"
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": text(i, 150)} for i in range(count)]
    source.write_bytes(orjson.dumps({"name": "theirs", "chat_history": history,
                                     "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"}))
    mine = dict(env, CHATCLI_HOME=str(home))
    command = [str(CHATCLI), "--session", "theirs", "-p", "hi"]
    parse = [str(PYTHON), "-c", "import json, sys; json.loads(open(sys.argv[1], 'rb').read())", str(source)]

    def fresh() -> None:
        shutil.rmtree(home, ignore_errors=True)
        (home / "sessions").mkdir(parents=True)
        shutil.copyfile(source, home / "sessions" / "theirs.json")

    turns = []
    for _ in range(runs_for(count)):
        fresh()
        turns.append(first_token(command, mine))
    floor = [whole(parse, mine)[0] for _ in range(runs_for(count))]
    fresh()
    rss = peak_rss(command, mine)
    return (statistics.median(t[0] for t in turns), statistics.median(t[1] for t in turns), statistics.median(floor),
            rss, peak_rss(parse, mine), source.stat().st_size)


FIRST_SEARCH = """
import sys, time
start = time.perf_counter()
from chatcli.config.settings import Settings
from chatcli.engine import records, sessions
from chatcli.engine.conversation import Conversation
settings = Settings.load()
conv = Conversation(settings, journal=True)
sessions.load(conv, sys.argv[1])
begin = time.perf_counter()
hits = records.search(settings, records.record(settings, conv.snapshot(), conv.transcript.id), sys.argv[2])
assert hits, "nothing found"
print((time.perf_counter() - begin) * 1000)
"""


def transcript_search(env: dict, name: str, count: int) -> float:
    """The first transcript search in a new process (what /transcript search costs the first
    time after resuming), on a journal chatcli wrote turn by turn: median of runs, each a new
    process (the session load before it is not counted)."""
    from journal import QUERIES

    runs = runs_for(count)
    return statistics.median(float(subprocess.run(
        [str(PYTHON), "-c", FIRST_SEARCH, name, QUERIES[run]], env=env, check=True,
        capture_output=True, text=True).stdout) for run in range(runs))


def session_corpus(env: dict, sessions_count: int, per_session: int) -> None:
    """`sessions_count` saved sessions of `per_session` messages (synthetic text of a 5,000-word
    vocabulary drawn with a Zipf-like law, bench/journal.py), written as chatcli writes them."""
    from journal import text

    from chatcli.core.session import SessionData

    store = Home.of(Settings.load(env)).sessions()  # the files, or CHATCLI_STORE's server
    for k in range(sessions_count):
        store.write(f"project-{k:04d}", SessionData(history=[
            Message("user" if i % 2 == 0 else "assistant", text(k * per_session + i, 30)) for i in range(per_session)]))


def session_search(env: dict) -> tuple[float, float]:
    """(the first search, building the index in this process; the median search after it)."""
    from journal import QUERIES

    from chatcli.engine import records
    from chatcli.store.sessions import SessionStore

    settings = Settings.load(env)
    store = SessionStore(Home.of(settings).sessions_dir, settings.encryption_key)
    start = time.perf_counter()
    records.search_sessions(settings, store, QUERIES[0])
    build = (time.perf_counter() - start) * 1000
    samples = []
    for run in range(RUNS):
        start = time.perf_counter()
        found = records.search_sessions(settings, store, QUERIES[1 + run])
        samples.append((time.perf_counter() - start) * 1000)
        assert found
    return build, statistics.median(samples)


def drop_caches() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as handle:
            handle.write("3\n")
        return True
    except OSError:
        return False


def listing(env: dict) -> tuple[float, float, bool]:
    """`chatcli session list` over 10,000 sessions, each run after a turn appended to one of
    them (the catalog must take it in), cold when the page cache can be dropped."""
    home = Path(env["CHATCLI_HOME"])
    sessions_dir = home / "sessions"
    sessions_dir.mkdir(parents=True, exist_ok=True)
    small = orjson.dumps({"version": 2, "title": "", "transcript_id": "", "chat_history": [
        {"role": "user", "content": "a question about the listing"}, {"role": "assistant", "content": "an answer"}]})
    for i in range(10_000):
        (sessions_dir / f"s{i:05d}.json").write_bytes(small)
    os.chmod(sessions_dir, 0o700)
    whole([str(CHATCLI), "session", "list"], env)  # the catalog, as every later listing finds it
    conv = Conversation(Settings.load(env), journal=False)
    sessions.load(conv, "s00042")
    times, floors, cold = [], [], False
    for run in range(RUNS):
        conv.history += [Message("user", f"turn {run}"), Message("assistant", "ok")]
        conv.binding.write_through()
        cold = drop_caches()
        times.append(whole([str(CHATCLI), "session", "list"], env)[0])
        drop_caches()
        floors.append(whole([str(PYTHON), "-c", "pass"], env)[0])
    return statistics.median(times), statistics.median(floors), cold


def plot(points: dict[str, list[tuple[int, float]]]) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no plot"
    figure, axis = plt.subplots(figsize=(9, 4.5))
    for label, series in points.items():
        axis.plot([x for x, _ in series], [y for _, y in series], marker="o", label=label)
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel("messages in the session (in the store, for session search)")
    axis.set_ylabel("ms")
    axis.set_title("chatcli: cost against session size")
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(loc="upper left", bbox_to_anchor=(1.02, 1), fontsize="small", frameon=False)
    target = ROOT / "bench" / "scale.png"
    figure.tight_layout()
    figure.savefig(target, dpi=100)
    return f"plot written to {target.relative_to(ROOT)}"


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="chatcli-bench-scale-"))
    rows, points = [], {"per-turn persistence": [], "floor: fsync'd append": [], "resume + one turn (-p hi)": [],
                        "floor: parse the file": [], "first turn, another program's file": [],
                        "transcript search, first use": []}
    try:
        with FakeModelServer("openai") as server:
            base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "CHATCLI_"))}
            env = dict(base, HOME=str(scratch), CHATCLI_HOME=str(scratch / "home"), LLM_PROVIDER="openai",
                       OPENAI_API_KEY="x", OPENAI_BASE_URL=server.base_url, OPENAI_MODEL="m")
            turns = {}
            for count in SIZES if "turns" in PARTS or "search" in PARTS else ():
                name = f"big{count}"
                path = build_session(env, name, count)
                if "turns" not in PARTS:
                    continue
                turn, floor = per_turn(env, name, count)
                turns[count] = turn
                rows.append((f"per-turn persistence, {count:,} msgs", turn, "fsync'd append", floor,
                             "≤ 2× the 100-message cost at 100k"))
                points["per-turn persistence"].append((count, turn))
                points["floor: fsync'd append"].append((count, floor))
                first, took, parse, rss, size = resume_one_turn(env, name, path, count)
                rows.append((f"`chatcli --session big -p hi`, {count:,} msgs ({size / 1e6:.1f} MB; peak RSS "
                             f"{rss / 1e6:.0f} MB = {rss / size:.1f}× the file)", took, "parse floor", parse,
                             "< 1 s, ≤ 2× floor, RSS ≤ 3× file" if count == 100_000 else ""))
                rows.append((f"  its first token, {count:,} msgs", first, "parse floor", parse,
                             "≤ 300 ms" if count == 100_000 else ""))
                points["resume + one turn (-p hi)"].append((count, took))
                points["floor: parse the file"].append((count, parse))
                first, took, parse, rss, parse_rss, size = foreign_first_turn(env, count)
                rows.append((f"first turn on a session another program wrote, {count:,} msgs ({size / 1e6:.1f} MB; "
                             f"peak RSS {rss / 1e6:.0f} MB = {rss / size:.1f}× the file, the parse's "
                             f"{parse_rss / 1e6:.0f} MB): its answer", first, "json.loads in a process", parse,
                             "≤ 3× floor, RSS ≤ 2× file" if count == 100_000 else ""))
                rows.append((f"  the whole process (the journal recorded after the answer), {count:,} msgs", took,
                             "json.loads in a process", parse, ""))
                points["first turn, another program's file"].append((count, first))
            if 100 in turns and 100_000 in turns:
                rows.append(("per-turn persistence, 100,000 vs 100 msgs", turns[100_000], "same at 100", turns[100],
                             "≤ 2×"))
                sealed_env = dict(env, CHATCLI_HOME=str(scratch / "sealed"),
                                  CHATCLI_ENCRYPTION_KEY=base64.b64encode(os.urandom(32)).decode())
                sealed = {}
                for count in (100, 100_000):
                    build_session(sealed_env, f"vault{count}", count)
                    sealed[count], floor = per_turn(sealed_env, f"vault{count}", count)
                    rows.append((f"per-turn persistence, sealed, {count:,} msgs", sealed[count], "fsync'd append",
                                 floor, ""))
                rows.append(("per-turn persistence, sealed, 100,000 vs 100 msgs", sealed[100_000], "same at 100",
                             sealed[100], "≤ 2×"))
            if "list" in PARTS:
                listed, start, cold = listing(dict(env, CHATCLI_HOME=str(scratch / "listing")))
                rows.append((f"`chatcli session list`, 10,000 sessions, after a turn ({'cold' if cold else 'warm'} cache)",
                             listed, "bare start", start, "< 100 ms"))
            if "search" in PARTS:
                search_rows(env, scratch, rows, points)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print_floor_table("Scale (`bench/scale.py`)", rows)
    print(f"\n{plot(points)}")
    for part, script in (("window", "scale_window"), ("listing", "scale_listing"), ("ranked", "scale_search")):
        if part in PARTS:
            print()
            __import__(script).main()
    return 0


def search_rows(env: dict, scratch: Path, rows: list, points: dict) -> None:
    """Transcript search on the sessions the turns rows built, then session search, plain and sealed."""
    bare = statistics.median(whole([str(PYTHON), "-c", "pass"], env)[0] for _ in range(RUNS))
    for count in SIZES:
        first = transcript_search(env, f"big{count}", count)
        rows.append((f"transcript search, {count:,} msgs, first use (a new process)", first, "bare start",
                     bare, "< 300 ms" if count == 100_000 else ""))
        points["transcript search, first use"].append((count, first))
    small = dict(env, CHATCLI_HOME=str(scratch / "search-10k"))
    session_corpus(small, 100, 100)
    build_small, small_ms = session_search(small)
    rows.append(("session search, 10,000 msgs (100 × 100), plain", small_ms, "bare start", bare, ""))
    rows.append(("first session search, 10,000 msgs (builds the index)", build_small, "bare start", bare, ""))
    plain = dict(env, CHATCLI_HOME=str(scratch / "search-plain"))
    sealed = dict(env, CHATCLI_HOME=str(scratch / "search-sealed"),
                  CHATCLI_ENCRYPTION_KEY=base64.b64encode(os.urandom(32)).decode())
    for label, where in (("plain", plain), ("sealed", sealed)):
        session_corpus(where, 1_000, 100)
    (build_plain, plain_ms), (build_sealed, sealed_ms) = session_search(plain), session_search(sealed)
    rows.append(("session search, 100,000 msgs (1,000 × 100), plain", plain_ms, "bare start", bare, ""))
    rows.append(("session search, 100,000 msgs, sealed vs plain", sealed_ms, "same, plain", plain_ms, "≤ 1.5×"))
    rows.append(("first session search, 100,000 msgs, sealed vs plain (builds the index)", build_sealed,
                 "same, plain", build_plain, ""))
    big = dict(env, CHATCLI_HOME=str(scratch / "search-1m"))
    session_corpus(big, int(os.environ.get("BENCH_SESSIONS", "1000")), 1_000)
    build_big, big_ms = session_search(big)
    rows.append(("session search, 1,000,000 msgs (1,000 × 1,000), indexed", big_ms, "bare start", bare,
                 "< 50 ms"))
    rows.append(("first session search, 1,000,000 msgs (builds the index; the REPL does it in the background)",
                 build_big, "bare start", bare, ""))
    points["session search, indexed (all sessions)"] = [(10_000, small_ms), (100_000, plain_ms), (1_000_000, big_ms)]
    points["first session search (builds the index)"] = [(10_000, build_small), (100_000, build_plain),
                                                         (1_000_000, build_big)]


if __name__ == "__main__":
    sys.exit(main())
