"""What the `chatcli import` tests of every source share: the sessions an import says it made,
the source files left as they were, a made session continued with the fake model."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import run_chatcli

MADE = re.compile(r"^  new '([^']+)'", re.M)


def made(output: str) -> list[str]:
    """The sessions an import's report says it made, in its order."""
    return MADE.findall(output)


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under `root`: its bytes and modification time (an import only reads them)."""
    return {str(path): (path.read_bytes(), path.stat().st_mtime_ns) for path in sorted(root.rglob("*"))
            if path.is_file()}


def imported(env: dict, *args: str) -> str:
    """Run `chatcli import ARGS`; its report (it must succeed, and say no traceback)."""
    result = run_chatcli("import", *args, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    return result.stdout


def session_document(env: dict, name: str) -> dict:
    return json.loads((Path(env["CHATCLI_HOME"]) / "sessions" / f"{name}.json").read_text())


def journaled(env: dict, name: str) -> list[str]:
    """The contents of the messages session `name`'s journal recorded, in order."""
    journal = Path(env["CHATCLI_HOME"]) / "transcripts" / f"{session_document(env, name)['transcript_id']}.jsonl"
    events = [json.loads(line) for line in journal.read_text().splitlines()]
    return [event["message"]["content"] for event in events if event["type"] == "message"]


def continued(env: dict, server, name: str, prompt: str = "and then?") -> list[dict]:
    """Continue session `name` with one turn (`--session NAME -p`); the messages the model got."""
    result = run_chatcli("--session", name, "-p", prompt, env=env)
    assert result.returncode == 0, result.stderr
    assert f"You said: {prompt}" in result.stdout
    sent = server.requests[-1].body["messages"]
    assert paired(sent), sent
    return sent


def paired(messages: list[dict]) -> bool:
    """OpenAI's rule for a request (it answers 400 otherwise): an assistant message's tool calls
    are followed at once by one tool message each, and no tool message stands anywhere else."""
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        if message["role"] == "tool":
            return False
        if message["role"] == "assistant" and message.get("tool_calls"):
            wanted = [call["id"] for call in message["tool_calls"]]
            answers = [m.get("tool_call_id") for m in messages[index:index + len(wanted)]]
            if sorted(answers, key=str) != sorted(wanted) or \
                    any(m["role"] != "tool" for m in messages[index:index + len(wanted)]):
                return False
            index += len(wanted)
    return True


def searched(env: dict, *words: str) -> str:
    result = run_chatcli("session", "search", *words, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout
