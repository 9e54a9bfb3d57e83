"""The fault campaign behind docs/reliability.md (run: make faults; FAULT_SCALE=4 for four times
as many of each). Every fault is injected into real files in a scratch CHATCLI_HOME, through the
code paths chatcli itself uses, and every outcome is checked for what was lost. It prints one
Markdown table row per fault: what was done, how many times, what was lost, what the user saw.

The suite (`make test`) runs the same kinds of faults in smaller numbers, each as a test that
fails if anything is lost; this campaign runs them in bulk, for the table.
"""

from __future__ import annotations

import base64
import json
import multiprocessing
import os
import random
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fakes import FakeModelServer  # noqa: E402

from chatcli.config.settings import Settings  # noqa: E402
from chatcli.core.errors import ChatcliError  # noqa: E402
from chatcli.core.messages import Message  # noqa: E402
from chatcli.core.names import validate_name  # noqa: E402
from chatcli.engine import records, sessions  # noqa: E402
from chatcli.engine.conversation import Conversation  # noqa: E402
from chatcli.store.home import Home  # noqa: E402
from chatcli.store.journal import Journal  # noqa: E402
from chatcli.store.sessions import SessionError, SessionStore  # noqa: E402

SCALE = float(os.environ.get("FAULT_SCALE", "1"))
CHATCLI = str(ROOT / ".venv" / "bin" / "chatcli")
ROWS: list[tuple[str, int, str, str]] = []


def n(count: int) -> int:
    return max(1, round(count * SCALE))


def row(fault: str, times: int, lost: str, seen: str) -> None:
    ROWS.append((fault, times, lost, seen))
    print(f"| {fault} | {times:,} | {lost} | {seen} |", flush=True)


def scratch_env(sealed: bool = False) -> dict[str, str]:
    home = Path(tempfile.mkdtemp(prefix="chatcli-faults-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "CHATCLI_", "LLM_"))}
    env.update(HOME=str(home), CHATCLI_HOME=str(home / ".chatcli"))
    if sealed:
        env["CHATCLI_ENCRYPTION_KEY"] = base64.b64encode(os.urandom(32)).decode()
    return env


def journal_of(settings: Settings, name: str, turns: int) -> tuple[Conversation, Path]:
    """A conversation bound to session `name` (created) after `turns` turns, and its journal."""
    conv = Conversation(settings, journal=True)
    sessions.start(conv, name=name)
    for t in range(turns):
        turn(conv, f"{name} q{t}")
    return conv, settings.home / "transcripts" / f"{conv.transcript.id}.jsonl"


def turn(conv: Conversation, text: str) -> None:
    conv.history += [Message("user", text), Message("assistant", f"re: {text}")]
    conv.sync_transcript()
    conv.binding.write_through()


# -- SIGKILL of a writer in the middle of its writes ----------------------------------------------
_KILLED = """
import os, sys
from chatcli.config.settings import Settings
from chatcli.core.messages import Message
from chatcli.engine import sessions
from chatcli.engine.conversation import Conversation
conv = Conversation(Settings.load(), journal=True)
sessions.start(conv, name="crashy")
print("ready", flush=True)
while True:
    n = len(conv.history) // 2 + 1
    conv.history.append(Message("user", f"q {os.getpid()} {n} " + "x" * (n % 7) * 300))
    conv.history.append(Message("assistant", f"a {os.getpid()} {n}"))
    conv.sync_transcript()
    notes = conv.binding.write_through()
    if not notes:
        print(f"done q {os.getpid()} {n} ", flush=True)  # this turn is on disk
"""


def kills(sealed: bool, times: int) -> None:
    env = scratch_env(sealed)
    settings = Settings.load(env)
    store = SessionStore(Home.of(settings).sessions_dir, settings.encryption_key)
    rng = random.Random(7)
    lost = unreadable = damaged = 0
    torn = cut_appends = 0
    path = Home.of(settings).sessions_dir / "crashy.json"
    for _ in range(times):
        proc = subprocess.Popen([sys.executable, "-c", _KILLED], env=env, stdout=subprocess.PIPE)
        assert proc.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0, 0.04))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        done = [line.decode().removeprefix("done ") for line in proc.stdout.read().splitlines()
                if line.startswith(b"done ")]
        try:
            data, _ = store.load("crashy")
        except SessionError:
            unreadable += 1
            continue
        cut_appends += _append_cut_short(path, settings.encryption_key)
        have = {m.content.split("x")[0].rstrip() + " " for m in data.history if m.role == "user"}
        lost += sum(1 for prefix in done if prefix.rstrip() + " " not in have)
        reading = Journal(settings.home / "transcripts", data.transcript_id, settings.encryption_key).read()
        damaged += reading.damaged + reading.stray
        torn += reading.torn
        recorded = {e["message"]["content"] for e in reading.events if e["type"] == "message"}
        lost += sum(1 for m in data.history if m.content not in recorded)  # the journal has every saved message
    kind = "sealed" if sealed else "plaintext"
    row(f"SIGKILL of a writer at a random instant of its turns ({kind} store)", times,
        f"{lost} completed turns; {unreadable} unreadable session files; {damaged} damaged journal lines",
        f"at most one torn journal line at a time ({torn} seen over all kills), ended or cut at the next append; "
        f"{cut_appends} session file(s) caught between the two steps of an in-place append (or with a sealed turn "
        "record cut short) read as the file before that turn")


