"""/schedule: slash commands on a cron schedule (engine/schedule.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from chatcli.commands import storage as storage_commands
from chatcli.commands.mistyped import unknown_action
from chatcli.commands.registry import CommandRegistry, Result
from chatcli.core.errors import UsageError

if TYPE_CHECKING:
    from chatcli.engine.conversation import Conversation

ACTIONS = ("list", "remove")


def schedule_command(conv: Conversation, args: str) -> Result:
    from chatcli.engine import schedule  # at the command, not when the registry is built (start-up)

    words = args.split()
    if not words or words == ["list"]:
        return Result(schedule.listing(conv.settings))
    if words[0].lower() == "remove":
        if len(words) != 2:
            raise UsageError("usage: /schedule remove ID")
        return Result(schedule.remove(conv.settings, words[1]))
    if words[0].isalpha() and words[0].lower() not in ACTIONS:  # no cron begins with a word (@daily does with @)
        raise unknown_action("schedule", words[0].lower(), ACTIONS, "or CRON /COMMAND")
    _cron, command = schedule.split(args)
    name, _, rest = command.partition(" ")
    if name.lower() == "/storage":
        storage_commands.parse(rest.split())  # a bad /storage is refused now, not every time it runs
    return Result(schedule.add(conv.settings, args, conv.agent.root or Path.cwd()))


def register(registry: CommandRegistry) -> None:
    registry.command("schedule", "/schedule [CRON /COMMAND | list | remove ID]",
                     "run /storage or /context save on a cron schedule while chatcli runs")(schedule_command)


__all__ = ["register", "schedule_command"]
