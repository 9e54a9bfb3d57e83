"""Codex CLI's sessions: `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`, one record a line.

What openai/codex's code declares: each line is `{timestamp, type, payload}`; `session_meta` first
(the conversation's id, cwd, version), then `response_item`s (what the model saw and said: messages,
reasoning, tool calls and their outputs), `turn_context` per turn (the model), `compacted` after a
compaction, and `event_msg`s, which repeat the visible turns for Codex's own interface and are not
read here. Older files have no envelope: a bare session meta line, then bare items, and
`record_type: state` lines.

Made into chatcli messages: user and assistant messages; the items of one model response (its
reasoning, text, tool calls) one assistant message; a function call's JSON argument text an object
(what the model wrote that is none kept as `raw`), a freeform tool's input `{"input": text}`, a
local shell call's action its arguments; outputs tool messages. Left out, and counted: reasoning
(its summary text kept in the message's `meta.thinking`; encrypted reasoning has none), images,
web searches (the query named in the message), encrypted compactions, and the context Codex
injects as messages (developer messages, environment context, AGENTS.md and user instructions,
skills, shell-command echoes, abort and subagent notices). A compaction's summary is kept as a
summary (`meta.is_summary`). The title is the first thing the user said."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from chatcli.core.imported import Found, Tally
from chatcli.core.messages import Message, new_call
from chatcli.store.sources import earliest, files_under, iso, json_lines, shown, timed

NAME = "codex"
LABEL = "Codex CLI"
# The kinds of an enveloped line (`{timestamp, type, payload}`).
_ENVELOPED = {"session_meta", "response_item", "compacted", "turn_context", "event_msg"}
# The kinds of item a rollout holds, enveloped or (older files) bare.
_ITEMS = {"message", "reasoning", "function_call", "function_call_output", "custom_tool_call",
          "custom_tool_call_output", "local_shell_call", "web_search_call", "ghost_snapshot", "compaction",
          "compaction_summary"}
# How the context Codex injects as a user message begins: it is no user's words.
_INJECTED = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<skill>",
             "<user_shell_command>", "<turn_aborted>", "<subagent_notification>")
# Codex's directory of rollouts under its home (CODEX_HOME): a name of Codex's layout, not chatcli's.
_SESSIONS = "sessions"
_TEXT_PARTS = ("input_text", "output_text", "text")
_ROLLOUT_ID = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$", re.I)
_DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+)?(?:;[^,]*)?,")


def default(env: Mapping[str, str], user_home: Path) -> Path:
    configured = (env.get("CODEX_HOME") or "").strip()
    return (Path(configured).expanduser() if configured else user_home / ".codex") / _SESSIONS


def files(root: Path) -> list[Path]:
    """The rollouts under `root` (its date directories, or flat as the first versions kept
    them), or one file."""
    return files_under(root, "**/rollout-*.jsonl", LABEL)


def read(path: Path, tally: Tally) -> Iterator[Found]:
    reading = _Reading(path, tally)
    for line in json_lines(path, tally):
        reading.take(line)
    found = reading.found()
    if found is not None:
        yield found


class _Reading:
    def __init__(self, path: Path, tally: Tally) -> None:
        self.path = path
        self.tally = tally
        self.messages: list[Message] = []
        named = _ROLLOUT_ID.search(path.name)
        self.found_ = Found(NAME, named.group(1).lower() if named else path.stem, self.messages, where=shown(path))
        self.had_meta = False
        self.times: list[str] = []
        self.first_said: str | None = None
        self.answer: Message | None = None  # the assistant message of the response being read
        self.models: dict[str, None] = {}

    def take(self, line: dict) -> None:
        kind = line.get("type")
        if kind is not None and not isinstance(kind, str):
            self.tally.skip("line of an unknown shape")
        elif kind in _ENVELOPED:
            self._enveloped(kind, line.get("payload"), iso(line.get("timestamp")))
        elif "record_type" in line:
            if line["record_type"] != "state":
                self.tally.skip(f"line of unknown type {str(line['record_type'])[:40]!r}")
        elif kind is None and isinstance(line.get("id"), str):
            self._meta(line)  # an older file's first line
        elif kind in _ITEMS:
            self._item(line, iso(line.get("timestamp")))
        else:
            self.tally.skip(f"line of unknown type {str(kind)[:40]!r}")

    def _enveloped(self, kind: str, payload: object, time: str | None) -> None:
        if not isinstance(payload, dict):
            self.tally.skip("line of an unknown shape")
            return
        if time:
            self.times.append(time)
        if kind == "session_meta":
            self._meta(payload)
        elif kind == "response_item":
            self._item(payload, time)
        elif kind == "compacted":
            self._compacted(payload, time)
        elif kind == "turn_context":
            self.answer = None  # a new turn
            if isinstance(payload.get("model"), str):
                self.models[payload["model"]] = None
        # event_msg: the visible turns again, for Codex's own interface

    def _meta(self, meta: dict) -> None:
        if self.had_meta:
            return  # a fork's copy of its parent's: the first is this conversation's
        self.had_meta = True
        if isinstance(meta.get("id"), str) and meta["id"]:
            self.found_.id = meta["id"]
        time = iso(meta.get("timestamp"))
        if time:
            self.times.append(time)
        details = self.found_.details
        for key in ("cwd", "cli_version", "originator", "model_provider", "forked_from_id", "source"):
            if isinstance(meta.get(key), str) and meta[key]:
                details[key] = meta[key]
        git = meta.get("git")
        if isinstance(git, dict):
            kept = {key: value for key, value in git.items() if isinstance(value, str)}
            if kept:
                details["git"] = kept

    def _item(self, item: dict, time: str | None) -> None:
        kind = item.get("type")
        if not isinstance(kind, str):
            self.tally.skip("item of an unknown shape")
        elif kind == "message":
            self._message(item, time)
        elif kind == "reasoning":
            self._reasoning(item, time)
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            self._call(kind, item, time)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            self._output(item, time)
        elif kind == "web_search_call":
            action = item.get("action") if isinstance(item.get("action"), dict) else {}
            what = action.get("query") or action.get("url")
            self._answer(time).meta.setdefault("left_out", []).append(
                f"web search {str(what)[:200]!r}" if isinstance(what, str) and what else "web search")
            self.found_.leave_out("web search")
        elif kind in ("compaction", "compaction_summary"):
            self.found_.leave_out("encrypted compaction")
        elif kind != "ghost_snapshot":  # ghost_snapshot: a git snapshot for Codex's undo
            self.tally.skip(f"item of unknown type {str(kind)[:40]!r}")

    def _message(self, item: dict, time: str | None) -> None:
        role = item.get("role")
        content = item.get("content")
        parts = [{"type": "input_text", "text": content}] if isinstance(content, str) else content
        if not isinstance(parts, list):
            self.tally.skip("message of an unknown shape")
            return
        if role in ("developer", "system"):
            self.found_.leave_out("injected context message")
            self.answer = None
            return
        if role not in ("user", "assistant"):
            self.tally.skip(f"message of unknown role {str(role)[:40]!r}")
            return
        texts, left = self._parts(parts)
        if role == "assistant":
            answer = self._answer(time)
            text = "\n\n".join(t for t in texts if t)
            if text:
                answer.content = f"{answer.content}\n\n{text}" if answer.content else text
            if left:
                answer.meta.setdefault("left_out", []).extend(left)
            return
        self.answer = None
        said = [text for text in texts if not text.lstrip().startswith(_INJECTED)]
        if len(said) < len(texts):
            self.found_.leave_out("injected context message")
        text = "\n".join(said)
        if not text.strip() and not left:
            return
        if self.first_said is None and text.strip():
            self.first_said = text
        if left:
            text = "\n".join(filter(None, (text, *(f"[{what}: not imported]" for what in left))))
        self._add(Message("user", text, {"left_out": left} if left else None), time)

    def _reasoning(self, item: dict, time: str | None) -> None:
        texts = _texts(item.get("summary"), ("summary_text",)) \
            or _texts(item.get("content"), ("reasoning_text", "text"))  # raw reasoning: some models only
        if texts:
            answer = self._answer(time)
            text = "\n\n".join(texts)
            before = answer.meta.get("thinking")
            answer.meta["thinking"] = f"{before}\n\n{text}" if before else text
            self.found_.leave_out("thinking block")
        elif isinstance(item.get("encrypted_content"), str) and item["encrypted_content"]:
            self.found_.leave_out("encrypted reasoning block")

    def _call(self, kind: str, item: dict, time: str | None) -> None:
        ident, name = item.get("call_id"), item.get("name")
        if kind == "local_shell_call":
            action = item.get("action")
            if not isinstance(action, dict):
                self.tally.skip("tool call of an unknown shape")
                return
            if not isinstance(ident, str) or not ident:  # its output cannot be told from another's
                command = action.get("command")
                shown_command = " ".join(map(str, command)) if isinstance(command, list) else "?"
                self._answer(time).meta.setdefault("left_out", []).append(f"shell call {shown_command[:200]!r}")
                self.found_.leave_out("unpaired shell call")
                return
            call = {"id": ident, "type": "function", "name": "local_shell", "arguments": dict(action)}
        elif not isinstance(ident, str) or not ident or not isinstance(name, str):
            self.tally.skip("tool call of an unknown shape")
            return
        elif kind == "custom_tool_call":
            text = item.get("input")
            call = {"id": ident, "type": "function", "name": name,
                    "arguments": {"input": text if isinstance(text, str) else ""}}
        else:
            arguments = item.get("arguments")
            if isinstance(arguments, dict):
                call = {"id": ident, "type": "function", "name": name, "arguments": arguments}
            else:
                call = new_call(ident, name, arguments if isinstance(arguments, str) else "")
        answer = self._answer(time)
        answer.tool_calls = [*(answer.tool_calls or []), call]

    def _output(self, item: dict, time: str | None) -> None:
        ident, output = item.get("call_id"), item.get("output")
        failed = False
        if isinstance(output, dict):  # {content, success}: written by some versions
            failed = output.get("success") is False
            output = output.get("content")
        if not isinstance(ident, str) or not ident or not isinstance(output, (str, list)):
            self.tally.skip("tool result of an unknown shape")
            return
        texts, left = ([output], []) if isinstance(output, str) else self._parts(output)
        text = "\n".join([*texts, *(f"[{what}: not imported]" for what in left)])
        extra = {"is_error": True} if failed else None
        self._add(Message("tool", text, {"left_out": left} if left else None, tool_call_id=ident, extra=extra), time)
        self.answer = None

    def _compacted(self, payload: dict, time: str | None) -> None:
        # Its replacement history repeats items already read: only the summary is new.
        text = payload.get("message")
        if isinstance(text, str) and text.strip():
            self._add(Message("user", text, {"is_summary": True}), time)
            self.answer = None

    def _parts(self, parts: list) -> tuple[list[str], list[str]]:
        """The text of a message's (or an output's) parts, and one line for each part left out."""
        texts: list[str] = []
        left: list[str] = []
        for part in parts:
            if isinstance(part, str):
                texts.append(part)
            elif not isinstance(part, dict):
                continue
            elif part.get("type") in _TEXT_PARTS and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif part.get("type") == "input_image":
                self.found_.leave_out("image")
                left.append(_image(part.get("image_url")))
            else:
                kind = str(part.get("type") or "unknown")[:40]
                self.found_.leave_out(f"{kind} part")
                left.append(kind)
        return texts, left

    def _answer(self, time: str | None) -> Message:
        """The assistant message the response being read goes into: made at its first item."""
        if self.answer is None:
            self.answer = Message("assistant", "")
            self._add(self.answer, time)
        return self.answer

    def _add(self, message: Message, time: str | None) -> None:
        self.messages.append(timed(message, time))

    def found(self) -> Found | None:
        if not self.messages:
            return None
        found = self.found_
        found.title = " ".join(self.first_said.split()) if self.first_said else None
        found.started = earliest(self.times, self.path)
        if self.models:
            found.details["models"] = list(self.models)
        return found


def _texts(parts: object, kinds: tuple[str, ...]) -> list[str]:
    """The texts of the parts of `kinds` in a list of parts (none when it is not a list)."""
    if not isinstance(parts, list):
        return []
    return [part["text"] for part in parts if isinstance(part, dict) and part.get("type") in kinds
            and isinstance(part.get("text"), str) and part["text"].strip()]


def _image(url: object) -> str:
    """An image part as one line: its type and size when it was sent inline (a data URL)."""
    if not isinstance(url, str):
        return "image"
    inline = _DATA_URL.match(url)
    if inline is None:
        return f"image ({url[:200]})"
    size = (len(url) - inline.end()) * 3 // 4 // 1024
    return f"image ({inline.group(1) or 'unknown type'}, {size} KB)"
