"""The compaction policy (SPEC §8), pure: which messages a summary replaces and which stay.

System messages and the most recent messages stay verbatim; everything older is summarised
into one message. A tool call and its results are one unit: the cut never falls between an
assistant message that calls tools and the tool messages answering it, so neither side ever
holds half of a call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import compress, repeat
from operator import attrgetter, eq, not_
from dataclasses import dataclass

from chatcli.core.messages import Message, call_chars

_ROLE, _CONTENT, _CALLS = attrgetter("role"), attrgetter("content"), attrgetter("tool_calls")

# Fewer older messages than this and there is nothing worth summarising.
MIN_SUMMARISED = 2


@dataclass(frozen=True)
class Cut:
    """History[:index] is the older part: its system messages stay, the rest is summarised."""

    index: int
    summarised: tuple[int, ...]  # positions of the messages the summary replaces
    kept_system: tuple[int, ...]  # system messages of the older part, kept verbatim


def safe_cuts(history: Sequence[Message]) -> list[bool]:
    """For every index i (0..len), whether the history may be cut just before message i: no
    tool call is waiting for its result there, and message i is not a tool result."""
    if not any(map(_CALLS, history)) and "tool" not in map(_ROLE, history):  # (a loop in C)
        return [True] * (len(history) + 1)  # no tool call anywhere: a cut may go anywhere
    allowed = []
    waiting: set[str] = set()
    for message in history:
        allowed.append(not waiting and message.role != "tool")
        if message.role == "assistant" and message.tool_calls:
            waiting = {str(call.get("id")) for call in message.tool_calls if isinstance(call, dict)}
            waiting.discard("None")
            if not waiting:  # calls without ids: the following tool messages belong to it
                waiting = {"?"}
        elif message.role == "tool":
            waiting.discard(str(message.tool_call_id))
            if "?" in waiting:
                waiting.clear()
        else:
            waiting.clear()  # a user or system turn: any call left unanswered stays unanswered
    allowed.append(not waiting)
    return allowed


def plan_cut(history: Sequence[Message], keep_recent: int) -> Cut | None:
    """Where to cut so that at least `keep_recent` of the latest non-system messages stay
    verbatim; None when fewer than MIN_SUMMARISED messages would be summarised."""
    allowed = safe_cuts(history)
    # The latest index that keeps `keep_recent` non-system messages after it.
    recent = 0
    index = len(history)
    while index > 0 and recent < keep_recent:
        index -= 1
        if history[index].role != "system":
            recent += 1
    while index > 0 and not allowed[index]:  # move earlier until no unit is split
        index -= 1
    system = list(map(eq, map(_ROLE, history[:index]), repeat("system")))  # (in C: 100,000 messages)
    summarised = tuple(compress(range(index), map(not_, system)))
    if len(summarised) < MIN_SUMMARISED:
        return None
    return Cut(index, summarised, tuple(compress(range(index), system)))


def compacted(history: Sequence[Message], cut: Cut, summary: Message) -> list[Message]:
    """The history after compaction: the older part's system messages, the summary, then the
    recent messages as they were."""
    return [*(history[i] for i in cut.kept_system), summary, *history[cut.index:]]


def estimate_tokens(system: str, history: Sequence[Message], text: str = "") -> int:
    """A rough count of the tokens a request takes: about four characters a token, plus a few
    for each message's framing. Good enough to tell when a window is filling up."""
    history = history if isinstance(history, (list, tuple)) else list(history)
    return tokens_of(len(system) + len(text) + history_chars(history), len(history))


def history_chars(history: Sequence[Message]) -> int:
    """The characters `estimate_tokens` counts of messages: their content and tool calls. A sum
    over messages, so that a part's count is the whole's less the rest's."""
    return sum(map(len, map(_CONTENT, history))) \
        + sum(map(call_chars, filter(_CALLS, history)))  # the loops in C: 100,000 messages at every turn


