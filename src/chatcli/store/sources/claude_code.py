"""Claude Code's sessions: `~/.claude/projects/<project>/<session-id>.jsonl`, one event a line.

What its readers declare (Claude Code itself is not open source): `user` and `assistant` lines
carry an Anthropic API `message`; one response is written a content block a line, the lines
sharing `message.id`, and are joined here into one assistant message. `tool_use` blocks become
tool calls, the `tool_result` blocks of the next user line tool messages. Left out, and counted:
thinking (its text kept in the message's `meta.thinking`), images and documents (one line in the
message says what was there), subagent (sidechain) lines, the injected lines Claude Code marks
`isMeta`, slash-command lines. Its compaction summaries are kept as summaries
(`meta.is_summary`). Bookkeeping lines (file snapshots, queue, progress, titles, modes) carry no
conversation; a `type` not known at all is counted as skipped. The title is the user's
(`custom-title`), else Claude Code's (`ai-title`, `summary`), else the first thing the user said."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from chatcli.core.imported import Found, Tally
from chatcli.core.messages import Message
from chatcli.store.sources import earliest, files_under, iso, json_lines, shown, timed

NAME = "claude-code"
LABEL = "Claude Code"
# Lines that hold no conversation: read for the title where they carry one, else passed over.
BOOKKEEPING = {"summary", "file-history-snapshot", "queue-operation", "progress", "attachment", "custom-title",
               "ai-title", "last-prompt", "agent-name", "agent-setting", "permission-mode", "mode", "pr-link",
               "bridge-session", "system"}
# The wrappers of a slash command's own lines (its name, arguments, output, the caveat before them).
_COMMAND_MARKS = ("<command-name>", "<command-message>", "<local-command-stdout>", "<local-command-stderr>",
                  "<local-command-caveat>")


def default(env: Mapping[str, str], user_home: Path) -> Path:
    configured = (env.get("CLAUDE_CONFIG_DIR") or "").split(",")[0].strip()
    return (Path(configured).expanduser() if configured else user_home / ".claude") / "projects"


def files(root: Path) -> list[Path]:
    """Each project's sessions (`<project>/<id>.jsonl`), or the sessions of one project's
    directory, or one file. Subagents' own files (`agent-*.jsonl`, `<id>/subagents/`) are not
    conversations of their own: a session counts its subagents' lines as left out."""
    if (root / "projects").is_dir():
        root = root / "projects"  # Claude Code's own directory (~/.claude) given
    if root.is_dir() and any(root.glob("*.jsonl")) and not any(root.glob("*/*.jsonl")):
        pattern = "*.jsonl"  # one project's directory
    else:
        pattern = "*/*.jsonl"
    return [path for path in files_under(root, pattern, LABEL) if not path.name.startswith("agent-")]


def read(path: Path, tally: Tally) -> Iterator[Found]:
    reading = _Reading(path, tally)
    # Read twice, never held whole: first what each line is in the conversation's tree, then the
    # lines themselves, those of branches the conversation left only counted.
    abandoned = side_branches(_Line.of(line) for line in json_lines(path, Tally("")))
    for line in json_lines(path, tally):
        if line.get("uuid") in abandoned and isinstance(line["uuid"], str):
            reading.found_.leave_out("message of an abandoned branch")
        else:
            reading.take(line)
    found = reading.found()
    if found is not None:
        yield found


class _Line(tuple):
    """What the tree needs of a line: (uuid, parent, a message of the conversation, a prompt the
    user typed)."""

    __slots__ = ()

    @classmethod
    def of(cls, line: dict) -> _Line:
        uuid, up = line.get("uuid"), line.get("parentUuid")
        if up is None and isinstance(line.get("logicalParentUuid"), str):
            up = line["logicalParentUuid"]  # a compaction's boundary: the chain goes on through it
        kind = line.get("type")
        message = kind in ("user", "assistant") and line.get("isSidechain") is not True
        return cls((uuid if isinstance(uuid, str) else None, up if isinstance(up, str) else None, message,
                    message and kind == "user" and _typed(line)))


def _typed(line: dict) -> bool:
    """A user line that is something the user typed: not a tool's result, not injected context."""
    if line.get("isMeta") is True or line.get("isCompactSummary") is True:
        return False
    content = line["message"].get("content") if isinstance(line.get("message"), dict) else None
    if isinstance(content, str):
        return bool(content.strip())
    return isinstance(content, list) and any(
        isinstance(block, str) or (isinstance(block, dict) and block.get("type") != "tool_result") for block in content)


