"""Reading the recall store (SPEC §8.1): one function for /recall and for the model's `recall` tool.

After a compaction the summary carries `<<ccr:KEY>>` markers. When the provider can call
tools, every request whose history holds such a summary offers the model a `recall` function
(engine/agent.py); the model calls it with the key and gets the same text /recall prints.
"""

from __future__ import annotations

from collections.abc import Sequence

from chatcli.config.settings import Settings
from chatcli.core.compaction import kept_originals
from chatcli.core.errors import ChatcliError
from chatcli.core.messages import Message
from chatcli.providers.base import Tool
from chatcli.store.home import Home
from chatcli.store.recall import parse_key

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


__all__ = ["TOOL", "originals", "recall_text"]
