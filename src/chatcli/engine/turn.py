"""One turn of a conversation, the pipeline every surface calls (REPL, one-shot, MCP, ACP):
adopt → compact if due → checkpoint → send → record → journal → persist.

Every request carries what fits the model's context window (core/request_window.py), whatever
the compaction setting: the latest messages, never the history whole when it is larger; the
history and the journal keep everything.

`run` is the whole of it; `Conversation.send` is its entry point. The binding steps (adopt,
write-through) are engine/binding.py's, the journal's engine/transcript.py's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from chatcli.core import checkpoints as rewind_points
from chatcli.core import request_window
from chatcli.core.terminal import printable
from chatcli.core.compaction import estimate_tokens, history_chars, plan_cut, tokens_of
from chatcli.core.errors import ChatcliError, ProviderError
from chatcli.core.messages import Message, new_call, well_formed
from chatcli.engine import compaction, resume
from chatcli.engine.agent import Approve
from chatcli.providers.base import Delta, Done, Request, Stop, Tool, ToolCall, streaming

if TYPE_CHECKING:
    from chatcli.engine.conversation import Conversation

# How many times in one chat turn the model may call tools before it must answer (agent and
# coder turns: CHATCLI_AGENT_MAX_STEPS).
MAX_TOOL_ROUNDS = 4


@dataclass(frozen=True)
class TurnResult:
    text: str
    interrupted: bool = False
    done: Done | None = None
    # Lines about what happened to the session after the answer (merged, unbound, too large…).
    notes: tuple[str, ...] = ()

    def with_notes(self, more: Sequence[str]) -> TurnResult:
        return replace(self, notes=(*self.notes, *more))

    @property
    def truncated(self) -> bool:
        """The answer stopped at the token limit rather than where the model meant to end."""
        return self.done is not None and self.done.stop_reason in ("length", "max_tokens")

    @property
    def window_full(self) -> bool:
        """The answer stopped because the message left it no more room in the context window."""
        return self.done is not None and self.done.stop_reason == "context_window"


@dataclass
class Pacing:
    """What a conversation's turns remember between them about its context window."""

    compact_after: int = 0  # after a failed automatic compaction: not before this length
    # Where this turn's first request starts sending the history (see _plan): microcompact looks
    # no further back.
    window_from: int = 0
    # The share of the window this turn's requests fill, when an automatic compaction could not
    # make room and sends the latest messages instead (CHATCLI_AUTO_COMPACT); 0: all of it but
    # the answer's room.
    share: float = 0.0
    # For which (window, session) the "older messages were not sent" notice was given: once,
    # and again only after a request that sent the whole history, in another session, or with
    # another window (/model, /provider).
    left_out_said: tuple[int, str | None] | None = None
    full_window_said: bool = False  # the "compacting would not help" note is given once
    too_large_said: bool = False  # the "too large to summarise" note too
    # What this turn's requests carry after the system prompt: the memory and the attached
    # contexts, made once a turn (the window checks count them too).
    extra_system: str = ""


