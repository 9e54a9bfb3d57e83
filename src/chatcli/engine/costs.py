"""Cost tracking: each request a conversation makes is counted (tokens in and out,
reported by the provider or estimated, and a cost from core/costs.py) in the cost snapshot its
session names (`cost_ref`, store/costs.py), and the last turn's requests are kept in memory for
`/cost`. A one-shot that keeps no session writes no snapshot, as it writes nothing else. A fork keeps the reference: its lines and its parent's are in one snapshot, each saying
which session made it."""

from __future__ import annotations

import os
import time

from chatcli.core import costs as pricing
from chatcli.core.messages import call_chars
from chatcli.providers.base import Done, Request
from chatcli.store.costs import REF_RE, CostStore, Line
from chatcli.store.home import Home
from chatcli.store.session_file import SessionError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from chatcli.engine.conversation import Conversation

REF_FIELD = "cost_ref"


def reference(conv: Conversation, create: bool = True) -> str | None:
    """The conversation's cost snapshot (made at its first request); None without one."""
    ref = conv.session.extra.get(REF_FIELD)
    if isinstance(ref, str) and REF_RE.fullmatch(ref):
        return ref
    if not create:
        return None
    ref = os.urandom(6).hex()
    conv.session.extra[REF_FIELD] = ref
    return ref


def record(conv: Conversation, request: Request, done: Done | None, answer_chars: int) -> pricing.Usage:
    """Count one request: in this turn's list, and in the snapshot (best effort: a cost line
    that cannot be written costs nothing else)."""
    sent = len(request.system) + sum(len(m.content) + call_chars(m) for m in request.messages)
    used = pricing.usage(conv.settings.provider, request.model, done.input_tokens if done else None,
                         done.output_tokens if done else None, sent, answer_chars,
                         {model: (rate_in, rate_out) for model, rate_in, rate_out in conv.settings.prices})
    conv.turn_costs.append(used)
    if conv.transcript is not None and not conv.read_only:  # a conversation that persists (not a plain one-shot)
        try:
            store(conv).add(reference(conv), Line(time.time(), conv.session_name or "", used.provider, used.model,
                                                  used.input_tokens, used.output_tokens, used.estimated, used.cost))
        except (OSError, SessionError):  # StoreUnavailable among them
            pass  # a snapshot is a record of costs, never a reason to fail a turn that was answered
    return used


def store(conv: Conversation) -> CostStore:
    return Home.of(conv.settings).costs()


def describe(lines: list) -> str:
    """"3 requests, 12.3k tokens in, 1.1k out, ≈ $0.0123; tokens estimated for 2 of them"."""
    if not lines:
        return "no requests"
    tokens_in = sum(line.input_tokens for line in lines)
    tokens_out = sum(line.output_tokens for line in lines)
    priced = [line.cost for line in lines if line.cost is not None]
    if all(line.provider in pricing.FREE_PROVIDERS for line in lines):  # the local model, Ollama: no bill
        cost = "free (the model runs on your machine)"
    else:
        cost = "≈ " + (pricing.money(sum(priced)) if priced else pricing.money(None))
        if priced and len(priced) < len(lines):
            cost += f" for {len(priced)} of them"
    estimated = sum(1 for line in lines if line.estimated)
    guess = ""
    if estimated:
        guess = "; tokens estimated" if estimated == len(lines) else f"; tokens estimated for {estimated} of them"
    return (f"{len(lines)} request{'s' if len(lines) != 1 else ''}, {pricing.tokens(tokens_in)} tokens in, "
            f"{pricing.tokens(tokens_out)} out, {cost}{guess}")


def own(lines: list[Line], name: str) -> list[Line]:
    """The lines of session `name`: its own, and, for the first name the lineage took, those made
    before it had a name (the conversation it was saved from)."""
    first = next((line.session for line in lines if line.session), name)
    return [line for line in lines if line.session == name or (not line.session and name and name == first)]


def session_cost(settings, data, name: str) -> str | None:
    """`session show`'s cost line for a saved session, or None when it has no snapshot."""
    ref = data.extra.get(REF_FIELD)
    if not isinstance(ref, str) or not REF_RE.fullmatch(ref):
        return None
    lines = Home.of(settings).costs().lines(ref)
    mine = own(lines, name)
    lineage = f"; its cost reference {ref}, shared with its forks: {describe(lines)}" if len(mine) != len(lines) else ""
    return f"cost: {describe(mine)}{lineage}"


def summary(conv: Conversation) -> str:
    """/cost: the last turn, this session, and the lineage its cost reference covers."""
    last = [Line(0, "", u.provider, u.model, u.input_tokens, u.output_tokens, u.estimated, u.cost)
            for u in conv.turn_costs]
    lines = [f"Last turn: {describe(last)}." if last else "No turn yet in this run."]
    ref = reference(conv, create=False)
    if ref is not None:
        every = store(conv).lines(ref)
        name = conv.session_name or ""
        mine = own(every, name) if name else [line for line in every if not line.session]
        lines.append(f"This {'session' if name else 'conversation'}{f' ({name})' if name else ''}: {describe(mine)}.")
        if len(mine) != len(every):
            lines.append(f"With its forks and earlier names (cost reference {ref}): {describe(every)}.")
    lines.append(f"Prices per million tokens from chatcli's table ({pricing.PRICES_AS_OF}) or CHATCLI_PRICES; "
                 "estimates count about four characters a token.")
    return "\n".join(lines)


__all__ = ["REF_FIELD", "describe", "record", "reference", "session_cost", "summary"]
