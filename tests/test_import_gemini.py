"""`chatcli import gemini`: Gemini CLI's chat recordings (~/.gemini/tmp/<project>/chats/session-*.json
and .jsonl) and `/chat save` checkpoints (checkpoint-<tag>.json) as chatcli sessions. The fixtures
are built here, record by record, in the shapes Gemini CLI's code declares (see
store/sources/gemini.py)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from conftest import run_chatcli
from importing import continued, imported, journaled, made, searched, session_document, snapshot

from chatcli.core.imported import Tally
from chatcli.store.sources import gemini

SESSION = "8c1e4b7a-2f0d-4a51-9e3b-6d2f0a9b7c11"
PROJECT = "/home/ana/proj"
PROJECT_HASH = hashlib.sha256(PROJECT.encode()).hexdigest()
SAVED_AT = 1759568400  # 2025-10-04T09:00:00Z: when the checkpoints below were saved


@pytest.fixture(autouse=True)
def gemini_home_not_set(monkeypatch):
    """Gemini CLI's files are looked for under the test's HOME, whatever the outer environment says."""
    monkeypatch.delenv("GEMINI_CLI_HOME", raising=False)


class Recording:
    """A Gemini CLI chat recording being written: each call adds one message record as Gemini
    CLI does; `write` writes the whole document again (`.json`), `write_lines` the log (`.jsonl`)."""

    def __init__(self, path: Path, session: str = SESSION) -> None:
        self.path = path
        self.session = session
        self.messages: list[dict] = []
        self.summary: str | None = None
        self.count = 0

    def time(self) -> str:
        return f"2025-10-03T09:{13 + self.count // 60:02d}:{self.count % 60:02d}.000Z"

    def add(self, kind: str, content, **fields) -> dict:
        self.count += 1
        record = {"id": f"{self.session[:8]}-{self.count:04d}", "timestamp": self.time(), "type": kind,
                  "content": content, **fields}
        self.messages.append(record)
        return record

    def user(self, content, **fields) -> dict:
        return self.add("user", content, **fields)

    def gemini(self, content, tool_calls: list[dict] | None = None, thoughts: list[dict] | None = None,
               **fields) -> dict:
        record = self.add("gemini", content, thoughts=thoughts or [], **fields)
        record.update(tokens={"input": 5120, "output": 18, "cached": 0, "thoughts": 40, "tool": 0, "total": 5178},
                      model="gemini-2.5-pro")
        if tool_calls:
            record["toolCalls"] = tool_calls
        return record

    def thought(self, subject: str, description: str) -> dict:
        return {"subject": subject, "description": description, "timestamp": self.time()}

    def tool_call(self, call: str, name: str, args: dict, *, output: str | None = None, error: str | None = None,
                  status: str = "success", display=None) -> dict:
        response = {"error": error} if error is not None else {"output": output}
        return {"id": call, "name": name, "args": args,
                "result": [{"functionResponse": {"id": call, "name": name, "response": response}}],
                "status": status, "timestamp": self.time(), "displayName": name, "description": "",
                "resultDisplay": display, "renderOutputAsMarkdown": False}

    def header(self) -> dict:
        return {"sessionId": self.session, "projectHash": PROJECT_HASH, "startTime": "2025-10-03T09:12:44.120Z",
                "lastUpdated": self.messages[-1]["timestamp"] if self.messages else "2025-10-03T09:12:44.120Z"}

    def document(self) -> dict:
        document = {**self.header(), "messages": self.messages}
        if self.summary:
            document["summary"] = self.summary
        return document

    def write(self) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.document(), indent=2))
        return self.path

    def write_lines(self, *lines: dict, torn: str = "") -> Path:
        """The recording as Gemini CLI's JSON Lines log (`<name>.jsonl`): its header, each message,
        then `lines` (updates, rewinds); `torn`, a last line cut short."""
        path = self.path.with_name(self.path.stem + ".jsonl")
        records = [self.header(), *self.messages, *lines]
        if self.summary:
            records.append({"$set": {"summary": self.summary}})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(record) + "\n" for record in records) + torn)
        return path


def project_dir(home: Path, name: str = "proj") -> Path:
    """A project's directory under Gemini CLI's tmp, named as newer versions name it."""
    directory = home / ".gemini" / "tmp" / name
    directory.mkdir(parents=True, exist_ok=True)
    (directory / ".project_root").write_text(PROJECT)
    return directory


def recording_at(project: Path, session: str = SESSION) -> Recording:
    return Recording(project / "chats" / f"session-2025-10-03T09-12-{session[:8]}.json", session)


def checkpoint(project: Path, tag: str, history: list[dict], *, bare: bool = False) -> Path:
    """A `/chat save <tag>` file: the history as Gemini API Contents (a bare list in older versions)."""
    encoded = "".join(ch if ch.isalnum() or ch in "-_.!~*'()" else "%" + "%".join(
        f"{byte:02X}" for byte in ch.encode()) for ch in tag)  # encodeURIComponent
    path = project / f"checkpoint-{encoded}.json"
    path.write_text(json.dumps(history if bare else {"history": history, "authType": "oauth-personal"}, indent=2))
    os.utime(path, (SAVED_AT, SAVED_AT))
    return path


CONTEXT = ("<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n"
           "Today's date is Friday, October 3, 2025.\nMy operating system is: linux\n</session_context>")


def a_recording(project: Path) -> Recording:
    """Every kind of message Gemini CLI records in a session of a few turns."""
    recording = recording_at(project)
    recording.summary = "Fix flaky date parser test"
    recording.user([{"text": "/chat save before-fix"}])
    recording.user([{"text": "Why does test_parse_date fail on CI?"}])
    recording.gemini("Let me run the test.", thoughts=[recording.thought("Reproducing", "I'll run it first.")],
                     tool_calls=[
                         recording.tool_call("run_shell_command-1759482773410-0", "run_shell_command",
                                             {"command": "pytest -k parse_date -q"}, output="1 failed: tz offset",
                                             display="1 failed: tz offset"),
                         recording.tool_call("read_file-1759482773411-1", "read_file",
                                             {"absolute_path": "/home/ana/proj/tests/test_dates.py"},
                                             error="File not found.", status="error")])
    recording.add("info", "Switched to gemini-2.5-flash for the rest of this session.")
    recording.gemini("The offset is read as local time; the deploy freeze ends Friday anyway.")
    recording.user([{"text": "Here is the screenshot"}, {"inlineData": {"mimeType": "image/png", "data": "A" * 4096}}])
    recording.add("error", "[API Error: Quota exceeded for quota metric 'Generate Content API requests']")
    recording.add("warning", "The context window is almost full.")
    recording.gemini("Fixed: parse with UTC.")
    return recording


def a_checkpoint(project: Path) -> Path:
    """An older `/chat save release plan`: the injected context and the model's thanks first, calls
    and responses without ids (paired by name, in order)."""
    return checkpoint(project, "release plan", [
        {"role": "user", "parts": [{"text": CONTEXT}]},
        {"role": "model", "parts": [{"text": "Got it. Thanks for the context!"}]},
        {"role": "user", "parts": [{"text": "Read both release notes"}]},
        {"role": "model", "parts": [
            {"text": "**Reading** Both files, then compare.", "thought": True},
            {"functionCall": {"name": "read_file", "args": {"absolute_path": "NOTES-1.md"}}},
            {"functionCall": {"name": "read_file", "args": {"absolute_path": "NOTES-2.md"}}}]},
        {"role": "user", "parts": [
            {"functionResponse": {"name": "read_file", "response": {"output": "v1: dates in UTC"}}},
            {"functionResponse": {"name": "read_file", "response": {"output": "v2: ship on Monday"}}}]},
        {"role": "model", "parts": [{"text": "The release ships on Monday with UTC dates."}]}], bare=True)


def test_a_recording_and_a_checkpoint_become_searchable_sessions_that_continue(
        env, openai_env, openai_server, home):
    project = project_dir(home)
    recording = a_recording(project)
    recording.write()
    subagent = project / "chats" / SESSION / "5d1c0a9e-0000-4000-8000-000000000001.jsonl"
    subagent.parent.mkdir()
    subagent.write_text(json.dumps({"sessionId": "5d1c", "projectHash": PROJECT_HASH, "kind": "subagent"}) + "\n")
    a_checkpoint(project)
    before = snapshot(home / ".gemini")

    report = imported(openai_env, "gemini")

    assert sorted(made(report)) == ["gemini-2025-10-03-fix-flaky-date-parser-test", "gemini-2025-10-04-release-plan"]
    name = "gemini-2025-10-03-fix-flaky-date-parser-test"
    assert f"new '{name}': 7 messages; left out: 1 error notice, 1 image, 1 info notice, 1 slash command message, " \
           "1 subagent transcript, 1 thinking block, 1 warning notice" in report
    assert "new 'gemini-2025-10-04-release-plan': 5 messages; left out: 2 injected context messages, " \
           "1 thinking block" in report
    assert "skipped" not in report
    assert snapshot(home / ".gemini") == before  # only read

    document = session_document(openai_env, name)
    assert document["title"] == "Fix flaky date parser test"
    record = document["imported"]
    assert (record["source"], record["id"]) == ("gemini", SESSION)
    assert record["details"]["projectHash"] == PROJECT_HASH and record["details"]["project"] == PROJECT
    assert record["details"]["models"] == ["gemini-2.5-pro"]
    history = document["chat_history"]
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "tool", "assistant", "user", "assistant"]
    assert history[0]["content"] == "Why does test_parse_date fail on CI?"
    assert history[0]["timestamp"] == "2025-10-03T09:13:02.000Z"
    first_answer = history[1]
    assert first_answer["content"] == "Let me run the test."
    assert [(c["id"], c["name"], c["arguments"]) for c in first_answer["tool_calls"]] == [
        ("run_shell_command-1759482773410-0", "run_shell_command", {"command": "pytest -k parse_date -q"}),
        ("read_file-1759482773411-1", "read_file", {"absolute_path": "/home/ana/proj/tests/test_dates.py"})]
    assert first_answer["meta"]["thinking"] == "**Reproducing** I'll run it first."
    assert (history[2]["tool_call_id"], history[2]["content"]) == ("run_shell_command-1759482773410-0",
                                                                   "1 failed: tz offset")
    assert "is_error" not in history[2]
    assert (history[3]["tool_call_id"], history[3]["content"], history[3]["is_error"]) == (
        "read_file-1759482773411-1", "File not found.", True)
    assert history[5]["content"] == "Here is the screenshot\n[image (image/png, 3 KB): not imported]"
    assert history[5]["meta"]["left_out"] == ["image (image/png, 3 KB)"]

    saved = session_document(openai_env, "gemini-2025-10-04-release-plan")
    assert saved["title"] == "release plan"
    assert saved["imported"]["id"] == f"checkpoint:{PROJECT_HASH}/release plan"  # its directory by its older name
    chat = saved["chat_history"]
    assert [m["role"] for m in chat] == ["user", "assistant", "tool", "tool", "assistant"]
    assert chat[0]["content"] == "Read both release notes"
    calls = chat[1]["tool_calls"]
    assert [(c["name"], c["arguments"]) for c in calls] == [("read_file", {"absolute_path": "NOTES-1.md"}),
                                                           ("read_file", {"absolute_path": "NOTES-2.md"})]
    assert calls[0]["id"] != calls[1]["id"]
    assert [(m["tool_call_id"], m["content"]) for m in chat[2:4]] == [(calls[0]["id"], "v1: dates in UTC"),
                                                                     (calls[1]["id"], "v2: ship on Monday")]
    assert chat[1]["meta"]["thinking"] == "**Reading** Both files, then compare."

    assert name in searched(openai_env, "offset", "local", "time")
    sent = continued(openai_env, openai_server, name)
    assert [m["role"] for m in sent[-8:]] == ["user", "assistant", "tool", "tool", "assistant", "user", "assistant",
                                              "user"]
    calls = sent[-7]["tool_calls"]
    assert [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("run_shell_command-1759482773410-0", "run_shell_command", {"command": "pytest -k parse_date -q"}),
        ("read_file-1759482773411-1", "read_file", {"absolute_path": "/home/ana/proj/tests/test_dates.py"})]
    assert (sent[-6]["tool_call_id"], sent[-6]["content"]) == ("run_shell_command-1759482773410-0",
                                                               "1 failed: tz offset")
    assert sent[-1]["content"] == "and then?"


def test_importing_again_adds_what_grew_and_nothing_twice(env, home):
    project = project_dir(home)
    recording = recording_at(project)
    recording.user("Is the freeze over?")
    recording.gemini("Not until Friday.")
    recording.write()
    other = recording_at(project, "0e9a5c3d-2222-4b3c-8d4e-6f7a8b9c0d1e")
    other.user([{"text": "Rename the module"}])
    other.gemini("Done.")
    other.write()
    first = imported(env, "gemini")
    assert sorted(made(first)) == ["gemini-2025-10-03-is-the-freeze-over", "gemini-2025-10-03-rename-the-module"]

    again = imported(env, "gemini")
    assert made(again) == [] and "0 new sessions, 0 grown, 0 messages written; 2 already imported" in again

    recording.user("And after Friday?")
    recording.gemini("Deploys resume Monday.")
    recording.write()  # Gemini CLI writes the whole document again
    grown = imported(env, "gemini")
    name = "gemini-2025-10-03-is-the-freeze-over"
    assert f"added 2 messages to '{name}' (now 4 messages)" in grown
    assert "1 already imported and unchanged" in grown
    history = session_document(env, name)["chat_history"]
    assert [m["content"] for m in history] == ["Is the freeze over?", "Not until Friday.", "And after Friday?",
                                               "Deploys resume Monday."]
    assert journaled(env, name) == [m["content"] for m in history]  # each message once in its journal

    # A newer Gemini CLI resumes it: the document is copied to <name>.jsonl, which it goes on logging.
    recording.user("Who signs off?")
    answer = recording.gemini("Nobody yet.")
    recording.write_lines({**answer, "content": "Ana signs off."}, {"$set": {"lastUpdated": recording.time()}})
    moved = imported(env, "gemini")
    assert f"added 2 messages to '{name}' (now 6 messages)" in moved and made(moved) == []
    assert [m["content"] for m in session_document(env, name)["chat_history"]][4:] == ["Who signs off?",
                                                                                       "Ana signs off."]
    assert run_chatcli("session", "list", env=env).stdout.count("gemini-") == 2


def test_damaged_files_are_skipped_one_line_each_and_the_rest_imported(env, home):
    project = project_dir(home)
    good = recording_at(project)
    good.user("A good question")
    good.gemini("A good answer.")
    good.write()
    cut = recording_at(project, "c0ffee00-3333-4c4d-9e5f-708192a3b4c5")
    cut.user("Lost to a crash")
    cut.gemini("Half written.")
    text = json.dumps(cut.document(), indent=2)
    cut.path.write_text(text[: len(text) // 2])  # the process killed while writing it whole
    newer = recording_at(project, "5eed0000-4444-4d5e-8f60-718293a4b5c6")
    newer.user("Still readable")
    newer.add("hologram", "a type no reader knows: a newer Gemini CLI")
    newer.add("user", 42)
    newer.write()
    (project / "chats" / "session-2025-10-03T10-00-e0e0e0e0.json").write_text("")
    torn = recording_at(project, "7022e000-5555-4e6f-a071-8293a4b5c6d7")
    torn.user("Written line by line")
    torn.write_lines(torn="{\"id\":\"x\",\"type\":\"gem")
    (project / "checkpoint-broken.json").write_text('{\n  "history": [\n    {\n      "role": "user",\n')

    report = imported(env, "gemini")

    assert sorted(made(report)) == ["gemini-2025-10-03-a-good-question", "gemini-2025-10-03-still-readable",
                                    "gemini-2025-10-03-written-line-by-line"]
    chats = "~/.gemini/tmp/proj/chats"
    assert f"{chats}/session-2025-10-03T09-12-c0ffee00.json: skipped 1 unreadable file (not valid JSON: " \
           "cut short?)" in report
    assert f"{chats}/session-2025-10-03T09-12-5eed0000.json: skipped 1 message of unknown type 'hologram', " \
           "1 user message with content of an unknown shape" in report
    assert f"{chats}/session-2025-10-03T10-00-e0e0e0e0.json: skipped 1 empty file" in report
    assert f"{chats}/session-2025-10-03T09-12-7022e000.jsonl: skipped 1 torn last line" in report
    assert "~/.gemini/tmp/proj/checkpoint-broken.json: skipped 1 unreadable file (not valid JSON: cut short?)" \
        in report
    assert report.count("skipped") == 5


def test_a_log_is_replayed_as_gemini_cli_reads_it_back(tmp_path):
    recording = Recording(tmp_path / "chats" / "session-2026-05-02T16-40-0d9f3c22.json",
                          "0d9f3c22-7b41-4e8e-a0c5-1b2c3d4e5f60")
    ask = recording.user([{"text": "What does util.ts export?"}])
    # A newer turn: the model's parts are the message's content, its calls' results on its toolCalls.
    calls = [recording.tool_call("grep-1", "grep_search", {"pattern": "export"}, output="util.ts: export slugify"),
             recording.tool_call("ls-2", "list_directory", {"path": "."}, output=None, status="cancelled")]
    calls[1]["result"] = None
    turn = recording.gemini([{"text": "Searching.", "thought": True, "thoughtSignature": "c2ln"},
                             {"functionCall": {"id": "grep-1", "name": "grep_search", "args": {"pattern": "export"}}},
                             {"functionCall": {"name": "list_directory", "args": {"path": "."}}}],  # no id
                            tool_calls=calls)
    # The results sent back, recorded again as a user message of function responses.
    recording.user([{"functionResponse": {"id": "grep-1", "name": "grep_search",
                                          "response": {"output": "util.ts: export slugify"}}}])
    answer = recording.gemini("It exports `slugify`.")
    oops = recording.user("oops, ignore that")
    path = recording.write_lines(
        {**answer, "tokens": {"input": 900, "output": 7, "cached": 0, "thoughts": 0, "tool": 0, "total": 907}},
        {"$rewindTo": oops["id"]}, {"$set": {"summary": "Inspect util.ts exports"}},
        {"mystery": True})
    tally = Tally("log")
    [found] = gemini.read(path, tally)
    assert tally.kinds == {"line of unknown shape": 1}
    assert found.id == "0d9f3c22-7b41-4e8e-a0c5-1b2c3d4e5f60" and found.title == "Inspect util.ts exports"
    assert found.started == "2025-10-03T09:12:44.120Z"
    assert [(m.role, m.content, m.extra.get("is_error")) for m in found.messages] == [
        ("user", "What does util.ts export?", None), ("assistant", "", None),
        ("tool", "util.ts: export slugify", None), ("tool", "[cancelled]", True),
        ("assistant", "It exports `slugify`.", None)]
    assert [call["id"] for call in found.messages[1].tool_calls] == ["grep-1", "ls-2"]
    assert [m.tool_call_id for m in found.messages[2:4]] == ["grep-1", "ls-2"]
    assert found.messages[1].meta["thinking"] == "Searching."
    assert found.left_out == {"thinking block": 1}
    assert turn["id"] != ask["id"]

    # A compression rewrites the whole history ($set.messages): what is read is what it left.
    snapshot_text = "<state_snapshot>\nThe user asked what util.ts exports: slugify.\n</state_snapshot>"
    compressed = [{"id": "env", "timestamp": recording.time(), "type": "user", "content": [{"text": CONTEXT}]},
                  {"id": "s1", "timestamp": recording.time(), "type": "user", "content": [{"text": snapshot_text}]},
                  {"id": "s2", "timestamp": recording.time(), "type": "gemini",
                   "content": [{"text": "Got it. Thanks for the additional context!"}]}]
    path = recording.write_lines({"$set": {"messages": compressed}})
    [found] = gemini.read(path, Tally("log"))
    assert [(m.role, m.content, m.is_summary) for m in found.messages] == [("user", snapshot_text, True)]
    assert found.left_out == {"injected context message": 2}


def test_a_newer_checkpoint_pairs_results_by_id_and_names_what_it_leaves_out(tmp_path):
    (tmp_path / "proj").mkdir()
    path = checkpoint(tmp_path / "proj", "a/b c", [
        {"role": "user", "parts": [{"text": CONTEXT}]},
        {"role": "user", "parts": [{"text": "Describe this"}, {"fileData": {"mimeType": "application/pdf",
                                                                             "fileUri": "gs://bucket/spec.pdf"}}]},
        {"role": "model", "parts": [{"functionCall": {"id": "b", "name": "read_file", "args": {"path": "b"}}},
                                    {"functionCall": {"id": "a", "name": "read_file", "args": {"path": "a"}}}]},
        {"role": "user", "parts": [
            {"functionResponse": {"id": "a", "name": "read_file", "response": {"output": "A"}}},
            {"functionResponse": {"id": "b", "name": "read_file", "response": {"error": "denied"}}}]},
        {"role": "model", "parts": [{"text": "Done."}, {"executableCode": {"code": "print(1)"}}]},
        {"role": "system", "parts": [{"text": "?"}]}])
    assert path.name == "checkpoint-a%2Fb%20c.json"
    tally = Tally("checkpoint")
    [found] = gemini.read(path, tally)
    assert tally.kinds == {"history entry of unknown role 'system'": 1}
    assert found.id == "checkpoint:proj/a/b c" and found.title == "a/b c"
    assert found.started == "2025-10-04T09:00:00+00:00"
    assert [(m.role, m.content, m.tool_call_id, m.extra.get("is_error")) for m in found.messages] == [
        ("user", "Describe this\n[file (application/pdf, gs://bucket/spec.pdf): not imported]", None, None),
        ("assistant", "", None, None), ("tool", "denied", "b", True), ("tool", "A", "a", None),
        ("assistant", "Done.", None, None)]
    assert found.messages[4].meta["left_out"] == ["executableCode part"]
    assert found.left_out == {"injected context message": 1, "file": 1, "executableCode part": 1}


def test_where_gemini_cli_keeps_them_and_what_is_read_there(home, tmp_path):
    assert gemini.default({}, home) == home / ".gemini" / "tmp"
    assert gemini.default({"GEMINI_CLI_HOME": str(tmp_path / "g")}, home) == tmp_path / "g" / ".gemini" / "tmp"
    project = project_dir(home)
    old = recording_at(project)
    old.user("hello")
    old.write()
    copied = old.write_lines()  # resumed by a newer Gemini CLI: read from the copy only
    (project / "checkpoints").mkdir()
    (project / "checkpoints" / "2025-10-02T14-03-11_123Z-app.ts-replace.json").write_text("{}")
    (project / "logs.json").write_text("[]")
    saved = checkpoint(project, "x", [])
    assert sorted(gemini.files(home / ".gemini" / "tmp")) == sorted([copied, saved])
    assert sorted(gemini.files(project)) == sorted([copied, saved])
    assert sorted(gemini.files(home / ".gemini")) == sorted([copied, saved])
    assert gemini.files(old.path) == [old.path]
    with pytest.raises(gemini.SourceError, match="no Gemini CLI conversations at"):
        gemini.files(tmp_path / "nowhere")