def run(
    conv: Conversation,
    text: str,
    on_text: Callable[[str], None] = lambda _t: None,
    on_notice: Callable[[str], None] | None = None,
    approve: Approve | None = None,
    stop: Stop | None = None,
) -> TurnResult:
    """Run one turn: adopt what other surfaces wrote, compact if due, checkpoint, send,
    record the answer, journal it, write the bound session. The user's message stays in the history whatever happens.

    Ctrl-C (KeyboardInterrupt) during the answer keeps the partial answer, marked
    `meta.interrupted`, and returns normally. A provider error keeps any partial answer
    the same way, then propagates. `approve` is asked before a tool call that asks (a shell
    command, a file write); without it such calls are refused. `stop`, set from another thread
    (a client's cancel), ends the turn as Ctrl-C does, closing the model's stream at once.
    """
    notice = on_notice or (lambda _text: None)
    text = well_formed(text)  # from any surface: a lone surrogate would make the session unwritable
    early = None
    if conv.pending is not None:  # a large session whose ends alone are read yet (engine/resume.py)
        early = resume.ask_early(conv, text, on_text, notice, stop)
    if early is not None:
        try:
            question, refusal = resume.catch_up(conv, text, early, notice)
        except BaseException as exc:
            kept = _keep_early(conv, early, notice, exc)
            if kept is not None and isinstance(exc, KeyboardInterrupt):
                return kept
            for note in kept.notes if kept is not None else ():
                notice(note)
            raise
        later = None
    else:
        conv.settle()  # the whole history first: adoption compares the file with what was read
        resume.say_settled(conv, notice)
        question, refusal, later = _prepare(conv, text, notice)
    try:
        if refusal is not None:
            raise ProviderError(refusal)
        result = _answer(conv, on_text, notice, approve, stop, early.round if early is not None else None)
    except ProviderError as exc:
        # A request refused as malformed would be refused again as it is: the question that
        # went with it is not kept (each retry would add it once more to the session); a
        # question whose turn had already got somewhere (an agent's tool calls) stays.
        if exc.refused_request and conv.history and conv.history[-1] is question:
            conv.history.pop()
            exc = ProviderError(f"{exc}; the message was not added to the conversation")
        for note in _persist(conv, later, notice):
            notice(note)
        raise exc from None
    except BaseException:
        # The user's message is recorded even when the turn failed.
        for note in _persist(conv, later, notice):
            notice(note)
        raise
    finally:
        conv.pacing.window_from, conv.pacing.share = 0, 0.0
    return replace(result, notes=tuple(_persist(conv, later, notice)))


def _keep_early(conv: Conversation, early: resume.Early, notice: Callable[[str], None],
                stopped: BaseException) -> TurnResult | None:
    """The early request's answer was shown when what follows it (the rest of the history, the
    checkpoint, the journal) stopped: Ctrl-C or an error (`stopped`). With the history whole,
    the question joins it, if it has not, and the answer as it came (marked `meta.interrupted`
    when its stream did not end; nothing when no text came and the request failed), and both
    are written; the turn ends there (its tool calls are not run). With the history not read
    whole (damaged in its middle) nothing more is written (engine/resume.py). Returns the
    interrupted turn's result, or None when nothing was kept."""
    if not early.pending.whole:
        return None
    resume.join_question(conv, early)
    sent = early.round
    answer = "".join(sent.parts)
    if answer or (isinstance(stopped, KeyboardInterrupt) and sent.error is None):
        meta = conv.agent.meta()
        if sent.ended is None or sent.error is not None:  # its stream did not end
            meta["interrupted"] = True
        conv.history.append(Message("assistant", answer, meta=meta))
    resume.say_settled(conv, notice)
    notes = _persist(conv, None, notice)
    conv.pacing.window_from, conv.pacing.share = 0, 0.0
    return TurnResult(answer, interrupted=True, done=early.round.ended, notes=tuple(notes))


def _persist(conv: Conversation, later: resume.Later | None, notice: Callable[[str], None]) -> list[str]:
    """The turn's end: the journal, then the bound file; or, when the journal is recorded after
    the answer (engine/resume.py's `record_later`), the file first."""
    if later is None:
        return conv.sync_transcript() + conv.binding.write_through()
    written = conv.binding.write_through()
    return written + resume.record_later(conv, later, notice)


def _prepare(conv: Conversation, text: str,
             notice: Callable[[str], None]) -> tuple[Message, str | None, resume.Later | None]:
    """What a turn does before the model is asked: adopt, compact if due, plan the window,
    microcompact, checkpoint, and the question in the history and, fsync'd, in the journal
    (or, for a long history no journal has recorded yet, in the session file, the journal
    recorded after the answer: engine/resume.py). Returns the question, why it is not to be
    sent if it is not (a message longer than the window), and the recording left for later."""
    for note in conv.binding.adopt():
        notice(note)
    # Imported at the first turn, not with the conversation: drawing the first prompt needs none.
    from chatcli.engine import contexts, memory, microcompact

    remembered = memory.prompt(conv.settings) if conv.memory else ""
    conv.pacing.extra_system = "\n\n".join(part for part in (remembered, contexts.block(conv, text)) if part)
    refusal = _too_long(conv, text)
    if refusal is None:  # a compaction cannot make room for a message longer than the window
        for note in _auto_compact(conv, text):
            notice(note)
        _plan(conv, text)
        for note in microcompact.apply(conv):
            notice(note)
    label = rewind_points.label_of(text)
    question = Message("user", text, meta=conv.agent.meta())
    later = resume.ask_before_recording(conv, label) if len(conv.history) >= resume.RECORD_LATER_FROM else None
    if later is not None:
        conv.history.append(question)
        if resume.question_kept(conv, later):
            return question, refusal, later
        conv.history.pop()  # the file could not take it: recorded in the journal now, as always
    for note in conv.checkpoint(label) if later is None or not later.ahead else ():  # (ahead: in the journal)
        notice(note)
    conv.history.append(question)
    # In the journal now, with the time it was asked (an export's question and its answer carry
    # their own times), and on disk before the model is asked: one fsync'd line.
    for note in conv.sync_transcript():
        notice(note)
    return question, refusal, None



