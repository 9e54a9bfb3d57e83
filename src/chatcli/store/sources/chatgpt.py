"""ChatGPT's data export: the `.zip` its "Export data" sends, or the `conversations.json` in it (a
JSON list of conversations; newer exports may split it into `conversations-000.json`, …).

There is no place ChatGPT keeps them on this machine: the path is given, the export's zip, its
unpacked directory or the file itself. The zip is read where it is, never unpacked.

A conversation is a tree of messages (`mapping`: node id → its message, parent and children);
what ChatGPT shows is the branch that ends at `current_node`, and that branch is what is made
into chatcli messages. The other branches (answers regenerated, messages edited) are left out,
and counted. An assistant message addressed to a tool (its `recipient`) is a tool call, its
code or JSON text the arguments; the tool's own messages that follow are its result (ChatGPT
gives no call ids: a result answers the latest call to its tool, ids are made from node ids).
A result whose call is not there gets it back, without arguments; a call left without a result
gets one saying so (providers refuse either alone). Left out, and counted: thoughts (their text
kept in the message's `meta.thinking`), images, audio and attached files (one line in the
message says what was there), custom instructions and memory, the messages ChatGPT hides. The
title is ChatGPT's, else the first thing the user said.

A file cut short keeps the conversations before the cut; an entry that is not a conversation, or
a message of a kind not known, is counted as skipped."""

from __future__ import annotations

import json
import math
import re
import zipfile
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import orjson

from chatcli.core.imported import Found, Tally
from chatcli.core.messages import Message, parse_arguments, well_formed
from chatcli.store.sources import SourceError, iso, shown

NAME = "chatgpt"
LABEL = "ChatGPT"
CONVERSATIONS = "conversations.json"
SPLIT = re.compile(r"conversations-\d+\.json")  # the parts of a split export
ASKED = "give the export's .zip, its conversations.json or the directory holding it"
NO_RESULT = "[no result in the export]"
# A conversations file larger than this once unpacked is not read (its text and what is made of it
# are held in memory): an export that size is unheard of, a zip that says so likely a zip bomb.
UNPACKED_MAX = 8 * 2**30
# Below this size (characters) a file's conversations are kept as read while they are put in order;
# above it each is read again when its turn comes, so that a large export is held as text only.
KEEP_BELOW = 16_000_000
# The content types read; a message of any other is counted as skipped.
KNOWN = {"text", "multimodal_text", "code", "execution_output", "tether_browsing_display", "tether_quote",
         "sonic_webpage", "system_error", "user_editable_context", "model_editable_context", "thoughts",
         "reasoning_recap"}
ROLES = {"user", "assistant", "system", "tool", "function"}
# Recipients that address no tool: the message is shown to the user.
_SHOWN = (None, "", "all", "assistant", "user")
_BLANKS = re.compile(r"[ \t\n\r]*")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def default(env: Mapping[str, str], user_home: Path) -> Path:
    """Where a browser puts the export's conversations.json once unpacked: ChatGPT keeps none here."""
    return user_home / "Downloads" / CONVERSATIONS


def files(root: Path) -> list[Path]:
    """The export to read: `root` itself (its zip, or a conversations file), or the conversations
    file (or the parts of a split one) of the directory `root`. SourceError for anything else."""
    if root.is_dir():
        if (root / CONVERSATIONS).is_file():
            return [root / CONVERSATIONS]
        if not _parts(root):
            raise SourceError(f"no ChatGPT export at {shown(root)}: no {CONVERSATIONS} there ({ASKED})")
        return [root]  # its parts read together: a conversation in two of them is read once
    if not root.is_file():
        raise SourceError(f"no ChatGPT export at {shown(root)}: it does not exist ({ASKED})")
    try:
        with open(root, "rb") as handle:
            head = handle.read(64)
    except OSError as exc:
        raise SourceError(f"{shown(root)} cannot be read ({exc.strerror or exc})") from None
    if head.startswith(b"PK"):
        try:
            with zipfile.ZipFile(root) as archive:
                members = _members(archive)
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise SourceError(f"{shown(root)} cannot be read as a zip (is it cut short?): {exc}") from None
        if not members:
            raise SourceError(f"{shown(root)} is not a ChatGPT export: it holds no {CONVERSATIONS}")
        return [root]
    if not head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith((b"[", b"{")):
        raise SourceError(f"{shown(root)} is not a ChatGPT export ({ASKED})")
    return [root]


