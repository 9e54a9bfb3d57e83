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

import faults_surfaces  # noqa: E402
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
    torn = cut_appends = left_torn = 0
    path = Home.of(settings).sessions_dir / "crashy.json"
    # Past the size under which a plaintext session is written whole at every turn: its turns are
    # appended in place, in two steps a kill can come between.
    seed = Conversation(settings, journal=True)
    sessions.start(seed, name="crashy")
    seed.history += [Message("user" if i % 2 == 0 else "assistant", f"seed {i} " + "s" * 600) for i in range(500)]
    seed.sync_transcript()
    seed.binding.write_through()
    for _ in range(times):
        proc = subprocess.Popen([sys.executable, "-c", _KILLED], env=env, stdout=subprocess.PIPE)
        assert proc.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0, 0.04))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        done = [line.decode().removeprefix("done ") for line in proc.stdout.read().splitlines()
                if line.startswith(b"done ")]
        cut_appends += _append_cut_short(path, settings.encryption_key)
        try:
            data, _ = store.load("crashy")  # the next command: it mends what the kill left
        except SessionError:
            unreadable += 1
            continue
        left_torn += 0 if sealed else _not_json_to_every_reader(path)
        have = {m.content.split("x")[0].rstrip() + " " for m in data.history if m.role == "user"}
        lost += sum(1 for prefix in done if prefix.rstrip() + " " not in have)
        reading = Journal(settings.home / "transcripts", data.transcript_id, settings.encryption_key).read()
        damaged += reading.damaged + reading.stray
        torn += reading.torn
        recorded = {e["message"]["content"] for e in reading.events if e["type"] == "message"}
        lost += sum(1 for m in data.history if m.content not in recorded)  # the journal has every saved message
    kind = "sealed" if sealed else "plaintext"
    mended = "" if sealed else (f"; {left_torn} files left that json or Go ChatCLI's decoder refuses after the "
                                "next command")
    row(f"SIGKILL of a writer at a random instant of its turns ({kind} store, a session past 256 KB: turns "
        "appended in place)", times,
        f"{lost} completed turns; {unreadable} unreadable session files; {damaged} damaged journal lines{mended}",
        f"at most one torn journal line at a time ({torn} seen over all kills), ended or cut at the next append; "
        f"{cut_appends} session file(s) caught between the two steps of an in-place append (or with a sealed turn "
        "record cut short): mended by the next command that opens them (plaintext), or read without that turn, "
        "which the journal gives back (sealed)")


def _not_json_to_every_reader(path: Path) -> int:
    """1 when the session file is not one JSON document to the json module, or to Go ChatCLI's own
    decoder (tests/go_reader, built by make test), both of which refuse trailing data."""
    try:
        json.loads(path.read_bytes())
    except ValueError:
        return 1
    reader = ROOT / ".venv" / "bin" / "go_reader"
    if reader.exists():
        read = subprocess.run([str(reader), str(path)], capture_output=True, text=True)
        return 0 if read.returncode == 0 and read.stdout.startswith("ok ") else 1
    return 0


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
def _change_a_byte(path: Path, at: int, rng: random.Random) -> None:
    """One byte of line `at` of a sealed journal changed, within its base64 (still base64, no
    longer authentic)."""
    lines = path.read_bytes().split(b"\n")
    line = bytearray(lines[at])
    spot = rng.randrange(len("chatcli-sealed:") + 1, len(line))
    line[spot] = ord("A") if line[spot] != ord("A") else ord("B")
    lines[at] = bytes(line)
    path.write_bytes(b"\n".join(lines))


def sealed_journal_flips(times: int) -> None:
    env = scratch_env(sealed=True)
    settings = Settings.load(env)
    rng = random.Random(11)
    wrong = 0
    healed = 0
    for i in range(times):
        conv, path = journal_of(settings, f"s{i}", 4)
        _change_a_byte(path, rng.randrange(path.read_bytes().count(b"\n")), rng)
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


def long_integers(times: int) -> None:
    """Integers of up to the interpreter's 4,300 digits in fields chatcli does not know (past a
    double from 310 digits), and longer ones."""
    env = scratch_env()
    settings = Settings.load(env)
    rng = random.Random(43)
    changed = refused_short = loaded_long = overwritten = 0
    limit = sys.get_int_max_str_digits()
    for i in range(times):
        long = i % 4 == 3
        digits = rng.randrange(limit + 1, limit + 2000) if long else rng.randrange(20, limit + 1)
        number = str(rng.randrange(1, 10)) + "".join(rng.choice(string.digits) for _ in range(digits - 1))
        with_number = json.dumps({"version": 2, "chat_history": [{"role": "user", "content": "x"}], "big": 0})
        raw = with_number.replace('"big": 0', f'"big": {number}').encode()
        path = Home.of(settings).sessions_dir / f"l{i}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)
        conv = Conversation(settings, journal=True)
        try:
            sessions.start(conv, name=f"l{i}")
        except ChatcliError:
            refused_short += not long
            overwritten += path.read_bytes() != raw
            continue
        loaded_long += long
        turn(conv, "more")
        changed += f'"big": {number}'.encode() not in path.read_bytes().replace(b'"big":', b'"big": ')
    row(f"integers of 20 to {limit:,} digits (past a double from 310) in fields chatcli does not know, re-saved; "
        f"and longer ones", times, f"{changed} values changed; {refused_short} refused that Python reads; "
        f"{overwritten} refused files changed", f"nothing for the first; past {limit:,} digits ({loaded_long} "
        "loaded) one line naming the file and the limit, the file untouched")


# -- the third campaign's findings, each in bulk ----------------------------------------------------
def wrong_key_without_check(times: int) -> None:
    """A wrong key while `key-check` is missing but sealed files exist (sessions and journals,
    journals only, sessions only): refused before anything is written; the right key still opens."""
    accepted = written = locked_out = 0
    for i in range(times):
        env = scratch_env(sealed=True)
        settings = Settings.load(env)
        journal_of(settings, "k", 2)
        home = Path(env["CHATCLI_HOME"])
        if i % 3 == 1:
            for path in (home / "sessions").glob("*.json"):
                path.unlink()
        elif i % 3 == 2:
            shutil.rmtree(home / "transcripts")
        (home / "key-check").unlink(missing_ok=True)  # in-process writers never made it; the CLI does
        before = sorted(str(p.relative_to(home)) for p in home.rglob("*"))
        wrong = dict(env, CHATCLI_ENCRYPTION_KEY=base64.b64encode(os.urandom(32)).decode())
        result = subprocess.run([CHATCLI, "session", "list"], env=wrong, capture_output=True, text=True)
        accepted += result.returncode == 0
        written += sorted(str(p.relative_to(home)) for p in home.rglob("*")) != before
        right = subprocess.run([CHATCLI, "session", "list"], env=env, capture_output=True, text=True)
        locked_out += right.returncode != 0
    row("a wrong key while key-check is missing and sealed files exist (sessions and journals, journals only, "
        "sessions only)", times, f"{accepted} wrong keys accepted; {written} runs wrote anything; {locked_out} "
        "right keys refused afterwards", "one line: the key opens none of the sealed files; exit 1")


def sealed_record_flips(times: int) -> None:
    """One bit flipped at a random place of a sealed session file's last turn record."""
    env = scratch_env(sealed=True)
    settings = Settings.load(env)
    store = SessionStore(Home.of(settings).sessions_dir, settings.encryption_key)
    rng = random.Random(29)
    lost = refused = unsaid = said_again = 0
    for i in range(times):
        name = f"r{i}"
        journal_of(settings, name, 3)
        path = Home.of(settings).sessions_dir / f"{name}.json"
        raw = bytearray(path.read_bytes())
        start = _last_record(bytes(raw))
        raw[rng.randrange(start, len(raw))] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(raw))
        later = Conversation(Settings.load(env), journal=True)
        try:
            said = sessions.start(later, name=name)
        except ChatcliError:
            refused += 1
            continue
        unsaid += not any("taken back from the session's journal" in line for line in said)
        turn(later, f"{name} after")
        data, _ = store.load(name)
        expected = [f"{name} q{t}" for t in range(3)] + [f"{name} after"]
        lost += sum(1 for text in expected if text not in {m.content for m in data.history})
        again = Conversation(Settings.load(env), journal=True)
        said_again += any("taken back" in line for line in sessions.start(again, name=name))
    row("one bit flipped at a random place of a sealed session file's last turn record", times,
        f"{lost} messages; {refused} sessions refused; {unsaid} not said; {said_again} said again later",
        "one line at load: the record is damaged (or, for a length made longer, cut short) and its messages were "
        "taken back from the journal; the next write rewrites the file whole")


def _last_record(raw: bytes) -> int:
    from chatcli.store.seal import session_layout

    offset = start = session_layout(raw)
    while offset < len(raw):
        start, offset = offset, offset + 16 + int.from_bytes(raw[offset: offset + 4], "big")
    return start


