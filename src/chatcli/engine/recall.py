"""Reading the recall store (SPEC §8.1): one function for /recall and for the model's `recall` tool.

After a compaction the summary carries `<<ccr:KEY>>` markers. When the provider can call
tools, every request whose history holds such a summary offers the model a `recall` function
(engine/agent.py); the model calls it with the key and gets the same text /recall prints. A
summary Go ChatCLI wrote names its own entries (`ccr/<key>.ccr`, raw text): they are read too.
"""

from __future__ import annotations

from collections.abc import Sequence

from chatcli.config.settings import Settings
from chatcli.core.compaction import kept_originals
from chatcli.core.errors import ChatcliError
from chatcli.core.messages import Message
from chatcli.providers.base import Tool
from chatcli.store.home import Home
from chatcli.store.recall import Entry, parse_key

TOOL = Tool(
    name="recall",
    description=("Fetch the original messages that a conversation summary replaced. Summaries name them "
                 "with markers like <<ccr:0123456789abcdef>>; pass the 16 hexadecimal digits as `key`."),
    parameters={"type": "object", "properties": {"key": {"type": "string", "description": "the 16-hex key"}},
                "required": ["key"]},
)


def entry(settings: Settings, key: str, history: Sequence[Message] = ()) -> Entry:
    """Recall entry `key`: from the recall store (chatcli's, else Go ChatCLI's raw text), or
    (expired there, or never there) from the summary in `history` that keeps its originals (with
    the journal off, SPEC §8.1). Raises ChatcliError (unknown, expired, damaged)."""
    try:
        return Home.of(settings).recall().read(key)
    except ChatcliError:
        kept = kept_originals(list(history), parse_key(key))
        if kept is None:
            raise
        return Entry(parse_key(key), kept, {"kept": "session"})


def originals(settings: Settings, key: str, history: Sequence[Message] = ()) -> tuple[list[Message], dict]:
    """The messages recall entry `key` stands for, and where they came from (see `entry`).
    Raises ChatcliError, also for Go ChatCLI's entry (text, not messages)."""
    found = entry(settings, key, history)
    return found.originals(), found.origin


def recall_text(settings: Settings, key: str, history: Sequence[Message] = ()) -> str:
    """What /recall prints (and the model's `recall` tool returns): the messages of entry `key`,
    numbered, or Go ChatCLI's text as it is. Raises ChatcliError (unknown, expired, damaged)."""
    found = entry(settings, key, history)
    if found.text is not None:
        altered = "" if found.intact else " (it no longer matches its key: changed since Go wrote it)"
        return f"Recall entry {found.key}: Go ChatCLI's text, as it stored it{altered}.\n\n{found.text}"
    messages, origin = found.messages, found.origin
    where = f" from session '{origin['session']}'" if origin.get("session") else ""
    if origin.get("kept"):
        where = " (kept in this session's summary: the recall store no longer has it)"
    blocks = [f"Recall entry {found.key}{where}: {len(messages)} messages."]
    blocks += [f"#{i} {m.role}\n{m.content}" for i, m in enumerate(messages, 1)]
    return "\n\n".join(blocks)


__all__ = ["TOOL", "entry", "originals", "recall_text"]
