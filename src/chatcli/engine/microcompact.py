"""Microcompact (issue 19): before a turn, the results of tool calls made more than
CHATCLI_MICROCOMPACT_TURNS turns ago that are at least MIN_CHARS long are replaced by a stub
naming their recall entry (`<<ccr:KEY>>`: /recall, or the model's recall tool, brings the text
back), as the seed's microcompact does. The history is rewritten the way a compaction rewrites
it: the journal records a rewrite event (reason "microcompact") and keeps the originals, and a
bound session is written whole. A stub is never stubbed again; the call and its id stay, so the
history still pairs every call with its result.

It costs a look at what was added since the last turn: how far the history was examined is
remembered while only appends change it.
"""

from __future__ import annotations

from chatcli.core.messages import Message, call_function
from chatcli.store.home import Home
from chatcli.store.recall import RecallError, marker

TYPE_CHECKING = False
if TYPE_CHECKING:
    from chatcli.engine.conversation import Conversation

MIN_CHARS = 1000
REASON = "microcompact"


def _cutoff(history: list, turns: int) -> int:
    """The index of the `turns`-th typed message from the end (0 when there are fewer)."""
    seen = 0
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if message.role == "user" and not message.is_summary:
            seen += 1
            if seen == turns:
                return index
    return 0


def apply(conv: Conversation) -> list[str]:
    turns = conv.settings.microcompact_turns
    history = conv.history
    if not turns or conv.read_only:
        return []
    cutoff = _cutoff(history, turns)
    mark = conv.microcompact_mark
    start = mark[2] if mark is not None and mark[0] is history and mark[1] == history.version else 0
    if cutoff <= start:
        return []
    names: dict[str, str] = {}
    stubs: dict[int, Message] = {}
    recall = Home.of(conv.settings).recall()
    for index in range(start, cutoff):
        message = history[index]
        for call in message.tool_calls or ():
            if isinstance(call, dict):
                names[str(call.get("id"))] = str(call_function(call).get("name"))
        if message.role != "tool" or len(message.content) < MIN_CHARS or (message._meta and message.meta.get(REASON)):
            continue
        try:
            key = recall.put([message], {"session": conv.session_name or "", "reason": REASON})
        except RecallError:
            continue  # kept as it is: nothing is stubbed that could not be kept
        name = names.get(str(message.tool_call_id), "a tool")
        stub = (f"[{name} result cleared by microcompact after {turns} turns: {len(message.content):,} characters. "
                f"/recall {key} (or the recall tool) brings it back {marker(key)}]")
        stubs[index] = Message("tool", stub, {**(message._meta or {}), REASON: True,
                                              "original_chars": len(message.content)},
                               tool_call_id=message.tool_call_id, extra=message._extra)
    if not stubs:
        conv.microcompact_mark = (history, history.version, cutoff)
        return []
    rewritten = list(history)
    for index, stub in stubs.items():
        rewritten[index] = stub
    freed = sum(len(history[index].content) - len(stub.content) for index, stub in stubs.items())
    notes = conv.binding.replace_history(rewritten, REASON)
    conv.microcompact_mark = (conv.history, conv.history.version, cutoff)
    return [f"Microcompact: {len(stubs)} tool result{'s' if len(stubs) != 1 else ''} older than {turns} turns "
            f"replaced by stubs ({freed:,} characters freed; /recall brings one back).", *notes]


__all__ = ["MIN_CHARS", "REASON", "apply"]
