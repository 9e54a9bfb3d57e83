"""Transcript exports (SPEC §7), pure: entries in, Markdown or JSON lines out.

An entry is a recorded message (`Entry.message` set, with its 1-based position and time) or
a rewrite of the live history (`Entry.live`: the positions of the history that replaced it).
"""

from __future__ import annotations

import json
import re
from collections import namedtuple
from collections.abc import Sequence

from chatcli.core.messages import call_function

Entry = namedtuple("Entry", "pos message time live", defaults=(None, "", None))


def local_time(text: str) -> str:
    """A journal time (ISO 8601, UTC) as local 'YYYY-MM-DD HH:MM:SS'; '' when there is none."""
    import datetime

    if not text:
        return ""
    try:
        return datetime.datetime.fromisoformat(text).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except (TypeError, ValueError):
        return str(text)[:19]


def fence(text: str, info: str = "") -> str:
    """`text` in a fenced code block whose fence is longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`{3,}", text)), default=2)
    marks = "`" * (longest + 1)
    return f"{marks}{info}\n{text}\n{marks}"


def to_markdown(entries: Sequence[Entry], *, title: str, facts: Sequence[str]) -> str:
    """One section per message; tool calls and results in code blocks; system prompts collapsed."""
    out = [f"# {title}", ""]
    out += [f"- {fact}" for fact in facts]
    for entry in entries:
        out.append("")
        if entry.message is None:
            out.append(f"> The live history was rewritten here (compaction, rewind or an edit); it continued "
                       f"with {len(entry.live or ())} messages.")
            continue
        message = entry.message
        when = f" · {local_time(entry.time)}" if entry.time else ""
        flags = f" ({message.meta['mode']})" if message.meta.get("mode") in ("agent", "coder") else ""
        flags += " (interrupted)" if message.meta.get("interrupted") else ""
        if message.meta.get("is_summary"):
            flags += f" (summary of {message.meta.get('summary_of', '?')} messages)"
        if message.role == "system":
            out += [f"<details><summary>#{entry.pos} system prompt{when}</summary>", "", message.content, "",
                    "</details>"]
            continue
        if message.role == "tool":
            call = f" for call {message.tool_call_id}" if message.tool_call_id else ""
            flags += " (refused)" if message.meta.get("refused") else ""
            out += [f"## #{entry.pos} tool result{call}{flags}{when}", "", fence(message.content)]
            continue
        out += [f"## #{entry.pos} {message.role}{flags}{when}", ""]
        if message.content:
            out.append(message.content)
        for call in message.tool_calls or ():
            out += ["", *_call_block(call)]
    return "\n".join(out).rstrip("\n") + "\n"


def _call_block(call: dict) -> list[str]:
    """A tool call as its name and id, then its arguments as indented JSON (as written, when they
    are not JSON)."""
    function = call_function(call)
    arguments = function.get("arguments")
    try:
        shown = json.dumps(json.loads(arguments), ensure_ascii=False, indent=2) if isinstance(arguments, str) \
            else json.dumps(arguments, ensure_ascii=False, indent=2)
    except ValueError:
        shown = str(arguments)
    return [f"Tool call `{function.get('name')}` (id {call.get('id')}):", "", fence(shown, "json")]


def to_jsonl(entries: Sequence[Entry]) -> str:
    """One JSON object per entry: a message with its position and time, or a rewrite."""
    lines = []
    for entry in entries:
        if entry.message is None:
            row = {"type": "rewrite", "time": entry.time, "live": list(entry.live or ())}
        else:
            row = {"type": "message", "pos": entry.pos, "time": entry.time or None, **entry.message.to_dict()}
        lines.append(json.dumps(row, ensure_ascii=False))
    return "\n".join(lines) + ("\n" if lines else "")


__all__ = ["Entry", "fence", "local_time", "to_jsonl", "to_markdown"]
