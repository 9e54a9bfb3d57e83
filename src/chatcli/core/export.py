"""Transcript exports (SPEC §7), pure: entries in, Markdown or JSON lines out.

An entry is a recorded message (`Entry.message` set, with its 1-based position and time) or
a rewrite of the live history (`Entry.live`: the positions of the history that replaced it).
"""

from __future__ import annotations

import json
import re
from collections import namedtuple
from collections.abc import Sequence

from chatcli.core.messages import Message, call_arguments, call_arguments_text, call_name, parse_arguments

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
    names = iter(call_names([entry.message for entry in entries if entry.message is not None]))
    for entry in entries:
        out.append("")
        if entry.message is None:
            why = REWRITES.get(entry.reason, "compaction, rewind or an edit")
            out.append(f"> The live history was rewritten here ({why}); it continued "
                       f"with {len(entry.live or ())} messages.")
            continue
        message, name = entry.message, next(names)
        when = f" · {local_time(entry.time)}" if entry.time else ""
        said = flags(message)
        if message.role == "system":
            out += [f"<details><summary>#{entry.pos} system prompt{when}</summary>", "", message.content, "",
                    "</details>"]
            continue
        if message.role == "tool":
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
        count = meta.get("summary_of")
        out += f" (summary of {count} messages)" if isinstance(count, int) else " (summary)"
    if meta.get("refused"):
        out += " (refused)"
    elif message.role == "tool" and message.extra.get("is_error") is True:
        out += " (error)"
    if meta.get("interrupted"):
        out += " (interrupted)"
    return out


def call_names(messages: Sequence[Message]) -> list[str | None]:
    """For each message, the name of the tool whose call it answers (None for anything but a
    tool result, and for a result whose call is not there), for the results' headings.

    A result answers the call with its id in the nearest assistant message before it: call ids
    are unique only within a turn (local models number them call_0, call_1, … afresh each time),
    so a later call, or an earlier turn's, with the same id is not its call."""
    latest: dict[str, str] = {}  # call id → name, as of the messages read so far
    names: list[str | None] = []
    for message in messages:
        if message.role == "tool":
            names.append(latest.get(str(message.tool_call_id)))
            continue
        names.append(None)
        for call in message.tool_calls or ():
            if isinstance(call, dict):
                latest[str(call.get("id"))] = call_name(call)
    return names


def plain_block(pos: int, message: Message, when: str = "", name: str | None = None) -> str:
    """One message as `session show` and `/session transcript show` print it: a heading, its
    text, then each tool call on a line of its own (name and arguments). `name`: for a tool
    result, the tool that made it (see call_names)."""
    role = message.role
    if role == "tool":
        role = f"tool result of {name} ({message.tool_call_id})" if name else f"tool result ({message.tool_call_id})"
    lines = [f"#{pos} {role}{flags(message)}{when}"]
    if message.content:
        lines.append(message.content)
    for call in message.tool_calls or ():
        if isinstance(call, dict):
            lines.append(f"→ {call_name(call)} {call_arguments_text(call)}")
    return "\n".join(lines)


def _call_block(call: dict) -> list[str]:
    """A tool call as its name and id, then its arguments as indented JSON (as written, when they
    are not JSON)."""
    text = call_arguments_text(call)
    try:
        shown = json.dumps(json.loads(text), ensure_ascii=False, indent=2)
    except ValueError:
        shown = text
    return [f"Tool call `{call_name(call)}` (id {call.get('id')}):", "", fence(shown, "json")]


def to_trajectory(entries: Sequence[Entry]) -> str:
    """The transcript as JSON lines, one turn per line (the seed's `@trajectory` format): a turn
    starts at each message the user typed and holds everything until the next one (what came
    before the first, a system prompt, say, is in the first)."""
    return "".join(json.dumps(turn, ensure_ascii=False) + "\n" for turn in trajectory(entries))


def trajectory(entries: Sequence[Entry]) -> list[dict]:
    """Each turn as a dict:

    turn, mode, time, end      its number (1-based), mode, and the times of its first and last
                               message (a later compaction folded into it keeps its own time)
    positions                  [first, last]: its messages' positions in the transcript
    user                       what the user typed (None only for a transcript with no prompt)
    answer                     the last thing the assistant said in it (None if nothing)
    steps                      each assistant message: {text, tool_calls: [{id, name, arguments,
                               result, is_error}]}, every call with the result that answered it
    system, summaries          system prompts, and compaction summaries ({content, summary_of}), if any
    rewrites                   rewrites of the live history made during it ({time, reason, live}), if any
    interrupted                true when an answer of it was cut short
    """
    turns: list[dict] = []
    calls: dict[str, dict] = {}  # call id → its entry in a step, for the result
    for entry in entries:
        message = entry.message
        typed = message is not None and message.role == "user" and not message.is_summary
        # A typed message starts a turn, unless the turn so far has none (what came before the
        # first prompt, a system prompt or a summary, belongs to the first turn).
        if not turns or typed and turns[-1]["user"] is not None:
            turns.append({"type": "turn", "turn": len(turns) + 1, "mode": "chat", "time": entry.time or None,
                          "end": None, "positions": None, "user": None, "answer": None, "steps": []})
            calls = {}
        turn = turns[-1]
        # A turn ends with its last message. A rewrite or a summary folded into it (a /compact
        # typed after the answer) keeps its own time under "rewrites" and does not stretch it.
        if message is not None and not message.is_summary or turn["end"] is None:
            turn["end"] = entry.time or turn["end"]
        if message is None:
            turn.setdefault("rewrites", []).append({"time": entry.time or None, "reason": entry.reason or None,
                                                    "live": list(entry.live or ())})
            continue
        first = turn["positions"][0] if turn["positions"] else entry.pos
        turn["positions"] = [first, entry.pos]
        mode = (message.meta.get("mode") if message._meta else None) or None
        if mode and (message.role == "user" or turn["mode"] == "chat"):
            turn["mode"] = mode
        if message.meta.get("interrupted") if message._meta else False:
            turn["interrupted"] = True
        if message.is_summary:
            turn.setdefault("summaries", []).append({"content": message.content,
                                                     "summary_of": message.meta.get("summary_of")})
        elif message.role == "user":
            turn["user"] = message.content
        elif message.role == "system":
            turn.setdefault("system", []).append(message.content)
        elif message.role == "assistant":
            step = {"text": message.content, "tool_calls": []}
            for call in message.tool_calls or ():
                if not isinstance(call, dict):
                    continue
                item = {"id": call.get("id"), "name": call_name(call), "arguments": call_arguments(call),
                        "result": None}
                if parse_arguments(call_arguments_text(call)) is None:  # not an object: as the model wrote it
                    item["raw"] = call_arguments_text(call)
                calls[str(call.get("id"))] = item
                step["tool_calls"].append(item)
            turn["steps"].append(step)
            if message.content:
                turn["answer"] = message.content
        elif message.role == "tool":
            item = calls.get(str(message.tool_call_id))
            failed = bool((message._meta and (message.meta.get("refused") or message.meta.get("is_error")))
                          or (message._extra and message.extra.get("is_error")))
            if item is None:  # a result whose call is not in this turn (a cut history): kept as it is
                turn.setdefault("tool_results", []).append({"tool_call_id": message.tool_call_id,
                                                            "result": message.content, "is_error": failed})
            else:
                item["result"], item["is_error"] = message.content, failed
    return turns


__all__ = ["Entry", "fence", "local_time", "to_markdown", "to_trajectory", "trajectory"]