def _parts(directory: Path) -> list[Path]:
    """The parts of a split export unpacked in `directory`, in order."""
    return sorted(path for path in directory.glob("conversations-*.json") if SPLIT.fullmatch(path.name))


def _members(archive: zipfile.ZipFile) -> list[str]:
    """The conversations files of an export's zip: its conversations.json (the one nearest the
    top, should there be several), else the parts of a split one."""
    names = [name for name in archive.namelist() if not name.endswith("/")]
    whole = [name for name in names if PurePosixPath(name).name == CONVERSATIONS]
    if whole:
        return [min(whole, key=lambda name: (name.count("/"), name))]
    return sorted(name for name in names if SPLIT.fullmatch(PurePosixPath(name).name))


def read(path: Path, tally: Tally) -> Iterator[Found]:
    """The conversations of an export, oldest first (by when each was started). A conversation
    that is there twice (in two parts of a split export) is read once: its latest copy."""
    texts = list(_texts(path, tally))
    chosen: dict[str, _Entry] = {}
    for number, text in enumerate(texts):
        for entry in _entries(text, number, tally):
            before = chosen.get(entry.id)
            if before is None or entry.updated >= before.updated:
                chosen[entry.id] = entry
    where = shown(path)
    for entry in sorted(chosen.values(), key=lambda entry: (entry.started, entry.order)):
        try:
            value = entry.value
            if value is None:
                value = json.JSONDecoder().raw_decode(texts[entry.text], entry.start)[0]
            found = _Conversation(entry.id, value, where, tally).found()
        except (ValueError, TypeError, OverflowError, RecursionError):  # one odd value costs its conversation only
            tally.skip("conversation that could not be read")
            continue
        if found is not None:
            yield found


def _texts(path: Path, tally: Tally) -> Iterator[str]:
    """The text of each conversations file of the export at `path` (its zip, one file, or the
    directory of a split export's parts)."""
    if path.is_dir():
        for part in _parts(path):
            with open(part, "rb") as handle:
                yield _decoded(handle.read())
        return
    with open(path, "rb") as handle:
        zipped = handle.read(2) == b"PK"
        if not zipped:
            handle.seek(0)
            yield _decoded(handle.read())
            return
    with zipfile.ZipFile(path) as archive:
        for name in _members(archive):
            size = archive.getinfo(name).file_size
            if size > UNPACKED_MAX:  # said before it is unpacked: a zip bomb never fills the memory
                tally.skip(f"file in the zip of {size // 2**30} GB unpacked, more than is read here")
                continue
            try:
                data = archive.read(name)
            except (zipfile.BadZipFile, zlib.error, EOFError, ValueError):
                tally.skip("damaged file in the zip")
                continue
            except (NotImplementedError, RuntimeError):  # a compression method, or a password
                tally.skip("file in the zip packed in a way not read here")
                continue
            yield _decoded(data)


def _decoded(data: bytes) -> str:
    return data.decode("utf-8", "replace").removeprefix("\ufeff")


@dataclass
class _Entry:
    """Where one conversation is in a file, and what puts it in order."""

    id: str
    started: float
    updated: float
    order: int
    text: int  # which file's text
    start: int
    value: dict | None  # kept as read when the file is small


def _entries(text: str, number: int, tally: Tally) -> Iterator[_Entry]:
    """The conversations of one file's text, read one at a time from its top-level list; a file
    cut short gives those before the cut. A file holding one object is read whole: a single
    conversation, or `{"conversations": [...]}`."""
    decoder = json.JSONDecoder()
    keep = len(text) < KEEP_BELOW
    position = _BLANKS.match(text).end()
    if position == len(text):
        tally.skip("empty conversations file")
        return
    order = number << 32
    if text[position] == "{":
        try:
            value = decoder.raw_decode(text, position)[0]
        except json.JSONDecodeError as exc:
            tally.skip(_torn(text, exc))
            return
        except RecursionError:
            tally.skip("conversation nested too deeply to read")
            return
        listed = value.get("conversations") if "mapping" not in value else None
        for item in listed if isinstance(listed, list) else [value]:
            entry = _entry(item, number, order, 0, tally)
            order += 1
            if entry is not None:
                entry.value = item  # read whole already: never read again
                yield entry
        return
    if text[position] != "[":
        tally.skip("file that is not a ChatGPT export")
        return
    position += 1
    while True:
        position = _BLANKS.match(text, position).end()
        if position == len(text):
            tally.skip("torn end of the file")
            return
        if text[position] == "]":
            return
        try:
            value, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            tally.skip(_torn(text, exc))
            return
        except RecursionError:  # where it ends is not known: what follows cannot be read either
            tally.skip("conversation nested too deeply to read (and the rest of the file)")
            return
        entry = _entry(value, number, order, position, tally)
        order += 1
        if entry is not None:
            if keep:
                entry.value = value
            yield entry
        position = _BLANKS.match(text, end).end()
        if position == len(text):
            tally.skip("torn end of the file")
            return
        if text[position] == "]":
            return
        if text[position] != ",":
            tally.skip("unreadable part of the file")
            return
        position += 1


