"""/compact (SPEC §8): the current model summarises the older part of the history into one message.

The policy (what is cut, what stays) is `core.compaction`; this runs it: the model writes the
summary, then the originals go to the recall store (the summary names them with a `<<ccr:KEY>>`
marker), and only then is the history replaced. The journal records the rewrite (the
originals stay in it) and a bound session is written at once. Interrupted or failed, nothing
changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chatcli.core.compaction import clean_summary, compacted, echoed, keep_originals, plan_cut, summary_message
from chatcli.core.errors import ProviderError
from chatcli.core.messages import Message, call_arguments_text, call_chars, call_name
from chatcli.engine.sessions import Outcome
from chatcli.providers.base import Delta, Done, Request, streaming
from chatcli.store.home import Home
from chatcli.store.recall import RecallError, marker

if TYPE_CHECKING:
    from chatcli.engine.conversation import Conversation

# The latest messages kept verbatim (the cut moves earlier rather than split a tool call).
KEEP_RECENT = 6
INSTRUCTIONS = (
    "Summarise the conversation below so that it can replace it: keep every fact, decision, name, "
    "number, file, command and open question that later turns may need; drop pleasantries. Write it "
    "as a compact briefing, in the conversation's language."
)
# The summary's length, bounded: a request without max_tokens lets a server write until its
# context is full (llama.cpp's does: minutes of spinner for a small model on a CPU). A summary
# is refused unless shorter than what it replaces, so it gets about half of that (at ~4
# characters a token), at least SUMMARY_MIN_TOKENS (a short cut still gets a usable briefing),
# at most a quarter of the context window (it travels beside the kept messages in every later
# request) and SUMMARY_MAX_TOKENS (what every Claude model accepts), and never more than
# CHATCLI_MAX_TOKENS.
SUMMARY_MIN_TOKENS = 256
SUMMARY_MAX_TOKENS = 4096
# How each provider says an answer stopped at max_tokens (OpenAI-compatible servers, Anthropic)
# or, for the local model, where the context window left it no more room. A summary cut there is
# kept, said so in its trailer (the model knows to recall what it lacks) and to the user: small
# local models ramble past any bound, so refusing it would make /compact fail there every time,
# and nothing is lost (the originals are in the recall store and the journal; /rewind compact).
CUT_REASONS = ("length", "max_tokens", "context_window")


def compact(conv: Conversation, instruction: str = "", keep_recent: int = KEEP_RECENT,
            label: str = "/compact") -> Outcome:
    notes = list(conv.binding.adopt())  # compact what the session is now
    cut = plan_cut(conv.history, keep_recent)
    if cut is None:
        return Outcome(f"Nothing to compact: the history has {len(conv.history)} messages, and the latest "
                       f"{keep_recent} stay as they are.", tuple(notes))
    older = [conv.history[i] for i in cut.summarised]
    origin = {"session": conv.session_name or "",
              "transcript": conv.transcript.id if conv.transcript is not None and conv.transcript.id else ""}
    recall = Home.of(conv.settings).recall()
    text, stopped = _summarise(conv, older, instruction)
    try:
        key, kept = recall.put(older, origin), True  # only once there is a summary to name it
    except RecallError as exc:  # the summary, paid for, is not thrown away: it keeps the originals itself
        key, kept = recall.key_of(older)[0], False
        notes.append(f"The recall store could not keep the originals ({exc}): the summary holds them "
                     f"(/recall {key} shows them from this conversation).")
    trailer = f"; {stopped}, so it may end mid-sentence" if stopped else ""
    summary = summary_message(f"{text.strip()}\n\n(Summary of {len(older)} earlier messages{trailer}; "
                              f"the originals: {marker(key)})", cut, conv.agent.mode)
    if stopped:
        notes.append(f"The summary was {stopped}: it may end mid-sentence. /recall {key} shows the originals, "
                     "/rewind compact undoes the compaction.")
    if conv.transcript is None or not conv.transcript.enabled or not kept:  # the summary keeps them
        keep_originals(summary, key, older)
    history = compacted(conv.history, cut, summary)
    notes += conv.checkpoint(label, command=True)  # /rewind 1 undoes it
    notes += conv.binding.replace_history(history, "compact")
    return Outcome(f"Compacted {len(older)} messages into one summary ({marker(key)}); the history now has "
                   f"{len(history)} messages. /recall {key} shows the originals.", tuple(notes))


def _summarise(conv: Conversation, older: list[Message], instruction: str) -> tuple[str, str]:
    """The summary's text, and how it was cut short ('' when it was not)."""
    lines = []
    for message in older:
        label = "summary of earlier messages" if message.meta.get("is_summary") else message.role
        calls = "".join(f" [calls {call_name(c)} {call_arguments_text(c)}]"
                        for c in message.tool_calls or () if isinstance(c, dict))
        if message.role == "tool":
            label = f"result of tool call {message.tool_call_id}"
        lines.append(f"[{label}]{calls}\n{message.content}")
    extra = f"\n\nAlso: {instruction.strip()}" if instruction.strip() else ""
    prompt = f"{INSTRUCTIONS}{extra}\n\n<conversation>\n" + "\n\n".join(lines) + "\n</conversation>"
    settings = conv.settings
    replaced = sum(len(m.content) + call_chars(m) for m in older)
    bound = summary_tokens(replaced, settings.context_tokens, settings.max_tokens)
    request = Request(model=settings.model, messages=[Message("user", prompt)], system=conv.system_prompt,
                      timeout=settings.timeout, max_tokens=bound)
    pieces, ended = [], None
    with streaming(conv.provider, request) as events:
        for event in events:
            if isinstance(event, Delta):
                pieces.append(event.text)
            elif isinstance(event, Done):
                ended = event
    raw = "".join(pieces)
    from chatcli.engine import costs

    costs.record(conv, request, ended, len(raw))  # a summary request costs as much as a turn's, often more
    text = clean_summary(raw)  # never the prompt's own markup, echoed back
    if not text:
        raise ProviderError("the model returned an empty summary" + (" (only the prompt's markup)" if raw.strip()
                                                                     else "") + "; nothing was compacted")
    if (copied := echoed(text, older)) is not None:
        quoted = " ".join(copied.content.split())
        quoted = quoted if len(quoted) <= 60 else quoted[:59].rstrip() + "…"
        raise ProviderError(f"the model's summary only repeats one of the {len(older)} messages it would replace "
                            f"(\"{quoted}\"); nothing was compacted")
    if len(text) >= replaced:
        raise ProviderError(f"the model's summary ({len(text):,} characters) is not shorter than the {replaced:,} "
                            "characters it would replace; nothing was compacted")
    stopped = ""
    if ended is not None and ended.stop_reason in CUT_REASONS:
        stopped = (f"cut where the {settings.context_tokens:,}-token context window ran out"
                   if ended.stop_reason == "context_window" else f"cut at its {bound:,}-token bound")
    return text, stopped


def summary_tokens(replaced_chars: int, context_tokens: int, max_tokens: int | None) -> int:
    """The max_tokens of a summary replacing `replaced_chars` characters (see SUMMARY_MIN_TOKENS)."""
    bound = min(max(replaced_chars // 8, SUMMARY_MIN_TOKENS), max(context_tokens // 4, 1), SUMMARY_MAX_TOKENS)
    return min(bound, max_tokens) if max_tokens else bound


__all__ = ["KEEP_RECENT", "compact", "summary_tokens"]
