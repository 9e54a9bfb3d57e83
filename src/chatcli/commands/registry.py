"""The per-instance slash-command registry: name, aliases, usage, summary; /help and completion come from it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from chatcli.commands.mistyped import unknown_command
from chatcli.core.errors import ChatcliError

if TYPE_CHECKING:
    from chatcli.engine.conversation import Conversation


@dataclass(frozen=True)
class Result:
    """What a command has to say. Surfaces decide how to show it."""

    text: str = ""
    error: bool = False
    exit: bool = False
    # A question an interactive surface may ask next (after showing `text`); a non-empty answer
    # runs `follow` with it as the argument. Other surfaces show `text` and stop.
    ask: str = ""
    follow: str = ""
    unanswered: str = ""  # what to say when the question is left without an answer
    send: str = ""  # a message the surface sends as a turn next (/agent TASK)


Handler = Callable[["Conversation", str], Result]
Completer = Callable[["Conversation", str], list[str]]


@dataclass(frozen=True)
class Command:
    name: str
    handler: Handler
    usage: str
    summary: str
    aliases: tuple[str, ...] = ()
    # Candidates for the argument being typed (given what has been typed of it).
    complete: Completer | None = None
    # (usage, summary) of each subcommand, listed under the command by /help.
    details: tuple[tuple[str, str], ...] = ()


@dataclass
class CommandRegistry:
    commands: dict[str, Command] = field(default_factory=dict)
    _by_alias: dict[str, Command] = field(default_factory=dict)

    def add(self, command: Command) -> Command:
        for key in (command.name, *command.aliases):
            if key in self._by_alias:
                raise ValueError(f"/{key} is registered twice")
            self._by_alias[key] = command
        self.commands[command.name] = command
        return command

    def command(self, name: str, usage: str, summary: str, aliases: tuple[str, ...] = (), complete=None):
        """Decorator form of `add`."""

        def decorate(handler: Handler) -> Handler:
            self.add(Command(name, handler, usage, summary, aliases, complete))
            return handler

        return decorate

    def find(self, name: str) -> Command | None:
        return self._by_alias.get(name.removeprefix("/").lower())

    def words(self) -> list[str]:
        """Every name and alias, as typed ('/help', '/quit', …)."""
        return sorted(f"/{key}" for key in self._by_alias)

    @staticmethod
    def is_command(line: str) -> bool:
        """A line is a command when its first word is `/name`.

        A path (`/usr/bin/python3 crashes, why?`) goes to the model, and so does `//text`,
        sent as `/text` (see `as_prompt`).
        """
        word = line.strip().split(maxsplit=1)[0] if line.strip() else ""
        return word.startswith("/") and not word.startswith("//") and "/" not in word[1:]

    @staticmethod
    def as_prompt(line: str) -> str:
        """The text to send for a line that is not a command: `//x` is the escape for `/x`."""
        stripped = line.lstrip()
        return stripped[1:] if stripped.startswith("//") else line

    def dispatch(self, line: str, conversation: Conversation) -> Result:
        """Run the command a `/…` line names. Failures come back as error results, never raise."""
        word, _, args = line.strip().partition(" ")
        command = self.find(word)
        if command is None:
            return Result(unknown_command(word, self._by_alias), error=True)
        try:
            return command.handler(conversation, args.strip())
        except ChatcliError as exc:
            return Result(str(exc), error=True)

    def help_text(self) -> str:
        rows = []
        for command in self.commands.values():
            alias = f" (also {', '.join('/' + a for a in command.aliases)})" if command.aliases else ""
            rows.append((command.usage, command.summary + alias))
            rows += [(f"  {usage}", summary) for usage, summary in command.details]
        width = max(len(usage) for usage, _ in rows)
        lines = ["Commands:"] + [f"  {usage.ljust(width)}  {summary}" for usage, summary in rows]
        lines.append("Alt-Enter inserts a newline; Ctrl-C cancels an answer or clears the line; Ctrl-D leaves.")
        return "\n".join(lines)
