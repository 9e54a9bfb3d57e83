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

from typing import TYPE_CHECKING

from chatcli.core import journal as rules
from chatcli.core.checkpoints import Checkpoint
from chatcli.core.errors import ChatcliError, UsageError
from chatcli.core.export import local_time
from chatcli.core.messages import Message, shared_prefix
from chatcli.engine.sessions import Outcome
from chatcli.store.recall import MARKER_RE, RecallStore

if TYPE_CHECKING:
    from chatcli.engine.conversation import Conversation


class _Journal:
    """The conversation's journal, read once, when first needed."""

    def __init__(self, conv: Conversation) -> None:
        self.conv = conv
        self._state: rules.Replay | None = None
        self.problem: str | None = None

    def events(self) -> list[dict]:
        transcript = self.conv.transcript
        journal = transcript.journal if transcript is not None else None
        if journal is None:
            self.problem = "the transcript journal is off"
            return []
        try:
            return journal.read().events
        except ChatcliError as exc:
            self.problem = str(exc)
            return []

    @property
    def state(self) -> rules.Replay:
        if self._state is None:
            self._state = rules.replay(self.events())
        return self._state


def _messages(point: Checkpoint, journal: _Journal) -> list[Message] | None:
    if point.messages is not None:
        return list(point.messages)
    messages, missing = journal.state.history(point.hashes() or ())
    return None if missing else messages


def usable(conv: Conversation) -> tuple[list[tuple[Checkpoint, list[Message]]], list[str]]:
    """The checkpoints that can be restored, newest first, with their messages; the others are
    dropped from the conversation, with a note."""
    journal = _Journal(conv)
    found, dropped = [], []
    for point in reversed(conv.checkpoints):
        messages = _messages(point, journal)
        if messages is None:
            dropped.append(point)
        else:
            found.append((point, messages))
    notes = []
    if conv.unreadable_checkpoints:
        notes.append(f"{conv.unreadable_checkpoints} checkpoint(s) in the session file could not be read; "
                     "they were dropped.")
        conv.unreadable_checkpoints = 0
    if dropped:
        gone = set(map(id, dropped))
        conv.checkpoints = [c for c in conv.checkpoints if id(c) not in gone]
        why = f" ({journal.problem})" if journal.problem else ""
        notes.append(f"Dropped {len(dropped)} checkpoint(s) whose messages the journal no longer has{why}.")
    return found, notes


def listing(conv: Conversation) -> Outcome:
    notes = conv.adopt()
    found, more = usable(conv)
    notes += more
    if not found:
        return Outcome("No checkpoints yet: one is taken before each turn.", tuple(notes))
    width = len(str(len(found)))
    lines = ["Checkpoints, newest first (restoring one drops the ones above it):"]
    for number, (point, messages) in enumerate(found, 1):
        lines.append(f"  {str(number).rjust(width)}  {local_time(point.time)}  before {_what(point)}  "
                     f"({len(messages)} messages)")
    lines.append("/rewind N restores one; /rewind compact undoes the last compaction.")
    return Outcome("\n".join(lines), tuple(notes))


def rewind(conv: Conversation, number: int) -> Outcome:
    notes = conv.adopt()
    found, more = usable(conv)
    notes += more
    if not found:
        raise UsageError("no checkpoints to rewind to: one is taken before each turn")
    if not 1 <= number <= len(found):
        raise UsageError(f"no checkpoint {number}: choose 1 to {len(found)} (/rewind lists them)")
    point, messages = found[number - 1]
    aside = len(conv.history) - shared_prefix(conv.history, messages)
    return _replace(conv, messages, f"/rewind {number}", point, notes,
                    f"Rewound to {_when(point)}: the history has {len(messages)} messages"
                    f" ({aside} set aside; the journal keeps them).")


def uncompact(conv: Conversation) -> Outcome:
    """Put back the messages the last compaction summarised, keeping everything said since."""
    notes = conv.adopt() + conv.sync_transcript()
    history = conv.history
    at = next((i for i in range(len(history) - 1, -1, -1) if history[i].is_summary), None)
    if at is None:
        return Outcome("Nothing to undo: the history holds no compaction summary.", tuple(notes))
    restored, source = _from_journal(conv, at)
    if restored is None:
        restored, source = _from_recall(conv, at)
    if restored is None:
        raise ChatcliError(f"cannot undo the compaction: {source}")
    summarised = len(restored) - len(history) + 1
    return _replace(conv, restored, "/rewind compact", None, notes,
                    f"Undid the compaction of {summarised} messages ({source}): the history has "
                    f"{len(restored)} messages.")


def _from_journal(conv: Conversation, at: int) -> tuple[list[Message] | None, str]:
    transcript = conv.transcript
    journal = _Journal(conv)
    hashes = transcript.live_hashes(conv.history) if transcript is not None else None
    events = journal.events() if hashes is not None else []
    if not events:
        return None, journal.problem or "the journal does not record this history"
    state, before, after = rules.before_introducing(events, hashes[at])
    if before is None:
        return None, "the journal has no record of this compaction"
    history = conv.history
    k = after.index(hashes[at])
    tail = after[k + 1:]
    end = at + 1 + len(tail)
    if list(hashes[:at]) == after[:k] and list(hashes[at + 1:end]) == tail:
        earlier, missing = state.history(before)  # the history before the compaction, exactly
        restored = earlier + list(history[end:])
    else:  # changed since in ways a replay cannot follow: put the originals where the summary is
        kept = set(after)
        earlier, missing = state.history([h for h in before if h not in kept])
        restored = list(history[:at]) + earlier + list(history[at + 1:])
    if missing:
        return None, f"the journal lacks {len(missing)} of the original messages"
    return restored, "originals from the journal"


def _from_recall(conv: Conversation, at: int) -> tuple[list[Message] | None, str]:
    keys = MARKER_RE.findall(conv.history[at].content)
    if not keys:
        return None, "the summary names no recall entry and the journal does not have the originals"
    try:
        originals, _origin = RecallStore(conv.settings.home / "ccr").get(keys[-1])
    except ChatcliError as exc:
        return None, str(exc)
    history = conv.history
    return list(history[:at]) + originals + list(history[at + 1:]), "originals from the recall store"


def _replace(conv: Conversation, messages: list[Message], label: str, target: Checkpoint | None,
             notes: list[str], text: str) -> Outcome:
    """Make `messages` the history: `target` and the checkpoints after it are dropped, and the
    history being replaced becomes the newest checkpoint (so this can be undone)."""
    notes += conv.checkpoint(label)
    *rest, undo = conv.checkpoints
    if target is not None:
        rest = rest[: rest.index(target)] if target in rest else []
    conv.checkpoints = [*rest, undo]
    conv.history = messages
    conv.synced_count = 0  # the file holds the replaced history: all of this is still to be written
    notes += conv.sync_transcript("rewind")
    notes += conv.write_through()
    return Outcome(f"{text} /rewind 1 undoes this.", tuple(notes))


def _what(point: Checkpoint) -> str:
    """A command (/rewind 2, /compact) as it is; the first words of a message in quotes."""
    return point.label if point.label.startswith("/") else f"“{point.label}”"


def _when(point: Checkpoint) -> str:
    return f"before {_what(point)} ({local_time(point.time)})"


__all__ = ["listing", "rewind", "uncompact", "usable"]
