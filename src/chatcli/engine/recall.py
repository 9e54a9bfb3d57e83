"""Reading the recall store (SPEC §8.1): one function for /recall and for the model's `recall` tool.

After a compaction the summary carries `<<ccr:KEY>>` markers. When the provider can call
tools, every request whose history holds such a summary offers the model a `recall` function
(engine/agent.py); the model calls it with the key and gets the same text /recall prints. A
summary Go ChatCLI wrote names its own entries (`ccr/<key>.ccr`, raw text): they are read too.
An entry the store no longer has (its TTL, its size cap) is found where the originals also are:
the summary itself with the journal off, else the conversation's journal, which recorded the
compaction (`compaction_in_journal`, which /rewind compact uses too).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from chatcli.config.settings import Settings
from chatcli.core import journal as rules
from chatcli.core.compaction import kept_originals
from chatcli.core.errors import ChatcliError
from chatcli.core.messages import Message
from chatcli.providers.base import Tool
from chatcli.store.home import Home
from chatcli.store.recall import MARKER_RE, Entry, parse_key

if TYPE_CHECKING:
    from chatcli.engine.transcript import TranscriptSync

TOOL = Tool(
    name="recall",
    description=("Fetch the original messages that a conversation summary replaced. Summaries name them "
                 "with markers like <<ccr:0123456789abcdef>>; pass the 16 hexadecimal digits as `key`."),
    parameters={"type": "object", "properties": {"key": {"type": "string", "description": "the 16-hex key"}},
                "required": ["key"]},
)


class Compaction(NamedTuple):
    """A compaction as a journal recorded it: the journal's state, and the live history's hashes
    just before and just after it."""

    state: rules.Replay
    before: list[str]
    after: list[str]

    def originals(self) -> tuple[list[Message], list[str]]:
        """The messages the summary replaced (those of the history before it that the history
        after it does not keep), and the hashes of those the journal lacks."""
        kept = set(self.after)
        return self.state.history([digest for digest in self.before if digest not in kept])


def compaction_in_journal(events: list[dict], summary: str) -> Compaction | None:
    """The compaction that brought the summary whose journal hash is `summary` into the history
    (core.journal.before_introducing); None when the journal records none."""
    state, before, after = rules.before_introducing(events, summary)
    return None if before is None else Compaction(state, before, after)


def _summary_in_journal(events: list[dict], key: str) -> str | None:
    """The journal hash of the summary whose originals are recall entry `key` (its last marker:
    a summary may quote an earlier one's), found among every message the journal recorded, so
    one compacted again, or rewound away, is found too."""
    for event in events:
        if event["type"] == rules.MESSAGE:
            message = event["message"]
            meta = message.get("meta")
            if isinstance(meta, dict) and meta.get("is_summary") \
                    and MARKER_RE.findall(str(message.get("content", "")))[-1:] == [key]:
                return event["hash"]
    return None


def _from_journal(transcript: TranscriptSync | None, key: str) -> Entry | None:
    """Entry `key` rebuilt from the conversation's journal, or None when it does not hold it."""
    if transcript is None or not transcript.id:
        return None
    try:
        events = transcript.recorded()
    except ChatcliError:
        return None
    summary = _summary_in_journal(events, key)
    found = compaction_in_journal(events, summary) if summary else None
    if found is None:
        return None
    messages, missing = found.originals()
    if missing or not messages:
        return None
    return Entry(key, messages, {"journal": transcript.id})


def entry(settings: Settings, key: str, history: Sequence[Message] = (),
          transcript: TranscriptSync | None = None) -> Entry:
    """Recall entry `key`: from the recall store (chatcli's, else Go ChatCLI's raw text), or
    (expired there, or never there) from the summary in `history` that keeps its originals (with
    the journal off, SPEC §8.1), else from the conversation's journal (`transcript`). Raises
    ChatcliError (unknown, expired, damaged)."""
    try:
        return Home.of(settings).recall().read(key)
    except ChatcliError as missing:
        key = parse_key(key)
        kept = kept_originals(list(history), key)
        if kept is not None:
            return Entry(key, kept, {"kept": "session"})
        found = _from_journal(transcript, key)
        if found is None:
            raise missing from None
        return found


def originals(settings: Settings, key: str, history: Sequence[Message] = (),
              transcript: TranscriptSync | None = None) -> tuple[list[Message], dict]:
    """The messages recall entry `key` stands for, and where they came from (see `entry`).
    Raises ChatcliError, also for Go ChatCLI's entry (text, not messages)."""
    found = entry(settings, key, history, transcript)
    return found.originals(), found.origin


def recall_text(settings: Settings, key: str, history: Sequence[Message] = (),
                transcript: TranscriptSync | None = None) -> str:
    """What /recall prints (and the model's `recall` tool returns): the messages of entry `key`,
    numbered, or Go ChatCLI's text as it is. Raises ChatcliError (unknown, expired, damaged)."""
    found = entry(settings, key, history, transcript)
    if found.text is not None:
        altered = "" if found.intact else " (it no longer matches its key: changed since Go wrote it)"
        return f"Recall entry {found.key}: Go ChatCLI's text, as it stored it{altered}.\n\n{found.text}"
    messages, origin = found.messages, found.origin
    where = f" from session '{origin['session']}'" if origin.get("session") else ""
    if origin.get("kept"):
        where = " (kept in this session's summary: the recall store no longer has it)"
    elif origin.get("journal"):
        where = " (from this conversation's transcript journal: the recall store no longer has it)"
    blocks = [f"Recall entry {found.key}{where}: {len(messages)} messages."]
    blocks += [f"#{i} {m.role}\n{m.content}" for i, m in enumerate(messages, 1)]
    return "\n\n".join(blocks)


__all__ = ["TOOL", "Compaction", "compaction_in_journal", "entry", "originals", "recall_text"]