def _append_cut_short(path: Path, key: bytes | None) -> int:
    """1 when the session file holds an append a kill stopped half-way (the loader read past it)."""
    import orjson

    from chatcli.store.seal import is_sealed, sealer_for

    raw = path.read_bytes()
    if is_sealed(raw):
        return 0 if sealer_for(key).open_session(raw, "crashy", "session")[1] or raw[15] != 2 else 1
    try:
        orjson.loads(raw)
        return 0
    except orjson.JSONDecodeError:
        return 1


# -- two surfaces writing one session at once ------------------------------------------------------
_SURFACE = """
import sys
from chatcli.config.settings import Settings
from chatcli.engine import sessions
from chatcli.engine.conversation import Conversation
conv = Conversation(Settings.load(), journal=True)
sessions.start(conv, name="shared")
print("ready", flush=True)
sys.stdin.readline()
for i in range(50):
    conv.send(f"{sys.argv[1]} turn {i}")
sessions.finish(conv)
"""


def concurrent(sealed: bool, rounds: int, server: FakeModelServer) -> None:
    lost = duplicated = misplaced = journals = 0
    for _ in range(rounds):
        env = scratch_env(sealed)
        env.update(LLM_PROVIDER="openai", OPENAI_API_KEY="x", OPENAI_BASE_URL=server.base_url, OPENAI_MODEL="m")
        settings = Settings.load(env)
        procs = [subprocess.Popen([sys.executable, "-c", _SURFACE, who], env=env, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE) for who in ("l", "r")]
        for proc in procs:
            proc.stdout.readline()
        for proc in procs:
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
        for proc in procs:
            proc.wait()
        data, _ = SessionStore(Home.of(settings).sessions_dir, settings.encryption_key).load("shared")
        contents = [m.content for m in data.history]
        expected = {f"{who} turn {i}" for who in ("l", "r") for i in range(50)}
        lost += len(expected - set(contents))
        duplicated += len(contents) - len(set(contents))
        misplaced += sum(1 for i, c in enumerate(contents) if c in expected
                         and (i + 1 >= len(contents) or contents[i + 1] != f"You said: {c}"))
        journals += len(list((settings.home / "transcripts").glob("*.jsonl"))) - 1
    kind = "sealed" if sealed else "plaintext"
    row(f"two surfaces, 50 turns each, at once on one session ({kind})", rounds * 100,
        f"{lost} turns; {duplicated} duplicated; {misplaced} answers apart from their question; {journals} extra "
        "journals", "each surface adopts the other's turns before its own (a note when the file changed)")


