"""Encryption at rest (SPEC §9) through the real command and REPL, on real files."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import CHATCLI, exported_contents, run_chatcli
from repl_driver import Repl, plain

SECRET = "zanzibar-periwinkle"  # a word that must never reach the disk in the clear


def new_key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def tree(home: Path) -> dict[str, str]:
    """Every file under CHATCLI_HOME and a digest of its bytes."""
    return {str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(home.rglob("*")) if p.is_file()}


def plaintext_hits(home: Path, word: str) -> list[str]:
    needles = [word.encode(), word.encode("utf-16-le"), base64.b64encode(word.encode())[:12]]
    return [str(p) for p in home.rglob("*") if p.is_file() and any(n in p.read_bytes() for n in needles)]


@pytest.fixture
def sealed_env(openai_env):
    openai_env["CHATCLI_ENCRYPTION_KEY"] = new_key()
    return openai_env


def chat(env, session: str, text: str) -> subprocess.CompletedProcess:
    result = run_chatcli("--session", session, "-p", text, env=env)
    assert result.returncode == 0, result.stderr
    return result


def test_with_a_key_no_message_text_reaches_the_disk_and_everything_still_works(sealed_env, openai_server, workdir):
    home = Path(sealed_env["CHATCLI_HOME"])
    sealed_env["NO_COLOR"] = "1"
    repl = Repl(sealed_env, "m", cwd=workdir, args=("--session", "vault"))
    try:
        for i in range(1, 6):
            repl.send(f"question {i} about the {SECRET}")
        openai_server.reply(f"Briefing on the {SECRET}.")
        assert "Compacted" in plain(repl.send("/compact"))
        assert f"#1 user …question 1 about the {SECRET}" in plain(repl.send(f"/session transcript search {SECRET}"))
        assert "vault" in plain(repl.send(f"/session search {SECRET}"))
        repl.send("/storage")
    finally:
        repl.close()
    assert plaintext_hits(home, SECRET) == []
    assert plaintext_hits(home, "question 3") == []
    assert (home / "sessions" / "vault.json").read_bytes().startswith(b"chatcli-sealed\n")
    listing = run_chatcli("session", "list", env=sealed_env)
    assert "vault" in listing.stdout and "Encryption is on" in listing.stdout and SECRET not in listing.stdout
    shown = run_chatcli("session", "show", "vault", env=sealed_env)
    assert shown.returncode == 0 and f"question 5 about the {SECRET}" in shown.stdout
    again = run_chatcli("-c", "-p", "and then?", env=sealed_env)
    assert again.returncode == 0, again.stderr
    assert f"question 5 about the {SECRET}" in json.dumps(openai_server.requests[-1].body)
    assert plaintext_hits(home, SECRET) == []


def test_a_wrong_or_missing_key_is_a_clear_error_and_changes_no_file(sealed_env, openai_server):
    home = Path(sealed_env["CHATCLI_HOME"])
    chat(sealed_env, "vault", f"the {SECRET}")
    run_chatcli("session", "list", env=sealed_env)
    before = tree(home)
    wrong = dict(sealed_env, CHATCLI_ENCRYPTION_KEY=new_key())
    missing = {k: v for k, v in sealed_env.items() if k != "CHATCLI_ENCRYPTION_KEY"}
    not_this_key = "CHATCLI_ENCRYPTION_KEY is not the key this store"
    for env, opening, starting in (
            (wrong, not_this_key, not_this_key),
            (missing, "is encrypted: set CHATCLI_ENCRYPTION_KEY", "is encrypted: set CHATCLI_ENCRYPTION_KEY")):
        shown = run_chatcli("session", "show", "vault", env=env)
        assert shown.returncode == 1 and opening in shown.stderr and "Traceback" not in shown.stderr
        bound = run_chatcli("--session", "vault", "-p", "more", env=env)
        assert bound.returncode != 0 and starting in bound.stderr and "Traceback" not in bound.stderr
        resumed = run_chatcli("-c", "-p", "more", env=env)
        assert starting in resumed.stderr
        listed = run_chatcli("session", "list", env=env)
        assert listed.returncode == 1 and starting in listed.stderr  # every command stops
        assert tree(home) == before
    repl = subprocess.run([CHATCLI], env=wrong, capture_output=True, text=True, input="")
    assert repl.returncode == 1 and not_this_key in repl.stderr  # nothing starts under a wrong key
    assert tree(home) == before
    for bad in ("short", base64.b64encode(os.urandom(16)).decode(), "not base64 at all!"):
        refused = run_chatcli("session", "list", env=dict(sealed_env, CHATCLI_ENCRYPTION_KEY=bad))
        assert refused.returncode == 2 and "CHATCLI_ENCRYPTION_KEY" in refused.stderr
        assert "openssl rand -base64 32" in refused.stderr
    assert tree(home) == before


def test_a_flipped_byte_and_a_file_copied_over_another_session_are_detected(sealed_env, openai_server, workdir):
    home = Path(sealed_env["CHATCLI_HOME"])
    chat(sealed_env, "alpha", "alpha's secret")
    chat(sealed_env, "beta", "beta's secret")
    sessions = home / "sessions"
    (sessions / "beta.json").write_bytes((sessions / "alpha.json").read_bytes())  # swapped in
    swapped = run_chatcli("session", "show", "beta", env=sealed_env)
    assert swapped.returncode == 1 and "altered or copied from elsewhere" in swapped.stderr
    data = bytearray((sessions / "alpha.json").read_bytes())
    data[len(data) // 2] ^= 0x01
    (sessions / "alpha.json").write_bytes(bytes(data))
    flipped = run_chatcli("session", "show", "alpha", env=sealed_env)
    assert flipped.returncode == 1 and "altered" in flipped.stderr
    assert (sessions / "alpha.json").read_bytes() == bytes(data)  # left as it was

    chat(sealed_env, "gamma", "gamma's secret")
    journal = next(p for p in (home / "transcripts").glob("*.jsonl")
                   if p.stem == json.loads(run_chatcli("session", "show", "gamma", "--json", env=sealed_env)
                                           .stdout)["transcript_id"])
    lines = journal.read_bytes().split(b"\n")
    # Two sealed lines swapped: the turn's question and its answer (a checkpoint, a `synced` line,
    # the question and the `synced` line journaling it as it was asked, then the answer).
    lines[2], lines[4] = lines[4], lines[2]
    journal.write_bytes(b"\n".join(lines))
    export = run_chatcli("session", "export", "gamma", "jsonl", str(workdir / "gamma.jsonl"), env=sealed_env)
    # The two, and the `synced` line between them, which the swap moved off the offset it was sealed for.
    assert export.returncode == 0 and "Skipped 3 damaged line(s)" in export.stdout, export
    assert "gamma's secret" not in (workdir / "gamma.jsonl").read_text()  # neither is read out of place


def test_a_plaintext_store_migrates_on_the_next_write(openai_env, openai_server, workdir):
    home = Path(openai_env["CHATCLI_HOME"])
    chat(openai_env, "old", f"written before the key: {SECRET}")
    assert SECRET.encode() in (home / "sessions" / "old.json").read_bytes()
    sealed = dict(openai_env, CHATCLI_ENCRYPTION_KEY=new_key())
    chat(sealed, "old", "written with the key")
    assert (home / "sessions" / "old.json").read_bytes().startswith(b"chatcli-sealed\n")
    [journal] = (home / "transcripts").glob("*.jsonl")
    kinds = [line.startswith(b"chatcli-sealed:") for line in journal.read_bytes().splitlines()]
    assert kinds[0] is False and kinds[-1] is True  # plaintext lines first, then sealed ones
    out = Path(workdir) / "all.jsonl"
    exported = run_chatcli("session", "export", "old", "jsonl", str(out), env=sealed)
    assert exported.returncode == 0, exported.stderr
    contents = exported_contents(out)
    assert f"written before the key: {SECRET}" in contents and "written with the key" in contents
    shown = run_chatcli("session", "show", "old", env=sealed)
    assert shown.returncode == 0 and "written with the key" in shown.stdout


def test_rekey_reseals_everything_and_finishes_after_an_interruption(sealed_env, openai_server):
    home = Path(sealed_env["CHATCLI_HOME"])
    for i in range(3):  # with journals
        chat(sealed_env, f"s{i:03d}", f"session {i}: {SECRET}")
    # Many more sessions, sealed in-process (quicker than 120 runs), so that a kill lands mid-way.
    from chatcli.config.settings import Settings
    from chatcli.core.messages import Message
    from chatcli.core.session import SessionData
    from chatcli.store.home import Home

    settings = Settings.load(sealed_env)
    store = Home.of(settings).sessions()
    Home.of(settings).memory().save(f"remember {SECRET}")  # a memory note and a context: sealed too
    (home.parent / "notes.txt").write_text(f"the context says {SECRET}\n")
    Home.of(settings).contexts().save("notes", ["notes.txt"], home.parent)
    for i in range(3, 400):
        with store.lock(f"s{i:03d}"):
            store.write(f"s{i:03d}", SessionData(history=[Message("user", f"{SECRET} {i}" + " padding" * 200)]))
    old_key, new = sealed_env["CHATCLI_ENCRYPTION_KEY"], new_key()
    rekey_env = dict(sealed_env, CHATCLI_NEW_ENCRYPTION_KEY=new)
    before = {p.name: p.stat().st_mtime_ns for p in (home / "sessions").glob("*.json")}

    child = subprocess.Popen([CHATCLI, "storage", "rekey"], env=rekey_env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    opened = Home(settings.home, base64.b64decode(new)).sessions()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and child.poll() is None:
        try:
            opened.load("s000")
            break  # the first file is done: the rest is in progress
        except Exception:  # noqa: BLE001 - not re-sealed yet
            time.sleep(0.005)
    child.send_signal(signal.SIGKILL)
    child.wait()
    finished = subprocess.run([CHATCLI, "storage", "rekey"], env=rekey_env, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stderr
    resealed, already = map(int, re.search(r"new key: (\d+) sessions.*; (\d+) file", finished.stdout).groups())
    assert resealed > 0 and already > 0, finished.stdout  # the kill did land in the middle
    again = subprocess.run([CHATCLI, "storage", "rekey"], env=rekey_env, capture_output=True, text=True)
    assert again.returncode == 0 and "Re-sealed under the new key: 0 sessions, 0 transcripts, 0 recall, 0 memory, " \
        "0 contexts" in again.stdout

    with_new = dict(sealed_env, CHATCLI_ENCRYPTION_KEY=new)
    shown = run_chatcli("session", "show", "s001", env=with_new)
    assert shown.returncode == 0 and f"session 1: {SECRET}" in shown.stdout
    assert run_chatcli("session", "show", "s399", env=with_new).returncode == 0
    stale = run_chatcli("session", "show", "s001", env=dict(sealed_env, CHATCLI_ENCRYPTION_KEY=old_key))
    assert stale.returncode == 1 and "CHATCLI_ENCRYPTION_KEY is not the key this store" in stale.stderr
    exported = run_chatcli("session", "export", "s002", "jsonl", str(home.parent / "s2.jsonl"), env=with_new)
    assert exported.returncode == 0, exported.stderr
    after = {p.name: p.stat().st_mtime_ns for p in (home / "sessions").glob("*.json")}
    assert after == before  # ages kept for the retention rules
    assert plaintext_hits(home, SECRET) == []
    opened = Home(settings.home, base64.b64decode(new))
    assert opened.memory().notes()[0][0].text == f"remember {SECRET}"  # readable with the new key
    assert opened.contexts().load("notes").chunks[0].text == f"the context says {SECRET}"


def test_rekey_leaves_a_session_file_chatcli_cannot_name_as_it_is(sealed_env, openai_server):
    """Go ChatCLI's name rules differ from chatcli's: a plaintext file it wrote under a name chatcli
    refuses is never loaded by chatcli, so sealing it would only make it unreadable to Go."""
    chat(sealed_env, "mine", "hello")
    sessions = Path(sealed_env["CHATCLI_HOME"]) / "sessions"
    go_file = sessions / "release..notes.json"
    go_file.write_text(json.dumps({"version": 2, "chat_history": [{"role": "user", "content": "from Go"}]}))
    before = go_file.read_bytes()
    result = run_chatcli("storage", "rekey", env=dict(sealed_env, CHATCLI_NEW_ENCRYPTION_KEY=new_key()))
    assert result.returncode == 0, result.stderr
    assert go_file.read_bytes() == before
    assert (sessions / "mine.json").read_bytes().startswith(b"chatcli-sealed\n")


def test_rekey_needs_the_new_key(sealed_env):
    result = run_chatcli("storage", "rekey", env=sealed_env)
    assert result.returncode == 2 and "set CHATCLI_NEW_ENCRYPTION_KEY" in result.stderr


def journal_of(env, name: str) -> Path:
    shown = run_chatcli("session", "show", name, "--json", env=env)
    return Path(env["CHATCLI_HOME"]) / "transcripts" / f"{json.loads(shown.stdout)['transcript_id']}.jsonl"


def test_a_sealed_line_torn_by_a_crash_is_cut_and_the_journal_goes_on(sealed_env, openai_server, workdir):
    chat(sealed_env, "torn", "first turn")
    journal = journal_of(sealed_env, "torn")
    data = journal.read_bytes()
    journal.write_bytes(data[:-40])  # the last line's end never reached the disk
    after = chat(sealed_env, "torn", "second turn")
    assert "damaged" not in after.stderr and "cannot be opened" not in after.stderr
    out = workdir / "torn.jsonl"
    exported = run_chatcli("session", "export", "torn", "jsonl", str(out), env=sealed_env)
    assert exported.returncode == 0, exported.stderr
    contents = exported_contents(out)
    assert contents[0] == "first turn" and contents[-2:] == ["second turn", "You said: second turn"]


def test_a_plaintext_line_slipped_into_a_sealed_journal_is_detected_and_skipped(sealed_env, openai_server, workdir):
    chat(sealed_env, "slipped", "a sealed turn")
    journal = journal_of(sealed_env, "slipped")
    forged = {"v": 1, "type": "message", "hash": "f" * 32, "time": "2026-01-01T00:00:00+00:00",
              "message": {"role": "user", "content": "words nobody said"}}
    with journal.open("a") as handle:
        handle.write(json.dumps(forged) + "\n")
    broken = journal.read_bytes().splitlines(keepends=True)
    # A newline put into the middle of a sealed line (the answer: a checkpoint, a `synced` line, the
    # question and the `synced` line of its own sync come before it).
    journal.write_bytes(b"".join(broken[:4]) + broken[4][:30] + b"\n" + broken[4][30:] + b"".join(broken[5:]))
    exported = run_chatcli("session", "export", "slipped", "jsonl", str(workdir / "x.jsonl"), env=sealed_env)
    assert exported.returncode == 0, exported.stderr
    # Detected, counted, not read: the two halves, and the `synced` line after them, which the
    # extra newline moved off the offset it was sealed for.
    assert "Skipped 3 damaged and 1 out-of-place line(s)" in exported.stdout
    assert "words nobody said" not in (workdir / "x.jsonl").read_text()
    assert "a sealed turn" in (workdir / "x.jsonl").read_text()


def test_a_plaintext_search_index_from_before_the_key_is_removed(openai_env, openai_server):
    home = Path(openai_env["CHATCLI_HOME"])
    chat(openai_env, "before", f"indexed in the clear: {SECRET}")
    assert run_chatcli("session", "search", SECRET, env=openai_env).returncode == 0
    assert plaintext_hits(home, SECRET)  # the session, its journal, the index
    sealed = dict(openai_env, CHATCLI_ENCRYPTION_KEY=new_key(), CHATCLI_NEW_ENCRYPTION_KEY=new_key())
    found = run_chatcli("session", "search", SECRET, env=sealed)
    assert found.returncode == 0 and "before" in found.stdout
    assert not (home / "index" / "search.sqlite").exists()
    rekeyed = run_chatcli("storage", "rekey", env=sealed)  # seals the plaintext files too
    assert rekeyed.returncode == 0, rekeyed.stderr
    assert plaintext_hits(home, SECRET) == []


def test_a_refused_compaction_leaves_no_recall_entry(sealed_env, openai_server, workdir):
    sealed_env["NO_COLOR"] = "1"
    repl = Repl(sealed_env, "m", cwd=workdir)
    try:
        for i in range(4):
            repl.send(f"q{i}")
        openai_server.reply("A summary far longer than the two short messages it is meant to replace.")
        assert "nothing was compacted" in plain(repl.send("/compact"))
    finally:
        repl.close()
    assert not list((Path(sealed_env["CHATCLI_HOME"]) / "ccr").glob("*.json"))


NOT_THIS_KEY = "CHATCLI_ENCRYPTION_KEY is not the key this store"


@pytest.mark.parametrize("left", ["sessions", "journals"])
def test_without_its_key_check_a_store_refuses_a_key_its_sealed_files_do_not_open(sealed_env, openai_server, left):
    home = Path(sealed_env["CHATCLI_HOME"])
    chat(sealed_env, "vault", f"the {SECRET}")
    (home / "key-check").unlink()
    if left == "journals":  # no session file left: a sealed journal line tells the key
        for path in (home / "sessions").glob("*.json"):
            path.unlink()
    before = tree(home)
    wrong = dict(sealed_env, CHATCLI_ENCRYPTION_KEY=new_key())
    for args in (("session", "list"), ("--session", "other", "-p", "more"), ("-p", "more")):
        refused = run_chatcli(*args, env=wrong)
        assert refused.returncode == 1 and NOT_THIS_KEY in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
        assert tree(home) == before  # no key check, no session, no journal line under the wrong key

    again = chat(sealed_env, "vault", "and the right key?")
    assert "You said: and the right key?" in again.stdout
    assert (home / "key-check").read_bytes().startswith(b"chatcli-sealed\n")
    assert NOT_THIS_KEY in run_chatcli("session", "list", env=wrong).stderr  # now the key check says so


def test_without_its_key_check_a_store_with_no_sealed_file_takes_the_key(openai_env, openai_server):
    home = Path(openai_env["CHATCLI_HOME"])
    chat(openai_env, "plain", "written before the key")
    assert not (home / "key-check").exists()
    chat(dict(openai_env, CHATCLI_ENCRYPTION_KEY=new_key()), "plain", "written with the key")
    assert (home / "key-check").read_bytes().startswith(b"chatcli-sealed\n")
