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


def continued(env: dict, server, name: str, prompt: str = "and then?") -> list[dict]:
    """Continue session `name` with one turn (`--session NAME -p`); the messages the model got."""
    result = run_chatcli("--session", name, "-p", prompt, env=env)
    assert result.returncode == 0, result.stderr
    assert f"You said: {prompt}" in result.stdout
    return server.requests[-1].body["messages"]


def searched(env: dict, *words: str) -> str:
    result = run_chatcli("session", "search", *words, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout
