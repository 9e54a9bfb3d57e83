"""/cost: what the last turn and this session cost (engine/costs.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chatcli.commands.registry import CommandRegistry, Result
from chatcli.core.errors import UsageError

if TYPE_CHECKING:
    from chatcli.engine.conversation import Conversation


def register(registry: CommandRegistry) -> None:
    @registry.command("cost", "/cost", "tokens and estimated cost of the last turn and of this session")
    def cost_command(conv: Conversation, args: str) -> Result:
        from chatcli.engine import costs  # at the command, not when the registry is built (start-up)

        if args.strip():
            raise UsageError("usage: /cost")
        return Result(costs.summary(conv))


__all__ = ["register"]
