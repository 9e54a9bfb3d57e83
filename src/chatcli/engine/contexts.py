"""Contexts attached to a conversation (`/context attach`): which snapshots
(store/contexts.py), with what priority, which chunks and which retrieval mode. The records live
in the session's `attachments` (SPEC §4), so a saved session carries them, a load attaches them
again (skipping, with a note, a snapshot that no longer exists) and a fork keeps them.

Each request carries the attached chunks after the system prompt, within a budget of a quarter
of the context window (BUDGET_SHARE; about four characters a token): attachments by priority
(highest first), then, per attachment, its chunks in order ("full") or the ones that share the
most words with the user's latest message first ("relevant"). What does not fit is left out,
and the model is told how much was.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from chatcli.core.errors import UsageError
from chatcli.engine.by_stamp import ByStamp
from chatcli.store.contexts import Chunk, Context, ContextError, ContextStore
from chatcli.store.home import Home
from chatcli.store.session_file import StoreUnavailable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from chatcli.engine.conversation import Conversation

MODES = ("full", "relevant")
DEFAULT_PRIORITY = 5
BUDGET_SHARE = 0.25
CHARS_PER_TOKEN = 4
_WORD = re.compile(r"\w{3,}")
_snapshots = ByStamp()  # (home, name) → the snapshot, by its file's stamp


@dataclass(frozen=True)
class Attachment:
    context_id: str
    name: str
    priority: int = DEFAULT_PRIORITY
    chunks: str = "all"  # "all", or ranges of chunk numbers: "1-3,7"
    mode: str = "full"

    def record(self) -> dict:
        return {"context_id": self.context_id, "name": self.name, "priority": self.priority,
                "chunks": self.chunks, "mode": self.mode}

    @classmethod
    def of(cls, record: object) -> "Attachment | None":
        """A session's record, or None for one this version cannot read (kept as it is)."""
        if not isinstance(record, dict) or not isinstance(record.get("name"), str):
            return None
        try:
            return cls(str(record.get("context_id", "")), record["name"], int(record.get("priority", DEFAULT_PRIORITY)),
                       str(record.get("chunks", "all")), str(record.get("mode", "full")))
        except (TypeError, ValueError):
            return None

    def describe(self) -> str:
        chunks = "all chunks" if self.chunks == "all" else f"chunks {self.chunks}"
        return f"{self.name} (priority {self.priority}, {chunks}, {self.mode})"


def store(conv: Conversation) -> ContextStore:
    return Home.of(conv.settings).contexts()


def attachments(conv: Conversation) -> list[Attachment]:
    return [found for record in conv.session.attachments if (found := Attachment.of(record)) is not None]


def selection(text: str) -> str:
    """A chunk selection as typed ("all", "3", "1-3,7") → its normal form; UsageError otherwise."""
    text = text.strip().lower()
    if text == "all":
        return text
    parts = []
    for part in text.split(","):
        found = re.fullmatch(r"(\d+)(?:-(\d+))?", part.strip())
        if not found or int(found.group(1)) < 1 or (found.group(2) and int(found.group(2)) < int(found.group(1))):
            raise UsageError(f"'{text}' is not a chunk selection (all, 3, 1-3 or 1-3,7)")
        parts.append(part.strip())
    return ",".join(parts)


def selected(chunks: list[Chunk], spec: str) -> list[Chunk]:
    if spec == "all":
        return chunks
    wanted: set[int] = set()
    for part in spec.split(","):
        first, _, last = part.partition("-")
        wanted.update(range(int(first), int(last or first) + 1))
    return [chunk for chunk in chunks if chunk.n in wanted]


# -- /context attach, detach, attached ---------------------------------------------------------
def attach(conv: Conversation, words: list[str]) -> str:
    """`/context attach NAME [priority] [chunks] [mode]` (also priority=, chunks=, mode=)."""
    if not words:
        raise UsageError("usage: /context attach NAME [priority] [chunks] [mode]")
    name, given = words[0], {}
    order = ["priority", "chunks", "mode"]
    for word in words[1:]:
        key, eq, value = word.partition("=")
        if eq:
            if key not in order:
                raise UsageError(f"unknown setting '{key}' (priority, chunks, mode)")
        else:
            key, value = next((slot for slot in order if slot not in given), ""), word
            if not key:
                raise UsageError("usage: /context attach NAME [priority] [chunks] [mode]")
        given[key] = value
    context = store(conv).load(name)
    try:
        priority = int(given.get("priority", DEFAULT_PRIORITY))
    except ValueError:
        raise UsageError(f"priority '{given['priority']}' is not a whole number") from None
    mode = given.get("mode", "full").lower()
    if mode not in MODES:
        raise UsageError(f"unknown retrieval mode '{mode}' (full or relevant)")
    chunks = selection(given.get("chunks", "all"))
    if chunks != "all" and not selected(context.chunks, chunks):
        raise UsageError(f"context '{name}' has {len(context.chunks)} chunks; '{chunks}' selects none")
    attachment = Attachment(context.id, name, priority, chunks, mode)
    kept = [record for record in conv.session.attachments if (Attachment.of(record) or Attachment("", "")).name != name]
    again = len(kept) != len(conv.session.attachments)
    conv.session.attachments = [*kept, attachment.record()]
    notes = conv.binding.write_through()
    return "\n".join([f"{'Re-attached' if again else 'Attached'} context {attachment.describe()}: "
                      f"{len(context.files)} files, {len(selected(context.chunks, chunks))} chunks.", *notes])