def _auto_compact(conv: Conversation, text: str) -> list[str]:
    """Before a turn: compact when the request would fill CHATCLI_AUTO_COMPACT of the context
    window (SPEC §8), and say so in one line. Only when it helps: the part a summary would
    replace must be at least a quarter of the request (otherwise it says so, once, and
    leaves the history alone; a compaction does not repeat at every turn). A failure is a
    note, the turn goes on, and the next attempt waits four turns; Ctrl-C or a signal stops
    the turn before anything was sent.

    Never compacted automatically: a session just loaded, at its first turn, and one whose
    older part is more than a summary request can carry. A turn whose request would not fit
    the window at all (those, or after a failed compaction) sends the latest messages that
    fit in CHATCLI_AUTO_COMPACT of it (`_window_view`), and says so."""
    share = conv.settings.auto_compact
    window = conv.settings.context_tokens
    chars = history_chars(conv.history)
    used = tokens_of(len(_system(conv)) + len(text) + chars, len(conv.history))
    if not share or used < share * window:
        return []
    too_big = used > window
    if len(conv.history) < conv.pacing.compact_after:  # a compaction failed lately: said then
        if too_big:
            _window_view(conv, text, said=True)  # said with the failure
        return []
    cut = plan_cut(conv.history, compaction.KEEP_RECENT)
    if cut is None:  # nothing old enough to summarise
        if not too_big:
            return []
        sent = _window_view(conv, text)
        return [f"This conversation holds about {used:,} tokens, more than the {window:,}-token context window, "
                f"and none of it is old enough to summarise: this turn sends the new message and the latest "
                f"{sent:,} of the {len(conv.history):,} before it."]
    percent = used * 100 // window
    kept = [*(conv.history[i] for i in cut.kept_system), *conv.history[cut.index:]]
    # What a summary would replace: every message but those kept (counted without going over
    # the 100,000 others again).
    summarisable = tokens_of(chars - history_chars(kept), len(cut.summarised)) <= window
    if conv.binding.unchanged_since_load() or not summarisable:
        # Not rewritten before the user has said a word in it, nor by a summary request that
        # no model would take: this turn sends the latest messages that fit, and says so.
        sent = _window_view(conv, text)
        later = ("later turns compact automatically" if summarisable else
                 "it is too large to summarise in one request, so later turns send their latest messages too")
        note = (f"This session holds about {used:,} tokens, {percent:,}% of the {window:,}-token context window. "
                f"Nothing was compacted: this turn sends its latest {sent:,} of {len(conv.history):,} messages "
                f"(/compact summarises the older ones; {later}).")
        if not summarisable:
            if conv.pacing.too_large_said:
                return []  # said once: every turn of such a session does the same
            conv.pacing.too_large_said = True
        return [note]
    left = estimate_tokens(_system(conv), kept, text)
    if used - left < used / 4:
        if too_big:
            _window_view(conv, text, said=False)  # the notice of what was left out says it
        if conv.pacing.full_window_said:
            return []
        conv.pacing.full_window_said = True
        return [f"The conversation is at about {percent:,}% of the {window:,}-token context window, mostly in "
                "its latest messages; compacting the older ones would not free enough, so it was not done."]
    head = f"Automatic compaction (about {percent:,}% of the {window:,}-token context window)"
    try:
        outcome = compaction.compact(conv, label="/compact (automatic)")
    except ChatcliError as exc:
        conv.pacing.compact_after = len(conv.history) + 8
        if too_big:
            sent = _window_view(conv, text)
            return [f"{head} failed: {exc}; this turn sends the latest {sent:,} messages that fit (the next try "
                    "in four turns)."]
        return [f"{head} failed: {exc}; the whole history is sent (the next try in four turns)."]
    conv.pacing.full_window_said = False
    return [f"{head}: {outcome.text[:1].lower()}{outcome.text[1:]}", *outcome.notes]