def tokens_of(chars: int, messages: int) -> int:
    """`estimate_tokens` of a request of `chars` characters (`history_chars`, the system prompt
    and the new text) in `messages` messages."""
    return chars // 4 + 4 * (messages + 2)


# The markup of the summary prompt (engine.compaction): the conversation in <conversation> tags,
# each message under a [label] line. A small model echoes it; it is never stored as summary.
_PROMPT_TAG = re.compile(r"</?\s*conversation\s*>", re.IGNORECASE)
_PROMPT_LABEL = re.compile(r"^[ \t]*\[(?:user|assistant|system|tool|summary of earlier messages|"
                           r"result of tool call [^\]\n]*)\][ \t]*$", re.IGNORECASE | re.MULTILINE)


# A summary whose words are this alike to one of the messages it replaces only repeats that
# message (a small model often gives the conversation's last answer again): it is refused.
ECHO_RATIO = 0.8


def echoed(summary: str, replaced: Sequence[Message]) -> Message | None:
    """The one message of several that `summary` only repeats, if it does (see ECHO_RATIO)."""
    import difflib  # only a compaction gets here

    words = summary.lower().split()
    if len(replaced) < 2 or not words:
        return None
    for message in replaced:
        theirs = message.content.lower().split()
        if not theirs or not 0.5 <= len(words) / len(theirs) <= 2:
            continue
        alike = difflib.SequenceMatcher(None, words, theirs, autojunk=False)
        if alike.real_quick_ratio() >= ECHO_RATIO and alike.quick_ratio() >= ECHO_RATIO \
                and alike.ratio() >= ECHO_RATIO:
            return message
    return None


def clean_summary(text: str) -> str:
    """A model's summary without the summary prompt's own markup echoed back (its
    <conversation> tags, the [role] lines that head each message), and without the blank lines
    that leaves; what is left may be empty."""
    text = re.sub(r"\n{3,}", "\n\n", _PROMPT_LABEL.sub("", _PROMPT_TAG.sub("", text))).strip()
    if text.startswith('"') and text.count('"') % 2:  # a quote opened and never closed: the echo's
        text = text[1:].lstrip()
    return text


def summary_message(text: str, cut: Cut, mode: str = "chat") -> Message:
    return Message("assistant", text, meta={"is_summary": True, "summary_of": len(cut.summarised), "mode": mode})


# With the journal off (CHATCLI_SESSION_TRANSCRIPT=false) the recall store would hold the only
# copy of what a summary replaced, and its TTL deletes it. So the summary itself keeps the
# originals, in its meta, for as long as the summary is part of a session: in the session file,
# never sent to a model (requests carry role and content).
ORIGINALS = "originals"
RECALL_KEY = "recall_key"


def keep_originals(summary: Message, key: str, older: list[Message]) -> None:
    summary.meta[RECALL_KEY] = key
    summary.meta[ORIGINALS] = [message.to_dict() for message in older]


def kept_originals(history: list[Message], key: str) -> list[Message] | None:
    """The originals a summary in `history` keeps for recall entry `key`, if one does. A summary
    compacted again sits, with what it keeps, among the originals of the later summary: those
    are searched too."""
    pending = [message.to_dict() for message in history if message._meta and ORIGINALS in message._meta]
    while pending:
        meta = pending.pop().get("meta")
        originals = meta.get(ORIGINALS) if isinstance(meta, dict) else None
        if not isinstance(originals, list):
            continue
        if meta.get(RECALL_KEY) == key:
            try:
                return [Message.from_dict(item) for item in originals]
            except ValueError:
                return None
        pending.extend(item for item in originals if isinstance(item, dict))
    return None


__all__ = ["clean_summary", "MIN_SUMMARISED", "ORIGINALS", "RECALL_KEY", "Cut", "compacted", "estimate_tokens", "history_chars", "keep_originals", "tokens_of",
           "kept_originals", "plan_cut", "safe_cuts", "summary_message"]