def detach(conv: Conversation, name: str) -> str:
    kept = [record for record in conv.session.attachments if (Attachment.of(record) or Attachment("", "")).name != name]
    if len(kept) == len(conv.session.attachments):
        raise UsageError(f"context '{name}' is not attached (/context attached lists them)")
    conv.session.attachments = kept
    return "\n".join([f"Detached context '{name}'.", *conv.binding.write_through()])


def attached(conv: Conversation) -> str:
    found = sorted(attachments(conv), key=lambda a: -a.priority)
    if not found:
        return "No context attached. /context attach NAME attaches a saved one (/context list)."
    lines = ["Attached contexts (highest priority first):"]
    for attachment in found:
        try:
            context = _context(conv, attachment.name)
            gone = context is None or (attachment.context_id and context.id != attachment.context_id)
        except ContextError as exc:
            gone, context = False, None
            lines.append(f"  {attachment.describe()}: cannot be read ({exc})")
            continue
        lines.append(f"  {attachment.describe()}" + ("  (no longer exists: not sent; /context detach "
                                                    f"{attachment.name})" if gone else ""))
    return "\n".join(lines)


def reattach(conv: Conversation) -> list[str]:
    """After a load: the session's attachments are attached again; those whose snapshot no longer
    exists (deleted, or replaced by another of the same name) are skipped and said."""
    if not conv.session.attachments:
        return []
    kept, names, notes = [], [], []
    for record in conv.session.attachments:
        attachment = Attachment.of(record)
        if attachment is None:
            kept.append(record)
            continue
        try:
            context = _context(conv, attachment.name)
        except ContextError as exc:
            notes.append(f"context '{attachment.name}' could not be read ({exc}); it stays attached")
            kept.append(record)
            continue
        if context is None or (attachment.context_id and context.id != attachment.context_id):
            notes.append(f"context '{attachment.name}' no longer exists; skipped")
            continue
        kept.append(record)
        names.append(attachment.describe())
    conv.session.attachments = kept
    return ([f"Attached contexts: {', '.join(names)}."] if names else []) + notes


# -- in each request ---------------------------------------------------------------------------
def _context(conv: Conversation, name: str) -> Context | None:
    contexts = store(conv)
    key = (contexts.place.where(""), name)
    try:
        stamp = contexts.stamp(name)
        if stamp is None:
            return None
        return _snapshots.get(key, stamp, lambda: contexts.load(name))
    except StoreUnavailable as exc:  # the server is not there now: the snapshot as it was read last
        last = _snapshots.last(key, None)
        if last is None:  # never read here: not to be taken for gone (it stays attached)
            raise ContextError(str(exc)) from None
        return last


def _question(conv: Conversation) -> str:
    for message in reversed(conv.history[-200:]):
        if message.role == "user" and not message.is_summary:
            return message.content
    return ""


def _ranked(context: Context, chunks: list[Chunk], question: str) -> list[Chunk]:
    """The chunks sharing the most (rarer) words with the question first; those sharing none last.
    Each chunk's words are read once per snapshot (kept with it in the cache)."""
    words = {word.lower() for word in _WORD.findall(question)}
    if not words:
        return chunks
    bags = _bags(context)
    counts = {word: sum(1 for bag in bags.values() if word in bag) for word in words}
    weight = {word: math.log(1 + len(bags) / (1 + counts[word])) for word in words}
    scored = [(sum(weight[word] for word in words & bags[chunk.n]), chunk) for chunk in chunks]
    return [chunk for score, chunk in sorted(scored, key=lambda item: (-item[0], item[1].n))]


def _bags(context: Context) -> dict[int, frozenset[str]]:
    bags = getattr(context, "_bags", None)
    if bags is None:
        bags = {chunk.n: frozenset(word.lower() for word in _WORD.findall(chunk.text)) for chunk in context.chunks}
        context._bags = bags  # the snapshot is cached by its file's stamp: so are its words
    return bags


def block(conv: Conversation, question: str = "") -> str:
    """The attached contexts as this turn's requests carry them ("" with none attached);
    `question`, the user's new message, ranks the chunks of a "relevant" attachment."""
    found = attachments(conv)
    if not found:
        return ""
    budget = int(conv.settings.context_tokens * CHARS_PER_TOKEN * BUDGET_SHARE)
    question = question or _question(conv)
    parts, left_out = [], 0
    for attachment in sorted(found, key=lambda a: -a.priority):
        try:
            context = _context(conv, attachment.name)
        except ContextError:
            continue
        if context is None or (attachment.context_id and context.id != attachment.context_id):
            continue
        chunks = selected(context.chunks, attachment.chunks)
        if attachment.mode == "relevant":
            chunks = _ranked(context, chunks, question)
        for chunk in chunks:
            piece = f"--- {attachment.name}: {chunk.file} lines {chunk.start}-{chunk.end} ---\n{chunk.text}"
            if len(piece) > budget:
                left_out += 1
                continue
            parts.append(piece)
            budget -= len(piece) + 1
    if not parts and not left_out:
        return ""
    more = [f"({left_out} more chunk{'s' if left_out != 1 else ''} left out: over this request's share of the "
            "context window.)"] if left_out else []
    return "\n".join(["Contexts the user attached to this conversation (files they saved with /context; use "
                      "them when they help):", *parts, *more])


__all__ = ["Attachment", "MODES", "attach", "attached", "attachments", "block", "detach", "reattach", "selection"]
