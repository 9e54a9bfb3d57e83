"""`chatcli import codex`: Codex CLI's rollouts (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl) as
chatcli sessions. The fixtures are built here, line by line, in the shapes openai/codex's code
declares (see store/sources/codex.py)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_chatcli
from importing import continued, imported, journaled, made, searched, session_document, snapshot

from chatcli.core.imported import Tally
from chatcli.store.sources import codex

SESSION = "5a1e2b3c-4d5e-4f60-8a9b-0c1d2e3f4a5b"


def rollout_path(home: Path, session: str = SESSION, day: str = "2025-09-10") -> Path:
    year, month, date = day.split("-")
    return home / ".codex" / "sessions" / year / month / date / f"rollout-{day}T14-02-11-{session}.jsonl"


class Rollout:
    """A Codex rollout being written: each call adds one line as Codex's recorder does."""

    def __init__(self, path: Path, session: str = SESSION, day: str = "2025-09-10") -> None:
        self.path = path
        self.session = session
        self.day = day
        self.lines: list[str] = []
        self.count = 0

    def time(self) -> str:
        self.count += 1
        return f"{self.day}T14:{self.count // 60:02d}:{self.count % 60:02d}.000Z"

    def add(self, line: dict) -> dict:
        self.lines.append(json.dumps(line))
        return line

    def line(self, kind: str, payload) -> dict:
        return self.add({"timestamp": self.time(), "type": kind, "payload": payload})

    def meta(self, **fields) -> dict:
        payload = {"id": self.session, "timestamp": f"{self.day}T14:00:00.000Z", "cwd": "/home/ana/proj",
                   "originator": "codex_cli_rs", "cli_version": "0.36.0", "instructions": None, "source": "cli",
                   "model_provider": "openai",
                   "git": {"commit_hash": "9f8e7d6", "branch": "main", "repository_url": "git@example.com:proj.git"},
                   **fields}
        return self.line("session_meta", payload)

    def turn(self, model: str = "gpt-5") -> dict:
        return self.line("turn_context", {"cwd": "/home/ana/proj", "approval_policy": "on-request",
                                          "sandbox_policy": {"type": "workspace-write"}, "model": model,
                                          "effort": "medium", "summary": "auto"})

    def item(self, payload: dict) -> dict:
        return self.line("response_item", payload)

    def event(self, kind: str, **fields) -> dict:
        return self.line("event_msg", {"type": kind, **fields})

    def user(self, text: str) -> None:
        """What the user typed: the item the model sees, and the event Codex's interface shows."""
        self.item(message("user", input_text(text)))
        self.event("user_message", message=text, images=[])

    def assistant(self, text: str) -> None:
        self.item(message("assistant", {"type": "output_text", "text": text}))
        self.event("agent_message", message=text)

    def write(self, torn: str = "") -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("\n".join(self.lines) + "\n" + torn)
        return self.path


def message(role: str, *parts: dict) -> dict:
    return {"type": "message", "role": role, "content": list(parts)}


def input_text(text: str) -> dict:
    return {"type": "input_text", "text": text}


def function_call(call: str, name: str, **arguments) -> dict:
    """A function call as Codex records it: its arguments JSON text."""
    return {"type": "function_call", "name": name, "arguments": json.dumps(arguments), "call_id": call}


def output(call: str, value, kind: str = "function_call_output") -> dict:
    return {"type": kind, "call_id": call, "output": value}


def reasoning(*summary: str, encrypted: str | None = "gAAAAB-opaque") -> dict:
    return {"type": "reasoning", "summary": [{"type": "summary_text", "text": text} for text in summary],
            "encrypted_content": encrypted}


PATCH = "*** Begin Patch\n*** Update File: src/dates.py\n-local\n+utc\n*** End Patch\n"