# Tool calls of no readable shape. (A call without an id is readable: Go ChatCLI reads it as the
# empty id it writes for one.)
_BAD_CALLS = [[{"id": 1, "function": "x"}], [{"id": "1", "function": "x"}], [{"id": "1", "name": "f", "arguments": 5}],
              [{"id": "1", "name": "f", "arguments": {}, "raw": 3}], [{"id": "1", "function": {"name": 7}}],
              [{"id": "1", "type": "function", "function": {"name": "f", "arguments": [1]}}], [{"name": 5}],
              [{"id": "1"}], ["x"], [None]]


def malformed_requests(times: int, server: FakeModelServer) -> None:
    """Tool calls of no readable shape in session files; requests the API refuses as malformed."""
    env = scratch_env()
    env.update(LLM_PROVIDER="openai", OPENAI_API_KEY="x", OPENAI_BASE_URL=server.base_url, OPENAI_MODEL="m")
    settings = Settings.load(env)
    rng = random.Random(31)
    loaded = changed = appended = 0
    for i in range(times):
        name = f"c{i}"
        path = Home.of(settings).sessions_dir / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        raw = json.dumps({"version": 2, "chat_history": [
            {"role": "user", "content": "hi"}, {"role": "assistant", "content": "", "tool_calls": rng.choice(_BAD_CALLS)},
            {"role": "tool", "content": "ok", "tool_call_id": "1"}]}).encode()
        path.write_bytes(raw)
        conv = Conversation(settings, journal=True)
        try:
            sessions.start(conv, name=name)
            loaded += 1
        except ChatcliError:
            pass
        changed += path.read_bytes() != raw
        bound = Conversation(settings, journal=True)
        sessions.start(bound, name=f"ok{i}")
        for status in (400, 422, 400):
            server.reply(status=status, error="messages[1].tool_calls[0]: field required")
            try:
                bound.send(f"refused {status}")
            except ChatcliError:
                pass
        data, _ = SessionStore(Home.of(settings).sessions_dir).load(f"ok{i}")
        appended += sum(1 for m in data.history if m.content.startswith("refused"))
    row("tool calls of no readable shape in a session file; then three requests an API refuses as malformed "
        "(HTTP 400, 422)", times, f"{loaded} such files loaded; {changed} files changed; {appended} refused "
        "questions appended", "one line naming the file and the call; the API's error, followed by \"the message "
        "was not added to the conversation\"")


def links_in_home(times: int, server: FakeModelServer) -> None:
    """The session's journal, cost snapshot or lock file replaced by a link to a file outside the
    home (existing or not), then a turn."""
    followed = lost = 0
    kinds = ("journal", "costs", "lock")
    for i in range(times):
        env = scratch_env()
        env.update(LLM_PROVIDER="openai", OPENAI_API_KEY="x", OPENAI_BASE_URL=server.base_url, OPENAI_MODEL="m")
        home = Path(env["CHATCLI_HOME"])
        subprocess.run([CHATCLI, "--session", "linked", "-p", "hi"], env=env, capture_output=True, check=True)
        data = json.loads((home / "sessions" / "linked.json").read_text())
        kind = kinds[i % 3]
        planted = {"journal": home / "transcripts" / f"{data['transcript_id']}.jsonl",
                   "costs": home / "costs" / f"{data.get('cost_ref')}.jsonl",
                   "lock": home / "sessions" / ".linked.lock"}[kind]
        outside = Path(env["HOME"]) / "outside.txt"
        if i % 2:
            outside.write_text("not chatcli's\n")
        planted.unlink(missing_ok=True)
        planted.symlink_to(outside)
        result = subprocess.run([CHATCLI, "--session", "linked", "-p", "again"], env=env, capture_output=True,
                                text=True)
        followed += (outside.read_text() != "not chatcli's\n") if i % 2 else outside.exists()
        lost += kind != "lock" and "You said: again" not in result.stdout
    row("a session's journal, cost snapshot or lock file replaced by a link to a file outside the home, then a "
        "turn", times, f"{followed} links followed (files outside written or created); {lost} answers lost",
        "journal: one line, the turn goes on; cost snapshot: not written, the turn goes on; lock: the session's "
        "write is refused in one line, as for a linked session file")


