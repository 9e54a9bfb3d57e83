"""/context: named snapshots of files and directories (store/contexts.py) and the ones attached to
the conversation (engine/contexts.py), written once for every surface that runs slash commands."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from chatcli.commands.mistyped import unknown_action
from chatcli.commands.registry import CommandRegistry, Result
from chatcli.core.errors import UsageError
from chatcli.core.retention import human_size

if TYPE_CHECKING:
    from chatcli.engine.conversation import Conversation

ACTIONS = ("save", "list", "show", "delete", "attach", "detach", "attached")


def context_command(conv: Conversation, args: str) -> Result:
    from chatcli.engine import contexts  # at the command, not when the registry is built (start-up)

    words = args.split()
    action, rest = (words[0].lower(), words[1:]) if words else ("attached", [])
    store = contexts.store(conv)
    if action == "save":
        if len(rest) < 2:
            raise UsageError("usage: /context save NAME PATH… (files or directories)")
        context, replaced = store.save(rest[0], rest[1:], conv.agent.root or Path.cwd())
        skipped = ", ".join(f"{count} {why}" for why, count in context.skipped.items())
        return Result(f"Context '{context.name}' {'replaced' if replaced else 'saved'}: {len(context.files)} files, "
                      f"{len(context.chunks)} chunks, {human_size(context.size)}"
                      + (f" (left out: {skipped})" if skipped else "") + ".")
    if action == "list":
        names = store.names()
        if not names:
            return Result("No saved contexts. /context save NAME PATH… makes one.")
        lines = ["Saved contexts:"]
        for name in names:
            try:
                context = store.load(name)
                lines.append(f"  {name}  {len(context.files)} files, {len(context.chunks)} chunks, "
                             f"{human_size(context.size)}, saved {context.created[:10]}")
            except Exception as exc:  # noqa: BLE001 - one unreadable snapshot does not hide the others
                lines.append(f"  {name}  ({exc})")
        return Result("\n".join(lines))
    if action in ("show", "delete", "detach") and len(rest) != 1:
        raise UsageError(f"usage: /context {action} NAME")
    if action == "show":
        context = store.load(rest[0])
        lines = [f"Context '{context.name}' (saved {context.created}, from {', '.join(context.roots)}): "
                 f"{len(context.files)} files, {len(context.chunks)} chunks"]
        chunks: dict[str, list[int]] = {}
        for chunk in context.chunks:
            chunks.setdefault(chunk.file, []).append(chunk.n)
        for item in context.files[:50]:
            numbers = chunks.get(item["path"], [])
            which = f"chunk {numbers[0]}" if len(numbers) == 1 else f"chunks {numbers[0]}-{numbers[-1]}" if numbers \
                else "no chunk"
            lines.append(f"  {item['path']}  {item['lines']} lines, {human_size(item['size'])}, {which}")
        if len(context.files) > 50:
            lines.append(f"  … and {len(context.files) - 50} more files")
        return Result("\n".join(lines))
    if action == "delete":
        store.delete(rest[0])
        return Result(f"Context '{rest[0]}' deleted. Sessions that attached it skip it from now on.")
    if action == "attach":
        return Result(contexts.attach(conv, rest))
    if action == "detach":
        return Result(contexts.detach(conv, rest[0]))
    if action == "attached":
        return Result(contexts.attached(conv))
    raise unknown_action("context", action, ACTIONS)


def register(registry: CommandRegistry) -> None:
    def complete(conv: Conversation, prefix: str) -> list[str]:
        words = prefix.split(" ")
        if len(words) == 1:
            return [f"{word} " for word in ACTIONS if word.startswith(words[0].lower())]
        if len(words) == 2 and words[0].lower() in ("show", "delete", "attach", "detach"):
            from chatcli.engine import contexts

            try:
                names = contexts.store(conv).names()
            except Exception:  # noqa: BLE001 - completion never fails loudly
                return []
            return [f"{words[0]} {name}" for name in names if name.startswith(words[1])]
        return []

    registry.command("context", "/context [save|list|show|delete|attach|detach|attached] …",
                     "named snapshots of files, attached to the conversation and saved with its session",
                     complete=complete)(context_command)


__all__ = ["context_command", "register"]