def a_rollout(path: Path) -> Rollout:
    """Every kind of line and item Codex writes in a session of a few turns."""
    rollout = Rollout(path)
    rollout.meta()
    rollout.item(message("developer", input_text("<permissions instructions>Sandbox: workspace-write.")))
    rollout.item(message("user", input_text("<environment_context>\n  <cwd>/home/ana/proj</cwd>\n"
                                            "</environment_context>")))
    rollout.turn()
    rollout.user("Why does test_parse_date fail on CI?")
    rollout.item(reasoning("**Running the test suite**"))
    rollout.event("agent_reasoning", text="**Running the test suite**")
    rollout.assistant("Let me run the test.")
    rollout.item(function_call("call_1", "shell", command=["bash", "-lc", "pytest -k parse_date -q"],
                               workdir="/home/ana/proj"))
    rollout.item({"type": "local_shell_call", "call_id": "call_2", "status": "completed",
                  "action": {"type": "exec", "command": ["cat", "tests/test_dates.py"], "timeout_ms": 10000}})
    rollout.item(output("call_1", json.dumps({"output": "1 failed: tz offset\n",
                                              "metadata": {"exit_code": 1, "duration_seconds": 7.2}})))
    rollout.item(output("call_2", {"content": "cat: tests/test_dates.py: No such file", "success": False}))
    rollout.item(reasoning(encrypted="gAAAAB-only-opaque"))
    rollout.assistant("The offset is read as local time; the deploy freeze ends Friday anyway.")
    rollout.event("token_count", info={"total_token_usage": {"input_tokens": 5200, "output_tokens": 180}},
                  rate_limits=None)
    rollout.turn()
    rollout.item(message("user", input_text("Here is the screenshot"),
                         {"type": "input_image", "image_url": "data:image/png;base64," + "A" * 4096}))
    rollout.event("user_message", message="Here is the screenshot", images=["data:image/png;base64,AAAA"])
    rollout.item({"type": "web_search_call", "status": "completed",
                  "action": {"type": "search", "query": "python fromisoformat Z suffix"}})
    rollout.assistant("Python 3.11 reads the Z suffix; patching.")
    rollout.item({"type": "custom_tool_call", "status": "completed", "call_id": "call_3", "name": "apply_patch",
                  "input": PATCH})
    rollout.item(function_call("call_4", "view_image", path="shot.png"))
    rollout.item(output("call_3", "Success. Updated the following files:\nM src/dates.py\n",
                        kind="custom_tool_call_output"))
    rollout.item(output("call_4", [input_text("the image:"),
                                   {"type": "input_image", "image_url": "data:image/jpeg;base64," + "B" * 2048}]))
    rollout.item({"type": "ghost_snapshot", "ghost_commit": {"id": "abc123", "parent": None}})
    rollout.event("context_compacted")
    rollout.line("compacted", {"message": "Summary: test_parse_date fails on tz offset; patched to UTC."})
    rollout.item({"type": "compaction", "encrypted_content": "gAAAAB-compacted"})
    rollout.line("hologram", {"shape": "new"})  # a line no reader knows: a newer Codex
    rollout.turn()
    rollout.assistant("Fixed: parse with UTC.")
    return rollout


def test_a_rollout_becomes_a_searchable_session_that_continues(env, openai_env, openai_server, home):
    path = rollout_path(home)
    a_rollout(path).write(torn='{"timestamp":"2025-09-10T15:00:00.000Z","type":"response_item","payl')
    before = snapshot(home / ".codex")

    report = imported(openai_env, "codex")

    name = "codex-2025-09-10-why-does-test-parse-date-fail-on-ci"
    assert made(report) == [name]
    assert "left out: 2 images, 2 injected context messages, 1 encrypted compaction, " \
           "1 encrypted reasoning block, 1 thinking block, 1 web search" in report
    assert f"~/.codex/sessions/2025/09/10/{path.name}: skipped 1 line of unknown type 'hologram', " \
           "1 torn last line" in report
    assert snapshot(home / ".codex") == before  # only read

    document = session_document(openai_env, name)
    assert document["title"] == "Why does test_parse_date fail on CI?"
    record = document["imported"]
    assert record["source"] == "codex" and record["id"] == SESSION
    assert record["details"]["cwd"] == "/home/ana/proj" and record["details"]["models"] == ["gpt-5"]
    assert record["details"]["cli_version"] == "0.36.0"
    history = document["chat_history"]
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "tool", "assistant", "user", "assistant",
                                            "tool", "tool", "user", "assistant"]
    assert history[0]["content"] == "Why does test_parse_date fail on CI?"
    first_answer = history[1]
    assert first_answer["content"] == "Let me run the test."
    assert first_answer["meta"]["thinking"] == "**Running the test suite**"
    assert [(c["id"], c["name"], c["arguments"]) for c in first_answer["tool_calls"]] == [
        ("call_1", "shell", {"command": ["bash", "-lc", "pytest -k parse_date -q"], "workdir": "/home/ana/proj"}),
        ("call_2", "local_shell", {"type": "exec", "command": ["cat", "tests/test_dates.py"], "timeout_ms": 10000})]
    assert history[2]["tool_call_id"] == "call_1" and "1 failed: tz offset" in history[2]["content"]
    assert history[3]["tool_call_id"] == "call_2" and history[3]["is_error"] is True
    assert history[3]["content"] == "cat: tests/test_dates.py: No such file"
    assert history[4]["content"] == "The offset is read as local time; the deploy freeze ends Friday anyway."
    assert "thinking" not in history[4].get("meta", {})
    assert history[5]["content"] == "Here is the screenshot\n[image (image/png, 3 KB): not imported]"
    patched = history[6]
    assert patched["content"] == "Python 3.11 reads the Z suffix; patching."
    assert patched["meta"]["left_out"] == ["web search 'python fromisoformat Z suffix'"]
    assert [(c["id"], c["name"], c["arguments"]) for c in patched["tool_calls"]] == [
        ("call_3", "apply_patch", {"input": PATCH}), ("call_4", "view_image", {"path": "shot.png"})]
    assert history[8]["content"] == "the image:\n[image (image/jpeg, 1 KB): not imported]"
    assert history[9]["meta"]["is_summary"] is True and history[9]["content"].startswith("Summary:")
    assert history[10]["content"] == "Fixed: parse with UTC."
    assert all(m["timestamp"].startswith("2025-09-10T14:") for m in history)

    assert name in searched(openai_env, "offset", "local", "time")
    sent = continued(openai_env, openai_server, name)
    assert [m["role"] for m in sent[-12:]] == ["user", "assistant", "tool", "tool", "assistant", "user",
                                               "assistant", "tool", "tool", "user", "assistant", "user"]
    calls = sent[-11]["tool_calls"]
    assert [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("call_1", "shell", {"command": ["bash", "-lc", "pytest -k parse_date -q"], "workdir": "/home/ana/proj"}),
        ("call_2", "local_shell", {"type": "exec", "command": ["cat", "tests/test_dates.py"], "timeout_ms": 10000})]
    assert sent[-10]["tool_call_id"] == "call_1" and "1 failed: tz offset" in sent[-10]["content"]
    assert sent[-1]["content"] == "and then?"


