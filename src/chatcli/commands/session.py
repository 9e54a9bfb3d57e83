"""/session …, /newsession and /config session: written once, rendered by every surface."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chatcli.commands.listing import format_listing
from chatcli.commands.registry import CommandRegistry, Result
from chatcli.core.errors import UsageError
from chatcli.core.names import is_machine_name
from chatcli.engine import sessions

if TYPE_CHECKING:
    from chatcli.engine.conversation import Conversation

SUBCOMMANDS = ("save", "load", "attach", "detach", "status", "list", "delete", "new", "fork")
_NEEDS_NAME = {"save", "load", "attach", "delete", "fork"}
USAGE = "/session save|load|attach|delete|fork <name> · /session detach|status|list|new"


def session_command(conv: Conversation, args: str) -> Result:
    words = args.split()
    if not words:
        return Result(sessions.status(conv).text + f"\nUsage: {USAGE}")
    action, rest = words[0].lower(), words[1:]
    if action not in SUBCOMMANDS:
        raise UsageError(f"unknown /session action '{action}'; usage: {USAGE}")
    if action in _NEEDS_NAME:
        if len(rest) != 1:
            raise UsageError(f"usage: /session {action} <name>")
        outcome = getattr(sessions, action)(conv, rest[0])
    elif rest:
        raise UsageError(f"usage: /session {action}")
    elif action == "list":
        return Result(format_listing(sessions.listing(conv), conv.session_name))
    else:
        outcome = getattr(sessions, action)(conv)
    return Result("\n".join((outcome.text, *outcome.notes)))


def config_command(conv: Conversation, args: str) -> Result:
    if args.strip().lower() not in ("", "session"):
        raise UsageError("usage: /config session")
    rows = conv.settings.session_report()
    rows.append(("bound session", conv.session_name or "(none)", "this conversation"))
    width = max(len(name) for name, _, _ in rows)
    return Result("\n".join(f"  {name.ljust(width)}  {value}  ({source})" for name, value, source in rows))


def _complete(conv: Conversation, prefix: str) -> list[str]:
    words = prefix.split(" ")
    action = words[0].lower()
    if len(words) == 1:
        return [f"{candidate} " if candidate in _NEEDS_NAME else candidate
                for candidate in SUBCOMMANDS if candidate.startswith(action)]
    if len(words) == 2 and action in ("load", "attach", "delete"):
        try:
            infos = conv.store.list()
        except Exception:  # noqa: BLE001 - completion never fails loudly
            return []
        names = [info.name for info in infos
                 if (info.messages is not None or action == "delete")
                 and not (action == "attach" and is_machine_name(info.name))]
        return [f"{words[0]} {name}" for name in names if name.startswith(words[1])]
    return []


def register(registry: CommandRegistry) -> None:
    registry.command("session", "/session <action> [name]", "save, load, attach, fork, list, delete sessions",
                     complete=_complete)(session_command)
    registry.command("newsession", "/newsession", "start a new conversation (same as /session new)")(
        lambda conv, _args: Result(sessions.new(conv).text)
    )
    registry.command("config", "/config session", "show the session settings and where each came from")(
        config_command
    )