def _too_long(conv: Conversation, text: str) -> str | None:
    """Why this message is not sent, when it is, with the system prompt, longer than a context
    window the user set (CHATCLI_CONTEXT_WINDOW): the window view can leave older messages out,
    not cut this one, and a server answers such a request with an error or, as llama.cpp's does,
    with an empty stream. A default window is a guess at the model's, so it refuses nothing."""
    window = conv.settings.context_window
    if window is None:
        return None
    needed = estimate_tokens(_system(conv), (), text)
    if needed <= window:
        return None
    return (f"this message is about {needed:,} tokens with the system prompt, more than the {window:,}-token "
            "context window (CHATCLI_CONTEXT_WINDOW), so it was not sent; it stays in the conversation")


def _system(conv: Conversation) -> str:
    """What the system part of this turn's requests holds, for the window checks."""
    return f"{conv.system_prompt}\n\n{conv.pacing.extra_system}" if conv.pacing.extra_system else conv.system_prompt


def _window_view(conv: Conversation, text: str, said: bool = True) -> int:
    """This turn's requests fill at most CHATCLI_AUTO_COMPACT of the window, with the latest
    messages (see `_plan`); how many of the history's it sends. `said`: the caller's note says
    so, the notice of what was left out need not."""
    conv.pacing.share = conv.settings.auto_compact
    if said:
        conv.pacing.left_out_said = _said_key(conv)
    return len(conv.history) - _plan(conv, text)


def _plan(conv: Conversation, text: str) -> int:
    """Where this turn's first request will start sending the history (its question not yet in
    it), for microcompact, which looks no further back, and the notes that say how much is sent."""
    planned = request_window.fit(request_window.Appended(conv.history, Message("user", text)),
                                 _budget(conv, _overhead(_system(conv), ())))
    conv.pacing.window_from = min(planned.start, len(conv.history))
    return conv.pacing.window_from


def _overhead(system: str, tools: Sequence[Tool]) -> int:
    """The tokens a request takes besides its messages: the system prompt, the tools' descriptions."""
    described = sum(len(tool.name) + len(tool.description) + len(json.dumps(tool.parameters)) for tool in tools)
    return estimate_tokens(system, ()) + described // 4


def _budget(conv: Conversation, overhead: int) -> int:
    """The tokens a request's messages may take: the context window but the answer's room (or
    the share `_window_view` set) and the `overhead`."""
    window = conv.settings.context_tokens
    limit = window - request_window.answer_room(window, conv.settings.max_tokens)
    if conv.pacing.share:
        limit = min(limit, int(conv.pacing.share * window))
    return limit - overhead


def _over_window(conv: Conversation, window: request_window.Window, system: str) -> str | None:
    """Why a request is not sent when even what it cannot leave out (the question, and between
    two steps of a turn the latest tool results) is, with the system prompt, more than a context
    window the user set, as `_too_long` says for a question before it is asked. A default
    window is a guess at the model's, so it refuses nothing; the tools' descriptions are left
    to the provider to judge (they take most of a tiny window)."""
    limit = conv.settings.context_window
    needed = window.tokens + estimate_tokens(system, ())
    if not window.over or limit is None or needed <= limit:
        return None
    what = "this message" if conv.history[-1].role == "user" else "the latest step of this turn"
    return (f"{what} is about {needed:,} tokens with the system prompt, more than the {limit:,}-token context "
            "window (CHATCLI_CONTEXT_WINDOW), so it was not sent; it stays in the conversation")


def _said_key(conv: Conversation) -> tuple[int, str | None]:
    return conv.settings.context_tokens, conv.session_name


