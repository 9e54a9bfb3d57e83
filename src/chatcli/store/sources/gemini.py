"""Gemini CLI's conversations, under `~/.gemini/tmp/<project>/` (`$GEMINI_CLI_HOME` in place of
the home directory when set): its chat recordings `chats/session-*.json` (one JSON document,
written whole at every change) and `chats/session-*.jsonl` (a log replayed as Gemini CLI does:
a message line again replaces the message in its place, `$rewindTo` takes back a message and
all after it, `$set` changes the header or replaces every message), and the `/chat save <tag>`
checkpoints `checkpoint-<tag>.json` (the model's history as Gemini API `Content`s, a bare list
in older versions). A recording and a checkpoint of the same chat are two conversations.

Messages are made into chatcli's: a model turn's function calls into tool calls, each followed
by a tool message with its result (a recording keeps the result on the call, a checkpoint in the
next `user` Content, paired by the call's id, else by its name in order). Left out, and counted:
thoughts (their text kept in the message's `meta.thinking`), images and other inline or linked
data (one line in the message says what was there), the context Gemini CLI injects at the start
(and the model's acknowledgement of it), slash commands, its info, warning and error notices,
subagents' transcripts. A compression summary is kept as a summary (`meta.is_summary`). The
title is Gemini CLI's summary of the recording, else the first thing the user said; a
checkpoint's is its tag."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from urllib.parse import unquote

import orjson

from chatcli.core.imported import Found, Tally
from chatcli.core.messages import Message
from chatcli.store.sources import SourceError, earliest, iso, json_lines, mtime_order, shown

NAME = "gemini"
LABEL = "Gemini CLI"
# What is read under a root: Gemini CLI's tmp directory, one project's directory, or its chats directory.
PATTERNS = ("*/chats/session-*.json", "*/chats/session-*.jsonl", "*/checkpoint-*.json",
            "chats/session-*.json", "chats/session-*.jsonl", "checkpoint-*.json",
            "session-*.json", "session-*.jsonl")
CHECKPOINT_PREFIX = "checkpoint-"
# The starts of the user messages that are not the user's words (Gemini CLI leaves them out when it
# resumes a session): the context it sets up, slash commands and the help key.
_CONTEXT_MARKS = ("<session_context>", "<hook_context>", "This is the Gemini CLI. We are setting up the context")
_COMMAND_MARKS = ("/", "?")
_CONTEXT_ACK = "Got it. Thanks for the context!"  # the model's answer to the injected context, in older versions
_SUMMARY_MARK = "<state_snapshot>"  # what a compression summary holds
_SUMMARY_ACK = "Got it. Thanks for the additional context!"  # the model's answer to it
_BINARY_KEY = "__binary_injection__"  # data a tool read that the next request carries
_NOTICES = ("info", "warning", "error")
_NO_RESULT = "[no result recorded]"


def default(env: Mapping[str, str], user_home: Path) -> Path:
    configured = (env.get("GEMINI_CLI_HOME") or "").strip()
    return (Path(configured).expanduser() if configured else user_home) / ".gemini" / "tmp"


def files(root: Path) -> list[Path]:
    """The chat recordings and `/chat save` checkpoints of every project under `root` (Gemini
    CLI's tmp directory, or one project's), or one file. A `.json` recording that Gemini CLI
    went on writing as `<name>.jsonl` (it copies it there) is read from that copy only."""
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise SourceError(f"no {LABEL} conversations at {shown(root)}: it does not exist (give the path to read)")
    found = {path for pattern in PATTERNS for path in root.glob(pattern) if path.is_file()}
    if not found and (root / "tmp").is_dir():  # Gemini CLI's own directory was given
        found = {path for pattern in PATTERNS[:3] for path in (root / "tmp").glob(pattern) if path.is_file()}
    found = {path for path in found if not (path.suffix == ".json" and path.with_name(path.name + "l") in found)}
    if not found:
        raise SourceError(f"no {LABEL} conversations at {shown(root)}: no chats/session-*.json or "
                          "checkpoint-*.json files there")
    return sorted(found, key=mtime_order)


def read(path: Path, tally: Tally) -> Iterator[Found]:
    with open(path, "rb") as handle:
        data = handle.read()
    if not data.strip():
        tally.skip("empty file")
        return
    try:
        value = orjson.loads(data)
    except ValueError:
        value = _BROKEN
    if value is _BROKEN or (path.suffix == ".jsonl" and isinstance(value, dict) and "sessionId" not in value):
        if path.suffix != ".jsonl" and not _starts_as_lines(data):
            tally.skip("unreadable file (not valid JSON: cut short?)")
            return
        value = _replayed(json_lines(path, tally), tally)
        if value is None:
            tally.skip("recording without its header line (sessionId, projectHash)")
            return
    found: Found | None
    if isinstance(value, list) or isinstance(value, dict) and "history" in value:
        found = _checkpoint(path, value, tally)
    elif isinstance(value, dict) and isinstance(value.get("sessionId"), str):
        found = _recording(path, value, tally)
    elif isinstance(value, dict) and ("clientHistory" in value or "toolCall" in value):
        tally.skip("tool call checkpoint (not a conversation: its recording holds it)")
        return
    else:
        tally.skip("file of unknown shape")
        return
    if found is not None:
        yield found


_BROKEN = object()  # the file is not one JSON document


def _starts_as_lines(data: bytes) -> bool:
    """Whether a file that is not one JSON document is JSON Lines (its first line is an object)."""
    first = next((line for line in data.split(b"\n") if line.strip()), b"")
    try:
        return isinstance(orjson.loads(first), dict)
    except ValueError:
        return False


def _replayed(lines: Iterator[dict], tally: Tally) -> dict | None:
    """A `.jsonl` recording's log replayed into the document it stands for (a header with its
    `messages`), as Gemini CLI reads it back; None when no line gave its header."""
    header: dict = {}
    messages: dict[str, dict] = {}  # by id, in the order first written
    for line in lines:
        if isinstance(line.get("$rewindTo"), str):
            ids = list(messages)
            if line["$rewindTo"] in messages:
                for ident in ids[ids.index(line["$rewindTo"]):]:
                    del messages[ident]
            else:
                messages.clear()  # what Gemini CLI does with an id it does not know
        elif isinstance(line.get("id"), str):
            messages[line["id"]] = line
        elif isinstance(line.get("$set"), dict):
            update = line["$set"]
            if isinstance(update.get("messages"), list):  # the history rewritten (a compression)
                messages.clear()
                _keep(messages, update["messages"])
            header.update({key: value for key, value in update.items() if key != "messages"})
        elif isinstance(line.get("sessionId"), str) and isinstance(line.get("projectHash"), str):
            header.update({key: value for key, value in line.items() if key != "messages"})
            if isinstance(line.get("messages"), list):
                _keep(messages, line["messages"])
        else:
            tally.skip("line of unknown shape")
    if not (isinstance(header.get("sessionId"), str) and isinstance(header.get("projectHash"), str)):
        return None
    return {**header, "messages": list(messages.values())}


def _keep(messages: dict[str, dict], records: list) -> None:
    for record in records:
        if isinstance(record, dict) and isinstance(record.get("id"), str):
            messages[record["id"]] = record


def _recording(path: Path, document: dict, tally: Tally) -> Found | None:
    session = document["sessionId"]
    found = Found(NAME, session, [], where=shown(path))
    reading = _Reading(found, tally)
    records = document.get("messages")
    if records is None:
        records = []
    elif not isinstance(records, list):
        tally.skip("recording with messages of an unknown shape")
        records = []
    times: list[str] = []
    models: dict[str, None] = {}
    for number, record in enumerate(records):
        if not isinstance(record, dict):
            tally.skip("message of unknown shape")
            continue
        kind = record.get("type")
        time = iso(record.get("timestamp"))
        if time and kind in ("user", "gemini", *_NOTICES):
            times.append(time)
        ident = record["id"] if isinstance(record.get("id"), str) else f"message-{number}"
        if kind in ("user", "gemini"):
            parts = _parts(record.get("content"))
            if parts is None:
                tally.skip(f"{kind} message with content of an unknown shape")
                continue
            if kind == "user":
                reading.user(parts, time)
                continue
            if isinstance(record.get("model"), str):
                models[record["model"]] = None
            calls = record.get("toolCalls")
            thoughts = record.get("thoughts")
            reading.model(parts, time, ident, calls if isinstance(calls, list) else [],
                          thoughts if isinstance(thoughts, list) else [])
        elif kind in _NOTICES:
            found.leave_out(f"{kind} notice")
        else:
            tally.skip(f"message of unknown type {str(kind)[:40]!r}")
    if not reading.finish():
        return None
    summary = document.get("summary")
    found.title = summary.strip() if isinstance(summary, str) and summary.strip() else reading.first_said
    found.started = iso(document.get("startTime")) or earliest(times, path)
    if isinstance(document.get("projectHash"), str):
        found.details["projectHash"] = document["projectHash"]
    if document.get("kind") == "subagent":
        found.details["kind"] = "subagent"
    if models:
        found.details["models"] = list(models)
    project = _project(path.parent.parent if path.parent.name == "chats" else path.parent)
    if project:
        found.details["project"] = project
    # A subagent's transcript is kept beside, under chats/<the session's id, made safe for a file name>/.
    subagents = path.parent / re.sub(r"[^a-zA-Z0-9_-]", "_", session)
    if subagents.is_dir():
        count = sum(1 for _ in subagents.glob("*.jsonl"))
        if count:
            found.leave_out("subagent transcript", count)
    return found


def _checkpoint(path: Path, document: list | dict, tally: Tally) -> Found | None:
    history = document if isinstance(document, list) else document.get("history")
    if not isinstance(history, list):
        tally.skip("checkpoint with a history of an unknown shape")
        return None
    project = _project(path.parent)
    if path.name.startswith(CHECKPOINT_PREFIX) and path.suffix == ".json":
        tag = unquote(path.stem[len(CHECKPOINT_PREFIX):], errors="replace")
        # The project by the hash of its path, as older versions named its directory (newer ones
        # name it by a short name, and move the old one there): the same id before and after.
        key = hashlib.sha256(project.encode()).hexdigest() if project else path.parent.name
        ident = f"checkpoint:{key}/{tag}"
    else:  # a history written elsewhere (`/chat share file.json`)
        tag = path.stem
        ident = f"export:{path.absolute()}"
    found = Found(NAME, ident, [], title=tag or None, where=shown(path))
    reading = _Reading(found, tally)
    for index, content in enumerate(history):
        if not isinstance(content, dict):
            tally.skip("history entry of unknown shape")
            continue
        parts = _parts(content.get("parts"))
        role = content.get("role")
        if parts is None:
            tally.skip("history entry with parts of an unknown shape")
        elif role == "user":
            reading.user(parts, None)
        elif role == "model":
            reading.model(parts, None, f"c{index}", [], [])
        else:
            tally.skip(f"history entry of unknown role {str(role)[:40]!r}")
    if not reading.finish():
        return None
    found.started = iso(os.stat(path).st_mtime)
    found.details["tag"] = tag
    if project:
        found.details["project"] = project
    return found


def _project(directory: Path) -> str | None:
    """The project a Gemini CLI project directory belongs to, as its `.project_root` names it
    (newer versions; older ones name the directory by a hash of the project's path)."""
    try:
        text = (directory / ".project_root").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    return text or None


def _parts(value: object) -> list[dict] | None:
    """A Gemini API part list as Gemini CLI writes it (text, one part, or a list of either) as a
    list of parts; None for any other shape."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"text": value}]
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        return [{"text": part} if isinstance(part, str) else part for part in value if isinstance(part, (str, dict))]
    return None


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


class _Call:
    """A tool call made into chatcli's, and the tool message that answers it (placed right
    after its assistant message, its result known then or later)."""

    def __init__(self, ident: str, name: str, message: Message) -> None:
        self.ident = ident
        self.name = name
        self.message = message
        self.answered = False
        self.status: str | None = None


class _Reading:
    """The messages of one conversation, made from Gemini CLI's user and model turns in order."""

    def __init__(self, found: Found, tally: Tally) -> None:
        self.found = found
        self.tally = tally
        self.messages = found.messages
        self.calls: dict[str, _Call] = {}
        self.latest: list[_Call] = []  # the calls of the last model turn that made any
        self.first_said: str | None = None
        self.after_context = False  # the last turn was the injected context

    def user(self, parts: list[dict], time: str | None) -> None:
        texts: list[str] = []
        left: list[str] = []
        for part in parts:
            if isinstance(part.get("functionResponse"), dict):
                self._answer(part["functionResponse"])
            elif isinstance(part.get("text"), str):
                if part.get("thought") is not True:
                    texts.append(part["text"])
            else:
                what = self._left_part(part)
                if what:
                    left.append(what)
        text = "".join(texts)
        said = text.strip()
        self.after_context = False
        if not said and not left:
            return
        if said.startswith(_CONTEXT_MARKS):
            self.found.leave_out("injected context message")
            self.after_context = True
            return
        if said.startswith(_COMMAND_MARKS):
            self.found.leave_out("slash command message")
            return
        meta: dict = {}
        if left:
            meta["left_out"] = left
            text = "\n".join(filter(None, (text, *(f"[{what}: not imported]" for what in left))))
        if said and self.first_said is None and _SUMMARY_MARK not in said:
            self.first_said = " ".join(said.split())
        self._add(Message("user", text, meta or None), time)

    def model(self, parts: list[dict], time: str | None, ident: str, records: list, thoughts: list) -> None:
        texts: list[str] = []
        thinking: list[str] = []
        left: list[str] = []
        calls: list[dict] = []
        made: set[str] = set()  # the ids made here for calls written without one
        results: dict[str, dict] = {}  # id → the recorded call that holds its result
        for index, part in enumerate(parts):
            if isinstance(part.get("text"), str):
                (thinking if part.get("thought") is True else texts).append(part["text"])
            elif isinstance(part.get("functionCall"), dict):
                self._call(calls, made, part["functionCall"], f"{ident}-{index}")
            else:
                what = self._left_part(part)
                if what:
                    left.append(what)
        for index, record in enumerate(records):
            if not isinstance(record, dict) or not isinstance(record.get("name"), str):
                self.tally.skip("tool call of unknown shape")
                continue
            call_id = record["id"] if isinstance(record.get("id"), str) and record["id"] else f"{ident}-call-{index}"
            call = next((call for call in calls if call["id"] == call_id), None)
            if call is None:  # the content's call without its id, first of its name: the recorded one
                call = next((call for call in calls if call["id"] in made and call["name"] == record["name"]), None)
                if call is not None:
                    made.discard(call["id"])
                    call["id"] = call_id
            if call is None:
                arguments = record.get("args") if isinstance(record.get("args"), dict) else {}
                calls.append({"id": call_id, "type": "function", "name": record["name"], "arguments": arguments})
            results[call_id] = record
        if not thinking:  # older recordings keep only the thoughts' summaries, beside the text
            for thought in thoughts:
                if isinstance(thought, dict) and isinstance(thought.get("description"), str):
                    subject = thought.get("subject")
                    head = f"**{subject}** " if isinstance(subject, str) and subject else ""
                    thinking.append(head + thought["description"])
        if thinking:
            self.found.leave_out("thinking block", len(thinking))
        text = "".join(texts)
        said = text.strip()
        if not calls:
            if self.after_context and said == _CONTEXT_ACK:
                self.after_context = False
                self.found.leave_out("injected context message")
                return
            last = self.messages[-1] if self.messages else None
            if said == _SUMMARY_ACK and last is not None and last.role == "user" and _SUMMARY_MARK in last.content:
                last.meta["is_summary"] = True
                self.found.leave_out("injected context message")
                return
        self.after_context = False
        if not said and not calls and not left:
            return  # thoughts alone (counted), or nothing
        message = Message("assistant", text, tool_calls=calls or None)
        if thinking:
            message.meta["thinking"] = "\n\n".join(thinking)
        if left:
            message.meta["left_out"] = left
        self._add(message, time)
        self.latest = []
        for call in calls:
            answer = _Call(call["id"], call["name"], Message("tool", "", tool_call_id=call["id"]))
            self.calls[call["id"]] = answer
            self.latest.append(answer)
            record = results.get(call["id"])
            self._add(answer.message, (iso(record.get("timestamp")) if record else None) or time)
            if record is not None:
                self._recorded(answer, record)

    def _call(self, calls: list[dict], made: set[str], function: dict, made_id: str) -> None:
        """A function call of a model turn's content; one without an id gets `made_id`."""
        name = function.get("name")
        if not isinstance(name, str):
            self.tally.skip("function call without a name")
            return
        call_id = function["id"] if isinstance(function.get("id"), str) and function["id"] else made_id
        if any(call["id"] == call_id for call in calls):
            return  # the same call twice
        if call_id == made_id:
            made.add(call_id)
        arguments = function.get("args") if isinstance(function.get("args"), dict) else {}
        calls.append({"id": call_id, "type": "function", "name": name, "arguments": arguments})

    def _recorded(self, call: _Call, record: dict) -> None:
        """A recording's call: its result (the function response Gemini CLI sent back, else what
        its screen showed), and whether it failed."""
        status = record.get("status")
        call.status = status if isinstance(status, str) else None
        failed = call.status in ("error", "cancelled")
        parts = _parts(record.get("result")) or []
        responses = [part["functionResponse"] for part in parts if isinstance(part.get("functionResponse"), dict)]
        mine = [response for response in responses if response.get("id") == call.ident]
        if not mine and len(responses) == 1:
            mine = responses
        texts: list[str] = []
        left: list[str] = []
        for response in mine:
            text, error, lost = self._response(response)
            texts.append(text)
            left += lost
            failed = failed or error
        if len(responses) <= 1:  # the result holds this call's only: its other parts are its own
            for part in parts:
                if isinstance(part.get("functionResponse"), dict):
                    continue
                if isinstance(part.get("text"), str):
                    texts.append(part["text"])
                else:
                    what = self._left_part(part)
                    if what:
                        left.append(what)
        if not any(text.strip() for text in texts):
            shown_text = _displayed(record.get("resultDisplay"))
            if shown_text is not None:
                texts = [shown_text]
            elif not mine and not left:
                return  # nothing recorded yet: a later function response may answer it
        self._fill(call, "\n".join(filter(None, texts)), failed, left)

    def _answer(self, response: dict) -> None:
        """A function response sent in a user turn: the result of its call (by its id, else the
        first call of the last model turn with its name that has none)."""
        ident, name = response.get("id"), response.get("name")
        call = self.calls.get(ident) if isinstance(ident, str) else None
        if call is None:
            call = next((c for c in self.latest if not c.answered and c.name == name), None)
        if call is None:
            self.found.leave_out("tool result without its call")
            return
        if call.answered:
            return  # the recording holds it twice: on its call, and in the turn that sent it
        text, error, left = self._response(response)
        self._fill(call, text, error, left)

    def _response(self, response: dict) -> tuple[str, bool, list[str]]:
        """A function response's text (its `output`, else its `error`, else the whole object),
        whether it is an error, and what it carried that is left out."""
        body = response.get("response")
        left: list[str] = []
        error = False
        if isinstance(body, dict):
            binary = body.get(_BINARY_KEY)
            for part in binary if isinstance(binary, list) else []:
                if isinstance(part, dict):
                    what = self._left_part(part)
                    if what:
                        left.append(what)
            rest = {key: value for key, value in body.items() if key != _BINARY_KEY}
            if isinstance(rest.get("output"), str):
                text = rest["output"]
            elif rest.get("error") not in (None, ""):
                text, error = _text(rest["error"]), True
            else:
                text = _text(rest) if rest else ""
        else:
            text = "" if body is None else _text(body)
        for part in response.get("parts") if isinstance(response.get("parts"), list) else []:
            if isinstance(part, dict):
                what = self._left_part(part)
                if what:
                    left.append(what)
        return text, error, left

    def _fill(self, call: _Call, text: str, error: bool, left: list[str]) -> None:
        message = call.message
        message.content = "\n".join(filter(None, (text, *(f"[{what}: not imported]" for what in left))))
        if left:
            message.meta["left_out"] = left
        if error:
            message.extra["is_error"] = True
        call.answered = True

    def _left_part(self, part: dict) -> str | None:
        """One line naming a part with no chatcli equivalent, counted by its kind; None for a
        part that carries nothing (a thought's signature alone)."""
        for key in ("inlineData", "fileData"):
            data = part.get(key)
            if isinstance(data, dict):
                media = data.get("mimeType") if isinstance(data.get("mimeType"), str) else "unknown type"
                kind = media.split("/")[0] if media.split("/")[0] in ("image", "audio", "video") else "file"
                self.found.leave_out(kind)
                if isinstance(data.get("data"), str):
                    return f"{kind} ({media}, {len(data['data']) * 3 // 4 // 1024} KB)"
                uri = data.get("fileUri")
                return f"{kind} ({media}{f', {uri}' if isinstance(uri, str) else ''})"
        key = next((key for key in part if key not in ("thought", "thoughtSignature")), None)
        if key is None:
            return None
        self.found.leave_out(f"{str(key)[:40]} part")
        return f"{str(key)[:40]} part"

    def _add(self, message: Message, time: str | None) -> None:
        if time:
            message.extra["timestamp"] = time
        self.messages.append(message)

    def finish(self) -> bool:
        """Calls left without a result get one that says so (a conversation sent on needs one
        for each); whether the conversation holds any message."""
        for call in self.calls.values():
            if not call.answered:
                self._fill(call, "[cancelled]" if call.status == "cancelled" else _NO_RESULT,
                           call.status in ("error", "cancelled"), [])
        return bool(self.messages)


def _displayed(value: object) -> str | None:
    """What Gemini CLI showed of a result, when it is text (a message, or a file's diff)."""
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, dict) and isinstance(value.get("fileDiff"), str):
        return value["fileDiff"]
    return None
