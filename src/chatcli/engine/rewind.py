"""/rewind (SPEC §8): go back to a checkpoint, or undo the last compaction.

A checkpoint is taken before every turn (`Conversation.checkpoint`). Restoring one replaces
the live history with the checkpoint's; the checkpoints taken after it are dropped, and the
history as it was just before the rewind becomes the newest checkpoint, so `/rewind 1` undoes
a rewind. The journal records each rewind as a rewrite event (reason "rewind"); nothing leaves
the journal.

A checkpoint read from a session file is a hash list: its messages come from the journal. One
the journal no longer has (pruned, or written with the journal off) is dropped, with a note, the
first time /rewind looks at it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from chatcli.core import journal as rules
from chatcli.core.checkpoints import Checkpoint, capped
from chatcli.core.errors import ChatcliError, UsageError
from chatcli.core.export import local_time
from chatcli.core.messages import Message
from chatcli.engine.sessions import Outcome
from chatcli.engine import recall
from chatcli.store.recall import MARKER_RE

if TYPE_CHECKING:
    from chatcli.engine.conversation import Conversation


class _Journal:
    """The conversation's journal, read once, when first needed (the next sync reads only what
    was appended since)."""

    def __init__(self, conv: Conversation) -> None:
        self.conv = conv
        self._state: rules.Replay | None = None
        self._events: list[dict] | None = None
        self.problem: str | None = None

    def events(self) -> list[dict]:
        if self._events is None:
            transcript = self.conv.transcript
            self._events = []
            if transcript is None or transcript.journal is None:
                self.problem = "the transcript journal is off"
            else:
                try:
                    self._events = transcript.events()
                except ChatcliError as exc:
                    self.problem = str(exc)
        return self._events

    @property
    def state(self) -> rules.Replay:
        if self._state is None:
            self._state = rules.replay(self.events())
        return self._state


def usable(conv: Conversation) -> tuple[list[Checkpoint], list[str], _Journal]:
    """The checkpoints that can be restored, newest first; the others are dropped from the
    conversation, with a note. A checkpoint can be restored when this process has its messages
    or the journal holds every hash of its list: its base's (checked once) and its own tail's."""
    journal = _Journal(conv)
    restorable: dict[int, bool] = {}
    for point in conv.checkpoints:  # oldest first: a base is decided before what builds on it
        if point.messages is not None:
            ok = True
        else:
            known = journal.state.positions
            base = point.base
            base_ok = point.keep == 0 or (restorable[id(base)] if id(base) in restorable
                                          else _restorable(base, known))
            ok = base_ok and all(digest in known for digest in point.tail or ())
        restorable[id(point)] = ok
    dropped = [p for p in conv.checkpoints if not restorable[id(p)]]
    notes = []
    if conv.unreadable_checkpoints:
        notes.append(f"{conv.unreadable_checkpoints} checkpoint(s) in the session file could not be read; "
                     "they were dropped.")
        conv.unreadable_checkpoints = 0
    if dropped and journal.problem:  # off or unreadable for now: kept for when it is back
        notes.append(f"{len(dropped)} checkpoint(s) need the journal to be restored, and {journal.problem}; "
                     "they are kept but not listed.")
    elif dropped:
        conv.checkpoints = [p for p in conv.checkpoints if restorable[id(p)]]
        notes.append(f"Dropped {len(dropped)} checkpoint(s) whose messages the journal no longer has.")
    return [p for p in reversed(conv.checkpoints) if restorable[id(p)]], notes, journal


def _restorable(point: Checkpoint | None, known: dict) -> bool:
    """For a base outside the list (dropped before): whether its whole hash list is known."""
    return point is not None and point.messages is None and all(h in known for h in point.hashes() or ())


def _restore(point: Checkpoint, journal: _Journal) -> tuple[list[Message], tuple[str, ...] | None]:
    """A checkpoint's messages, and its hash list when it has one."""
    hashes = point.hashes()
    if point.messages is not None:
        return list(point.messages), hashes
    messages, _missing = journal.state.history(hashes)  # `usable` checked that none is missing
    return messages, hashes


def listing(conv: Conversation) -> Outcome:
    notes = conv.binding.adopt()
    found, more, _journal = usable(conv)
    notes += more
    if not found:
        return Outcome("No checkpoints yet: one is taken before each turn.", tuple(notes))
    width = len(str(len(found)))
    lines = ["Checkpoints, newest first (restoring one drops the ones above it):"]
    for number, point in enumerate(found, 1):
        lines.append(f"  {str(number).rjust(width)}  {local_time(point.time)}  before {_what(point)}  "
                     f"({_messages_text(point.size)})")
    lines.append("/rewind N restores one; /rewind compact undoes the last compaction.")
    return Outcome("\n".join(lines), tuple(notes))


