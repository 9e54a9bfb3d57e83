"""Transcript exports (SPEC §7), pure: entries in, Markdown or JSON lines out.

An entry is a recorded message (`Entry.message` set, with its 1-based position and time) or
a rewrite of the live history (`Entry.live`: the positions of the history that replaced it).
"""

from __future__ import annotations

import json
import re
from collections import namedtuple
from collections.abc import Sequence

from chatcli.core.messages import Message, call_function

Entry = namedtuple("Entry", "pos message time live reason", defaults=(None, "", None, ""))


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


# What rewrote the history, by the `reason` of its journal event.
REWRITES = {"compact": "a compaction", "rewind": "a rewind", "uncompact": "a compaction undone"}


def to_markdown(entries: Sequence[Entry], *, title: str, facts: Sequence[str]) -> str:
    """One section per message; tool calls and results in code blocks; system prompts collapsed."""
    out = [f"# {title}", ""]
    out += [f"- {fact}" for fact in facts]
    names = call_names([entry.message for entry in entries if entry.message is not None])
    for entry in entries:
        out.append("")
        if entry.message is None:
            why = REWRITES.get(entry.reason, "compaction, rewind or an edit")
            out.append(f"> The live history was rewritten here ({why}); it continued "
                       f"with {len(entry.live or ())} messages.")
            continue
        message = entry.message
        when = f" · {local_time(entry.time)}" if entry.time else ""
        said = flags(message)
        if message.role == "system":
            out += [f"<details><summary>#{entry.pos} system prompt{when}</summary>", "", message.content, "",
                    "</details>"]
            continue
        if message.role == "tool":
            name = names.get(str(message.tool_call_id))
            call = f" for call {message.tool_call_id}" if message.tool_call_id else ""
            call = f" of {name}{call}" if name else call
            out += [f"## #{entry.pos} tool result{call}{said}{when}", "", fence(message.content)]
            continue
        out += [f"## #{entry.pos} {message.role}{said}{when}", ""]
        if message.content:
            out.append(message.content)
        for call in message.tool_calls or ():
            out += ["", *_call_block(call)]
    return "\n".join(out).rstrip("\n") + "\n"


def flags(message: Message) -> str:
    """What a heading says about a message beside its role: ' (coder) (refused)', …"""
    meta = message.meta
    out = f" ({meta['mode']})" if meta.get("mode") in ("agent", "coder") else ""
    if meta.get("is_summary"):
        out += f" (summary of {meta.get('summary_of', '?')} messages)"
    if meta.get("refused"):
        out += " (refused)"
    elif message.role == "tool" and message.extra.get("is_error") is True:
        out += " (error)"
    if meta.get("interrupted"):
        out += " (interrupted)"
    return out


def call_names(messages: Sequence[Message]) -> dict[str, str]:
    """Tool call id → the tool's name, for the results' headings."""
    names = {}
    for message in messages:
        for call in message.tool_calls or ():
            if isinstance(call, dict):
                names[str(call.get("id"))] = str(call_function(call).get("name"))
    return names


def plain_block(pos: int, message: Message, when: str = "", names: dict[str, str] | None = None) -> str:
    """One message as `session show` and `/session transcript show` print it: a heading, its
    text, then each tool call on a line of its own (name and arguments)."""
    role = message.role
    if role == "tool":
        name = (names or {}).get(str(message.tool_call_id))
        role = f"tool result of {name} ({message.tool_call_id})" if name else f"tool result ({message.tool_call_id})"
    lines = [f"#{pos} {role}{flags(message)}{when}"]
    if message.content:
        lines.append(message.content)
    for call in message.tool_calls or ():
        if isinstance(call, dict):
            function = call_function(call)
            lines.append(f"→ {function.get('name')} {function.get('arguments') or '{}'}")
    return "\n".join(lines)


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
            row = {"type": "rewrite", "time": entry.time, "live": list(entry.live or ()),
                   **({"reason": entry.reason} if entry.reason else {})}
        else:
            row = {"type": "message", "pos": entry.pos, "time": entry.time or None, **entry.message.to_dict()}
        lines.append(json.dumps(row, ensure_ascii=False))
    return "\n".join(lines) + ("\n" if lines else "")


__all__ = ["Entry", "fence", "local_time", "to_jsonl", "to_markdown"]