def _left_out_note(conv: Conversation, window: request_window.Window) -> str | None:
    """The notice that older messages were not sent: once (see Pacing.left_out_said)."""
    if not window.left_out:
        conv.pacing.left_out_said = None
        return None
    if conv.pacing.left_out_said == _said_key(conv):
        return None
    conv.pacing.left_out_said = _said_key(conv)
    count = window.left_out
    return (f"{count:,} older message{'s were' if count != 1 else ' was'} not sent (they do not fit the model's "
            f"{conv.settings.context_tokens:,}-token context window; /compact summarises them). The session keeps "
            "them all; later turns send their latest messages too.")


@dataclass
class Round:
    """One request of a turn and what its stream gave: the answer's pieces, the tool calls, the
    end, and what stopped it, if anything did (raised where the stream is read)."""

    request: Request
    parts: list[str]
    calls: list[ToolCall]
    ended: Done | None = None
    error: BaseException | None = None


def stream_round(conv: Conversation, request: Request, on_text: Callable[[str], None]) -> Round:
    """Send `request` and read its stream to the end, each piece of text to `on_text` as it comes;
    whatever stops it (Ctrl-C, a provider error) is kept in the round, with what came before."""
    done = Round(request, [], [])
    try:
        with streaming(conv.provider, request) as events:
            for event in events:
                if isinstance(event, Delta):
                    chunk = well_formed(event.text)
                    done.parts.append(chunk)
                    on_text(chunk)
                elif isinstance(event, ToolCall):
                    done.calls.append(replace(event, name=well_formed(event.name),
                                              arguments=well_formed(event.arguments)))
                elif isinstance(event, Done):
                    done.ended = event
    except BaseException as exc:  # noqa: BLE001 - raised again by the caller, where it reads the round
        done.error = exc
    return done


def _answer(conv: Conversation, on_text: Callable[[str], None], notice: Callable[[str], None],
            approve: Approve | None, stop: Stop | None = None, first: Round | None = None) -> TurnResult:
    """Stream the answer. When the provider can call tools the model may call those the mode
    offers (engine/agent.py): each batch of calls joins the history as an assistant message
    holding them, followed by one `tool` message per call, and the model is asked again, at
    most MAX_TOOL_ROUNDS times in chat (CHATCLI_AGENT_MAX_STEPS in agent and coder modes).

    An agent or coder turn syncs the journal at the start of every step (SPEC §7): the
    previous batch's results are on disk before the model is asked again, so a hard kill
    loses at most the batch in flight. `run` syncs again when the turn ends, however it ends.
    `first`: the turn's first request, sent and read already (engine/resume.py)."""
    agent = conv.agent
    limit = conv.settings.agent_max_steps if agent.tagged else MAX_TOOL_ROUNDS
    parts: list[str] = []
    said: list[str] = []  # the text of the steps before this one (the turn's answer is all of it)
    done: Done | None = None
    rounds = 0
    from chatcli.engine import costs

    conv.turn_costs = []
    system = "\n\n".join(part for part in (conv.system_prompt, conv.pacing.extra_system, agent.instructions(conv))
                         if part)
    try:
        while True:
            if agent.tagged:
                for note in conv.sync_transcript():
                    notice(note)
            tools, callable_now = agent.offered(conv)
            choice = "auto" if callable_now and rounds < limit else "none"
            if agent.tagged and tools and rounds == limit:
                notice(f"This {agent.mode} turn reached its limit of {limit} tool steps (CHATCLI_AGENT_MAX_STEPS) "
                       "and was asked to answer now.")
            overhead = _overhead(system, tools)
            window = request_window.fit(conv.history, _budget(conv, overhead))
            if first is None and (refusal := _over_window(conv, window, system)):
                raise ProviderError(refusal)
            if note := _left_out_note(conv, window):
                notice(note)
            if first is None:
                request = Request(
                    model=conv.settings.model,
                    messages=window.messages(conv.history),
                    system=system,
                    timeout=conv.settings.timeout,
                    max_tokens=conv.settings.max_tokens,
                    on_retry=notice,
                    tools=tools,
                    tool_choice=choice,
                    stop=stop,
                )
                sent = stream_round(conv, request, on_text)
            else:  # asked before the whole history was read; what it sent is what this plans
                sent, first = first, None
            request, parts, calls, ended = sent.request, sent.parts, sent.calls, sent.ended
            done = ended or done
            try:
                if sent.error is not None:
                    raise sent.error
                costs.record(conv, request, ended, sum(map(len, parts)) + sum(len(c.arguments) for c in calls))
            except ProviderError as exc:
                if parts or calls or not tools or agent.tagged or not _refuses_tools(exc):
                    raise
                agent.tools_refused = True  # chat goes on without tools, said once
                notice(f"The endpoint refused a request offering tools ({exc}); this conversation goes on "
                       "without the session tools (CHATCLI_CHAT_TOOLS=off stops offering them).")
                continue
            if calls:
                agent.called_tools = True
            elif choice == "auto" and (note := agent.answered_without_tools()):
                notice(note)
            if not calls or choice == "none":
                break
            rounds += 1
            text, parts = "".join(parts), []  # the batch's message holds it now
            if text:
                said.append(text)
            _run_tools(conv, text, calls, notice, approve)
            if text:
                on_text("\n\n")
    except KeyboardInterrupt:
        answer = "".join(parts)
        last = conv.history[-1]
        if answer or not (last.role == "tool" and last.meta.get("interrupted")):  # a stopped batch says so
            conv.history.append(Message("assistant", answer, meta={**agent.meta(), "interrupted": True}))
        return TurnResult("\n\n".join([*said, answer] if answer else said), interrupted=True)
    except ProviderError:
        if parts:
            conv.history.append(Message("assistant", "".join(parts), meta={**agent.meta(), "interrupted": True}))
        raise
    answer = "".join(parts)
    conv.history.append(Message("assistant", answer, meta=agent.meta()))
    return TurnResult("\n\n".join([*said, answer] if answer else said), done=done)


