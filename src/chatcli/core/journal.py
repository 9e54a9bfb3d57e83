"""The transcript journal's format and rules (SPEC §7), pure: hashing, lines, sync plans, replay.

A journal is a JSON-lines file, one event per line, each with `"v": 1` and a `"type"`:

  {"v":1,"type":"message","hash":H,"message":{…},"time":"2026-12-02T14:05:09.123+00:00"}
      a message, recorded once, the first time it appeared at the tail of the live history
  {"v":1,"type":"rewrite","hashes":[H, …],"time":…,"reason":"compact"}
      the live history was replaced (compaction, rewind, trim, a message changed in place):
      these are the hashes of the history that replaced it, in order; the optional `reason`
      says what did it ("compact", "rewind"), when chatcli knows
  {"v":1,"type":"fork","from":ID,"time":…}
      first line of a fork's journal; the parent's events follow, copied, then the fork's own
  {"v":1,"type":"checkpoint","time":…,"label":"first words…"[,"command":true][,"count":N]}
      a /rewind checkpoint (SPEC §8) taken before a turn (or a command): the live history as
      of this line is the checkpoint's (core.checkpoints.from_journal); with `count`, its first N
      messages, recorded after this line (a history recorded after the turn's answer:
      engine/resume.py writes the checkpoint first, so that a stop while the history is
      recorded leaves it in place; a version before the field reads the line as a checkpoint
      of the history before it, which is empty there)
  {"v":1,"type":"synced","count":N,"last":H,"dead":D}
      written with every sync: the live history then had N messages, the last one hashed H,
      and the journal held D hashes besides the live ones. While it is the journal's last
      line, nothing changed since, so the next process trusts it instead of reading the
      whole journal (engine.transcript)
  {"v":1,"type":"checkpoints","items":[…],"time":…}
      the checkpoint list as a /rewind or /compact left it, replacing the one before, in the
      session file's item shape (core.checkpoints.encode)

Replaying the events gives the live history as of any line: a message event appends its hash,
a rewrite event replaces the list. A hash names a message by what it says (role, content, tool
calls, tool_call_id, images) and by how many identical messages came before it in the history
("ok", "ok" are two messages): `<32 hex>` for the first, `<32 hex>.<n>` for the (n+1)th.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence

from chatcli.core.messages import Message, field_problem, stored_call

VERSION = 1
MESSAGE = "message"
REWRITE = "rewrite"
FORK = "fork"
CHECKPOINT = "checkpoint"
CHECKPOINTS = "checkpoints"
SYNCED = "synced"
CALLS_KEYED = "k"  # on a message line with tool calls: 2 when hashed by what their arguments mean


_quote = json.encoder.encode_basestring  # a str as a JSON string, non-ASCII kept (ensure_ascii=False)


def content_digest(message: Message) -> str:
    """32 hex of SHA-256 over what a message says: role, content, tool calls (id, name,
    arguments), tool_call_id and images. Metadata (interrupted, mode, times) is not part of it."""
    extra = message._extra
    if not extra and not message.tool_calls and message.tool_call_id is None and message.content.__class__ is str:
        # The common case, the same bytes json.dumps writes below, without building an encoder.
        data = f"[{_quote(message.role)},{_quote(message.content)},[],null,null]"
        return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    calls = [call_key(call) if isinstance(call, dict) else [None, None, str(call)] for call in message.tool_calls or ()]
    return _digest(message, calls)


def _digest(message: Message, calls: list) -> str:
    extra = message._extra or {}
    raw_content = extra.get("content", message.content)  # multi-part content, images included
    key = [message.role, raw_content, calls, message.tool_call_id, extra.get("images")]
    data = json.dumps(key, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _earlier_digest(recorded: dict, message: Message) -> str:
    """The hash an earlier chatcli gave a message recorded as `recorded` (`message` read from it):
    its tool calls' arguments counted as they were written, whatever their shape."""
    calls = []
    for call in recorded.get("tool_calls") or ():
        if isinstance(call, dict):
            function = call.get("function")
            function = function if isinstance(function, dict) else call
            calls.append([call.get("id"), function.get("name"), function.get("arguments")])
        else:
            calls.append([None, None, str(call)])
    return _digest(message, calls)


def call_key(call: dict) -> list:
    """What a tool call contributes to its message's hash: id, name, and the arguments as what
    they mean (the object, keys sorted when hashed) rather than how they were written, so a call
    read in any shape (Go's object, chatcli's earlier JSON text, Chat Completions' `function`)
    hashes the same; text that is no JSON object counts as the text."""
    stored = stored_call(call)
    arguments = stored.get("arguments")
    raw = stored.get("raw")
    return [stored.get("id"), stored.get("name"), raw if isinstance(raw, str) and raw and not arguments else arguments]


def history_hashes(history: Sequence[Message], counts: dict[str, int] | None = None) -> list[str]:
    """The hash of every message of `history`, in order. `counts` (digest → occurrences so far)
    lets a caller continue a list it hashed before; it is updated."""
    counts = {} if counts is None else counts
    out = []
    for message in history:
        digest = content_digest(message)
        seen = counts.get(digest, 0)
        counts[digest] = seen + 1
        out.append(digest if seen == 0 else f"{digest}.{seen}")
    return out


