"""`chatcli mcp-server` driven by the MCP Inspector's CLI, the protocol's own client from npm (SPEC §1, §11).

`make test` installs the Inspector into the virtual environment and names it in MCP_INSPECTOR;
run without make, the tests find it there by the repository's layout. They never skip: a
missing Inspector fails them, saying so.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import CHATCLI

REPO = Path(__file__).resolve().parent.parent
INSPECTOR = os.environ.get("MCP_INSPECTOR") or str(REPO / ".venv" / "node" / "node_modules" / ".bin" / "mcp-inspector")
# The Inspector starts a stdio server with a few variables of its own environment only (PATH,
# HOME…): what chatcli reads goes with `-e KEY=VALUE`.
SERVER_VARIABLES = ("HOME", "LANG", "CHATCLI_", "LLM_", "OPENAI_")


def inspect(env: dict[str, str], *args: str) -> tuple[int, dict]:
    """Run `mcp-inspector --cli chatcli mcp-server ARGS` (one server per run, as the Inspector
    does), and return its exit status and its one JSON object: {"result": …} on stdout, or
    {"error": …} on stderr."""
    if not os.access(INSPECTOR, os.X_OK):
        pytest.fail(f"the MCP Inspector is not installed at {INSPECTOR}: `make test` installs it "
                    "(or set MCP_INSPECTOR to its mcp-inspector)", pytrace=False)
    passed = [flag for key, value in sorted(env.items()) if key.startswith(SERVER_VARIABLES)
              for flag in ("-e", f"{key}={value}")]
    done = subprocess.run([INSPECTOR, "--cli", *passed, CHATCLI, "mcp-server", "--format", "json", *args],
                          env=env, capture_output=True, text=True, timeout=120)
    out = done.stdout.strip() or done.stderr.strip().splitlines()[-1]
    return done.returncode, json.loads(out)


def text(result: dict) -> str:
    return "\n".join(part["text"] for part in result["content"] if part.get("type") == "text")


def test_the_inspector_lists_the_tools_with_their_schemas(openai_env, openai_server):
    code, out = inspect(openai_env, "--method", "tools/list", "--strict")
    assert code == 0, out
    tools = {tool["name"]: tool for tool in out["result"]["tools"]}
    assert set(tools) == {"ask_chatcli", "agent_task", "manage_session"}
    assert tools["ask_chatcli"]["inputSchema"]["required"] == ["prompt"]
    assert "fork" in tools["manage_session"]["inputSchema"]["properties"]["action"]["enum"]


def test_the_inspector_lists_the_saved_sessions_with_manage_session(openai_env, openai_server):
    code, out = inspect(openai_env, "--method", "tools/call", "--tool-name", "manage_session",
                        "--tool-arg", "action=list")
    assert code == 0, out
    assert text(out["result"]) == "No saved sessions." and out["result"]["isError"] is False


def test_the_inspector_asks_chatcli_and_the_next_run_continues_the_conversation(openai_env, openai_server):
    code, out = inspect(openai_env, "--method", "tools/call", "--tool-name", "ask_chatcli",
                        "--tool-arg", "prompt=the heron nests by the river")
    assert code == 0, out
    assert text(out["result"]) == "You said: the heron nests by the river"
    code, out = inspect(openai_env, "--method", "tools/call", "--tool-name", "ask_chatcli",
                        "--tool-arg", "prompt=where does it nest?")
    assert text(out["result"]) == "[Continued from 'mcp-mcp' (2 messages).]\nYou said: where does it nest?"
    assert [m["content"] for m in openai_server.requests[-1].body["messages"]] == [
        "the heron nests by the river", "You said: the heron nests by the river", "where does it nest?"]


def test_the_inspector_gets_one_clear_line_for_an_unknown_prompt(openai_env, openai_server):
    code, out = inspect(openai_env, "--method", "prompts/get", "--prompt-name", "x")
    assert code != 0
    assert out["error"]["message"] == "unknown prompt 'x': this server has no prompts"


def test_the_inspector_gets_one_clear_line_for_a_missing_argument(openai_env, openai_server):
    code, out = inspect(openai_env, "--method", "tools/call", "--tool-name", "ask_chatcli")
    assert code != 0 and out["result"]["isError"] is True
    assert text(out["result"]) == "ask_chatcli: 'prompt' is required"


def test_a_number_the_inspector_sends_for_a_name_or_a_prompt_is_taken_as_text(openai_env, openai_server):
    """The Inspector reads `--tool-arg name=2024` as the number 2024: a session may be named so,
    and a prompt may be a number."""
    code, out = inspect(openai_env, "--method", "tools/call", "--tool-name", "manage_session",
                        "--tool-arg", "action=save", "name=2024")
    assert code == 0, out
    assert text(out["result"]).startswith("Session '2024' saved")
    code, out = inspect(openai_env, "--method", "tools/call", "--tool-name", "ask_chatcli", "--tool-arg", "prompt=42")
    assert code == 0, out
    assert text(out["result"]).endswith("You said: 42")


def test_the_inspector_sees_chatclis_name_and_version(openai_env, openai_server):
    from chatcli import __version__

    code, out = inspect(openai_env, "--method", "initialize")
    assert code == 0, out
    assert out["result"]["serverInfo"] == {"name": "chatcli", "version": __version__}
