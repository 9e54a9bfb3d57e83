"""/compact, /rewind and /recall KEY: shrink the history, go back, and print what a compaction
summarised away (SPEC §8)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from chatcli.commands.mistyped import unknown_action
from chatcli.commands.registry import CommandRegistry, Result
from chatcli.core.errors import UsageError
from chatcli.engine import compaction, rewind
from chatcli.engine.recall import recall_text

if TYPE_CHECKING:
    from chatcli.engine.conversation import Conversation


def register(registry: CommandRegistry) -> None:
    @registry.command("compact", "/compact [instruction]",
                      "summarise the older messages into one (originals kept: /recall, the journal)")
    def compact(conv: Conversation, args: str) -> Result:
        try:
            outcome = compaction.compact(conv, args)
        except KeyboardInterrupt:  # Ctrl-C while the model writes the summary (a signal too: the REPL then ends)
            return Result("Compaction interrupted; the history is unchanged.")
        return Result("\n".join((outcome.text, *outcome.notes)))

    @registry.command("rewind", "/rewind [N|compact]",
                      "list the checkpoints (one before each turn) and restore one; undo the last /compact")
    def rewind_command(conv: Conversation, args: str) -> Result:
        if not args:
            outcome = rewind.listing(conv)
            chooses = outcome.text.startswith("Checkpoints")
            return Result("\n".join((*outcome.notes, outcome.text)),
                          ask="Rewind to checkpoint (number; Enter keeps the history): " if chooses else "",
                          follow="/rewind", unanswered="History kept.")
        if args.lower() == "compact":
            outcome = rewind.uncompact(conv)
        elif re.fullmatch(r"[0-9]+", args):
            outcome = rewind.rewind(conv, int(args))
        elif args.isalpha():  # a word: a mistyped action, not a mistyped number
            raise unknown_action("rewind", args.lower(), ("compact",), "or a checkpoint number from the /rewind list")
        else:
            raise UsageError(f"'{args}' is not a checkpoint number: /rewind lists the checkpoints, /rewind N "
                             "restores one, /rewind compact undoes the last compaction")
        return Result("\n".join((outcome.text, *outcome.notes)))

    @registry.command("recall", "/recall KEY", "print the original messages a summary's <<ccr:KEY>> stands for")
    def recall(conv: Conversation, args: str) -> Result:
        if len(args.split()) != 1:
            raise UsageError("usage: /recall KEY (16 hexadecimal digits, or <<ccr:KEY>>)")
        return Result(recall_text(conv.settings, args, conv.history, conv.transcript))
