"""/agent, /coder and /chat: the conversation's mode (SPEC §3). One history holds every mode's
messages; agent and coder turns may call tools (engine/agent.py), each shell command and file
write asking first."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chatcli.commands.registry import CommandRegistry, Result
from chatcli.core.agent import SHELL, WRITE

if TYPE_CHECKING:
    from chatcli.engine.conversation import Conversation

WHAT = {
    "chat": "Chat mode: the model answers in text (it may still search your saved sessions).",
    "agent": "Agent mode: the model may read, list and grep files under {root} and run shell commands "
             "there; each command asks first (y / n / always). /coder adds file edits, /chat returns.",
    "coder": "Coder mode: as agent mode, and the model may write and edit files under {root}; each write "
             "shows its diff and asks first (y / n / always). /agent drops the edits, /chat returns.",
}


def switch(conv: Conversation, mode: str, task: str = "") -> Result:
    """Enter `mode`; with a task, send it as this mode's first turn."""
    already = conv.agent.mode == mode
    conv.agent.switch(mode, conv)
    text = WHAT[mode].format(root=conv.agent.workspace(conv).root)
    approved = [what for kind, what in ((SHELL, "commands"), (WRITE, "writes"))
                if kind in conv.agent.always or conv.agent.approve_all]
    if mode != "chat" and approved:
        why = "--yes" if conv.agent.approve_all else "you said always"
        text += f" Approved without asking ({why}): {' and '.join(approved)}."
    if already:
        text = f"Already in {mode} mode." if not task else ""
    return Result(text, send=task)


def register(registry: CommandRegistry) -> None:
    @registry.command("agent", "/agent [task]", "agent mode: the model may read files and run commands (asking)")
    def agent(conv: Conversation, args: str) -> Result:
        return switch(conv, "agent", args)

    @registry.command("coder", "/coder [task]", "coder mode: agent mode plus file edits, each diff approved")
    def coder(conv: Conversation, args: str) -> Result:
        return switch(conv, "coder", args)

    @registry.command("chat", "/chat [message]", "back to chat mode (no file or shell tools)")
    def chat(conv: Conversation, args: str) -> Result:
        return switch(conv, "chat", args)
