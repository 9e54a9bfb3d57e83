"""A conversation's mode (chat, agent, coder) and the calls its model makes: which tools a
request offers, and each call planned, approved (or refused) and run. engine/turn.py drives it;
the tools are engine/tools.py's, the rules core/agent.py's.

The approval question goes to whoever runs the turn (`approve`: the REPL asks y / n / always,
a one-shot asks on its terminal, an MCP server started with --allow-writes has said yes to all).
An "always" answer holds for the rest of this conversation, for that kind of tool (shell
commands, or file writes). A refused call is recorded in the history as refused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import os
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING

from chatcli.core import agent as rules
from chatcli.core.errors import UsageError
from chatcli.core.messages import History, Message, call_function
from chatcli.providers.base import Tool, ToolCall
from chatcli.store.recall import MARKER_RE

if TYPE_CHECKING:
    from chatcli.engine import tools
    from chatcli.engine.conversation import Conversation

def _tools():
    """engine/tools.py, imported at the first request that may offer tools (not at start-up)."""
    from chatcli.engine import tools

    return tools


# Told the approval question, returns rules.YES, NO or ALWAYS (Ctrl-C propagates: the turn stops).
Approve = Callable[[rules.Approval], str]

# (whether a summary or stub of the history names recall entries, the tools the history called)
ToolState = tuple[bool, frozenset[str]]


# What a user sets for a provider that calls tools (the local model and Ollama's endpoint do not).
TOOL_PROVIDERS = ("openai (set OPENAI_API_KEY; OPENAI_BASE_URL for a compatible server such as llama.cpp's "
                  "llama-server --jinja or vLLM), anthropic (set ANTHROPIC_API_KEY); then /provider NAME, or "
                  "start chatcli with --provider NAME")


@dataclass
class Agent:
    mode: str = "chat"
    # Kinds of tool the user said "always" to, in this session (a new or loaded one asks again).
    always: set[str] = field(default_factory=set)
    # Every command and write approved without asking, for the whole run: --yes, or an MCP
    # server started with --allow-writes (no one is there to ask).
    approve_all: bool = False
    # False for an MCP server not started with --allow-writes: no shell, no writes, in any mode.
    writes: bool = True
    root: Path | None = None  # the working directory (None: the process's, when first needed)
    # The endpoint answered a request offering tools with an error about them: chat offers none.
    tools_refused: bool = False
    # Where the call in hand is: "asking" (its approval question), "running", or "" (neither).
    stage: str = ""
    # Whether the model called a tool in this conversation, and whether an agent step it answered
    # in text alone was pointed out (once): a server that ignores `tools` (llama.cpp's with its
    # default chat format) answers every agent turn in text, and nothing else would say so.
    called_tools: bool = False
    said_tools_unused: bool = False
    _workspace: tools.Workspace | None = None
    _workspace_for: tuple | None = None  # the (root, CHATCLI_AGENT_DIRS) it was made for
    # What the history has told `allowed` so far, so each agent step reads only the messages
    # added since (a 100,000-message session is not walked at every step): the history read,
    # its version (changed by anything but an append), how far, and what was found.
    _seen: tuple[object, int, int, bool, frozenset[str]] = (None, 0, 0, False, frozenset())

    def switch(self, mode: str, conv: Conversation) -> None:
        """Change the mode; agent and coder need a provider that calls tools (one line why not)."""
        if mode not in rules.MODES:
            raise UsageError(f"no mode {mode!r}; the modes are {', '.join(rules.MODES)}")
        if mode != "chat" and not getattr(conv.provider, "supports_tools", False):
            raise UsageError(f"{mode} mode needs a model that calls tools, and provider '{conv.settings.provider}' "
                             f"does not; these do: {TOOL_PROVIDERS}")
        if mode == "chat":
            self.always.clear()  # leaving agent work: the next agent run asks again
        self.mode = mode

    @property
    def tagged(self) -> bool:
        """Whether this is a tool-working mode (agent or coder), not chat."""
        return self.mode != "chat"

    def meta(self) -> dict:
        """The meta every new message carries: the mode it was made in, chat included, as Go
        ChatCLI's files carry it (SPEC §3)."""
        return {"mode": self.mode}

    def allowed(self, conv: Conversation, state: ToolState | None = None) -> tuple[list[str], set[str]]:
        """The tools the model may call now, and those the history called. `recall` is offered
        while a summary names recall entries, in every mode; the other session tools
        (`session_search`, `session_read`) in every mode, in chat unless CHATCLI_CHAT_TOOLS turns
        chat's tools off (as a gateway guest's conversation has them). `state`: (a summary names
        recall entries, the tools called), when the caller knows them without the history."""
        summary, called = state if state is not None else self._tool_state(conv.history)
        kinds = rules.kinds_for(self.mode, self.writes)
        if self.mode == "chat" and not conv.settings.chat_tools:
            kinds = ()
        names = [name for name, spec in _tools().TOOLS.items()
                 if (summary if name == "recall" else spec.kind in kinds)]
        return names, called

    def workspace(self, conv: Conversation) -> tools.Workspace:
        """Where the file tools work: `root` (as it is now: a server may set it after a first
        turn), else the process's working directory."""
        wanted = (self.root, conv.settings.agent_dirs)
        if self._workspace is None or self._workspace_for != wanted:
            home = conv.settings.env.get("HOME") or os.path.expanduser("~")
            self._workspace = _tools().Workspace.at(self.root or Path.cwd(), conv.settings.agent_dirs, home)
            self._workspace_for = wanted
        return self._workspace

    def offered(self, conv: Conversation, state: ToolState | None = None) -> tuple[tuple[Tool, ...], bool]:
        """The tools a request describes, and whether the model may call them now: those allowed.
        A provider that refuses calls of undefined tools in the history (Anthropic) is also told
        of the others the history called, each marked as not available now."""
        provider = conv.provider
        if not getattr(provider, "supports_tools", False) or (self.tools_refused and not self.tagged):
            return (), False
        allowed, called = self.allowed(conv, state)
        offered = [_tools().TOOLS[name].tool for name in _tools().TOOLS if name in allowed]
        if getattr(provider, "defines_called_tools", False):
            offered += [_unavailable(_tools().TOOLS[name].tool, self.why_not(name))
                        for name in _tools().TOOLS if name in called and name not in allowed]
        return tuple(offered), bool(allowed)

    def instructions(self, conv: Conversation) -> str:
        """What the model is told of agent or coder work, after the bootstrap system prompt."""
        import platform

        if not self.tagged:
            return ""
        root = self.workspace(conv).root
        edits = ("You may also create, write and edit files with write_file and edit_file; edit_file's old_text must "
                 "be copied exactly from the file, and read a file before you edit it. " if self.mode == "coder" and
                 self.writes else "")
        asks = ("The user approves every shell command and file write before it runs; a refused call is final: do "
                "not try it another way, ask instead. " if self.writes else
                "You can only read here: no shell commands, no file writes. ")
        return (f"You are working in {self.mode} mode in the directory {root} ({platform.system()}). Use the tools to "
                f"look at files (read_file, list_dir, grep) and, where allowed, to run commands (run_shell). {edits}"
                f"{asks}Paths are relative to that directory and cannot leave it. When the task is done, answer in "
                "text: say what you did and what you found.")

    def why_not(self, name: str) -> str:
        """Why a tool is not available now, in words the model (and the user) can act on."""
        kind = _tools().TOOLS[name].kind
        if kind in rules.ASKS and not self.writes:
            return ("this server was started read-only: it runs no commands and writes no files (the user can "
                    "restart it with chatcli mcp-server --allow-writes)")
        if name == "recall":
            return "no summary in this conversation names a recall entry"
        if kind == rules.SESSION:
            return "the user turned chat's tools off (CHATCLI_CHAT_TOOLS)"
        if self.mode == "chat":
            return "chat mode has no file or shell tools (the user can turn them on with /agent or /coder)"
        return "agent mode does not write files (the user can turn that on with /coder)"

    def answered_without_tools(self) -> str | None:
        """The note for an agent or coder step that could call tools and was answered in text
        alone: once per conversation, and not once the model has called a tool in it."""
        if not self.tagged or self.called_tools or self.said_tools_unused:
            return None
        self.said_tools_unused = True
        return ("The model answered without using its tools; if it never does, its server may be ignoring them "
                "(llama.cpp's llama-server offers them to the model when started with --jinja; llama-cpp-python's "
                "server, python -m llama_cpp.server, streams a call only when one tool is forced).")

    def call(self, conv: Conversation, call: ToolCall, approve: Approve | None) -> tools.Outcome:
        """Plan the call, ask when it asks (unless "always" was said for its kind), run it."""
        allowed, _called = self.allowed(conv)
        if call.name in _tools().TOOLS and call.name not in allowed:
            why = self.why_not(call.name)
            return _tools().Outcome(f"error: {call.name} is not available: {why}",
                                 f"The model's {call.name} call was not run: {why}", error=True)
        plan = _tools().plan(call.name, call.arguments, _tools().Context(conv, self.workspace(conv)), allowed)
        question = plan.approval
        if question is not None and question.kind not in self.always and not self.approve_all:
            self.stage = "asking"
            answer = approve(question) if approve is not None else None
            self.stage = ""
            if answer is None:
                why = "there was no one to approve it (run it in the REPL, or give --yes)"
                return _tools().Outcome(f"refused: {question.title}: {why}", f"refused ({why}): {question.title}",
                                     error=True, refused=True)
            if answer == rules.NO:
                return _tools().Outcome(f"refused: the user did not allow this ({question.title}). Do not try it again "
                                     "another way; ask the user what to do instead.",
                                     f"refused: {question.title}", error=True, refused=True)
            if answer == rules.ALWAYS:
                self.always.add(question.kind)
        self.stage = "running"  # left so when Ctrl-C stops it: the turn says where it was
        outcome = plan.run()
        self.stage = ""
        return outcome


    def _tool_state(self, history: History) -> tuple[bool, frozenset[str]]:
        """(whether a summary names recall entries, the names of the tools the history called)."""
        seen, version, upto, summary, called = self._seen
        if seen is not history or version != history.version or upto > len(history):
            upto, summary, called = 0, False, frozenset()
        more_summary, more_called = _scan(history[upto:]) if upto < len(history) else (False, set())
        summary, called = summary or more_summary, called | more_called
        self._seen = (history, history.version, len(history), summary, called)
        return summary, called


def _unavailable(tool: Tool, why: str) -> Tool:
    return Tool(tool.name, f"NOT AVAILABLE NOW ({why}); do not call it. {tool.description}", tool.parameters)


def _scan(messages: Sequence[Message]) -> tuple[bool, set[str]]:
    """(whether a summary or a microcompact stub names a recall entry, the tools called): only
    the messages with calls or meta are looked at (picked out in C: 100,000 messages at a load)."""
    summary, called = False, set()
    for message in filter(attrgetter("tool_calls"), messages):
        called.update(call_function(c).get("name") for c in message.tool_calls if isinstance(c, dict))
    for message in filter(attrgetter("_meta"), messages):
        if not message.tool_calls and (message.is_summary or (message.role == "tool" and message.meta.get(
                "microcompact"))) and MARKER_RE.search(message.content):
            summary = True
            break
    return summary, called


__all__ = ["Agent", "Approve"]