def _run_tools(conv: Conversation, text: str, calls: list[ToolCall], notice: Callable[[str], None],
               approve: Approve | None) -> None:
    """One batch: the assistant message that makes the calls, then each call's result in order
    (refused ones too, as refused). Every call gets exactly one result, whatever happens: a
    tool that fails in a way nobody foresaw answers with the error, and Ctrl-C stops the batch,
    the calls left answering that they were stopped (every provider refuses a call without
    its result, and the session would carry it forever)."""
    meta = conv.agent.meta()
    conv.history.append(Message("assistant", text, meta=meta, tool_calls=[
        new_call(c.id, c.name, c.arguments) for c in calls]))
    answered = 0
    try:
        for call in calls:
            try:
                outcome = conv.agent.call(conv, call, approve)
            except Exception as exc:  # noqa: BLE001 - the model is told; the conversation goes on
                from chatcli.engine.tools import Outcome

                problem = f"{type(exc).__name__}: {exc}"
                outcome = Outcome(f"error: {problem}", f"The model's {call.name} call failed: {problem}", error=True)
            tool_meta = {**(meta or {}), "refused": True} if outcome.refused else meta
            conv.history.append(Message("tool", outcome.text, meta=tool_meta, tool_call_id=call.id,
                                        extra={"is_error": True} if outcome.error else None))
            answered += 1
            if outcome.note:
                notice(printable(outcome.note))
    finally:
        stage, conv.agent.stage = conv.agent.stage, ""
        for index, left in enumerate(calls[answered:]):
            what = STOPPED.get(stage, STOPPED[""]) if index == 0 else STOPPED[""]
            conv.history.append(Message("tool", what, meta={**(meta or {}), "interrupted": True},
                                        tool_call_id=left.id, extra={"is_error": True}))


# A call's result when Ctrl-C stopped the turn, by where the call was.
STOPPED = {"asking": "error: not run: the user stopped the turn (Ctrl-C) at its approval question",
           "running": "error: stopped by the user (Ctrl-C) while it ran",
           "": "error: not run: the turn was stopped (Ctrl-C) before it"}


def _refuses_tools(exc: ProviderError) -> bool:
    """Whether a provider error says the endpoint takes no tools (a server without tool calling:
    vLLM without its tool parser, llama.cpp without --jinja, which answers 500): the request's
    `tools` or its tool choice named, not a message of the history ("role 'tool'")."""
    text = str(exc).lower()
    return bool(re.search(r"http (400|422|500)\b", text)) and \
        bool(re.search(r"\btools\b|tool[_ ]choice|--jinja|function[_ ]call", text))