# -- bytes altered on disk ------------------------------------------------------------------------
def sealed_journal_flips(times: int) -> None:
    env = scratch_env(sealed=True)
    settings = Settings.load(env)
    rng = random.Random(11)
    wrong = 0
    healed = 0
    for i in range(times):
        conv, path = journal_of(settings, f"s{i}", 4)
        lines = path.read_bytes().split(b"\n")
        at = rng.randrange(len(lines) - 1)
        line = bytearray(lines[at])
        spot = rng.randrange(len("chatcli-sealed:") + 1, len(line))
        line[spot] = ord("A") if line[spot] != ord("A") else ord("B")
        lines[at] = bytes(line)
        path.write_bytes(b"\n".join(lines))
        later = Conversation(Settings.load(env), journal=True)
        sessions.start(later, name=f"s{i}")
        turn(later, f"s{i} after")
        reading = Journal(path.parent, path.stem, settings.encryption_key).read()
        recorded = {e["message"]["content"] for e in reading.events if e["type"] == "message"}
        if reading.damaged != 1:
            wrong += 1
        if all(m.content in recorded for m in later.history):
            healed += 1
    row("one byte changed in a random line of a sealed journal", times,
        f"0 messages (the line is skipped and its message recorded again from the session: {healed} of {times}); "
        f"{wrong} misreported", "one line when the journal is next read: \"skipped 1 damaged line(s)\"; "
        "appending goes on")


def session_file_damage(times: int) -> None:
    env = scratch_env()
    settings = Settings.load(env)
    store = SessionStore(Home.of(settings).sessions_dir)
    rng = random.Random(13)
    overwritten = internal = 0
    loaded = refused = 0
    values = [5, -1, 2.5, True, None, "text", [], [1, "x"], {}, {"a": [1]}, 10 ** 30]
    for i in range(times):
        name = f"f{i}"
        document = {"version": 2, "chat_history": [{"role": "user", "content": "hi"},
                                                   {"role": "assistant", "content": "hello"}]}
        how = rng.randrange(3)
        if how == 0:  # a field of a message given a value of any JSON type
            field = rng.choice(["role", "content", "meta", "tool_calls", "tool_call_id", "images"])
            document["chat_history"][rng.randrange(2)][field] = rng.choice(values)
            raw = json.dumps(document).encode()
        elif how == 1:  # truncated anywhere
            full = json.dumps(document).encode()
            raw = full[: rng.randrange(len(full))]
        else:  # top-level fields of any type
            document[rng.choice(["version", "chat_history", "title", "transcript_id", "checkpoints"])] = \
                rng.choice(values)
            raw = json.dumps(document).encode()
        path = Home.of(settings).sessions_dir / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)
        conv = Conversation(settings, journal=True)
        try:
            sessions.start(conv, name=name)
            turn(conv, "after")  # a turn on a file that loaded
            loaded += 1
        except ChatcliError:
            refused += 1
            if path.read_bytes() != raw:
                overwritten += 1
        except Exception:  # noqa: BLE001 - what the campaign counts
            internal += 1
        store.entries()  # a listing never fails on it either
    row("session files with a field of the wrong type, truncated, or odd top-level values", times,
        f"{overwritten} unreadable files overwritten; {internal} internal errors",
        f"{refused} refused with one line naming the file and what is wrong (bytes unchanged), {loaded} loaded")


