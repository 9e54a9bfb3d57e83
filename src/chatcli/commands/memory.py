"""/memory save|list|show|forget: the global memory (engine/memory.py), written once for every
surface that runs slash commands."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chatcli.commands.mistyped import unknown_action
from chatcli.commands.registry import CommandRegistry, Result
from chatcli.core.errors import UsageError

if TYPE_CHECKING:
    from chatcli.engine.conversation import Conversation

USAGE = "/memory [list] · /memory save <text> · /memory show <n|id> · /memory forget <n|id>"
ACTIONS = ("list", "save", "show", "forget")


def memory_command(conv: Conversation, args: str) -> Result:
    from chatcli.engine import memory  # at the command, not when the registry is built (start-up)

    action, _, rest = args.strip().partition(" ")
    action, rest = action.lower(), rest.strip()
    if action in ("", "list"):
        if rest:
            raise UsageError(f"usage: {USAGE}")
        return Result(memory.listing(conv.settings))
    if action == "save":
        return Result(memory.save(conv.settings, rest, conv.session_name or ""))
    if action in ("show", "forget"):
        if not rest or len(rest.split()) != 1:
            raise UsageError(f"usage: /memory {action} <n|id> (the number or id /memory list shows)")
        return Result(memory.show(conv.settings, rest) if action == "show" else memory.forget(conv.settings, rest))
    raise unknown_action("memory", action, ACTIONS)


def register(registry: CommandRegistry) -> None:
    def complete(_conv: Conversation, prefix: str) -> list[str]:
        words = prefix.split(" ")
        return [f"{word} " for word in ACTIONS if len(words) == 1 and word.startswith(words[0].lower())]

    registry.command("memory", "/memory [save <text>|list|show <n>|forget <n>]",
                     "notes every conversation's model is offered (global memory)", complete=complete)(memory_command)


__all__ = ["memory_command", "register"]