def rewind(conv: Conversation, number: int) -> Outcome:
    notes = conv.binding.adopt()
    found, more, journal = usable(conv)
    notes += more
    if not found:
        raise UsageError("no checkpoints to rewind to: one is taken before each turn")
    if not 1 <= number <= len(found):
        choices = "there is only checkpoint 1" if len(found) == 1 else f"choose 1 to {len(found)}"
        raise UsageError(f"no checkpoint {number}: {choices} (/rewind lists them)")
    point = found[number - 1]
    messages, hashes = _restore(point, journal)
    aside = _set_aside(conv.history, messages)
    kept = "; the journal keeps them" if conv.transcript is not None and conv.transcript.journal else ""
    return _replace(conv, messages, hashes, f"/rewind {number}", point, notes,
                    f"Rewound to {_when(point)}: the history has {_messages_text(len(messages))}"
                    f" ({aside} set aside{kept}).")


def _set_aside(current: Sequence[Message], restored: Sequence[Message]) -> int:
    """How many of the current messages the restored history does not hold."""
    left = Counter((m.role, m.content) for m in restored)
    aside = 0
    for message in current:
        key = (message.role, message.content)
        if left[key]:
            left[key] -= 1
        else:
            aside += 1
    return aside


def uncompact(conv: Conversation) -> Outcome:
    """Put back the messages the last compaction summarised, keeping everything said since."""
    notes = conv.binding.adopt()
    journal = _Journal(conv)
    journal.events()  # read once, before the sync: the sync then reads only what it appends after
    notes += conv.sync_transcript()
    history = conv.history
    at = next((i for i in range(len(history) - 1, -1, -1) if history[i].is_summary), None)
    if at is None:
        return Outcome("Nothing to undo: the history holds no compaction summary.", tuple(notes))
    restored, hashes, source = _from_journal(conv, journal, at)
    if restored is None:
        restored, source = _from_recall(conv, at)
    if restored is None:
        raise ChatcliError(f"cannot undo the compaction: {source}")
    summarised = len(restored) - len(history) + 1
    return _replace(conv, restored, hashes, "/rewind compact", None, notes,
                    f"Undid the compaction of {_messages_text(summarised)} ({source}): the history has "
                    f"{_messages_text(len(restored))}.")


def _from_journal(conv: Conversation, journal: _Journal, at: int) \
        -> tuple[list[Message] | None, list[str] | None, str]:
    """The history with the compaction at `at` undone, from the journal, and its hashes when
    they are known without hashing every message; or None and why not."""
    transcript = conv.transcript
    hashes = transcript.live_hashes(conv.history) if transcript is not None else None
    events = journal.events() if hashes is not None else []
    if not events:
        return None, None, journal.problem or "the journal does not record this history"
    found = recall.compaction_in_journal(events, hashes[at])
    if found is None:
        return None, None, "the journal has no record of this compaction"
    state, before, after = found
    history = conv.history
    k = after.index(hashes[at])
    tail = after[k + 1:]
    end = at + 1 + len(tail)
    restored_hashes = None
    if list(hashes[:at]) == after[:k] and list(hashes[at + 1:end]) == tail:
        earlier, missing = state.history(before)  # the history before the compaction, exactly
        restored = earlier + list(history[end:])
        later = rules.history_hashes(history[end:], rules.occurrence_counts(before))
        restored_hashes = before + later
    else:  # changed since in ways a replay cannot follow: put the originals where the summary is
        earlier, missing = found.originals()
        restored = list(history[:at]) + earlier + list(history[at + 1:])
    if missing:
        return None, None, f"the journal lacks {len(missing)} of the original messages"
    return restored, restored_hashes, "originals from the journal"


def _from_recall(conv: Conversation, at: int) -> tuple[list[Message] | None, str]:
    keys = MARKER_RE.findall(conv.history[at].content)
    if not keys:
        return None, "the summary names no recall entry and the journal does not have the originals"
    try:
        originals, origin = recall.originals(conv.settings, keys[-1], conv.history, conv.transcript)
    except ChatcliError as exc:
        return None, str(exc)
    history = conv.history
    source = ("originals kept in the session" if origin.get("kept") else "originals from the journal"
              if origin.get("journal") else "originals from the recall store")
    return list(history[:at]) + originals + list(history[at + 1:]), source


def _replace(conv: Conversation, messages: list[Message], hashes: Sequence[str] | None, label: str,
             target: Checkpoint | None, notes: list[str], text: str) -> Outcome:
    """Make `messages` (whose journal hashes are `hashes`, if known) the history: `target` and
    the checkpoints after it are dropped, and the history being replaced becomes the newest
    checkpoint, remembering what was dropped, so that restoring it undoes this completely."""
    notes += conv.checkpoint(label, command=True)
    *rest, undo = conv.checkpoints
    back: tuple[Checkpoint, ...] = ()
    if target is not None:
        at = rest.index(target) if target in rest else 0
        rest, undo.later, back = rest[:at], tuple(rest[at:]), target.later
    conv.checkpoints = capped([*rest, *back, undo])
    notes += conv.binding.replace_history(messages, "rewind", hashes)
    return Outcome(f"{text} /rewind 1 undoes this.", tuple(notes))


def _what(point: Checkpoint) -> str:
    """A command (/rewind 2, /compact) as it is; the first words of a message in quotes."""
    return point.label if point.command else f"“{point.label}”"


def _messages_text(count: int) -> str:
    return f"{count} message" + ("" if count == 1 else "s")


def _when(point: Checkpoint) -> str:
    return f"before {_what(point)} ({local_time(point.time)})"


__all__ = ["listing", "rewind", "uncompact", "usable"]
