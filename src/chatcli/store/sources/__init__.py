"""Readers of other tools' saved conversations, for `chatcli import`: one module a tool.

Each module declares
- `NAME` (the source as the user types it, and the first part of its sessions' names), `LABEL`;
- `default(env, user_home) -> Path`: where the tool keeps them;
- `files(root) -> list[Path]`: what to read under `root` (a directory or one file), oldest first;
- `read(path, tally) -> Iterator[Found]`: the conversations in one file, oldest first, each made
  into chatcli messages (core/imported.Found). What cannot be read (a torn last line, an unknown
  event, a newer schema) is counted on `tally` and skipped, never raised; only an OSError
  (the file cannot be read at all) is.

The source files are only ever opened for reading."""

from __future__ import annotations

import datetime
import importlib
import orjson
import os
from collections.abc import Iterator
from pathlib import Path

from chatcli.core.errors import ChatcliError, UsageError
from chatcli.core.imported import Tally, moment

# The sources, in the order `chatcli import` lists them: NAME → module.
SOURCES = {
    "claude-code": "claude_code",
    "codex": "codex",
    "gemini": "gemini",
    "chatgpt": "chatgpt",
    "llm": "llm",
    "chatcli": "chatcli",
}


class SourceError(ChatcliError):
    """The source cannot be read at all (nothing where it was looked for, not its format)."""


def source(name: str):
    """The reader module of source `name`; UsageError naming the sources for any other."""
    module = SOURCES.get(name.lower())
    if module is None:
        raise UsageError(f"unknown source {name!r}: choose one of {', '.join(SOURCES)}")
    return importlib.import_module(f"chatcli.store.sources.{module}")


def shown(path: Path | str) -> str:
    """A path as a message shows it: under the user's home as `~/…`."""
    text, home = str(path), os.path.expanduser("~")
    if home not in ("", "/") and (text == home or text.startswith(home + os.sep)):
        return "~" + text[len(home):]
    return text


def files_under(root: Path, pattern: str, label: str) -> list[Path]:
    """The files matching `pattern` (a glob) under the directory `root`, or `root` itself when
    it is a file; oldest first (their modification times). SourceError when there are none."""
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise SourceError(f"no {label} conversations at {shown(root)}: it does not exist (give the path to read)")
    found = [path for path in root.glob(pattern) if path.is_file()]
    if not found:
        raise SourceError(f"no {label} conversations at {shown(root)}: no {pattern} files there")
    return sorted(found, key=mtime_order)


def mtime_order(path: Path) -> tuple[float, str]:
    try:
        return path.stat().st_mtime, str(path)
    except OSError:
        return 0.0, str(path)


def json_lines(path: Path, tally: Tally) -> Iterator[dict]:
    """The JSON objects of a JSON Lines file, in order. A last line cut short (the tool was
    writing it) is "torn last line"; any other line that is not a JSON object, "unreadable line"."""
    with open(path, "rb") as handle:  # line by line: a log of gigabytes is never held whole
        for line in handle:
            if not line.strip():
                continue
            try:
                value = orjson.loads(line)
            except ValueError:
                # Only the last line can lack its newline: the tool was writing it.
                tally.skip("unreadable line" if line.endswith(b"\n") else "torn last line")
                continue
            if not isinstance(value, dict):
                tally.skip("unreadable line")
                continue
            yield value


def timed(message, time: str | None):
    """`message`, carrying the time its tool recorded for it (in `timestamp`, the field other
    versions of ChatCLI wrote and the v1 merge reads) when there is one."""
    if time:
        message.extra["timestamp"] = time
    return message


def earliest(times: list[str], path: Path) -> str | None:
    """When a conversation started: the earliest time its lines carry, else its file's
    modification time."""
    return min(times) if times else iso(os.stat(path).st_mtime)


def iso(value: object) -> str | None:
    """A time as ISO 8601 in UTC: from epoch seconds (or milliseconds), or a time string kept as
    it is when it parses as one; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        seconds = value / 1000 if value > 1e11 else value
        try:
            return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).isoformat(timespec="seconds")
        except (OverflowError, OSError, ValueError):
            return None
    return value if moment(value) is not None else None
