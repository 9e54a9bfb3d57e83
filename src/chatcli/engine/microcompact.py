"""Microcompact: before a turn, the results of tool calls made more than
CHATCLI_MICROCOMPACT_TURNS turns ago that are at least MIN_CHARS long are replaced by a stub
naming their recall entry (`<<ccr:KEY>>`: /recall, or the model's recall tool, brings the text
back), as the seed's microcompact does. The history is rewritten the way a compaction rewrites
it: the journal is brought up to date first (so it holds the originals), then records a rewrite
event (reason "microcompact"), and a bound session is written whole. With no journal, the stub
keeps its original in its meta (never sent to the model), as a summary keeps its originals. A stub is never stubbed again; the call and its id stay, so the
history still pairs every call with its result.

Only the results this turn's request carries are looked at (a history larger than the context
window sends its latest part), newest first. As every rewrite, a microcompact writes a bound
session whole: on a long history (SMALL messages or more) it waits until BATCH results or
BATCH_CHARS characters are due, so that cost is paid once for many.
"""

from __future__ import annotations

from chatcli.core.compaction import keep_originals
from chatcli.core.messages import Message, call_function
from chatcli.store.home import Home
from chatcli.store.recall import RecallError, marker

TYPE_CHECKING = False
if TYPE_CHECKING:
    from chatcli.engine.conversation import Conversation

MIN_CHARS = 1000
PER_TURN = 200  # stubs made before one turn at most (each first keeps its text in the recall store)
SMALL = 2000  # messages: below this a rewrite is cheap, and a result is stubbed as soon as it is old
BATCH, BATCH_CHARS = 8, 32_000  # above it, stubs wait until this many results, or characters, are due
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
    # Only what this turn's request carries (a history larger than the window sends its latest
    # part: conv.pacing.window_from, set by the window check just before).
    floor = min(conv.pacing.window_from, cutoff)
    due = [index for index in range(cutoff - 1, floor - 1, -1) if _stubbable(history[index])]
    if not due:
        return []
    # A rewrite writes a bound session whole: on a long history it waits until it frees enough.
    pending = sum(len(history[index].content) for index in due)
    if len(history) >= SMALL and len(due) < BATCH and pending < BATCH_CHARS:
        return []
    # The originals are in the journal before anything replaces them: a conversation with a
    # journal recorded them as they came; one without (a session made elsewhere, a journal
    # lost) gets one now.
    transcript = conv.transcript
    missing = transcript is not None and transcript.enabled and (not transcript.id or not transcript.journal.exists())
    notes = conv.sync_transcript() if missing else []
    journaled = bool(conv.transcript is not None and conv.transcript.enabled and conv.transcript.id
                     and conv.transcript.problem is None)
    stubs: dict[int, Message] = {}
    recall = Home.of(conv.settings).recall()
    for index in due[:PER_TURN]:  # newest first
        message = history[index]
        try:
            key = recall.put([message], {"session": conv.session_name or "", "reason": REASON})
        except RecallError:
            continue  # kept as it is: nothing is stubbed that could not be kept
        name = _called(history, index, str(message.tool_call_id))
        stub = (f"[{name} result cleared by microcompact after {turns} turns: {len(message.content):,} characters. "
                f"/recall {key} (or the recall tool) brings it back {marker(key)}]")
        stubs[index] = Message("tool", stub, {**(message._meta or {}), REASON: True,
                                              "original_chars": len(message.content)},
                               tool_call_id=message.tool_call_id, extra=message._extra)
        if not journaled:  # no journal to keep it: the stub does (not sent to the model), as a summary does
            keep_originals(stubs[index], key, [message])
    if not stubs:
        return notes
    rewritten = list(history)
    for index, stub in stubs.items():
        rewritten[index] = stub
    freed = sum(len(history[index].content) - len(stub.content) for index, stub in stubs.items())
    notes += conv.binding.replace_history(rewritten, REASON)
    return [f"Microcompact: {len(stubs)} tool result{'s' if len(stubs) != 1 else ''} older than {turns} turns "
            f"replaced by stubs ({freed:,} characters freed; /recall brings one back).", *notes]


def _stubbable(message: Message) -> bool:
    return message.role == "tool" and len(message.content) >= MIN_CHARS and not (message._meta and
                                                                                  message.meta.get(REASON))


def _called(history: list, index: int, call_id: str) -> str:
    """The name of the tool whose call `call_id` the result at `index` answers (its batch is just before)."""
    for position in range(index - 1, max(-1, index - 200), -1):
        for call in history[position].tool_calls or ():
            if isinstance(call, dict) and str(call.get("id")) == call_id:
                return str(call_function(call).get("name"))
    return "a tool"


__all__ = ["MIN_CHARS", "REASON", "apply"]
