"""Reading the recall store (SPEC §8.1): one function for /recall and for the model's `recall` tool.

After a compaction the summary carries `<<ccr:KEY>>` markers. When the provider can call
tools, every request whose history holds such a summary offers the model a `recall` function;
the model calls it with the key and gets the same text /recall prints.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from chatcli.config.settings import Settings
from chatcli.core.compaction import kept_originals
from chatcli.core.errors import ChatcliError
from chatcli.core.messages import Message
from chatcli.providers.base import Tool, ToolCall
from chatcli.store.home import Home
from chatcli.store.recall import MARKER_RE, parse_key

TOOL = Tool(
    name="recall",
    description=("Fetch the original messages that a conversation summary replaced. Summaries name them "
                 "with markers like <<ccr:0123456789abcdef>>; pass the 16 hexadecimal digits as `key`."),
    parameters={"type": "object", "properties": {"key": {"type": "string", "description": "the 16-hex key"}},
                "required": ["key"]},
)


def originals(settings: Settings, key: str, history: Sequence[Message] = ()) -> tuple[list[Message], dict]:
    """The messages recall entry `key` stands for, and where they came from: from the recall
    store, or (expired there, or never there) from the summary in `history` that keeps them
    (with the journal off, SPEC §8.1). Raises ChatcliError (unknown, expired, damaged)."""
    try:
        return Home.of(settings).recall().get(key)
    except ChatcliError:
        kept = kept_originals(list(history), parse_key(key))
        if kept is None:
            raise
        return kept, {"kept": "session"}


def recall_text(settings: Settings, key: str, history: Sequence[Message] = ()) -> str:
    """The messages of recall entry `key`, numbered. Raises ChatcliError (unknown, expired, damaged)."""
    messages, origin = originals(settings, key, history)
    where = f" from session '{origin['session']}'" if origin.get("session") else ""
    if origin.get("kept"):
        where = " (kept in this session's summary: the recall store no longer has it)"
    blocks = [f"Recall entry {parse_key(key)}{where}: {len(messages)} messages."]
    blocks += [f"#{i} {m.role}\n{m.content}" for i, m in enumerate(messages, 1)]
    return "\n\n".join(blocks)


def tool_state(history: Sequence[Message]) -> tuple[bool, bool]:
    """(whether a summary in the history names recall entries: the tool is offered; whether the
    history holds tool calls: tools must be described even when not offered)."""
    summary = called = False
    for message in history:
        if message.tool_calls:
            called = True
        elif message.is_summary and MARKER_RE.search(message.content):
            summary = True
    return summary, called


def answer(settings: Settings, call: ToolCall, history: Sequence[Message] = ()) -> tuple[str, str | None]:
    """The result of a tool call the model made, and a line for the user: (text, None) when it
    worked, (error text, the line) when it did not. Never raises."""
    if call.name != TOOL.name:
        problem = f"there is no tool named {call.name!r}; the only one is 'recall'"
    else:
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError:
            arguments = None
        key = arguments.get("key") if isinstance(arguments, dict) else None
        if not isinstance(key, str):
            problem = "recall needs a 'key' argument (16 hexadecimal digits)"
        else:
            try:
                return recall_text(settings, key, history), None
            except ChatcliError as exc:
                problem = str(exc)
    return f"error: {problem}", f"The model's {call.name} call failed: {problem}"


__all__ = ["TOOL", "answer", "originals", "recall_text", "tool_state"]