def plain_journal_damage(times: int) -> None:
    env = scratch_env()
    settings = Settings.load(env)
    rng = random.Random(17)
    included = lost = 0
    other = Conversation(settings, journal=True)
    sessions.start(other, name="other")
    turn(other, "foreign words")
    foreign_line = (settings.home / "transcripts" / f"{other.transcript.id}.jsonl").read_bytes().splitlines(True)[0]
    for i in range(times):
        conv, path = journal_of(settings, f"p{i}", 4)
        lines = path.read_bytes().splitlines(True)
        for _ in range(rng.randint(1, 3)):
            kind = rng.randrange(3)
            extra = foreign_line if kind == 0 else rng.choice(lines) if kind == 1 else b'{"noise": 1}\n'
            lines.insert(rng.randrange(len(lines) + 1), extra)
        path.write_bytes(b"".join(lines))
        rec = records.record(settings, conv.snapshot(), conv.transcript.id)
        exported = [e.message.content for e in records.messages(rec)]
        expected = [m.content for m in conv.history]
        included += sum(1 for c in exported if c not in expected) + len(exported) - len(set(exported))
        lost += sum(1 for c in expected if c not in exported)
    row("lines of another journal, duplicated lines and garbage inserted at random in a plaintext journal", times,
        f"{lost} messages; {included} foreign or duplicated messages exported",
        "export and stats say how many lines were skipped, and why")


# -- names, keys, homes ----------------------------------------------------------------------------
def fuzzed_names(times: int) -> None:
    rng = random.Random(19)
    alphabet = string.printable + "éü中/\\.\x00-_"
    escaped = accepted = 0
    root = Path(tempfile.mkdtemp()) / "sessions"
    store = SessionStore(root)
    for _ in range(times):
        name = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        if rng.random() < 0.2:
            name = rng.choice(["..", "../x", "a/../b", "/etc/passwd", "a..b", ".hidden", "-x", "x" * 129]) + name
        try:
            validate_name(name)
        except ChatcliError:
            continue
        accepted += 1
        if store.path(name).resolve().parent != root.resolve():
            escaped += 1
    row("random session names (printable, non-ASCII, separators, NUL, `..`)", times,
        f"{escaped} paths outside the sessions directory", f"{accepted} valid names accepted, the rest refused with "
        "the allowed characters")


def keys(times: int) -> None:
    plain = scratch_env()
    written = 0
    outcomes = {}
    for i in range(times):
        case = i % 4
        env = dict(plain)
        sealed = scratch_env(sealed=True)
        if case == 0:
            env["CHATCLI_ENCRYPTION_KEY"] = ""
        elif case == 1:
            env["CHATCLI_ENCRYPTION_KEY"] = "not base64!"
        elif case == 2:
            env = dict(sealed, CHATCLI_ENCRYPTION_KEY=base64.b64encode(os.urandom(32)).decode())
            subprocess.run([CHATCLI, "session", "list"], env=sealed, capture_output=True)  # the store's key check
        else:
            env = dict(sealed)
            subprocess.run([CHATCLI, "session", "list"], env=sealed, capture_output=True)
            env.pop("CHATCLI_ENCRYPTION_KEY")
        home = Path(env["CHATCLI_HOME"])
        before = sorted(p.name for p in home.rglob("*")) if home.exists() else []
        result = subprocess.run([CHATCLI, "--session", "k", "-p", "hi"], env=env, capture_output=True, text=True)
        after = sorted(p.name for p in home.rglob("*")) if home.exists() else []
        written += after != before
        outcomes.setdefault(("empty", "not base64", "wrong", "missing")[case], result.returncode)
    codes = ", ".join(f"{k}: exit {v}" for k, v in outcomes.items())
    row("empty, malformed, wrong and missing CHATCLI_ENCRYPTION_KEY", times,
        f"{written} runs wrote anything", f"one line each ({codes})")