def journal_mark_damage(times: int) -> None:
    """One byte changed in a sealed journal's checkpoint or `synced` line."""
    from chatcli.store.seal import sealer_for

    env = scratch_env(sealed=True)
    settings = Settings.load(env)
    rng = random.Random(37)
    unsaid = said_again = lost = 0
    for i in range(times):
        name = f"m{i}"
        conv = Conversation(settings, journal=True)
        sessions.start(conv, name=name)
        for t in range(3):
            conv.checkpoint(f"q{t}")
            turn(conv, f"{name} q{t}")
        path = settings.home / "transcripts" / f"{conv.transcript.id}.jsonl"
        offset, kinds = 0, []
        for line in path.read_bytes().split(b"\n")[:-1]:
            kinds.append(json.loads(sealer_for(settings.encryption_key).open_line(line, path.stem, offset))["type"])
            offset += len(line) + 1
        _change_a_byte(path, rng.choice([k for k, kind in enumerate(kinds) if kind in ("checkpoint", "synced")]), rng)
        later = Conversation(Settings.load(env), journal=True)
        sessions.start(later, name=name)
        notes = later.sync_transcript()
        unsaid += not any("damaged" in note for note in notes)
        turn(later, f"{name} after")
        again = Conversation(Settings.load(env), journal=True)
        sessions.start(again, name=name)
        said_again += bool(again.sync_transcript())
        recorded = {e["message"]["content"] for e in Journal(path.parent, path.stem, settings.encryption_key).read().events
                    if e["type"] == "message"}
        lost += sum(1 for m in later.history if m.content not in recorded)
    row("one byte changed in a sealed journal's checkpoint or synced line", times,
        f"{lost} messages; {unsaid} not said; {said_again} said again by a later process",
        "one line at the next sync: \"skipped 1 damaged line(s)\" (a /rewind point it held is gone); the count "
        "said is recorded, so later processes say nothing")


def search_without_index(times: int) -> None:
    """`session search` where the search index cannot be made (`index` is a file)."""
    env = scratch_env()
    settings = Settings.load(env)
    failed = missed = noisy = 0
    for i in range(times):
        journal_of(settings, f"herons{i}", 1)
    index = Path(env["CHATCLI_HOME"]) / "index"
    shutil.rmtree(index, ignore_errors=True)
    index.write_text("not a directory")
    for i in range(times):
        result = subprocess.run([CHATCLI, "session", "search", f"herons{i}", "q0"], env=env, capture_output=True,
                                text=True)
        failed += result.returncode != 0
        missed += f"herons{i}" not in result.stdout
        noisy += len(result.stderr.splitlines()) != 1
    row("session search where the search index cannot be written (index/ a file; a read-only home in the suite)",
        times, f"{failed} failed searches; {missed} sessions not found; {noisy} runs not saying it in one line",
        "\"warning: the search index cannot be written (…): searching without it\", once")


# A writer that rewrites a 2 MB session whole, again and again (a compaction, a rewind, a save).
_REWRITER = """
from chatcli.config.settings import Settings
from chatcli.core.messages import Message
from chatcli.core.session import SessionData
from chatcli.store.home import Home
from chatcli.store.sessions import SessionStore
settings = Settings.load()
store = SessionStore(Home.of(settings).sessions_dir)
data = SessionData(history=[Message("user", "x" * 2000) for _ in range(1000)])
print("ready", flush=True)
while True:
    store.write("rewritten", data)
"""


def temp_files_after_kills(times: int) -> None:
    """Writers killed mid-turn leave temporary files; the start-up sweep removes those of dead writers."""
    env = scratch_env(sealed=False)
    home = Path(env["CHATCLI_HOME"])
    rng = random.Random(41)
    for _ in range(times):
        proc = subprocess.Popen([sys.executable, "-c", _REWRITER], env=env, stdout=subprocess.PIPE)
        proc.stdout.readline()
        time.sleep(rng.uniform(0, 0.05))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    left = [p for p in home.rglob(".*.tmp")]
    for path in left:  # the next start, a minute later (a temporary file younger may still be in use)
        os.utime(path, (time.time() - 61, time.time() - 61))
    from chatcli.engine import upkeep

    upkeep.sweep(Settings.load(env))
    after = [p for p in home.rglob(".*.tmp")]
    row("temporary files left by writers killed mid-write, then the start-up sweep", times,
        f"{len(after)} of {len(left)} temporary files left after the sweep", "nothing: the sweep at start-up "
        "removes a temporary file whose writer is dead (once a minute old; any once an hour old)")


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
        long_integers(n(40))
        wrong_key_without_check(n(12))
        sealed_record_flips(n(100))
        malformed_requests(n(30), server)
        links_in_home(n(12), server)
        journal_mark_damage(n(100))
        search_without_index(n(10))
        temp_files_after_kills(n(100))
        # The surfaces: coder-mode writes, the gateway's webhook and logs, the web view.
        faults_surfaces.approval_race(n(300), row)
        faults_surfaces.webhook_hostile(n(300), row, server)
        faults_surfaces.web_search_queries(n(500), row)
        faults_surfaces.log_growth(n(36_000), row, server)  # past the cap four times over: the oldest copy goes


if __name__ == "__main__":
    main()
