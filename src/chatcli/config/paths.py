"""Where chatcli keeps things, from the environment alone (light: no settings machinery).

`Settings` uses these, and so does `chatcli session list`, which needs a path and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def expand(path: str, env: Mapping[str, str]) -> Path:
    """expanduser against the HOME of `env` (not necessarily this process's)."""
    if path == "~" or path.startswith("~/"):
        home = env.get("HOME") or str(Path.home())
        path = home + path[1:]
    return Path(path).expanduser()


def chatcli_home(env: Mapping[str, str]) -> Path:
    return expand(env.get("CHATCLI_HOME") or "~/.chatcli", env)


def sessions_dir(env: Mapping[str, str]) -> Path:
    return chatcli_home(env) / "sessions"


def history_file(env: Mapping[str, str]) -> Path:
    return expand(env.get("HISTORY_FILE") or "~/.chatcli_history", env)