def _torn(text: str, error: json.JSONDecodeError) -> str:
    """What a conversation that does not parse is counted as: cut short when the file ends where
    it stops making sense (within a string, or a few characters before the end); else the rest
    of the file cannot be read."""
    if error.msg.startswith("Unterminated string") or len(text) - error.pos < 16 or not text[error.pos:].strip():
        return "conversation cut short"
    return "unreadable part of the file"


def _entry(value: object, number: int, order: int, start: int, tally: Tally) -> _Entry | None:
    if not isinstance(value, dict) or not isinstance(value.get("mapping"), dict):
        tally.skip("entry that is not a conversation")
        return None
    ident = value.get("conversation_id") or value.get("id")
    if not isinstance(ident, str) or not ident.strip():
        tally.skip("conversation without an id")
        return None
    started = _number(value.get("create_time"))
    updated = _number(value.get("update_time"))
    return _Entry(ident, started if started is not None else updated if updated is not None else float("inf"),
                  updated if updated is not None else started or 0.0, order, number, start, None)


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list:
    return value if isinstance(value, list) else []


def current_branch(mapping: dict, current: object) -> tuple[list[tuple[str, dict]], int]:
    """The nodes (id, node) from the root to `current` (else to the newest leaf, when `current`
    names no node), and how many side branches leave that path (its nodes' children not on it).
    A parent that is not there ends the path, as does a node met twice."""
    if not isinstance(current, str) or not isinstance(mapping.get(current), dict):
        current = _newest_leaf(mapping)
    path: list[tuple[str, dict]] = []
    seen: set[str] = set()
    node_id = current
    while isinstance(node_id, str) and node_id not in seen and isinstance(mapping.get(node_id), dict):
        seen.add(node_id)
        path.append((node_id, mapping[node_id]))
        node_id = mapping[node_id].get("parent")
    path.reverse()
    side = 0
    for index, (_, node) in enumerate(path):
        following = path[index + 1][0] if index + 1 < len(path) else None
        children = _list(node.get("children"))
        side += sum(1 for child in children
                    if child != following and isinstance(child, str) and isinstance(mapping.get(child), dict))
    return path, side


def _newest_leaf(mapping: dict) -> str | None:
    leaves = [(key, node) for key, node in mapping.items()
              if isinstance(node, dict) and not any(isinstance(child, str) and isinstance(mapping.get(child), dict)
                                                    for child in _list(node.get("children")))]
    if not leaves:
        return None
    return max(leaves, key=lambda item: _number(_dict(item[1].get("message")).get("create_time")) or 0.0)[0]


def _call_id(node_id: object) -> str:
    """A tool call's id made from the id of the node that holds it (stable from one export to the next)."""
    return "call_" + (_UNSAFE.sub("_", str(node_id))[:58] or "0")


def _tool_name(recipient: str) -> str:
    """A tool's name as providers take it (letters, digits, '_' and '-'): `dalle.text2im` → `dalle_text2im`."""
    return _UNSAFE.sub("_", recipient)[:64] or "tool"


def _kb(size: object) -> str | None:
    if not isinstance(size, (int, float)) or isinstance(size, bool) or not math.isfinite(size):
        return None
    return f"{int(size) // 1024} KB"


class _Conversation:
    """One conversation being made into chatcli messages, a node of its current branch at a time."""

    def __init__(self, ident: str, value: dict, where: str, tally: Tally) -> None:
        self.value = value
        self.tally = tally
        self.messages: list[Message] = []
        self.found_ = Found(NAME, ident, self.messages, where=where)
        self.block: Message | None = None  # the assistant message whose calls the messages after it answer
        self.tools: dict[str, str] = {}  # call id → the tool it was addressed to
        self.answers: dict[str, Message] = {}  # call id → its result
        self.thinking: list[str] = []  # thoughts waiting for the answer they led to
        self.thought = False  # thoughts were read since the user last spoke
        self.models: dict[str, None] = {}
        self.times: list[str] = []
        self.first_said: str | None = None
        self.goes_on = False  # the last answer stopped at its length limit: the next one continues it

    def found(self) -> Found | None:
        path, side = current_branch(self.value["mapping"], self.value.get("current_node"))
        if side:
            self.found_.leave_out("side branch", side)
        for node_id, node in path:
            message = node.get("message")
            if isinstance(message, dict):
                self.take(node_id, message)
        self._close()
        if self.thinking:
            last = next((m for m in reversed(self.messages) if m.role == "assistant"), None)
            if last is not None:
                self._think(last)
        if not self.messages:
            return None
        found = self.found_
        title = self.value.get("title")
        found.title = well_formed(title.strip()) if isinstance(title, str) and title.strip() else \
            (" ".join(self.first_said.split()) if self.first_said else None)
        found.started = iso(self.value.get("create_time")) or (min(self.times) if self.times else None)
        default_model = self.value.get("default_model_slug")
        if not self.models and isinstance(default_model, str) and default_model:
            self.models[well_formed(default_model)] = None
        if self.models:
            found.details["models"] = list(self.models)
        gpt = self.value.get("gizmo_id")
        if isinstance(gpt, str) and gpt:  # a custom GPT's
            found.details["gpt"] = well_formed(gpt)
        return found

    def take(self, node_id: str, message: dict) -> None:
        author = _dict(message.get("author"))
        role = author.get("role")
        content = _dict(message.get("content"))
        kind = content.get("content_type")
        metadata = _dict(message.get("metadata"))
        if not isinstance(kind, str) or kind not in KNOWN:
            self.tally.skip(f"message of unknown content type {str(kind)[:40]!r}")
            return
        if not isinstance(role, str) or role not in ROLES:
            self.tally.skip(f"message of unknown role {str(role)[:40]!r}")
            return
        time = iso(message.get("create_time"))
        if time:
            self.times.append(time)
        model = metadata.get("model_slug")
        if role == "assistant" and isinstance(model, str) and model:
            self.models[well_formed(model)] = None
        said = _said(content)
        if kind == "user_editable_context" or metadata.get("is_user_system_message") is True:
            if said:
                self.found_.leave_out("set of custom instructions")
            return
        if kind == "model_editable_context":
            if said:
                self.found_.leave_out("memory context message")
            return
        if role == "system":
            if said:
                self.found_.leave_out("system message")
            return
        if kind in ("thoughts", "reasoning_recap"):
            self._thoughts(content, kind)
            return
        tool = role in ("tool", "function")
        recipient = message.get("recipient")
        call = role == "assistant" and isinstance(recipient, str) and recipient not in _SHOWN
        if metadata.get("is_visually_hidden_from_conversation") is True and not tool and not call:
            # Context ChatGPT gave the model and did not show; calls and results are kept, in pairs.
            if said:
                self.found_.leave_out("hidden context message")
            return
        if tool:
            name = author.get("name")
            self._result(node_id, name if isinstance(name, str) and name else "tool", content, metadata, time)
        elif call:
            self._call(node_id, recipient, content, time)
        elif role == "user":
            self._user(content, metadata, time)
        else:
            self._answer(content, metadata, time)

    def _user(self, content: dict, metadata: dict, time: str | None) -> None:
        text, left = self._body(content)
        # An uploaded image is also among the attachments: named once, as an image.
        pointers = [part["asset_pointer"] for part in _list(content.get("parts"))
                    if isinstance(part, dict) and isinstance(part.get("asset_pointer"), str)]
        for attachment in _list(metadata.get("attachments")):
            if not isinstance(attachment, dict):
                continue
            ident = attachment.get("id")
            if not (isinstance(ident, str) and ident and any(ident in pointer for pointer in pointers)):
                left.append(self._attachment(attachment))
        if not text.strip() and not left:
            return
        self._close()
        self.thought = False
        if self.first_said is None and text.strip():
            self.first_said = text
        self._add(Message("user", _with_lines(text, left), {"left_out": left} if left else None), time)

    def _answer(self, content: dict, metadata: dict, time: str | None) -> None:
        text, left = self._body(content)
        if content.get("content_type") == "code" and text:
            language = content.get("language")
            text = f"```{language if isinstance(language, str) and language != 'unknown' else ''}\n{text}\n```"
        if not text.strip() and not left:
            return
        text = _with_lines(text, left)
        last = self.messages[-1] if self.messages else None
        if last is not None and last.role == "assistant" and not last.tool_calls:
            # One answer in several nodes ("continue generating", a commentary then the answer).
            joint = "" if self.goes_on or not last.content else "\n\n"
            last.content = f"{last.content}{joint}{text}"
            target = last
        else:
            self._close()
            target = self._add(Message("assistant", text), time)
        if left:
            target.meta.setdefault("left_out", []).extend(left)
        self._think(target)
        self.goes_on = _dict(metadata.get("finish_details")).get("type") == "max_tokens"

    def _call(self, node_id: str, recipient: str, content: dict, time: str | None) -> None:
        text, left = self._body(content)
        arguments = _arguments(text, "code" if content.get("content_type") == "code" else "text")
        target = self._caller(time)
        self._add_call(target, _call_id(node_id), recipient, arguments)
        if left:
            target.meta.setdefault("left_out", []).extend(left)
        self._think(target)

    def _caller(self, time: str | None) -> Message:
        """The assistant message a new call goes on: the last message when it is the model's
        (its text, its other calls: one response), else a new one."""
        last = self.messages[-1] if self.messages else None
        if last is not None and last.role == "assistant":
            return last
        self._close()
        return self._add(Message("assistant", ""), time)

    def _add_call(self, target: Message, call_id: str, recipient: str, arguments: dict) -> None:
        target.tool_calls = [*(target.tool_calls or []), {"id": call_id, "type": "function",
                                                           "name": _tool_name(recipient), "arguments": arguments}]
        self.tools[call_id] = recipient
        self.block = target

    def _result(self, node_id: str, name: str, content: dict, metadata: dict, time: str | None) -> None:
        text, left = self._body(content)
        run = _dict(metadata.get("aggregate_result"))
        for output in _list(run.get("messages")):
            if isinstance(output, dict) and output.get("message_type") == "image":
                self.found_.leave_out("image")
                left.append("image the code made")
        failed = content.get("content_type") == "system_error" or bool(run.get("in_kernel_exception")) or \
            str(run.get("status") or "").startswith("failed")
        text = _with_lines(text, left)
        call = self._waiting(name)
        last = self.messages[-1] if self.messages else None
        if call is None and last is not None and last.role == "tool" and self.tools.get(last.tool_call_id) == name:
            # The same tool again for the same call (an image, then its note): one result.
            last.content = f"{last.content}\n\n{text}" if last.content and text else last.content or text
            if left:
                last.meta.setdefault("left_out", []).extend(left)
            if failed:
                last.extra["is_error"] = True
            return
        if call is None:  # a result without its call (a plugin's): the call is put back, without arguments
            call = _call_id(node_id)
            target = self.block if last is not None and last.role == "tool" and self.block is not None \
                else self._caller(time)
            self._add_call(target, call, name, {})
        result = Message("tool", text, {"left_out": left} if left else None, tool_call_id=call,
                         extra={"is_error": True} if failed else None)
        self.answers[call] = self._add(result, time)

    def _waiting(self, name: str) -> str | None:
        """The latest call still without its result that `name` answers: one to that tool, else
        to a tool of the same family (`web` for `web.run`)."""
        if self.block is None:
            return None
        waiting = [call["id"] for call in self.block.tool_calls or [] if call["id"] not in self.answers]
        for match in (lambda tool: tool == name, lambda tool: tool.split(".")[0] == name.split(".")[0]):
            for call in reversed(waiting):
                if match(self.tools.get(call, "")):
                    return call
        return None

    def _close(self) -> None:
        """Ends the calls of the last response: each call still without its result gets one saying so."""
        if self.block is None:
            return
        for call in self.block.tool_calls or []:
            if call["id"] not in self.answers:
                self.answers[call["id"]] = self._add(Message("tool", NO_RESULT, tool_call_id=call["id"]), None)
        self.block = None

    def _thoughts(self, content: dict, kind: str) -> None:
        if kind == "reasoning_recap":
            # "Thought for 12s": kept only when the thoughts themselves are not in the export.
            recap = content.get("content")
            if isinstance(recap, str) and recap.strip() and not self.thought:
                self.thinking.append(well_formed(recap.strip()))
                self.found_.leave_out("thinking block")
            return
        texts = []
        for thought in _list(content.get("thoughts")):
            if isinstance(thought, dict):
                texts.append("\n".join(str(thought[key]).strip() for key in ("summary", "content")
                                       if isinstance(thought.get(key), str) and thought[key].strip()))
        text = "\n\n".join(filter(None, texts))
        if text:
            self.thinking.append(well_formed(text))
            self.thought = True
            self.found_.leave_out("thinking block")

    def _think(self, target: Message) -> None:
        if not self.thinking:
            return
        before = target.meta.get("thinking")
        target.meta["thinking"] = "\n\n".join([before, *self.thinking] if before else self.thinking)
        self.thinking = []

    def _body(self, content: dict) -> tuple[str, list[str]]:
        """A message's text, and one line for each thing in it with no chatcli equivalent."""
        kind = content.get("content_type")
        left: list[str] = []
        if kind in ("text", "multimodal_text"):
            texts = []
            for part in _list(content.get("parts")):
                if isinstance(part, str):
                    texts.append(part)
                elif isinstance(part, dict):
                    if part.get("content_type") == "audio_transcription" and isinstance(part.get("text"), str):
                        texts.append(part["text"])
                    else:
                        left.append(self._part(part))
            text = "\n".join(filter(None, texts))
        elif kind == "tether_browsing_display":
            text = "\n\n".join(content[key] for key in ("result", "summary") if _text(content.get(key)))
        elif kind in ("tether_quote", "sonic_webpage"):
            head = "\n".join(content[key] for key in ("title", "url") if _text(content.get(key)))
            text = "\n\n".join(filter(None, (head, content["text"] if _text(content.get("text")) else "")))
        elif kind == "system_error":
            text = ": ".join(content[key] for key in ("name", "text") if _text(content.get(key)))
        else:  # code, execution_output
            text = content["text"] if isinstance(content.get("text"), str) else ""
        return well_formed(text), left

    def _part(self, part: dict) -> str:
        """One line naming a part of a message with no chatcli equivalent, counted by its kind."""
        kind = well_formed(str(part.get("content_type") or "unknown part")[:40])
        if kind == "image_asset_pointer":
            self.found_.leave_out("image")
            width, height = part.get("width"), part.get("height")
            size = [f"{width}x{height}"] if isinstance(width, int) and isinstance(height, int) else []
            size += [_kb(part.get("size_bytes"))] if _kb(part.get("size_bytes")) else []
            made = "generated image" if _dict(_dict(part.get("metadata")).get("dalle")) else "image"
            return f"{made} ({', '.join(size)})" if size else made
        if kind in ("audio_asset_pointer", "real_time_user_audio_video_asset_pointer"):
            self.found_.leave_out("audio clip")
            return "audio clip"
        self.found_.leave_out(kind)
        return kind

    def _attachment(self, attachment: dict) -> str:
        self.found_.leave_out("attached file")
        name = attachment.get("name")
        about = [attachment[key] for key in ("mime_type",) if isinstance(attachment.get(key), str)]
        about += [_kb(attachment.get("size"))] if _kb(attachment.get("size")) else []
        line = f"file {name if isinstance(name, str) else ''}".rstrip() + (f" ({', '.join(about)})" if about else "")
        return well_formed(line)

    def _add(self, message: Message, time: str | None) -> Message:
        if time:
            message.extra["timestamp"] = time
        self.messages.append(message)
        return message


def _text(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _said(content: dict) -> bool:
    """Whether a message holds anything at all (the root's system message holds an empty part)."""
    for key in ("parts", "thoughts"):
        if any((isinstance(item, str) and item.strip()) or isinstance(item, dict) for item in _list(content.get(key))):
            return True
    return any(isinstance(content.get(key), str) and content[key].strip()
               for key in ("text", "result", "content", "user_profile", "user_instructions", "model_set_context"))


def _arguments(text: str, key: str) -> dict:
    """A call's arguments: the object its text is, when it is a JSON object, else the text under `key`."""
    parsed = parse_arguments(text)
    if parsed is not None:
        try:
            orjson.dumps(parsed)  # a lone surrogate escaped in the JSON cannot be written again
            return parsed
        except orjson.JSONEncodeError:
            pass
    return {key: text} if text else {}


def _with_lines(text: str, left: list[str]) -> str:
    """A message's text followed by a line for each thing left out of it."""
    return well_formed("\n".join(filter(None, (text, *(f"[{what}: not imported]" for what in left)))))