def side_branches(lines) -> set[str]:
    """The uuids of the message lines on branches the conversation left. Claude Code keeps every
    line; a prompt edited or rewound to starts a new branch from an earlier line (`parentUuid`).
    The conversation is the chain that ends at its last message. A line off that chain is on a
    branch left behind when its own chain joins it through a prompt the user typed (the prompt
    that was edited away); lines hanging off it otherwise (the results of calls made in
    parallel, each a child of its own call's line) are the conversation's, and so is a line
    whose chain breaks before it joins (a line lost to damage): only a proven branch is left."""
    parent: dict[str, str | None] = {}
    typed: set[str] = set()
    messages: list[str] = []
    for uuid, up, message, prompt in lines:
        if uuid is None:
            continue
        parent.setdefault(uuid, up)
        if message:
            messages.append(uuid)
        if prompt:
            typed.add(uuid)
    if not messages:
        return set()
    main: set[str] = set()
    node: str | None = messages[-1]
    while node is not None and node not in main:
        main.add(node)
        node = parent.get(node)
    # The conversation's chain reached its first line (not a line lost to damage): another first
    # line joins it there, as the first prompt edited does (it has no parent either).
    rooted = node is None
    left: dict[str, bool] = {}  # uuid off the chain → on a branch left behind

    def abandoned(start: str) -> bool:
        path: list[str] = []
        on_path: set[str] = set()
        node: str | None = start
        verdict = False
        while True:
            if node is None:  # a first line: joined at the top when the conversation's chain is rooted
                verdict = rooted and bool(path) and path[-1] in typed
                break
            if node not in parent or node in on_path:
                break  # the chain breaks (or loops): nothing proven
            if node in left:
                verdict = left[node]
                break
            if node in main:  # joined: through a typed prompt just off the chain?
                verdict = bool(path) and path[-1] in typed
                break
            path.append(node)
            on_path.add(node)
            node = parent[node]
        for step in path:
            left[step] = verdict
        return verdict

    return {uuid for uuid in messages if uuid not in main and abandoned(uuid)}