def test_importing_again_adds_what_grew_and_nothing_twice(env, home):
    rollout = Rollout(rollout_path(home))
    rollout.meta()
    rollout.turn()
    rollout.user("Is the freeze over?")
    rollout.assistant("Not until Friday.")
    rollout.write()
    other_id = "0e9a0000-1111-4222-8333-444455556666"
    other = Rollout(rollout_path(home, other_id, "2025-09-11"), session=other_id, day="2025-09-11")
    other.meta()
    other.user("Rename the module")
    other.assistant("Done.")
    other.write()
    first = imported(env, "codex")
    assert sorted(made(first)) == ["codex-2025-09-10-is-the-freeze-over", "codex-2025-09-11-rename-the-module"]

    again = imported(env, "codex")
    assert made(again) == [] and "0 new sessions, 0 grown, 0 messages written; 2 already imported" in again

    rollout.turn()
    rollout.user("And after Friday?")
    rollout.item(reasoning(encrypted="gAAAAB-opaque"))
    rollout.assistant("Deploys resume Monday.")
    rollout.write()
    grown = imported(env, "codex")
    name = "codex-2025-09-10-is-the-freeze-over"
    assert f"added 2 messages to '{name}' (now 4 messages)" in grown
    assert "1 already imported and unchanged" in grown
    history = session_document(env, name)["chat_history"]
    assert [m["content"] for m in history] == ["Is the freeze over?", "Not until Friday.", "And after Friday?",
                                               "Deploys resume Monday."]
    assert journaled(env, name) == [m["content"] for m in history]  # each message once in its journal
    assert run_chatcli("session", "list", env=env).stdout.count("codex-") == 2
    assert "0 new sessions, 0 grown" in imported(env, "codex")


def test_an_older_rollout_without_the_envelope_imports(env, home):
    older = "0c9b8a7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d"
    path = home / ".codex" / "sessions" / f"rollout-2025-05-07-{older}.jsonl"  # the first, flat layout
    lines = [{"id": older, "timestamp": "2025-05-07T17:24:21.123Z", "instructions": None},
             message("user", input_text("<user_instructions>\nBe brief.\n</user_instructions>")),
             message("user", input_text("add a README")),
             function_call("call_1", "shell", command=["ls"]),
             output("call_1", "src\nCargo.toml\n"),
             {"record_type": "state", "previous_response_id": "resp_abc"},
             message("assistant", {"type": "output_text", "text": "Created README.md."}),
             {"record_type": "state"}]
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))

    report = imported(env, "codex")

    assert made(report) == ["codex-2025-05-07-add-a-readme"]
    assert "left out: 1 injected context message" in report and "skipped" not in report
    document = session_document(env, "codex-2025-05-07-add-a-readme")
    assert document["imported"]["id"] == older
    history = document["chat_history"]
    assert [(m["role"], m["content"]) for m in history] == [
        ("user", "add a README"), ("assistant", ""), ("tool", "src\nCargo.toml\n"),
        ("assistant", "Created README.md.")]
    assert history[1]["tool_calls"][0]["arguments"] == {"command": ["ls"]}