def occurrence_counts(hashes: Sequence[str]) -> dict[str, int]:
    """digest → how many times it occurs in a hash list: the `counts` that `history_hashes`
    would have left after hashing that list's messages (no hashing needed)."""
    counts: dict[str, int] = {}
    for item in hashes:
        digest = item.partition(".")[0]
        counts[digest] = counts.get(digest, 0) + 1
    return counts


def plan_sync(recorded: Sequence[str], known: set[str], live: Sequence[str]) -> tuple[list[int], bool]:
    """What a sync appends: (indexes into `live` of the messages to record, whether a rewrite
    event follows). `recorded` is the live history as the journal last left it, `known` every
    hash the journal holds. A pure extension by unseen messages records the new tail; anything
    else (an undone rewind brings back messages it holds) records only messages the journal has
    never seen, then the rewrite."""
    n = len(recorded)
    if len(live) >= n and list(live[:n]) == list(recorded) and not any(h in known for h in live[n:]):
        return list(range(n, len(live))), False  # only messages never seen, at the tail
    fresh, seen = [], set()
    for index, digest in enumerate(live):
        if digest not in known and digest not in seen:
            fresh.append(index)
            seen.add(digest)
    return fresh, True


def message_line(digest: str, message: Message, time: str) -> dict:
    line = {"v": VERSION, "type": MESSAGE, "hash": digest, "message": message.to_dict(), "time": time}
    if message.tool_calls:
        line[CALLS_KEYED] = 2  # hashed by what its calls' arguments mean (see rekey_earlier_hashes)
    return line


def rewrite_line(hashes: Sequence[str], time: str, reason: str | None = None) -> dict:
    line = {"v": VERSION, "type": REWRITE, "hashes": list(hashes), "time": time}
    if reason:
        line["reason"] = reason
    return line


def fork_line(parent: str, time: str) -> dict:
    return {"v": VERSION, "type": FORK, "from": parent, "time": time}


def checkpoint_line(time: str, label: str, command: bool = False, count: int | None = None) -> dict:
    line = {"v": VERSION, "type": CHECKPOINT, "time": time, "label": label}
    if command:
        line["command"] = True
    if count is not None:
        line["count"] = count
    return line


def synced_line(count: int, last: str, dead: int, damaged: int = 0) -> dict:
    """`damaged`: how many lines of the journal were found damaged or out of place when this
    was written, and said to the user: a later reader that finds no more says nothing."""
    line = {"v": VERSION, "type": SYNCED, "count": count, "last": last, "dead": dead}
    if damaged:
        line["damaged"] = damaged
    return line


def damage_said(event: dict) -> int:
    """The damaged-line count a `synced` event records as said (0 when it records none)."""
    value = event.get("damaged", 0)
    return value if value.__class__ is int and value > 0 else 0


def checkpoints_line(items: list, time: str) -> dict:
    return {"v": VERSION, "type": CHECKPOINTS, "items": items, "time": time}


def rekey_earlier_hashes(events: list[dict]) -> None:
    """Give the messages with tool calls that an earlier chatcli recorded (no `k` on the line; it
    hashed a call's arguments as they were written, `_earlier_digest`) the hashes they have now
    (by what the arguments mean, `call_key`), in every event that names them, in place, so a
    journal written before keeps matching the history it recorded. Each such message event keeps
    its recorded hash as `was` (for hash lists kept elsewhere: `earlier_aliases`). Lines this
    version wrote cost one key lookup."""
    aliases: dict[str, str] = {}
    renamed: list[dict] = []
    for event in events:
        if event["type"] == MESSAGE and CALLS_KEYED not in event:
            recorded = event["message"]
            if recorded.get("tool_calls"):
                digest = event["hash"].partition(".")[0]
                message = Message.from_dict(recorded)
                now = content_digest(message)
                if now != digest and digest == _earlier_digest(recorded, message):
                    aliases[digest] = now
                    renamed.append(event)
    if not aliases:
        return
    for event in renamed:
        event["was"], event[CALLS_KEYED] = event["hash"], 2  # a fork's copy of the line needs no second look
    for event in events:
        kind = event["type"]
        if kind == MESSAGE:
            event["hash"] = rekeyed(event["hash"], aliases)
        elif kind == REWRITE:
            event["hashes"] = [rekeyed(item, aliases) for item in event["hashes"]]
        elif kind == SYNCED:
            event["last"] = rekeyed(event["last"], aliases)
        elif kind == CHECKPOINTS:
            event["items"] = rekeyed_items(event["items"], aliases)


def earlier_aliases(events: list[dict]) -> dict[str, str]:
    """digest an earlier chatcli recorded → digest now, from events `rekey_earlier_hashes` renamed."""
    return {event["was"].partition(".")[0]: event["hash"].partition(".")[0]
            for event in events if event["type"] == MESSAGE and "was" in event}


