"""Retention and /storage on real files (SPEC §10): the start-up sweep in a real REPL, and
`chatcli storage prune` through the real executable."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import CHATCLI, run_chatcli
from repl_driver import Repl, plain

from chatcli.config.settings import Settings
from chatcli.store.home import Home
from chatcli.store.sessions import SessionStore
from chatcli.store.storage import Storage

DAY = 86_400


@pytest.fixture
def chatcli_home(env) -> Path:
    return Path(env["CHATCLI_HOME"])


@pytest.fixture
def sessions(chatcli_home) -> Path:
    path = chatcli_home / "sessions"
    path.mkdir(parents=True)
    return path


def put(directory: Path, name: str, *, age_days: float = 0, messages: int = 4, transcript: str = "",
        suffix: str = ".json") -> Path:
    """A session file (or any file, with `suffix`) last modified `age_days` ago."""
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"} for i in range(messages)]
    path = directory / f"{name}{suffix}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": 2, "chat_history": history, "transcript_id": transcript}))
    when = time.time() - age_days * DAY
    os.utime(path, (when, when))
    return path


def tree(root: Path) -> dict[str, tuple]:
    """Every file and directory under `root` with its content hash, mode and mtime."""
    out = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
        out[str(path.relative_to(root))] = (digest, st.st_mode, st.st_mtime_ns)
    return out


def wait_for(condition, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def names(directory: Path) -> set[str]:
    return {path.stem for path in directory.glob("*.json")}


# -- the start-up sweep, in the real REPL ---------------------------------------------------
def test_the_start_up_sweep_removes_expired_machine_sessions_and_nothing_else(openai_env, env, workdir, sessions):
    put(sessions, "autosave-20260801-101010", age_days=100)
    put(sessions, "mcp-0123abcd", age_days=100)
    put(sessions, "project", age_days=100)  # named by the user: never removed automatically
    put(sessions, "autosave-20261201-090000", age_days=1)
    repl = Repl(openai_env, "m", cwd=workdir)
    try:
        assert wait_for(lambda: names(sessions) == {"project", "autosave-20261201-090000"}), names(sessions)
    finally:
        repl.close()


def test_a_ttl_of_zero_keeps_everything_while_the_backstop_still_counts(openai_env, env, workdir, sessions):
    env.update(CHATCLI_SESSION_TTL="0", CHATCLI_SESSION_AUTOSAVE_KEEP="1")
    put(sessions, "autosave-20200101-000000", age_days=2000)
    put(sessions, "mcp-new", age_days=1)
    put(sessions, "mcp-older", age_days=2)  # beyond the newest 1 of its prefix
    repl = Repl(openai_env, "m", cwd=workdir)
    try:
        # The backstop's removal shows the sweep has run; the ancient autosave is still there.
        assert wait_for(lambda: not (sessions / "mcp-older.json").exists())
        assert names(sessions) == {"autosave-20200101-000000", "mcp-new"}
    finally:
        repl.close()


def exited_pid() -> int:
    """The pid of a process that has run and been reaped: no live process has it (for now)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def planted(path: Path, age: float = 120) -> Path:
    """A file last modified `age` seconds ago: past the minute a writer is given to settle."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{")
    os.utime(path, (time.time() - age, time.time() - age))
    return path


def test_the_start_up_sweep_removes_temporary_files_whose_writer_is_dead(openai_env, env, workdir, chatcli_home,
                                                                          sessions):
    dead = exited_pid()
    transcripts = chatcli_home / "transcripts"
    lost = [planted(sessions / f".autosave-20261201-090000.json.{dead}.0123456789ab.tmp"),
            planted(transcripts / f".t-killed.jsonl.{dead}.abcdef012345.tmp")]
    in_flight = planted(sessions / f".project.json.{os.getpid()}.fedcba987654.tmp")  # its writer is alive
    not_ours = [planted(sessions / f".project.json.{dead}.tmp"),  # not chatcli's temporary name
                planted(transcripts / f"notes.{dead}.0123456789ab.tmp")]
    repl = Repl(openai_env, "m", cwd=workdir)
    try:
        assert wait_for(lambda: not any(path.exists() for path in lost)), [p.name for p in lost if p.exists()]
        assert in_flight.exists()
        assert all(path.exists() for path in not_ours)
    finally:
        repl.close()


def test_the_backstop_keeps_the_newest_n(env, sessions):
    env["CHATCLI_SESSION_AUTOSAVE_KEEP"] = "3"
    for i in range(6):
        put(sessions, f"autosave-2026110{i}-000000", age_days=10 - i)
    Storage(Settings.load(env)).sweep()
    assert names(sessions) == {f"autosave-2026110{i}-000000" for i in (3, 4, 5)}


def test_invalid_retention_values_are_reported_once_and_the_defaults_used(env, workdir, sessions):
    env.update(CHATCLI_SESSION_TTL="ninety", CHATCLI_SESSION_AUTOSAVE_KEEP="-4")
    put(sessions, "autosave-20260801-101010", age_days=100)
    result = run_chatcli("storage", "prune", env=env, cwd=workdir)
    assert result.returncode == 0
    warnings = result.stderr.splitlines()
    assert len(warnings) == 2
    assert "CHATCLI_SESSION_TTL='ninety' is not a number of days" in warnings[0] and "90 days" in warnings[0]
    assert "CHATCLI_SESSION_AUTOSAVE_KEEP='-4'" in warnings[1] and "using 600" in warnings[1]
    assert "sessions/autosave-20260801-101010.json" in result.stdout


# -- chatcli storage prune ------------------------------------------------------------------
def populate(chatcli_home: Path, sessions: Path) -> None:
    put(sessions, "autosave-20260801-101010", age_days=100, transcript="t-expired")
    put(sessions, "mcp-feedface", age_days=120)
    put(sessions, "project", age_days=400, transcript="t-project")
    put(sessions, "autosave-20261201-090000", age_days=1)
    for i in range(5):  # a scripted run: five two-message sessions within a few seconds
        put(sessions, f"mcp-burst{i}", age_days=2 + i / DAY, messages=2)
    transcripts = chatcli_home / "transcripts"
    put(transcripts, "t-expired", age_days=100, suffix=".jsonl")  # goes with its session
    put(transcripts, "t-project", age_days=400, suffix=".jsonl")  # kept: a session refers to it
    put(transcripts, "t-nobody", age_days=3, suffix=".jsonl")  # orphan, on demand
    put(transcripts, "t-live", age_days=0, suffix=".jsonl")  # unreferenced but being written
    put(chatcli_home / "ccr", "0123456789abcdef", age_days=8, suffix="")
    put(chatcli_home / "ccr", "fedcba9876543210", age_days=1, suffix="")
    (sessions / ".gone.lock").touch()
    os.utime(sessions / ".gone.lock", (time.time() - 3600, time.time() - 3600))
    (sessions / ".project.lock").touch()  # its session exists: not an orphan
    lost = sessions / ".project.json.999999999.0123456789ab.tmp"  # its writer is long gone
    lost.write_text("{")
    os.utime(lost, (time.time() - 7200, time.time() - 7200))
    (sessions / f".project.json.{os.getpid()}.abcdefabcdef.tmp").write_text("{")  # in flight


def listed(stdout: str) -> set[str]:
    return set(re.findall(r"^    (\S+)  \(", stdout, re.M))


EXPECTED = {
    "sessions/autosave-20260801-101010.json", "sessions/mcp-feedface.json", "transcripts/t-expired.jsonl",
    "ccr/0123456789abcdef", "sessions/.gone.lock", "transcripts/t-nobody.jsonl",
    "sessions/.project.json.999999999.0123456789ab.tmp", *(f"sessions/mcp-burst{i}.json" for i in range(5)),
}


def test_prune_without_apply_changes_nothing_and_with_apply_removes_exactly_the_list(env, workdir,
                                                                                   chatcli_home, sessions):
    populate(chatcli_home, sessions)
    before = tree(chatcli_home)
    dry = run_chatcli("storage", "prune", env=env, cwd=workdir)
    assert dry.returncode == 0, dry.stderr
    assert tree(chatcli_home) == before  # not a byte, not a mode, not a time changed
    assert listed(dry.stdout) == EXPECTED
    for heading in ("TTL", "orphan", "test burst", "lost temporary file"):
        assert re.search(rf"^  {heading} — .*: \d+ files?, ", dry.stdout, re.M), heading
    assert "Nothing was removed" in dry.stdout

    applied = run_chatcli("storage", "prune", "--apply", env=env, cwd=workdir)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert listed(applied.stdout) == EXPECTED
    assert f"Removed {len(EXPECTED)} files" in applied.stdout
    gone = set(before) - set(tree(chatcli_home))
    assert gone == EXPECTED


def test_prune_of_one_store_touches_no_other(env, workdir, chatcli_home, sessions):
    populate(chatcli_home, sessions)
    result = run_chatcli("storage", "prune", "--apply", "ccr", env=env, cwd=workdir)
    assert result.returncode == 0
    assert listed(result.stdout) == {"ccr/0123456789abcdef"}
    assert not (chatcli_home / "ccr" / "0123456789abcdef").exists()
    assert (sessions / "mcp-feedface.json").exists()


def test_an_unknown_store_is_a_one_line_usage_error(env, workdir):
    result = run_chatcli("storage", "prune", "everything", env=env, cwd=workdir)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "chatcli: error: unknown store 'everything' (choose from: sessions, transcripts, recall, hub, costs, "
        "memory, contexts, schedule, history, index, logs, temp)"]


# -- the Conversation Hub (hub.db) ---------------------------------------------------------------
def hub_rows(chatcli_home: Path) -> tuple[list[str], int]:
    """The principals ("channel:sender") and the number of delivery records in hub.db."""
    hub = Home(chatcli_home).hub()
    try:
        return sorted(f"{p.channel}:{p.sender}" for p in hub.principals()), hub.deliveries()
    finally:
        hub.close()


def populate_hub(chatcli_home: Path, sessions: Path) -> dict[str, str]:
    """Five senders seen by the gateway, and four delivery records, three of them old:
    - telegram:1 (Ann), unbound, last seen 100 days ago, no mirror: stale;
    - telegram:2, unbound, last seen 100 days ago, but its mirror was written today: kept;
    - telegram:3, unbound, last seen 100 days ago, its mirror as old: goes with its mirror;
    - telegram:4, bound to projeto-x, last seen 100 days ago: a binding is never swept;
    - telegram:5, unbound, seen today."""
    hub = Home(chatcli_home).hub()
    for sender in "12345":
        hub.principal("telegram", sender, "Ann" if sender == "1" else "")
    hub.bind("telegram", "4", "projeto-x")
    for n in range(4):
        hub.claim("telegram", f"42/{n}", f"{os.getpid()}:t")
        hub.answered("telegram", f"42/{n}")
    old = time.time() - 100 * DAY
    hub.db.execute("UPDATE principals SET last_seen = ? WHERE sender != '5'", (old,))
    hub.db.execute("UPDATE delivered SET at = ? WHERE message != '42/3'", (time.time() - 8 * DAY,))
    mirrors = {p.sender: p.mirror for p in hub.principals()}
    hub.close()
    put(sessions, mirrors["2"])
    put(sessions, mirrors["3"], age_days=100)
    return mirrors


def test_the_hub_is_swept_on_demand_only_and_never_drops_a_binding(env, workdir, chatcli_home, sessions):
    mirrors = populate_hub(chatcli_home, sessions)
    everyone = [f"telegram:{n}" for n in "12345"]
    Storage(Settings.load(env)).sweep()  # what every start runs: expired mirrors go, the hub is not its business
    assert hub_rows(chatcli_home) == (everyone, 4)
    assert not (sessions / f"{mirrors['3']}.json").exists()
    put(sessions, mirrors["3"], age_days=100)  # as if the sweep had not run yet

    report = run_chatcli("storage", env=env, cwd=workdir)
    assert re.search(r"^  conversation hub +[1-3] +\S+ \S+ +2 gateway senders, 3 delivery records +the gateway's",
                     report.stdout, re.M), report.stdout

    dry = run_chatcli("storage", "prune", "hub", env=env, cwd=workdir)
    assert dry.returncode == 0, dry.stderr
    # Alone, the hub keeps telegram:3: its mirror is not part of this plan.
    assert "Would remove 1 gateway sender and 3 delivery records from conversation hub:" in dry.stdout
    assert re.search(r"^    telegram:1 \(Ann\)  \(last seen 100 days ago\)$", dry.stdout, re.M), dry.stdout
    assert "telegram:3" not in dry.stdout
    assert hub_rows(chatcli_home) == (everyone, 4)  # a dry run changes nothing

    applied = run_chatcli("storage", "prune", "--apply", env=env, cwd=workdir)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "Forgot 2 gateway senders and 3 delivery records in hub.db." in applied.stdout
    assert hub_rows(chatcli_home) == (["telegram:2", "telegram:4", "telegram:5"], 1)
    hub = Home(chatcli_home).hub()
    assert hub.get("telegram", "4").session == "projeto-x"
    hub.close()


def test_a_hub_chatcli_cannot_read_is_a_note_and_left_alone(env, workdir, chatcli_home):
    chatcli_home.mkdir(parents=True, exist_ok=True)
    (chatcli_home / "hub.db").write_bytes(b"not sqlite" * 100)
    result = run_chatcli("storage", "prune", "--apply", "hub", env=env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert "Note: the conversation hub was not examined:" in result.stdout
    assert (chatcli_home / "hub.db").read_bytes() == b"not sqlite" * 100


def test_a_session_written_after_the_plan_is_kept(env, sessions):
    put(sessions, "mcp-live", age_days=100)
    storage = Storage(Settings.load(env))
    plan = storage.plan()
    assert [removal.session for removal in plan.removals] == ["mcp-live"]
    put(sessions, "mcp-live", age_days=0, messages=6)  # the MCP server mirrored a new turn meanwhile
    applied = storage.apply(plan)
    assert applied.removed == [] and len(applied.kept) == 1
    assert (sessions / "mcp-live.json").exists()


def test_a_same_size_rewrite_in_the_same_tick_is_still_seen(env, sessions):
    path = put(sessions, "mcp-tick", age_days=100)
    storage = Storage(Settings.load(env))
    plan = storage.plan()
    st = path.stat()
    replacement = sessions / ".mcp-tick.new"  # what every chatcli write is: a rename over the file
    replacement.write_bytes(path.read_bytes())
    os.utime(replacement, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(replacement, path)
    assert storage.apply(plan).removed == []
    assert path.exists()


def test_a_journal_stays_when_its_session_was_kept_at_apply_time(env, chatcli_home, sessions):
    put(sessions, "autosave-20260801-101010", age_days=100, transcript="t-x")
    journal = put(chatcli_home / "transcripts", "t-x", age_days=100, suffix=".jsonl")
    storage = Storage(Settings.load(env))
    plan = storage.plan()
    assert {r.store for r in plan.removals} == {"sessions", "transcripts"}
    put(sessions, "autosave-20260801-101010", age_days=0, transcript="t-x")  # written again meanwhile
    applied = storage.apply(plan)
    assert applied.removed == [] and journal.exists()
    assert {why for _, why in applied.kept} == {"changed or in use since the plan", "its session was kept"}


def test_pruning_only_transcripts_keeps_the_journals_sessions_still_refer_to(env, workdir, chatcli_home,
                                                                            sessions):
    put(sessions, "autosave-20260801-101010", age_days=100, transcript="t-kept")
    put(chatcli_home / "transcripts", "t-kept", age_days=100, suffix=".jsonl")
    put(chatcli_home / "transcripts", "t-none", age_days=100, suffix=".jsonl")
    result = run_chatcli("storage", "prune", "--apply", "transcripts", env=env, cwd=workdir)
    assert listed(result.stdout) == {"transcripts/t-none.jsonl"}
    assert (chatcli_home / "transcripts" / "t-kept.jsonl").exists()
    assert (sessions / "autosave-20260801-101010.json").exists()


def test_a_session_file_with_a_name_to_fix_keeps_its_journal_and_is_named(env, chatcli_home, sessions):
    put(sessions, "My Notes", transcript="t-mine")  # listed as "rename the file to use it"
    put(chatcli_home / "transcripts", "t-mine", age_days=200, suffix=".jsonl")
    plan = Storage(Settings.load(env)).plan()
    assert [r for r in plan.removals if r.store == "transcripts"] == []
    assert any("names chatcli cannot use" in note and "My Notes.json" in note for note in plan.notes)


# Session files in Go ChatCLI's sessions directory whose names chatcli refuses (Go's rules differ).
LONG_NAME = "go-" + "n" * 197


def misnamed_and_expired(chatcli_home: Path, sessions: Path) -> None:
    put(sessions, "release..notes", age_days=200, transcript="t-release")
    put(sessions, LONG_NAME, age_days=200, transcript="t-long")
    put(sessions, "autosave-20250101-000000", age_days=200, transcript="t-auto")  # expired machine session
    put(sessions, "project", age_days=200, transcript="t-project")
    transcripts = chatcli_home / "transcripts"
    for journal in ("t-release", "t-long", "t-auto", "t-project", "t-expired-orphan"):
        put(transcripts, journal, age_days=200, suffix=".jsonl")
    put(transcripts, "t-orphan", age_days=3, suffix=".jsonl")


MISNAMED_PLAN = {"sessions/autosave-20250101-000000.json", "transcripts/t-auto.jsonl",
                 "transcripts/t-expired-orphan.jsonl", "transcripts/t-orphan.jsonl"}
MISNAMED_KEPT = {"sessions/release..notes.json", f"sessions/{LONG_NAME}.json", "transcripts/t-release.jsonl",
                 "transcripts/t-long.jsonl", "sessions/project.json", "transcripts/t-project.jsonl"}


def test_session_files_with_names_chatcli_refuses_never_stop_the_prune(env, workdir, chatcli_home, sessions):
    misnamed_and_expired(chatcli_home, sessions)
    before = tree(chatcli_home)
    report = run_chatcli("storage", env=env, cwd=workdir)
    assert report.returncode == 0, report.stderr
    assert re.search(r"^  transcripts +6 .* 3 files, ", report.stdout, re.M), report.stdout
    assert re.search(r"^  sessions +4 ", report.stdout, re.M), report.stdout  # they are counted
    dry = run_chatcli("storage", "prune", env=env, cwd=workdir)
    assert dry.returncode == 0, dry.stderr
    assert tree(chatcli_home) == before
    assert listed(dry.stdout) == MISNAMED_PLAN
    assert "transcripts were not pruned" not in dry.stdout
    note = next(line for line in dry.stdout.splitlines() if "names chatcli cannot use" in line)
    assert "release..notes.json" in note and "never" in note

    applied = run_chatcli("storage", "prune", "--apply", env=env, cwd=workdir)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert listed(applied.stdout) == MISNAMED_PLAN
    assert set(before) - set(tree(chatcli_home)) == MISNAMED_PLAN
    assert MISNAMED_KEPT <= set(tree(chatcli_home))


def test_the_start_up_sweep_prunes_journals_beside_session_files_chatcli_cannot_name(openai_env, workdir,
                                                                                     chatcli_home, sessions):
    misnamed_and_expired(chatcli_home, sessions)
    repl = Repl(openai_env, "m", cwd=workdir)
    try:
        # The sweep's rules (TTL, backstop): the expired session and the unreferenced expired journal.
        journal = chatcli_home / "transcripts" / "t-expired-orphan.jsonl"
        assert wait_for(lambda: not journal.exists())
        assert not (sessions / "autosave-20250101-000000.json").exists()
    finally:
        repl.close()
    assert MISNAMED_KEPT <= set(tree(chatcli_home))
    assert (chatcli_home / "transcripts" / "t-orphan.jsonl").exists()  # orphans wait for a prune


def test_a_journal_a_file_chatcli_cannot_name_refers_to_by_apply_time_is_kept(env, chatcli_home, sessions):
    journal = put(chatcli_home / "transcripts", "t-late", age_days=200, suffix=".jsonl")
    storage = Storage(Settings.load(env))
    plan = storage.plan()
    assert [r.path for r in plan.removals] == [journal]
    put(sessions, "release..notes", transcript="t-late")  # Go saved a session on it meanwhile
    applied = storage.apply(plan)
    assert journal.exists()
    assert [(r.path, why) for r, why in applied.kept] == [(journal, "a session refers to it now")]


@pytest.mark.parametrize("unreadable", ["broken.json", "release..notes.json"])  # a name chatcli refuses, too
def test_journals_are_not_pruned_while_a_session_cannot_be_read(env, chatcli_home, sessions, unreadable):
    (sessions / unreadable).write_text("{ not json")
    put(chatcli_home / "transcripts", "t-whose", age_days=200, suffix=".jsonl")
    plan = Storage(Settings.load(env)).plan()
    assert not [r for r in plan.removals if r.store == "transcripts"]
    assert any("cannot be read" in note for note in plan.notes)
    assert (sessions / unreadable).exists()


def test_a_keep_of_zero_turns_the_backstop_off(env, sessions):
    env["CHATCLI_SESSION_AUTOSAVE_KEEP"] = "0"
    for i in range(3):
        put(sessions, f"autosave-2026110{i}-000000", age_days=i)
    Storage(Settings.load(env)).sweep()
    assert len(names(sessions)) == 3


def test_a_sessions_path_that_cannot_be_listed_is_a_note_not_a_crash(env, workdir, chatcli_home):
    chatcli_home.mkdir()
    (chatcli_home / "sessions").write_text("not a directory")
    for args in (("storage",), ("storage", "prune", "--apply")):
        result = run_chatcli(*args, env=env, cwd=workdir)
        assert result.returncode == 0, result.stderr
        assert "sessions were not examined: cannot list" in result.stdout
        assert "Traceback" not in result.stderr + result.stdout


def test_fifos_directories_and_symlinks_in_sessions_never_hang_and_are_never_removed(env, workdir, sessions,
                                                                                   tmp_path):
    os.mkfifo(sessions / "autosave-20250101-000000.json")
    os.mkfifo(sessions / "fifo.json")
    (sessions / "autosave-20250101-000001.json").mkdir()
    (tmp_path / "elsewhere.json").write_text("{}")
    (sessions / "mcp-link.json").symlink_to(tmp_path / "elsewhere.json")
    old = time.time() - 200 * DAY
    for name in ("autosave-20250101-000000.json", "fifo.json", "autosave-20250101-000001.json", "mcp-link.json"):
        os.utime(sessions / name, (old, old), follow_symlinks=False)
    for args in (("storage",), ("storage", "prune", "--apply"), ("session", "list")):
        result = run_chatcli(*args, env=env, cwd=workdir, timeout=20)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
    assert "not a regular file" in run_chatcli("session", "list", env=env, cwd=workdir).stdout
    assert sorted(os.listdir(sessions)) == ["autosave-20250101-000000.json", "autosave-20250101-000001.json",
                                            "fifo.json", "mcp-link.json"]
    assert (tmp_path / "elsewhere.json").exists()


def test_the_recall_store_is_capped_by_size_and_swept_on_demand_only(env, chatcli_home):
    env["CHATCLI_CCR_MAX_SIZE"] = "250"
    for i in range(4):
        path = put(chatcli_home / "ccr", f"{i:016x}", age_days=4 - i, suffix="")
        path.write_bytes(b"x" * 100)
        os.utime(path, (time.time() - (4 - i) * DAY,) * 2)
    put(chatcli_home / "ccr", "feedfacefeedface", age_days=30, suffix="")  # past CHATCLI_CCR_TTL (7 days)
    every = sorted(p.name for p in (chatcli_home / "ccr").iterdir())
    storage = Storage(Settings.load(env))
    storage.sweep()  # what every start runs: the recall store is not its business
    assert sorted(p.name for p in (chatcli_home / "ccr").iterdir()) == every
    storage.apply(storage.plan())
    assert sorted(p.name for p in (chatcli_home / "ccr").iterdir()) == [f"{2:016x}", f"{3:016x}"]


def test_go_chatclis_ccr_entries_are_counted_and_never_pruned(env, workdir, chatcli_home):
    env["CHATCLI_CCR_MAX_SIZE"] = "150"
    ccr = chatcli_home / "ccr"
    go_old = put(ccr, "0123456789abcdef", age_days=30, suffix=".ccr")  # past CHATCLI_CCR_TTL
    go_big = put(ccr, "fedcba9876543210", age_days=1, suffix=".ccr")
    go_big.write_bytes(b"x" * 400)  # alone beyond the cap
    os.utime(go_big, (time.time() - DAY,) * 2)
    mine = put(ccr, "00000000000000aa", age_days=30, suffix=".json")
    report = run_chatcli("storage", env=env, cwd=workdir)
    assert re.search(r"^  recall store +3 .* 1 file, .*Go ChatCLI's \.ccr entries \(2, .*never pruned", report.stdout,
                     re.M), report.stdout
    applied = run_chatcli("storage", "prune", "--apply", env=env, cwd=workdir)
    assert listed(applied.stdout) == {"ccr/00000000000000aa.json"}
    assert go_old.exists() and go_big.exists() and not mine.exists()


# -- /storage in the REPL ---------------------------------------------------------------------
def test_storage_shows_one_line_per_store_and_prune_needs_apply(openai_env, env, workdir, chatcli_home, sessions):
    populate(chatcli_home, sessions)
    env["CHATCLI_SESSION_TTL"] = "0"  # the start-up sweep must leave the expired files for this test
    repl = Repl(openai_env, "m", cwd=workdir)
    try:
        report = plain(repl.send("/storage"))
        for label in ("sessions", "transcripts", "recall store", "conversation hub", "prompt history",
                      "search index", "temporary files"):
            assert re.search(rf"^  {label} +\d+ +[\d.]+ [KMG]?B +", report, re.M), label
        assert re.search(r"^  prompt history .*never pruned", report, re.M)
        assert re.search(r"^  sessions +\d+ .* 6 files, ", report, re.M)  # the burst and the orphan lock
    finally:
        repl.close()


def test_storage_prune_in_the_repl_lists_then_applies_to_one_store(openai_env, env, workdir, chatcli_home, sessions):
    populate(chatcli_home, sessions)
    repl = Repl(openai_env, "m", cwd=workdir)
    try:
        shown = plain(repl.send("/storage prune sessions"))
        assert "Nothing was removed" in shown and (sessions / "mcp-burst0.json").exists()
        done = plain(repl.send("/storage prune sessions --apply"))
        assert "Removed" in done
        assert not (sessions / "mcp-burst0.json").exists()
        assert (chatcli_home / "transcripts" / "t-nobody.jsonl").exists()  # another store: untouched
    finally:
        repl.close()


# -- locks that disappear with their session --------------------------------------------------
_LOCKER = """
import sys
from pathlib import Path
from chatcli.store.sessions import SessionStore
store = SessionStore(Path(sys.argv[1]))
counter = Path(sys.argv[1]) / "counter"
for _ in range(int(sys.argv[2])):
    with store.lock("shared"):
        value = int(counter.read_text())
        counter.write_text(str(value + 1))