def test_damaged_files_are_skipped_one_line_each_and_the_rest_imported(env, home):
    good = Rollout(rollout_path(home))
    good.meta()
    good.user("A good question")
    good.write()
    day = home / ".codex" / "sessions" / "2025" / "09" / "10"
    (day / "rollout-empty.jsonl").write_text("")
    (day / "rollout-garbage.jsonl").write_bytes(b"\x00\xff not json\n[1,2]\n")
    newer_id = "9a9a9a9a-0000-4000-8000-000000000001"
    newer = Rollout(rollout_path(home, newer_id), session=newer_id)
    newer.meta()
    newer.item(message("user", input_text("Asked in a newer Codex")))
    newer.line("response_item", "a string where an object was")
    newer.item({"type": "message", "role": "user", "content": 42})
    newer.item({"type": "hologram_call", "call_id": "call_9"})
    newer.item({"type": "function_call", "name": "shell", "arguments": "{}"})  # no call id
    newer.item(output("call_9", 42))
    newer.write()

    report = imported(env, "codex")

    assert sorted(made(report)) == ["codex-2025-09-10-a-good-question", "codex-2025-09-10-asked-in-a-newer-codex"]
    assert "~/.codex/sessions/2025/09/10/rollout-garbage.jsonl: skipped 2 unreadable lines" in report
    assert f"~/.codex/sessions/2025/09/10/{newer.path.name}: skipped 1 item of unknown type 'hologram_call', " \
           "1 line of an unknown shape, 1 message of an unknown shape, 1 tool call of an unknown shape, " \
           "1 tool result of an unknown shape" in report
    assert "rollout-empty" not in report
    assert sum(1 for line in report.splitlines() if "skipped" in line) == 2


def test_the_codex_home_is_where_codex_home_says(tmp_path):
    assert codex.default({"CODEX_HOME": str(tmp_path / "elsewhere")}, tmp_path / "home") == \
        tmp_path / "elsewhere" / "sessions"
    assert codex.default({}, tmp_path / "home") == tmp_path / "home" / ".codex" / "sessions"


def test_reading_keeps_what_the_model_wrote_and_names_the_conversation_by_its_file(tmp_path):
    rollout = Rollout(tmp_path / f"rollout-2025-09-10T14-02-11-{SESSION}.jsonl")
    rollout.user("Check both files")  # no session_meta line: the id is the file's
    rollout.item({"type": "function_call", "name": "shell", "arguments": "{\"command\": [\"ls\"", "call_id": "c1"})
    rollout.item({"type": "function_call", "name": "read", "arguments": "[1, 2]", "call_id": "c2"})
    rollout.item(output("c1", "A"))
    rollout.item(output("c2", "B"))
    rollout.item({"type": "local_shell_call", "call_id": None, "status": "completed",
                  "action": {"type": "exec", "command": ["make", "test"]}})
    rollout.item(message("user", input_text("<turn_aborted>\nThe user interrupted.\n</turn_aborted>")))
    rollout.item(message("assistant", {"type": "output_text", "text": "Both read."}))
    tally = Tally("s.jsonl")
    [found] = codex.read(rollout.write(), tally)
    assert not tally
    assert found.id == SESSION and found.title == "Check both files"
    assert found.left_out == {"unpaired shell call": 1, "injected context message": 1}
    roles = [(m.role, m.tool_call_id or [c["id"] for c in m.tool_calls or []]) for m in found.messages]
    assert roles == [("user", []), ("assistant", ["c1", "c2"]), ("tool", "c1"), ("tool", "c2"), ("assistant", []),
                     ("assistant", [])]
    calls = found.messages[1].tool_calls
    assert [(c["arguments"], c.get("raw")) for c in calls] == [({}, "{\"command\": [\"ls\""), ({}, "[1, 2]")]
    assert found.messages[4].meta["left_out"] == ["shell call 'make test'"]
