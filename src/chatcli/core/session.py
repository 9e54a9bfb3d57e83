"""The session document (SPEC §4): v2 values, v1/legacy migration, titles. Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chatcli.core.messages import Message

VERSION = 2
TITLE_MAX = 60
_KNOWN = ("version", "title", "chat_history", "agent_history", "coder_history", "shared_memory",
          "transcript_id", "attachments", "checkpoints")
# Where a message may carry its time, in the files other versions wrote.
_TIME_KEYS = ("timestamp", "created_at", "time")


class SessionFormatError(ValueError):
    """The document is not a session chatcli can read; the text says why, in a few words."""


@dataclass
class SessionData:
    history: list[Message] = field(default_factory=list)
    title: str | None = None
    transcript_id: str | None = None
    attachments: list[Any] = field(default_factory=list)
    checkpoints: list[Any] = field(default_factory=list)
    shared_memory: list[Any] = field(default_factory=list)
    # Top-level fields this version does not know, written back untouched.
    extra: dict[str, Any] = field(default_factory=dict)
    # What the file was: "v2", "v1" or "legacy" (a bare array); new documents are "v2".
    source: str = "v2"
    # Set by the store when it read this from a file: the file ends with its `chat_history`, so
    # messages can be added to it in place (store.sessions.append). Not copied.
    appendable: bool = False
    # Set by the store: the file was read between the two steps of an append (see the store).
    torn: bool = False
    # Set by the store: the file's last turn was left out of `history`, "cut" (an append a crash
    # stopped) or "damaged" (a sealed turn record that fails authentication); its messages are
    # taken back from the journal (engine.binding.Binding.take_back_turns).
    left_out: str = ""
    # Set when read: some tool calls were in a shape Go ChatCLI cannot read (chatcli's earlier
    # string `arguments`, the Chat Completions `function`), so the file is rewritten whole in the
    # stored shape at the next write instead of being appended to.
    reshaped: bool = False

    def copy(self) -> "SessionData":
        return SessionData(list(self.history), self.title, self.transcript_id, list(self.attachments),
                           list(self.checkpoints), list(self.shared_memory), dict(self.extra), self.source)


def decode_session(document: Any) -> SessionData:
    """A parsed JSON document → SessionData. v1 and legacy files are migrated; newer versions refused."""
    if isinstance(document, list):
        return SessionData(history=_messages(document, "the message list"), source="legacy")
    if not isinstance(document, dict):
        raise SessionFormatError("not a session document (expected an object or an array)")
    version = document.get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise SessionFormatError(f"unknown format version {version!r}")
    if version > VERSION:
        raise SessionFormatError(
            f"format version {version} is newer than this chatcli understands ({VERSION}); "
            "upgrade chatcli to open it"
        )
    chat = _messages(document.get("chat_history") or [], "chat_history")
    agent = _messages(document.get("agent_history") or [], "agent_history")
    coder = _messages(document.get("coder_history") or [], "coder_history")
    history = chat if (version == VERSION and not agent and not coder) else merge_mode_histories(chat, agent, coder)
    title = document.get("title")
    transcript = document.get("transcript_id")
    data = SessionData(
        history=history,
        title=title if isinstance(title, str) and title.strip() else None,
        transcript_id=transcript if isinstance(transcript, str) and transcript else None,
        attachments=_list(document.get("attachments")),
        checkpoints=_list(document.get("checkpoints")),
        shared_memory=_list(document.get("shared_memory")),
        extra={k: v for k, v in document.items() if k not in _KNOWN},
        source="v2" if version == VERSION else "v1",
    )
    data.reshaped = any(reshaped(messages, document.get(key) or ()) for key, messages in
                        (("chat_history", chat), ("agent_history", agent), ("coder_history", coder)))
    return data


def reshaped(messages: list[Message], items: Any) -> bool:
    """Whether reading `items` (a parsed message list) changed the shape of a tool call."""
    return any(message.tool_calls is not None and message.tool_calls is not item.get("tool_calls")
               for message, item in zip(messages, items))


def encode_head(data: SessionData) -> dict[str, Any]:
    """The v2 document without its `chat_history`: every field a turn leaves as it is."""
    document: dict[str, Any] = {"version": VERSION}
    document["title"] = data.title or make_title(data.history) or ""
    document["agent_history"] = []
    document["coder_history"] = []
    document["shared_memory"] = data.shared_memory
    document["transcript_id"] = data.transcript_id or ""
    document["attachments"] = data.attachments
    document["checkpoints"] = data.checkpoints
    for key, value in data.extra.items():
        document.setdefault(key, value)
    return document


def encode_session(data: SessionData) -> dict[str, Any]:
    """SessionData → the v2 document, unknown fields carried over. `chat_history` comes last
    (JSON readers do not care about the order of keys): the file then ends with the end of the
    history, and a turn is added by writing its messages there (store.sessions.append), not by
    rewriting the file."""
    document = encode_head(data)
    document["chat_history"] = [m.to_dict() for m in data.history]
    return document


def make_title(history: list[Message]) -> str | None:
    """The first user message, whitespace collapsed, at most 60 characters (+ '…')."""
    for message in history:
        if message.role == "user" and message.content.strip():
            return title_of(message.content)
    return None


def title_of(content: str) -> str:
    """A title made of a message's text (make_title's rule, for readers that have the text)."""
    text = " ".join(content.split())
    return text if len(text) <= TITLE_MAX else text[:TITLE_MAX].rstrip() + "…"


def merge_mode_histories(chat: list[Message], agent: list[Message], coder: list[Message]) -> list[Message]:
    """Merge v1 per-mode histories into one, chronologically (SPEC §4).

    By timestamps where messages carry them (equal times keep chat, agent, coder order);
    otherwise chat, then agent, then coder, each list keeping its order. The agent and coder
    lists' system messages are left out, as Go ChatCLI leaves them out when it merges: they are
    that mode's instructions, not conversation, and the mode in use gives its own.
    """
    if all(message.role == "system" for message in (*agent, *coder)):
        # Nothing to merge (the common file: one mode's history): the file's own order, without
        # reading 100,000 timestamps to sort a list that is already in it.
        for message in chat:
            if "mode" not in message.meta:
                message.meta["mode"] = "chat"
        return list(chat)
    tagged: list[tuple[int, int, Message]] = []
    for rank, (mode, messages) in enumerate((("chat", chat), ("agent", agent), ("coder", coder))):
        for index, message in enumerate(messages):
            if message.role == "system" and rank:
                continue
            if "mode" not in message.meta:
                message.meta["mode"] = mode
            tagged.append((rank, index, message))
    # A message without a time takes the time of the one before it in its own list (or the
    # earliest time if none), so every list keeps its order and undated messages stay with
    # their neighbours; with no times at all this is simply chat, then agent, then coder.
    keyed = []
    last: dict[int, float] = {}
    for rank, index, message in tagged:
        own = _time_of(message)
        when = own if own is not None else last.get(rank, float("-inf"))
        last[rank] = when
        keyed.append((when, rank, index, message))
    keyed.sort(key=lambda item: item[:3])
    return [message for *_, message in keyed]


def _time_of(message: Message) -> float | None:
    """A message's time as seconds since the epoch (UTC when the text names no zone), if it has one."""
    import datetime  # only v1 files get here

    for source in (message.extra, message.meta):
        for key in _TIME_KEYS:
            value = source.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
            if isinstance(value, str) and value:
                try:
                    parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
                except ValueError:
                    continue
                return (parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.timezone.utc)).timestamp()
    return None


def messages_of(items: Any) -> list[Message]:
    """A parsed chat_history → messages (SessionFormatError names the first bad one)."""
    return _messages(items, "chat_history")


def _messages(items: Any, where: str) -> list[Message]:
    if not isinstance(items, list):
        raise SessionFormatError(f"{where} is not a list")
    try:
        return list(map(Message.from_dict, items))
    except ValueError:
        pass
    for index, item in enumerate(items):  # the fast path failed: find which message, to name it
        try:
            Message.from_dict(item)
        except ValueError as exc:
            raise SessionFormatError(f"{where}[{index}] (message {index + 1}): {exc}") from None
    raise SessionFormatError(f"{where}: unreadable messages")  # not reached: the loop found it


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []
