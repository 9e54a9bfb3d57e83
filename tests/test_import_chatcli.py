"""`chatcli import chatcli PATH`: another ChatCLI home (Go ChatCLI's ~/.chatcli, or a chatcli's from
another machine) brought in: its sessions under their own names where free, its recall entries."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from conftest import run_chatcli
from importing import continued, imported, made, searched, session_document, snapshot

from chatcli.core.messages import Message
from chatcli.core.session import SessionData
from chatcli.store.recall import RecallStore
from chatcli.store.sessions import SessionStore


def other_home(root: Path) -> Path:
    """A Go ChatCLI home: a v2 session with a tool call in Go's shape, a v1 file with per-mode
    histories, a bare array (legacy), one that is not JSON, and two recall entries."""
    sessions = root / "sessions"
    sessions.mkdir(parents=True)
    (sessions / "projeto-x.json").write_text(json.dumps({
        "version": 2, "title": "Projeto X", "attachments": [{"context": "docs"}], "chat_history": [
            {"role": "user", "content": "When does the deploy freeze end?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "name": "read_file", "arguments": {"path": "calendar.md"}}]},
            {"role": "tool", "content": "freeze: until Friday", "tool_call_id": "c1"},
            {"role": "assistant", "content": "The freeze ends Friday.", "meta": {"mode": "agent"}}]}))
    (sessions / "old-notes.json").write_text(json.dumps({
        "version": 1, "chat_history": [{"role": "user", "content": "remember the llama"}],
        "agent_history": [{"role": "user", "content": "list the files"}], "coder_history": []}))
    (sessions / "bare.json").write_text(json.dumps([{"role": "user", "content": "a legacy array"}]))
    (sessions / "broken.json").write_text('{"version": 2, "chat_history": [')
    # A file whose last append a crash cut short (chatcli reads the document before it).
    (sessions / "cut.json").write_text('{"version":2,"chat_history":[{"role":"user","content":"kept"}]},{"role":"us')
    (sessions / ".projeto-x.lock").write_text("")
    ccr = root / "ccr"
    ccr.mkdir()
    text = b"the compacted original text"
    (ccr / f"{hashlib.sha256(text).hexdigest()[:16]}.ccr").write_bytes(text)
    return root


def test_another_home_comes_in_under_its_own_names_and_continues(openai_env, openai_server, tmp_path):
    source = other_home(tmp_path / "laptop" / ".chatcli")
    before = snapshot(source)

    report = imported(openai_env, "chatcli", str(source))

    assert sorted(made(report)) == ["bare", "cut", "old-notes", "projeto-x"]
    assert "'projeto-x': 4 messages; left out: 1 context attachment" in report
    assert "broken.json: skipped 1 unreadable session (not valid JSON)" in report
    assert "1 recall entry copied" in report
    assert snapshot(source) == before
    document = session_document(openai_env, "projeto-x")
    assert document["chat_history"][1]["tool_calls"][0]["arguments"] == {"path": "calendar.md"}
    assert document["imported"]["details"]["attachments"] == [{"context": "docs"}]
    assert [m["content"] for m in session_document(openai_env, "old-notes")["chat_history"]] == [
        "remember the llama", "list the files"]
    key = next((source / "ccr").iterdir()).stem
    assert RecallStore(Path(openai_env["CHATCLI_HOME"]) / "ccr").read(key).text == "the compacted original text"

    assert "projeto-x" in searched(openai_env, "freeze")
    sent = continued(openai_env, openai_server, "projeto-x")
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[1]["tool_calls"][0]["function"]["name"] == "read_file"


def test_a_name_taken_here_gets_a_name_of_its_own_and_importing_again_adds_only_what_grew(openai_env, tmp_path):
    env = openai_env
    source = other_home(tmp_path / "laptop")
    mine = run_chatcli("--session", "projeto-x", "-p", "mine", env=env)
    assert mine.returncode == 0, mine.stderr
    first = imported(env, "chatcli", str(source))
    renamed = [name for name in made(first) if name.startswith("chatcli-")]
    assert len(renamed) == 1 and renamed[0].endswith("-projeto-x")
    assert f"new '{renamed[0]}': 4 messages ('projeto-x' there: that name is taken here)" in first
    mine = [m["content"] for m in session_document(env, "projeto-x")["chat_history"]]
    assert mine == ["mine", "You said: mine"]  # the user's own, untouched

    again = imported(env, "chatcli", str(source))
    assert made(again) == [] and "4 already imported and unchanged" in again
    assert "1 recall entry already here" in again

    path = source / "sessions" / "projeto-x.json"
    document = json.loads(path.read_text())
    document["chat_history"] += [{"role": "user", "content": "and the next one?"},
                                 {"role": "assistant", "content": "In March."}]
    path.write_text(json.dumps(document))
    grown = imported(env, "chatcli", str(source))
    assert f"added 2 messages to '{renamed[0]}' (now 6 messages)" in grown
    assert [m["content"] for m in session_document(env, renamed[0])["chat_history"][-2:]] == [
        "and the next one?", "In March."]


def test_a_sealed_session_of_the_other_home_is_skipped_and_named(env, tmp_path):
    source = tmp_path / "other"
    store = SessionStore(source / "sessions", key=b"k" * 32)
    store.write("secret", SessionData(history=[Message("user", "sealed words")]))
    (source / "sessions" / "plain.json").write_text(json.dumps({"version": 2, "chat_history": [
        {"role": "user", "content": "plain words"}]}))
    (source / "sessions" / "go-secret.json").write_bytes(b"CHATCLI_ENC_v1\n" + bytes(range(40)))
    report = imported(env, "chatcli", str(source))
    assert made(report) == ["plain"]
    assert "secret.json: skipped 1 sealed session (its home's key is needed: copy that home whole instead)" in report
    assert "go-secret.json: skipped 1 session Go ChatCLI encrypted (decrypt it there first)" in report


def test_this_home_itself_is_refused_in_one_line(env):
    result = run_chatcli("import", "chatcli", env["CHATCLI_HOME"], env=env)
    assert result.returncode == 1
    assert result.stderr.strip().endswith("is this chatcli's own home (CHATCLI_HOME): there is nothing to import "
                                          "from it")
    assert "Traceback" not in result.stderr


def test_nothing_there_is_one_line(env, tmp_path):
    result = run_chatcli("import", "chatcli", str(tmp_path / "nowhere"), env=env)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "no ChatCLI sessions at" in result.stderr
    unknown = run_chatcli("import", "notepad", env=env)
    assert unknown.returncode == 2
    assert "unknown source 'notepad': choose one of claude-code, codex, gemini, chatgpt, llm, chatcli" in unknown.stderr


def test_two_homes_with_a_session_of_the_same_name_are_two_conversations(env, tmp_path):
    for machine, words in (("laptop", "laptop words"), ("desktop", "desktop words")):
        sessions = tmp_path / machine / "sessions"
        sessions.mkdir(parents=True)
        (sessions / "work.json").write_text(json.dumps({"version": 2, "chat_history": [
            {"role": "user", "content": words}]}))
    assert made(imported(env, "chatcli", str(tmp_path / "laptop"))) == ["work"]
    second = made(imported(env, "chatcli", str(tmp_path / "desktop")))
    assert len(second) == 1 and second[0].startswith("chatcli-") and second[0].endswith("-desktop-words")
    assert made(imported(env, "chatcli", str(tmp_path / "desktop"))) == []


def test_a_dry_run_says_what_the_import_will_say(env, tmp_path):
    source = other_home(tmp_path / "laptop")
    assert "1 recall entry would be copied" in imported(env, "chatcli", str(source), "--dry-run")
    imported(env, "chatcli", str(source))
    again = imported(env, "chatcli", str(source), "--dry-run")
    assert "1 recall entry already here" in again and "0 new sessions" in again


def test_a_second_import_while_one_runs_is_refused_in_one_line(env, tmp_path):
    from chatcli.store.held import hold

    source = other_home(tmp_path / "laptop")
    held = hold(Path(env["CHATCLI_HOME"]) / ".import.lock")  # an import running in another process's place
    try:
        result = run_chatcli("import", "chatcli", str(source), env=env)
        assert result.returncode == 1
        assert result.stderr == "chatcli: error: another chatcli import is running in this CHATCLI_HOME; wait for " \
                                "it to end\n"
        # A dry run writes nothing: it runs beside an import.
        assert "would make 'projeto-x'" in imported(env, "chatcli", str(source), "--dry-run")
    finally:
        held.close()
    assert sorted(made(imported(env, "chatcli", str(source)))) == ["bare", "cut", "old-notes", "projeto-x"]


def test_two_sessions_of_the_other_home_sharing_a_journal_stay_two_and_steady(env, tmp_path):
    sessions = tmp_path / "other" / "sessions"
    sessions.mkdir(parents=True)
    for name, history in (("autosave-20250102-101010", ["asked", "answered"]),
                          ("work", ["asked", "answered", "and then"])):  # saved again under a name: one journal
        (sessions / f"{name}.json").write_text(json.dumps({"version": 2, "transcript_id": "0123456789abcdef",
                                                           "chat_history": [{"role": "user", "content": text}
                                                                            for text in history]}))
    first = imported(env, "chatcli", str(tmp_path / "other"))
    assert len(made(first)) == 2
    again = imported(env, "chatcli", str(tmp_path / "other"))
    assert "0 new sessions, 0 grown, 0 messages written; 2 already imported and unchanged." in again


def test_a_session_whose_messages_carry_no_time_is_dated_by_its_file(env, tmp_path):
    import os

    sessions = tmp_path / "other" / "sessions"
    sessions.mkdir(parents=True)
    old = sessions / "oldtalk.json"
    old.write_text(json.dumps({"version": 2, "chat_history": [{"role": "user", "content": "from 2023"}]}))
    os.utime(old, (1_690_000_000, 1_690_000_000))  # July 2023
    imported(env, "chatcli", str(tmp_path / "other"))
    listed = [line for line in run_chatcli("session", "list", env=env).stdout.splitlines() if "oldtalk" in line]
    assert len(listed) == 1 and " 2023-07-2" in listed[0]
