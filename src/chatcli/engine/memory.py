"""What the model is told of the global memory (`/memory`, store/memory.py): the notes, newest
first, up to PROMPT_LIMIT characters (and WINDOW_SHARE of the context window), after the
bootstrap system prompt of every conversation.
Read again only when a note was saved or forgotten (by any surface)."""

from __future__ import annotations

from chatcli.config.settings import Settings
from chatcli.engine.by_stamp import ByStamp
from chatcli.store.home import Home
from chatcli.store.session_file import SessionError
from chatcli.store.memory import Note

PROMPT_LIMIT = 8000  # characters of notes in a request at most
WINDOW_SHARE = 0.15  # and at most this share of the context window (about four characters a token)
_prompts = ByStamp()  # (home, limit) → the text, by the notes' stamp


def compose(notes: list[Note], limit: int = PROMPT_LIMIT) -> str:
    """The notes as the model reads them, newest first; "" when there are none."""
    if not notes:
        return ""
    lines, used = [], 0
    for note in reversed(notes):
        line = f"- {note.text}"
        if used + len(line) > limit and lines:
            break
        lines.append(line)
        used += len(line) + 1
    left = len(notes) - len(lines)
    more = [f"({left} older note{'s' if left != 1 else ''} not shown here; the user can list them with "
            "/memory list.)"] if left else []
    return "\n".join(["The user asked you to remember these notes (their global memory, shared by every "
                      "conversation; newest first):", *lines, *more])


def prompt(settings: Settings) -> str:
    """The memory part of the system prompt, from the notes as they are now."""
    store = Home.of(settings).memory()
    limit = min(PROMPT_LIMIT, int(settings.context_tokens * 4 * WINDOW_SHARE))
    key = (store.place.where(""), limit)
    try:
        stamp = store.stamp()
        if stamp is None:
            return ""
        # A note that cannot be read is not offered (/memory list says why).
        return _prompts.get(key, stamp, lambda: compose(store.notes()[0], limit))
    except SessionError:  # the server is not there now (or refused): the notes as they were read last
        return _prompts.last(key, "")


__all__ = ["PROMPT_LIMIT", "compose", "prompt"]


# -- /memory ---------------------------------------------------------------------------------
def save(settings: Settings, text: str, origin: str = "") -> str:
    note = Home.of(settings).memory().save(text, origin)
    return f"Remembered as note {note.id}; every conversation's model is offered it (/memory forget {note.id} drops it)."


def listing(settings: Settings) -> str:
    notes, problems = Home.of(settings).memory().notes()
    if not notes:
        lines = ["No notes in memory. /memory save <text> keeps one for every conversation."]
    else:
        lines = [f"Memory ({len(notes)} note{'s' if len(notes) != 1 else ''}, oldest first; every conversation's "
                 f"model is offered the newest that fit in {PROMPT_LIMIT:,} characters and {WINDOW_SHARE:.0%} of its window):"]
        for number, note in enumerate(notes, 1):
            first = note.text.splitlines()[0] if note.text else ""
            shown = first if len(first) <= 70 and "\n" not in note.text else first[:69] + "…"
            lines.append(f"  {number:>3}. [{note.id}] {note.created[:10]}  {shown}")
    return "\n".join([*lines, *(f"Note: {problem}" for problem in problems)])


def show(settings: Settings, ref: str) -> str:
    note = Home.of(settings).memory().find(ref)
    origin = f", saved in session '{note.origin}'" if note.origin else ""
    return f"Note {note.id} ({note.created}{origin}):\n{note.text}"


def forget(settings: Settings, ref: str) -> str:
    note = Home.of(settings).memory().forget(ref)
    return f"Forgot note {note.id}."


__all__ += ["forget", "listing", "save", "show"]