def read_only_home(times: int, server: FakeModelServer) -> None:
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"]).returncode != 0:
        return
    import pexpect

    bad = 0
    for i in range(times):
        env = scratch_env(sealed=bool(i % 2))
        env.update(LLM_PROVIDER="openai", OPENAI_API_KEY="x", OPENAI_BASE_URL=server.base_url, OPENAI_MODEL="m",
                   PROMPT_TOOLKIT_NO_CPR="1", NO_COLOR="1", TERM="xterm")
        home = env["HOME"]
        full = i % 4 >= 2
        mount = (f"mount -t tmpfs -o size=64k tmpfs {home} && (dd if=/dev/zero of={home}/fill bs=4k; true) "
                 "2>/dev/null" if full else f"mount -t tmpfs -o size=1m tmpfs {home} && mount -o remount,ro {home}")
        child = pexpect.spawn("unshare", ["-m", "sh", "-c", f"{mount} && exec {CHATCLI}"], env=env,
                              encoding="utf-8", timeout=20)
        said = ""
        try:
            child.expect(r"m(?:\x1b\[[0-9;]*m)*>")
            said += child.before
            for text in ("one", "two", "three"):
                child.send(text + "\r")
                child.expect("You said: " + text)
                child.expect(r"m(?:\x1b\[[0-9;]*m)*>")
                said += child.before
            child.send("/exit\r")
            child.expect(pexpect.EOF)
            said += child.before
        except pexpect.ExceptionPexpect:
            bad += 1
            continue
        problems = said.count("warning:") + said.count("transcript journal") + said.count("could not be written")
        if "internal error" in said or problems > 2:
            bad += 1
    row("a read-only or full home (tmpfs remounted read-only, or filled), REPL, three turns", times,
        f"{bad} runs that could not chat or repeated a warning", "one warning at start (read-only) or at the first "
        "failing write (full); the answers are shown; the exit line says nothing was kept")


# -- the search index created by many at once ------------------------------------------------------
def _search(path: str, barrier) -> str:
    from chatcli.store.search import SearchIndex

    barrier.wait()
    try:
        SearchIndex(Path(path)).search_journal("j", "s", lambda _o: ([("user", "hello")], 1), "hello")
    except Exception as exc:  # noqa: BLE001
        return type(exc).__name__
    return "ok"


def index_race(rounds: int) -> None:
    context = multiprocessing.get_context("fork")
    failed = 0
    for _ in range(rounds):
        path = str(Path(tempfile.mkdtemp()) / "index" / "search.sqlite")
        barrier = context.Manager().Barrier(30)
        with context.Pool(30) as pool:
            failed += sum(1 for r in pool.starmap(_search, [(path, barrier)] * 30) if r != "ok")
    row("30 processes opening a new search index at the same instant", rounds * 30, f"{failed} failed starts",
        "every search answers")


def big_numbers(times: int) -> None:
    env = scratch_env()
    settings = Settings.load(env)
    rng = random.Random(23)
    changed = 0
    for i in range(times):
        number = rng.choice([1, -1]) * rng.randrange(2 ** 63, 2 ** 200)
        raw = json.dumps({"version": 2, "chat_history": [{"role": "user", "content": "x", "id": number,
                                                          "meta": {"n": number}}], "big": number})
        path = Home.of(settings).sessions_dir / f"n{i}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(raw)
        conv = Conversation(settings, journal=True)
        sessions.start(conv, name=f"n{i}")
        turn(conv, "more")
        document = json.loads(path.read_text())
        changed += (document["big"] != number) + (document["chat_history"][0]["id"] != number) \
            + (document["chat_history"][0]["meta"]["n"] != number)
    row("integers past 64 bits in fields chatcli does not know, re-saved", times, f"{changed} values changed",
        "nothing: they come back as written")


def main() -> None:
    print("| fault | times | lost | what the user sees |\n|---|---:|---|---|", flush=True)
    with FakeModelServer("openai") as server:
        kills(False, n(400))
        kills(True, n(400))
        concurrent(False, n(5), server)
        concurrent(True, n(5), server)
        sealed_journal_flips(n(100))
        plain_journal_damage(n(100))
        session_file_damage(n(400))
        fuzzed_names(n(10_000))
        keys(n(20))
        read_only_home(n(8), server)
        index_race(n(20))
        big_numbers(n(50))


if __name__ == "__main__":
    main()