"""
_DROPPER = """
import sys, time
from pathlib import Path
from chatcli.store.sessions import SessionStore
store = SessionStore(Path(sys.argv[1]))
deadline = time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    with store.lock("shared", drop=True):  # what delete does: the lock file goes with the session
        pass
"""


def test_a_lock_file_unlinked_by_a_deleter_never_lets_two_holders_in(tmp_path):
    root = tmp_path / "sessions"
    root.mkdir()
    (root / "counter").write_text("0")
    lockers = [subprocess.Popen([sys.executable, "-c", _LOCKER, str(root), "150"]) for _ in range(4)]
    dropper = subprocess.Popen([sys.executable, "-c", _DROPPER, str(root), "3"])
    assert all(proc.wait(timeout=120) == 0 for proc in lockers)
    assert dropper.wait(timeout=120) == 0
    assert (root / "counter").read_text() == str(4 * 150)


def test_deleting_a_session_leaves_no_lock_file(tmp_path):
    store = SessionStore(tmp_path / "sessions")
    from chatcli.core.session import SessionData

    store.create("gone", SessionData())
    store.delete("gone")
    assert sorted(os.listdir(tmp_path / "sessions")) == []


def test_chatcli_storage_is_on_the_command_line(env, workdir):
    result = subprocess.run([CHATCLI, "storage", "--help"], env=env, capture_output=True, text=True)
    assert result.returncode == 0 and "prune" in result.stdout


def test_debug_is_taken_before_a_subcommand_and_among_its_words(env, workdir):
    for argv in (("--debug", "storage"), ("storage", "prune", "--debug"), ("--debug", "session", "list"),
                 ("session", "list", "--debug")):
        result = run_chatcli(*argv, env=env, cwd=workdir)
        assert result.returncode == 0 and "unrecognized arguments" not in result.stderr, (argv, result.stderr)
