"""Go ChatCLI reads the session files chatcli writes, checked by Go's own decoder: `go_reader`
(tests/go_reader/main.go, built by `make test` with Debian's Go) declares the types of Go
ChatCLI's `models` package and loads a file as its SessionManager does. The JSON Schema the
suite checks every file against (tests/go_session.schema.json) is held to the same decoder here."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import run_chatcli
from fakes import tool_call as call

from chatcli.engine import sessions
from chatcli.engine.compaction import compact

ROOT = Path(__file__).resolve().parent.parent


def go_reader() -> str:
    path = os.environ.get("GO_READER") or str(ROOT / ".venv" / "bin" / "go_reader")
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is missing: `make test` builds it from tests/go_reader/main.go with Debian's Go")
    return path


def go_reads(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run([go_reader(), *map(str, paths)], capture_output=True, text=True, timeout=30)


def test_go_chatcli_reads_an_agent_session_chatcli_wrote(tool_server, env, workdir, sessions_dir):
    (workdir / "notes.txt").write_text("the freeze ends Friday\n")
    tool_server.reply("Reading.", tool_calls=[call("c1", "read_file", path="notes.txt"),
                                              {"id": "c2", "name": "list_dir", "arguments": '{"path": '}])
    tool_server.reply("It ends Friday.")
    result = run_chatcli("--agent", "--yes", "--session", "agent-s", "-p", "when does the freeze end?", env=env,
                         cwd=workdir)
    assert result.returncode == 0, result.stderr
    read = go_reads(sessions_dir / "agent-s.json")
    assert read.returncode == 0 and read.stdout.startswith("ok "), read.stdout
    history = json.loads((sessions_dir / "agent-s.json").read_text())["chat_history"]
    assert [m["meta"]["mode"] for m in history] == ["agent"] * len(history)


def test_go_chatcli_reads_a_compacted_session_and_a_continued_v1_file(make_conversation, fake_model, sessions_dir):
    conv = make_conversation()
    for word in ("one", "two", "three", "four", "five"):
        conv.send(f"tell me about {word}")
    sessions.save(conv, "compacted")
    fake_model.reply("We spoke of numbers.")
    compact(conv, keep_recent=2)
    sessions_dir.joinpath("old-v1.json").write_text(json.dumps({
        "version": 1, "chat_history": [{"role": "user", "content": "c"}],
        "agent_history": [{"role": "system", "content": "agent rules"}, {"role": "user", "content": "a"},
                          {"role": "assistant", "content": "", "tool_calls": [
                              {"id": "x", "type": "function", "function": {"name": "grep", "arguments": "{}"}}]}]}))
    sessions.load(conv, "old-v1")
    conv.send("and now?")
    read = go_reads(sessions_dir / "compacted.json", sessions_dir / "old-v1.json")
    assert read.returncode == 0, read.stdout


# Documents on which Go's decoder and the schema must agree: (document, Go reads it).
AGREEMENT = [
    ({"version": 2, "chat_history": [{"role": "user", "content": "hi", "meta": {"mode": "chat"}}]}, True),
    ({"version": 2, "chat_history": [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "type": "function", "name": "f", "arguments": {"a": [1, {"b": None}]}, "raw": ""}]}]}, True),
    ({"version": 2, "chat_history": [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "type": "function", "name": "f", "arguments": None}]}]}, True),
    ({"version": 2, "chat_history": [{"role": "user", "content": "x", "images": [
        {"media_type": "image/png", "data": "aGk="}], "is_error": False, "error_code": ""}]}, True),
    ({"version": 2, "chat_history": [], "agent_history": None, "unknown": {"kept": 1}, "transcript_id": "t"}, True),
    # Go's int takes no number written with a fraction, 3.0 included (a schema's "integer" would).
    ({"version": 2, "chat_history": [{"role": "user", "content": "x", "meta": {"summary_of": 3.0}}]}, False),
    ({"version": 2, "chat_history": [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "type": "function", "name": "f", "arguments": "{\"a\": 1}"}]}]}, False),
    ({"version": 2, "chat_history": [{"role": "user", "content": "x", "meta": {"summary_of": 1.5}}]}, False),
    ({"version": 2, "chat_history": [{"role": "user", "content": "x", "is_error": "yes"}]}, False),
    ({"version": 2, "chat_history": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]}, False),
    ({"version": 2, "chat_history": [{"role": "user", "content": "x", "meta": {"mode": 1}}]}, False),
    ({"version": 2, "chat_history": [{"role": "user", "content": "x", "images": [{"data": "not base64!"}]}]}, False),
    ({"version": "2", "chat_history": []}, False),
]


@pytest.mark.parametrize("document,readable", AGREEMENT, ids=[str(i) for i in range(len(AGREEMENT))])
def test_the_schema_agrees_with_go_s_decoder(document, readable, tmp_path):
    from go_format import validator

    path = tmp_path / "s.json"
    path.write_text(json.dumps(document))
    assert (go_reads(path).returncode == 0) is readable
    assert validator().is_valid(document) is readable  # the schema with Go's integers (no 3.0)