def rekeyed(item: str, aliases: dict[str, str]) -> str:
    """A hash (`<digest>` or `<digest>.<n>`) under its digest now."""
    digest, dot, count = item.partition(".")
    return aliases[digest] + dot + count if digest in aliases else item


def rekeyed_items(items: list, aliases: dict[str, str]) -> list:
    """Checkpoint items (a session file's, a `checkpoints` event's) with their hashes rekeyed."""
    if not aliases:
        return items
    out = []
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("hashes"), list):
            item = {**item, "hashes": [rekeyed(h, aliases) if isinstance(h, str) else h for h in item["hashes"]]}
        out.append(item)
    return out


def check_event(value: object) -> dict | None:
    """A parsed line → the event, if it is one this version reads; None for a foreign line."""
    if not isinstance(value, dict) or value.get("v") != VERSION:
        return None
    kind = value.get("type")
    if kind == MESSAGE:
        message = value.get("message")
        ok = value.get("hash").__class__ is str and message.__class__ is dict \
            and message.get("role").__class__ is str
        if ok and (len(message) != 2 or message.get("content").__class__ is not str):  # beyond {role, content}:
            ok = field_problem(message) is None  # a session file's checks: a wrong-typed field makes it foreign
    elif kind == REWRITE:
        ok = isinstance(value.get("hashes"), list) and all(isinstance(h, str) for h in value["hashes"])
    elif kind == FORK:
        ok = isinstance(value.get("from"), str)
    elif kind == CHECKPOINT:
        ok = isinstance(value.get("time"), str) and isinstance(value.get("label"), str) \
            and (value.get("count", 0).__class__ is int and value.get("count", 0) >= 0)
    elif kind == CHECKPOINTS:
        ok = isinstance(value.get("items"), list)
    elif kind == SYNCED:
        ok = (value.get("count").__class__ is int and value.get("dead").__class__ is int
              and value.get("last").__class__ is str)
    else:
        ok = False
    return value if ok else None


class Replay:
    """The state of a journal after some of its events: every message recorded (in order, each
    with its 1-based position), the hash → position map, and the live history's hashes."""

    __slots__ = ("entries", "positions", "live")

    def __init__(self) -> None:
        self.entries: list[dict] = []  # the message events, in journal order (position = index + 1)
        self.positions: dict[str, int] = {}  # hash → position of its first recording
        self.live: list[str] = []

    def apply(self, events: Iterable[dict]) -> None:
        entries, positions, live = self.entries, self.positions, self.live
        for event in events:
            kind = event["type"]
            if kind == MESSAGE:
                entries.append(event)
                positions.setdefault(event["hash"], len(entries))
                live.append(event["hash"])
            elif kind == REWRITE:
                live[:] = event["hashes"]

    @property
    def known(self) -> set[str]:
        return set(self.positions)

    def history(self, hashes: Sequence[str] | None = None) -> tuple[list[Message], list[str]]:
        """The messages of a hash list (the live one by default), and the hashes the journal
        does not hold (their messages are missing from the result)."""
        out, missing = [], []
        for digest in self.live if hashes is None else hashes:
            position = self.positions.get(digest)
            if position is None:
                missing.append(digest)
            else:
                out.append(Message.from_dict(self.entries[position - 1]["message"]))
        return out, missing


def before_introducing(events: Iterable[dict], digest: str) -> tuple[Replay, list[str] | None, list[str] | None]:
    """The journal's state, and the live history just before and just after the rewrite event
    that brought `digest` into it (a compaction's summary: the first one, not marked as a
    rewind, since undoing a later compaction brings an earlier summary back); None, None when
    none did.

    One sync writes its new messages and then its rewrite event with one time: those messages
    are part of the rewrite, not of the history before it."""
    state = Replay()
    before = after = None
    batch, batch_time = 0, None  # message events just before, written with one time
    for event in events:
        kind = event["type"]
        if kind == REWRITE:
            prior = state.live[: len(state.live) - batch] if event.get("time") == batch_time else state.live
            if before is None and event.get("reason") in (None, "compact") and digest in event["hashes"] \
                    and digest not in prior:
                before, after = list(prior), list(event["hashes"])
        if kind == MESSAGE:
            batch = batch + 1 if event.get("time") == batch_time else 1
            batch_time = event.get("time")
        else:
            batch, batch_time = 0, None
        state.apply((event,))
    return state, before, after


def replay(events: Iterable[dict], upto: int | None = None) -> Replay:
    """The journal's state after its first `upto` events (all of them by default)."""
    state = Replay()
    events = list(events)
    state.apply(events if upto is None else events[:upto])
    return state


__all__ = ["CHECKPOINT", "CHECKPOINTS", "FORK", "MESSAGE", "REWRITE", "SYNCED", "VERSION", "checkpoint_line",
           "checkpoints_line", "synced_line", "Replay", "before_introducing", "check_event", "content_digest", "damage_said", "fork_line",
           "history_hashes", "message_line", "occurrence_counts", "plan_sync", "replay", "rewrite_line"]