class _Reading:
    def __init__(self, path: Path, tally: Tally) -> None:
        self.path = path
        self.tally = tally
        self.messages: list[Message] = []
        self.found_ = Found(NAME, path.stem, self.messages, where=shown(path))
        self.seen: set[str] = set()
        self.times: list[str] = []
        self.titles: dict[str, str] = {}
        self.summaries: dict[str, str] = {}  # leafUuid → summary
        self.uuids: set[str] = set()
        self.first_said: str | None = None
        self.last_assistant: tuple[str, Message] | None = None  # (message.id, message) while it may go on
        self.models: dict[str, None] = {}

    def take(self, line: dict) -> None:
        kind = line.get("type")
        if kind is not None and not isinstance(kind, str):
            self.tally.skip("line of an unknown shape")
            return
        uuid = line.get("uuid")
        if isinstance(uuid, str):
            if uuid in self.seen:
                return  # the same line written twice
            self.seen.add(uuid)
            self.uuids.add(uuid)
        if kind in ("user", "assistant"):
            message = line.get("message")
            if not isinstance(message, dict):
                self.tally.skip(f"{kind} line without a message")
                return
            time = iso(line.get("timestamp"))
            if time:
                self.times.append(time)
            if line.get("isSidechain") is True:
                self.found_.leave_out("subagent message")
                return
            for key in ("cwd", "gitBranch", "version"):
                if isinstance(line.get(key), str):
                    self.found_.details[key] = line[key]
            if kind == "user":
                self._user(line, message, time)
            else:
                self._assistant(line, message, time)
        elif kind == "summary":
            if isinstance(line.get("summary"), str) and isinstance(line.get("leafUuid"), str):
                self.summaries[line["leafUuid"]] = line["summary"]
        elif kind in ("custom-title", "ai-title"):
            value = line.get("customTitle" if kind == "custom-title" else "aiTitle")
            if isinstance(value, str) and value.strip():
                self.titles[kind] = value.strip()
        elif kind not in BOOKKEEPING:
            self.tally.skip(f"line of unknown type {str(kind)[:40]!r}")

    def _user(self, line: dict, message: dict, time: str | None) -> None:
        content = message.get("content")
        if line.get("isMeta") is True:
            self.found_.leave_out("injected context message")
            return
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            self.tally.skip("user line with content of an unknown shape")
            return
        texts: list[str] = []
        left: list[str] = []
        for block in blocks:
            if isinstance(block, str):
                texts.append(block)
            elif not isinstance(block, dict):
                continue
            elif block.get("type") == "tool_result":
                self._result(block, time)
            elif block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            else:
                left.append(self._left_block(block))
        text = "\n".join(texts)
        if not text.strip() and not left:
            return
        if text.lstrip().startswith(_COMMAND_MARKS):
            self.found_.leave_out("slash command line")
            return
        summary = line.get("isCompactSummary") is True
        meta: dict = {"is_summary": True} if summary else {}
        if left:
            meta["left_out"] = left
            text = "\n".join(filter(None, (text, *(f"[{what}: not imported]" for what in left))))
        if not summary and self.first_said is None and text.strip():
            self.first_said = text
        self._add(Message("user", text, meta or None), time)
        self.last_assistant = None

    def _result(self, block: dict, time: str | None) -> None:
        call = block.get("tool_use_id")
        if not isinstance(call, str):
            self.tally.skip("tool result without its call's id")
            return
        content = block.get("content")
        texts: list[str] = []
        left: list[str] = []
        for part in [content] if isinstance(content, str) else content if isinstance(content, list) else []:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part, dict):
                left.append(self._left_block(part))
        text = "\n".join([*texts, *(f"[{what}: not imported]" for what in left)])
        extra = {"is_error": True} if block.get("is_error") is True else None
        message = Message("tool", text, {"left_out": left} if left else None, tool_call_id=call, extra=extra)
        self._add(message, time)

    def _assistant(self, line: dict, message: dict, time: str | None) -> None:
        blocks = message.get("content")
        if isinstance(blocks, str):
            blocks = [{"type": "text", "text": blocks}]
        if not isinstance(blocks, list):
            self.tally.skip("assistant line with content of an unknown shape")
            return
        model = message.get("model")
        if isinstance(model, str) and model != "<synthetic>":
            self.models[model] = None
        ident = message.get("id")
        current = self.last_assistant
        if current is not None and isinstance(ident, str) and current[0] == ident:
            target = current[1]  # the same response, its next block
        else:
            target = Message("assistant", "")
            if line.get("isApiErrorMessage") is True or model == "<synthetic>":
                target.extra["is_error"] = True
            self._add(target, time)
            self.last_assistant = (ident, target) if isinstance(ident, str) else None
        for block in blocks:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                target.content = f"{target.content}\n\n{block['text']}" if target.content else block["text"]
            elif kind == "tool_use" and isinstance(block.get("id"), str) and isinstance(block.get("name"), str):
                arguments = block.get("input") if isinstance(block.get("input"), dict) else {}
                calls = list(target.tool_calls or [])
                calls.append({"id": block["id"], "type": "function", "name": block["name"], "arguments": arguments})
                target.tool_calls = calls
            elif kind == "thinking" and isinstance(block.get("thinking"), str):
                before = target.meta.get("thinking")
                target.meta["thinking"] = f"{before}\n\n{block['thinking']}" if before else block["thinking"]
                self.found_.leave_out("thinking block")
            else:
                target.meta.setdefault("left_out", []).append(self._left_block(block))

    def _left_block(self, block: dict) -> str:
        """One line naming a block with no chatcli equivalent, counted by its kind."""
        kind = str(block.get("type") or "unknown")[:40]
        source = block.get("source") if isinstance(block.get("source"), dict) else {}
        if kind in ("image", "document"):
            self.found_.leave_out(kind)
            media = source.get("media_type") or "unknown type"
            data = source.get("data")
            size = f", {len(data) * 3 // 4 // 1024} KB" if isinstance(data, str) else ""
            return f"{kind} ({media}{size})"
        if kind == "redacted_thinking":
            self.found_.leave_out("redacted thinking block")
            return "redacted thinking"
        name = block.get("name")
        self.found_.leave_out(f"{kind} block")
        return f"{kind}{f' {name}' if isinstance(name, str) else ''}"

    def _add(self, message: Message, time: str | None) -> None:
        self.messages.append(timed(message, time))

    def found(self) -> Found | None:
        if not self.messages:
            return None
        found = self.found_
        summary = next((text for leaf, text in self.summaries.items() if leaf in self.uuids), None)
        found.title = self.titles.get("custom-title") or self.titles.get("ai-title") or summary or \
            (" ".join(self.first_said.split()) if self.first_said else None)
        found.started = earliest(self.times, self.path)
        if self.models:
            found.details["models"] = list(self.models)
        subagents = self.path.with_suffix("") / "subagents"
        if subagents.is_dir():
            count = sum(1 for _ in subagents.rglob("agent-*.jsonl"))
            if count:
                found.leave_out("subagent transcript", count)
        return found
