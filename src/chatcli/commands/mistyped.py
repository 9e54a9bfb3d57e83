"""The one-line answer to a mistyped command or action: the nearest name, if one is near, and where the rest are.

Every command with actions raises `unknown_action(…)` for a word it does not know, so that
`/session lst`, `/storage prnue` and `/memory lsit` read alike on every surface."""

from __future__ import annotations

from collections.abc import Iterable

from chatcli.core.errors import UsageError


def nearest(word: str, choices: Iterable[str]) -> str | None:
    """The choice closest to `word` (case aside), or None when none is close."""
    import difflib  # where used, not at start-up

    found = difflib.get_close_matches(word.lower(), list(choices), n=1)
    return found[0] if found else None


def unknown_command(word: str, names: Iterable[str]) -> str:
    """`word` (as typed, with its /) names no command; `names` are every name and alias, without /."""
    match = nearest(word.removeprefix("/"), names)
    if match is not None:
        return f"unknown command {word} — did you mean /{match}? (/help lists them)"
    return f"unknown command {word} (/help lists them; start a message with // to send it as text)"


def unknown_action(command: str, action: str, actions: Iterable[str], other: str = "") -> UsageError:
    """The error for `/command action` when `command` (as in `session transcript`) has no such
    action; `other` is what else the command takes in that place (`or CRON /COMMAND`)."""
    actions = list(actions)
    match = nearest(action, actions)
    guess = f" — did you mean '{match}'?" if match is not None else ""
    listed = ", ".join(actions) + (f"; {other}" if other else "")
    return UsageError(f"unknown action '{action}' for /{command}{guess} (actions: {listed})")


__all__ = ["nearest", "unknown_action", "unknown_command"]
