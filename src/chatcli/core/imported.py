"""Conversations read from another tool, as values, and the rules of bringing them in: the
session name one gets, what its session records of where it came from, what an import does to a
session already imported (add, grow, leave). Pure: the readers (store/sources) and the import
itself (engine/importing.py) do the I/O."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from chatcli.core.journal import history_hashes
from chatcli.core.messages import Message
from chatcli.core.names import is_machine_name, is_valid_name

# The top-level field of a session document that records its import (SPEC §4: unknown fields are
# kept by every reader, and Go ChatCLI ignores fields it does not know).
META_KEY = "imported"
SLUG_MAX = 40  # characters of the title kept in a session's name


@dataclass
class Found:
    """One conversation as another tool saved it, made into chatcli messages.

    `id` is the tool's own id for it (stable across imports: what makes a second import update
    rather than duplicate); `started` an ISO 8601 time; `left_out` counts, by kind, what has no
    chatcli equivalent ("thinking block", "image", "side branch"): each such thing is also
    named in one line in its message's `meta.left_out`, or kept in the message's meta."""

    source: str
    id: str
    messages: list[Message]
    title: str | None = None
    started: str | None = None
    where: str = ""
    left_out: dict[str, int] = field(default_factory=dict)
    # A session name the conversation already had in its tool (Go ChatCLI's sessions), kept when free.
    name: str | None = None
    details: dict = field(default_factory=dict)  # kept in the session's import record (cwd, model…)

    def leave_out(self, kind: str, count: int = 1) -> None:
        self.left_out[kind] = self.left_out.get(kind, 0) + count


class Tally:
    """What one source file held that could not be read, by kind ("torn last line", "unknown
    event type 'x'"): said in one line per file, never fatal."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.kinds: dict[str, int] = {}

    def skip(self, kind: str, count: int = 1) -> None:
        self.kinds[kind] = self.kinds.get(kind, 0) + count

    def __bool__(self) -> bool:
        return bool(self.kinds)

    def line(self) -> str:
        return f"{self.where}: skipped {described(self.kinds)}"


def slug(title: str | None) -> str:
    """A title as a name's last part: accents folded, case folded ("Straße" → "strasse"), words
    joined by '-', at most SLUG_MAX characters cut at a word; "" when no letter or digit of the
    Latin alphabet is left (a title in Chinese, Greek, emoji)."""
    text = unicodedata.normalize("NFKD", (title or "").casefold())
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    words = re.findall(r"[a-z0-9]+", text)
    out = ""
    for word in words:
        candidate = f"{out}-{word}" if out else word
        if len(candidate) > SLUG_MAX:
            if not out:
                out = word[:SLUG_MAX]
            break
        out = candidate
    return out


def session_name(source: str, started: str | None, title: str | None, taken: Callable[[str], bool],
                 kept: str | None = None, tag: str = "") -> str:
    """The session an imported conversation becomes: `kept` (its name in the other tool) when it
    is a free, valid, user name, else `<source>-<date>-<short title>`, with `-2`, `-3`… when
    that is taken. `tag` (a short hash of the conversation's id) stands for a title that gives no
    name (none, or none in Latin letters), and for every title when `title` is None (a sealed
    store, whose file names must not tell what its conversations are about). Never a name that
    exists: an import never writes over a session."""
    if kept and is_valid_name(kept) and not is_machine_name(kept) and not taken(kept):
        return kept
    date = started[:10] if started and re.fullmatch(r"\d{4}-\d{2}-\d{2}", started[:10]) else "undated"
    base = f"{source}-{date}-{slug(title) or tag or 'untitled'}"
    name, counter = base, 1
    while taken(name):
        counter += 1
        name = f"{base}-{counter}"
    return name


def digest(messages: Sequence[Message], hashes: Sequence[str] | None = None) -> str:
    """What an import recorded of the messages it brought in: a later import compares it with
    the same number of the conversation's messages to see that they are still the ones it took.
    `hashes`: the messages' journal hashes, when the caller has them already."""
    hashes = history_hashes(messages) if hashes is None else hashes
    return hashlib.sha256("\n".join(hashes).encode()).hexdigest()[:32]


# What stands for a tool's result the source never recorded (a tool still running when the
# conversation was saved, a result lost): a request carries an answer for every call.
NO_RESULT = "[no result recorded]"
UNKNOWN_TOOL = "unknown_tool"  # the name of a call the source recorded only the result of


def well_paired(found: Found) -> None:
    """Make `found`'s messages a sequence every provider accepts, in place: each tool message
    right after the assistant message whose calls name it, in the calls' order; a call the
    source holds no result for answered by NO_RESULT (an error); a result with no call given one
    (named UNKNOWN_TOOL) in an assistant message before it; a second result of one call with the
    same text kept once. A call or result without an id gets one made from its place.

    A result answers the latest call of its id before it that has no answer yet (some servers
    number calls afresh at every answer: `call_0` again and again), else the first such call
    after it within the same turn (a result written before its call's line); never a call
    across a message the user typed, so that what a source adds later does not change how its
    earlier messages pair. Each repair is counted in `found.left_out`. A conversation this made
    is left as it is by a second pass: every import of a source makes the same messages."""
    messages = found.messages
    for index, message in enumerate(messages):  # ids for what has none, made from the place
        if message.role == "assistant" and message.tool_calls:
            for number, call in enumerate(message.tool_calls):
                if isinstance(call, dict) and not isinstance(call.get("id"), str):
                    call["id"] = f"import-{index}-{number}"
        elif message.role == "tool" and not isinstance(message.tool_call_id, str):
            message.tool_call_id = f"import-{index}"
    # Where each call is: its slot (message index, call index), by id, in order; each position's turn.
    slots: dict[str, list[tuple[int, int]]] = {}
    turn_of: list[int] = []
    turn = 0
    for index, message in enumerate(messages):
        if message.role == "user":
            turn += 1
        turn_of.append(turn)
        if message.role == "assistant":
            for number, call in enumerate(message.tool_calls or ()):
                if isinstance(call, dict):
                    slots.setdefault(call["id"], []).append((index, number))
    answer: dict[tuple[int, int], Message] = {}  # slot → its result
    unanswered: dict[str, list[tuple[int, int]]] = {}  # id → calls before the current place, unanswered
    seen: dict[str, int] = {}  # id → how many of its slots are before the current place
    drop: set[int] = set()  # id() of results placed after their call, or dropped
    orphans: dict[int, str] = {}  # id() of results given a call of their own → why
    for index, message in enumerate(messages):
        if message.role == "assistant":
            for number, call in enumerate(message.tool_calls or ()):
                if isinstance(call, dict):
                    ident = call["id"]
                    seen[ident] = seen.get(ident, 0) + 1
                    if (index, number) not in answer:
                        unanswered.setdefault(ident, []).append((index, number))
        elif message.role == "tool":
            ident = message.tool_call_id
            waiting = unanswered.get(ident)
            if waiting:
                answer[waiting.pop()] = message
                drop.add(id(message))
                continue
            later = [slot for slot in slots.get(ident, ())[seen.get(ident, 0):]
                     if turn_of[slot[0]] == turn_of[index] and slot not in answer]
            if later:
                answer[later[0]] = message
                drop.add(id(message))
                continue
            given = [answer[slot] for slot in slots.get(ident, ()) if slot in answer]
            if any(other.content == message.content for other in given):
                drop.add(id(message))
                found.leave_out("duplicate tool result")
            else:
                orphans[id(message)] = ident
    out: list[Message] = []
    for index, message in enumerate(messages):
        if id(message) in drop:
            continue
        if id(message) in orphans:
            call = {"id": orphans[id(message)], "type": "function", "name": UNKNOWN_TOOL, "arguments": {}}
            out.append(Message("assistant", "", {"left_out": ["a tool call the source did not record"]},
                               tool_calls=[call], extra=_time_of(message)))
            found.leave_out("missing tool call")
        out.append(message)
        if message.role == "assistant":
            for number, call in enumerate(message.tool_calls or ()):
                result = answer.get((index, number))
                if result is None:
                    ident = call["id"] if isinstance(call, dict) else ""
                    extra = {"is_error": True, **_time_of(message)}
                    result = Message("tool", NO_RESULT, tool_call_id=ident, extra=extra)
                    found.leave_out("missing tool result")
                out.append(result)
    messages[:] = out


def _time_of(message: Message) -> dict:
    time = message.extra.get("timestamp") if message._extra else None
    return {"timestamp": time} if time else {}


def last_time(found: Found) -> float | None:
    """When the conversation was last held, in seconds since the epoch: its last message's
    recorded time (`timestamp`, ISO 8601), else when it started (a source whose messages carry
    no time: its file's); None when nothing says."""
    for message in reversed(found.messages):
        value = message.extra.get("timestamp") if message._extra else None
        moment = _epoch(value)
        if moment is not None:
            return moment
    return _epoch(found.started)


def moment(value: object):
    """An ISO 8601 time (`Z` for UTC accepted) as a datetime; None for anything else."""
    import datetime

    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _epoch(value: object) -> float | None:
    import datetime

    when = moment(value)
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return when.timestamp()


def settled(messages: Sequence[Message]) -> int:
    """How many of a conversation's first messages its tool will not change any more: those
    before its last assistant message, and before the first answer NO_RESULT stands in for. That
    answer and what follows it, the last answer above all, may still change while the tool
    writes the conversation (the answer's next blocks joined to it, a result recorded in place
    of NO_RESULT), and a later import replaces them."""
    last = 0
    for index, message in enumerate(messages):
        if message.role == "assistant":
            last = index
        elif message.role == "tool" and message.content == NO_RESULT and message._extra \
                and message._extra.get("is_error") is True:
            return last  # the answer whose call this stands for a result of
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "assistant":
            return index
    return 0


@dataclass
class Record:
    """A session's import record (its META_KEY field): where it came from, how many of the
    source conversation's messages it holds (those first ones, matching `digest`), and how many
    of those were settled (`settled`, matching `settled_digest`)."""

    source: str
    id: str
    name: str  # the session it was made as: a fork or a copy under another name is not updated
    count: int
    digest: str
    at: str
    where: str = ""
    left_out: dict[str, int] = field(default_factory=dict)
    details: dict = field(default_factory=dict)
    settled: int = 0
    settled_digest: str = ""
    # The session as the import left it: its first `held` messages (matching `held_digest`), of
    # which the last `run` are the source's last messages, in a row (turns made in chatcli since
    # an earlier import stand before them).
    held: int = 0
    held_digest: str = ""
    run: int = 0

    def to_meta(self) -> dict:
        meta = {"source": self.source, "id": self.id, "session": self.name, "count": self.count,
                "digest": self.digest, "settled": self.settled, "settled_digest": self.settled_digest,
                "held": self.held, "held_digest": self.held_digest, "run": self.run,
                "at": self.at, "from": self.where}
        if self.left_out:
            meta["left_out"] = dict(self.left_out)
        if self.details:
            meta["details"] = dict(self.details)
        return meta

    @classmethod
    def of_meta(cls, meta: object) -> Record | None:
        """The record a session holds, or None when it holds none (or one in a shape not ours)."""
        if not isinstance(meta, dict):
            return None
        values = (meta.get("source"), meta.get("id"), meta.get("session"), meta.get("digest"), meta.get("at"))
        count = meta.get("count")
        if not all(isinstance(v, str) for v in values) or not isinstance(count, int) or isinstance(count, bool):
            return None
        left = meta.get("left_out")
        details = meta.get("details")
        firm, firm_digest = meta.get("settled"), meta.get("settled_digest")
        if not _count(firm, count) or not isinstance(firm_digest, str):
            firm, firm_digest = count, values[3]  # nothing recorded as unsettled
        held, held_digest, run = meta.get("held"), meta.get("held_digest"), meta.get("run")
        if not _count(held, None) or not isinstance(held_digest, str) or not _count(run, held):
            held, held_digest, run = count, values[3], count  # the session was the source's messages
        return cls(values[0], values[1], values[2], count, values[3], values[4], str(meta.get("from") or ""),
                   dict(left) if isinstance(left, dict) else {}, dict(details) if isinstance(details, dict) else {},
                   firm, firm_digest, held, held_digest, run)


def _count(value: object, most: int | None) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value and (most is None or value <= most)


# What an import does with one conversation.
NEW = "new"  # no session holds it: made
GROWN = "grown"  # its session holds its first messages, and it has more: they are added
SAME = "same"  # its session holds all of it already
CHANGED = "changed"  # a settled message differs from what was imported (edited at the source): left


def decide(found: Found, record: Record | None) -> tuple[str, int]:
    """What to do with `found`, given the record of the session that imported it before (None:
    none did), and from which of its messages on the session takes the source's: GROWN from
    `record.count` adds what follows what it holds; GROWN from `record.settled`, below that,
    replaces the unsettled messages it holds, which the tool changed since (see `settled`)."""
    if record is None:
        return NEW, 0
    messages = found.messages
    hashes = history_hashes(messages[:max(record.count, record.settled)])  # hashed once, for both digests
    if record.settled > len(messages) or digest((), hashes[:record.settled]) != record.settled_digest:
        return CHANGED, record.settled
    if record.count <= len(messages) and digest((), hashes[:record.count]) == record.digest:
        return (SAME, record.count) if record.count == len(messages) else (GROWN, record.count)
    if len(messages) < record.count:  # fewer than were imported: taken back at the source, not here
        return CHANGED, record.settled
    return GROWN, record.settled


def described(kinds: dict[str, int]) -> str:
    """`3 thinking blocks, 1 image`: counts by kind, most first. A kind is a singular noun
    ("torn last line", "line of unknown type 'x'"), made plural here."""
    return ", ".join(f"{count} {kind if count == 1 else plural(kind)}"
                     for kind, count in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))


def plural(kind: str) -> str:
    """"side branch" → "side branches", "line of unknown type 'x'" → "lines of unknown type 'x'"."""
    head, of, tail = kind.partition(" of ")
    suffix = "es" if head.endswith(("s", "x", "ch", "sh")) else "s"
    return f"{head}{suffix}{of}{tail}"
