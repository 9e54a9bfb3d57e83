"""A conversation's binding to a named session (SPEC §6.1): the one place that knows it.

Attach (`bind`), detach (`unbind`), adoption of what other surfaces wrote before a turn, and
write-through after it: the merge when the file changed under us, the in-place append when
only the history grew, the journal claim of a session's first turn. engine/sessions.py's
operations (save, load, attach, fork…) decide *what* to bind; this decides how the binding
is kept true, including a session's journal when another program wrote its file back without
naming it (`take_back_journal`).
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Sequence
from typing import TYPE_CHECKING

from chatcli.core.messages import Message, shared_prefix
from chatcli.core.names import is_machine_name
from chatcli.core.session import SessionData
from chatcli.engine.transcript import continues
from chatcli.engine.transcript import new_id as new_transcript_id
from chatcli.store.home import Home
from chatcli.store.journal import ID_RE
from chatcli.store.session_file import StoreUnavailable
from chatcli.store.sessions import SessionError, Stamp

if TYPE_CHECKING:
    from chatcli.engine.conversation import Conversation

# What the bound file holds (Binding.note_file): as of `stamp`, the first `count` messages of
# `history` (at `version`) and, serialised, every other field (`head`).
FileMark = namedtuple("FileMark", "stamp history version count head")


class Binding:
    """Which session a conversation is bound to, and what its file held at our last read or write."""

    def __init__(self, conv: Conversation) -> None:
        self.conv = conv
        # The name of the bound session (prompt shows `[name] model> `); None when unbound.
        self.name: str | None = None
        # The bound file as of our last read or write, and how many messages it then held.
        self.stamp: Stamp | None = None
        self.synced_count = 0
        # Set while a rewrite of the history (compaction, rewind) is not yet in the bound file:
        # how many messages the file held at our last write.
        self.rewrite_base: int | None = None
        # What the bound file holds, when a turn can be appended to it in place (see note_file).
        self.file: FileMark | None = None
        self.write_problem: str | None = None  # the last write-through failure said (said once)
        self.loaded_mark: tuple | None = None  # see mark_loaded
        # An autosave loaded to be continued (unbound, as every machine session), and its file as
        # loaded: what the conversation is kept in when it ends, instead of a second autosave.
        self.loaded_autosave: tuple[str, Stamp] | None = None

    def bind(self, name: str | None, data: SessionData, stamp: Stamp | None) -> list[str]:
        """Make `data` the live conversation, bound to `name` unless that is a machine-made session.
        Another session (new, loaded, saved under another name) asks again before commands and
        writes: an "always" answer was given for the session it was given in. Returns what the
        user is told of the file as read (a last turn taken back from the journal)."""
        if name is None or name != self.name:
            self.conv.agent.always.clear()
        self.loaded_autosave = None
        self.conv.session = data
        self.conv.history = data.history
        self.name = None if name is None or is_machine_name(name) else name
        self.stamp = stamp if self.name else None
        self.synced_count = len(self.conv.history)
        self.rewrite_base = None
        self.conv.read_checkpoints(data)
        self.note_file(data, len(self.conv.history), self.stamp)
        self.take_back_journal(name, data)  # after note_file: the file does not name it (the next write does)
        if self.conv.transcript is not None:
            self.conv.transcript.attach(data.transcript_id)
        return self.take_back_turns(name, data)

    def take_back_turns(self, name: str | None, data: SessionData) -> list[str]:
        """The last turn the file as read left out, put back from the journal (`taken_back`)
        after bind counted the file's messages: they are written at the next write."""
        taken, notes = taken_back(self.conv.settings, name, data)
        self.conv.history.extend(taken)
        return notes

    def take_back_journal(self, name: str | None, data: SessionData) -> None:
        """Session `name`'s file as read (`data`) names no journal, but chatcli named one in it:
        another program wrote the file back without the field (Go ChatCLI's sessions have no
        `transcript_id`). That journal holds what compactions replaced; it becomes the session's
        again when it records the conversation the file continues (engine.transcript.continues),
        and the next write names it in the file. Otherwise the session starts a new one."""
        if name is None or data.transcript_id:
            return
        remembered = self.conv.store.catalog.remembered_journal(name)
        if not remembered or not ID_RE.fullmatch(remembered):
            return
        transcript = self.conv.transcript
        if transcript is not None and transcript.id == remembered:
            data.transcript_id = remembered  # this conversation writes it already: nothing to check
            return
        # Another session's file naming it (a file renamed by hand) keeps it: two sessions never
        # write one journal. Listing is cheap (the catalog), and this runs only for such files.
        if any(row[5] == remembered and other != name for other, row in self.conv.store.entries().items()):
            return
        if continues(Home.of(self.conv.settings).journal(remembered), data.history):
            data.transcript_id = remembered

    def note_file(self, data: SessionData | None, count: int, stamp: Stamp | None) -> None:
        """The bound file, as of `stamp`, is `data`: the first `count` messages of the live history
        and `data`'s other fields. While only the history grows after that, a write-through
        appends the new messages to the file instead of rewriting it (`append`)."""
        if data is None or stamp is None or not data.appendable or self.name is None:
            self.file = None
            return
        head = self.conv.store.head(data)
        self.file = None if head is None else FileMark(stamp, self.conv.history, self.conv.history.version, count, head)

    def append(self, data: SessionData, stamp: Stamp | None) -> Stamp | None:
        """Write a turn by appending its messages to the file, when the file is still the one
        `note_file` saw (`stamp`), the history has only grown since, and nothing else changed.
        None when it cannot be done that way (the caller writes the file whole)."""
        mark = self.file
        if mark is None or stamp != mark.stamp:
            return None
        history, count = mark.history, mark.count
        if history is not self.conv.history or mark.version != history.version or len(history) < count:
            return None
        if self.conv.store.head(data) != mark.head:
            return None
        if len(history) == count:
            return stamp  # nothing new: the file already is this conversation
        return self.conv.store.append(self.name, history[count:], count, stamp)

    def unbind(self) -> None:
        self.name = None
        self.stamp = None

    def claim_journal(self) -> None:
        """The first journal of a bound session is named in its file before anything is written
        to it, under the session's lock: two surfaces starting the session's first turns at
        once then share one journal, instead of each starting its own and one of them being
        left behind, an orphan holding a turn. Best effort: on any failure the sync starts a
        journal of its own, as before."""
        name = self.name
        try:
            with self.conv.store.lock(name):
                stamp = self.conv.store.stamp(name)
                if stamp is None:
                    return
                if stamp == self.stamp and self.synced_count == len(self.conv.history) and self.unchanged_since_load():
                    # The file is still the one this conversation loaded, and the history is still
                    # what it read there: not parsed again (a 100,000-message file another program
                    # wrote costs seconds to decode). The turn's requests will name their cost
                    # record in it: named now, in this write, the turn is appended after it.
                    from chatcli.engine.costs import reference

                    reference(self.conv)
                    data = self.conv.session.copy()
                else:
                    data, stamp = self.conv.store.load(name)
                self.take_back_journal(name, data)
                if data.transcript_id:  # another surface got there first (or it is taken back): write that one
                    self.conv.transcript.attach(data.transcript_id)
                    return
                data.transcript_id = new_transcript_id()
                written = self.conv.store.write(name, data)
        except SessionError:
            return
        self.conv.transcript.attach(data.transcript_id)
        self.conv.session.transcript_id = data.transcript_id
        if stamp == self.stamp:  # the file was ours: this write changed nothing else
            self.stamp = written
            if self.conv.session.title is None:
                self.conv.session.title = data.title  # the write named it (the file says so now)
            if self.file is not None and self.file.stamp == stamp:
                self.note_file(data, self.file.count, written)
            elif self.file is None and self.synced_count == len(data.history):
                # Another program's file, now in chatcli's own shape: the turn is appended to it,
                # not written whole a second time.
                self.note_file(data, len(data.history), written)

    @property
    def unsynced(self) -> int:
        """Messages of a bound conversation that are not yet in its file (a write failed, or
        write-through is off)."""
        return len(self.conv.history) - self.synced_count if self.name else 0

    def adopt(self) -> list[str]:
        """Before a turn: take over what other surfaces wrote to the bound session since our last
        sync. Messages of ours not yet written are kept after the file's (and written next)."""
        name = self.name
        if name is None or not self.conv.settings.session_writethrough:
            return []
        try:
            stamp = self.conv.store.watched_stamp(name)
        except StoreUnavailable as exc:  # answered from memory; written when the store is back
            return [f"{exc} (the conversation here is used; it is written once the store is back)"]
        if stamp == self.stamp:
            return []
        if stamp is None:
            self.unbind()
            return [f"Session '{name}' was deleted elsewhere; unbound (the conversation stays in memory)."]
        try:
            self._count_landed(name)
            appended = self._appended(name, stamp)
            data, stamp = appended if appended is not None else self.conv.store.load(name)
        except StoreUnavailable as exc:  # for now: the binding stays, the next turn tries again
            return [f"{exc} (the conversation here is used; it is written once the store is back)"]
        except SessionError as exc:
            self.unbind()
            return [f"{exc}; unbound so that it is not overwritten."]
        note = self.merge(name, data, "was updated elsewhere", stamp)
        self.stamp = stamp
        return [note] if note else []

    def _count_landed(self, name: str) -> None:
        """A write of ours whose answer was lost but which is in the session after all (the store
        says so: `landed`): its messages count as written, so the merge that follows does not
        take them as another surface's and add ours again after them."""
        landed = self.conv.store.landed(name)
        if landed is not None and landed <= len(self.conv.history):
            self.rewrite_base = None
            self.synced_count = landed
            self.file = None  # read whole: the mark is of the session before that write

    def _appended(self, name: str, stamp: Stamp) -> tuple[SessionData, Stamp] | None:
        """The bound file as it is now, read from its end only, when all that changed since our
        last read or write is turns another surface appended in place (a 100,000-message session
        is then not parsed whole at each switch of surface); None when that cannot be known."""
        mark = self.file
        if mark is None or self.stamp is None or mark.stamp != self.stamp or self.rewrite_base is not None \
                or stamp.inode != self.stamp.inode or stamp.size <= self.stamp.size \
                or mark.history is not self.conv.history or mark.version != self.conv.history.version \
                or mark.count != self.synced_count:
            return None
        added = self.conv.store.appended_since(name, self.stamp.inode, self.stamp.size)
        if added is None or (added[1], added[2]) != (stamp.inode, stamp.size):
            return None  # rewritten, sealed, or written again while we read: read it whole
        data = self.conv.session.copy()
        data.history = [*self.conv.history[:mark.count], *added[0]]
        data.appendable = True
        return data, stamp

    def mark_loaded(self) -> None:
        """The history is a session's as it is on disk (just loaded, or just kept elsewhere)."""
        self.loaded_mark = (self.conv.history, self.conv.history.version, len(self.conv.history))

    def unchanged_since_load(self) -> bool:
        """Nothing was added to or changed in the history since `mark_loaded`: keeping it again
        (an autosave on exit, before a load) would only copy a file that is already there."""
        mark = self.loaded_mark
        return mark is not None and mark[0] is self.conv.history and mark[1:] == (self.conv.history.version, len(self.conv.history))

    def write_through(self, force: bool = False) -> list[str]:
        """After a turn (or on /session save): write the bound session at once.

        If another surface wrote meanwhile, merge instead of overwriting: the file's history
        first, then our messages that it does not have. `force` writes even when
        CHATCLI_SESSION_WRITETHROUGH is off (an explicit save).
        """
        name = self.name
        if name is None or not (force or self.conv.settings.session_writethrough) or (self.conv.read_only and not force):
            return []
        notes: list[str] = []
        store = self.conv.store
        try:
            with store.lock(name):
                stamp = store.stamp(name)
                if stamp is None and not force:
                    self.unbind()
                    return [f"Session '{name}' was deleted elsewhere; unbound and not recreated "
                            "(the conversation stays in memory)."]
                if stamp is not None and stamp != self.stamp:
                    self._count_landed(name)
                    data, stamp = store.load(name)
                    note = self.merge(name, data, "was also written by another surface", stamp)
                    notes += [note] if note else []
                data = self.conv.snapshot(share=True, checkpoints=False)
                written = self.append(data, stamp)
                if written is None:  # written whole: with every checkpoint
                    data = self.conv.snapshot(share=True)
                    written = store.write(name, data)
                    self.conv.wrote_whole(data)
                    self.note_file(data, len(self.conv.history), written)
                else:
                    self.file = self.file._replace(stamp=written, count=len(self.conv.history))
                stamp = written
        except SessionError as exc:
            # An explicit save (or the last write on exit) has no next turn to try again.
            problem = str(exc) if force else f"{exc} (the conversation is still in memory; the next turn tries again)"
            if problem == self.write_problem and not force:  # a full disk: said at the first turn
                return []
            self.write_problem = problem
            return [problem]
        self.write_problem = None
        if self.conv.read_only:  # the home can be written after all (remounted, space freed): persist again
            self.conv.read_only = None
            if self.conv.transcript is not None:
                self.conv.transcript.enabled = self.conv.settings.session_transcript
        self.stamp = stamp
        self.synced_count = len(self.conv.history)
        self.rewrite_base = None
        return notes + self.size_notes(name, stamp)

    def merge(self, name: str, data: SessionData, what: str, stamp: Stamp) -> str:
        """Make the history the file's, followed by our messages the file does not have yet.
        After a rewrite of ours not yet written (/compact, /rewind), ours comes first instead:
        the rewritten history, then what the file gained since our last write."""
        self.conv.session = data
        if self.rewrite_base is not None:
            theirs = list(data.history[self.rewrite_base:])
            self.conv.history = list(self.conv.history) + theirs
            self.rewrite_base = len(data.history)  # still all to be written
            text = (f"Session '{name}' {what}: kept this conversation's rewritten history, then the "
                    f"file's {len(theirs)} new message(s).")
        else:
            ours = self.conv.history[self.synced_count:]
            base = self.conv.history[: self.synced_count]
            shared = shared_prefix(data.history, base)
            self.conv.history = list(data.history) + ours
            self.synced_count = len(data.history)
            if shared == len(base) == len(data.history):
                text = ""  # the same messages (read again after an append cut short): nothing to say
            elif shared == len(base):
                text = f"Session '{name}' {what}: took its {len(data.history) - shared} new message(s)"
            else:
                text = (f"Session '{name}' {what} and rewritten there: took its version "
                        f"({len(data.history)} messages)")
            if text:
                text += f", then this conversation's {len(ours)}." if ours else "."
        # The file holds its history, which the live one now starts with (after a rewrite of
        # ours it does not: that is written whole).
        self.note_file(data if self.rewrite_base is None else None, len(data.history), stamp)
        self.take_back_journal(name, data)
        self.conv.take_file_fields(data)
        return text

    def replace_history(self, messages: list[Message], reason: str, hashes: Sequence[str] | None = None) -> list[str]:
        """Replace the history (a compaction, a rewind): journal it as a rewrite (`hashes` are the
        new history's, if known) and write a bound session at once."""
        if self.rewrite_base is None:
            self.rewrite_base = self.synced_count  # what the file held when we last wrote it
        self.conv.history = messages
        self.synced_count = 0  # the file holds the replaced history: all of this is still to be written
        return self.conv.sync_transcript(reason, hashes) + self.write_through()

    def size_notes(self, name: str, stamp: Stamp) -> list[str]:
        limit = self.conv.settings.history_max_size
        if stamp.size <= limit:
            return []
        return [f"Session '{name}' is {stamp.size / 1e6:.1f} MB, above HISTORY_MAX_SIZE ({limit / 1e6:.1f} MB); "
                "/compact would shrink it. Nothing was truncated."]


def taken_back(settings, name: str | None, data: SessionData) -> tuple[list[Message], list[str]]:
    """The file as read left its last turn out (`data.left_out`: an append a crash cut short,
    or a sealed turn record that fails authentication). The journal, written before the file
    at every turn, holds it: when the journal's live history is the file's followed by more,
    those are the messages to put back, before the file is ever written again (the next write
    rewrites it whole, with them). Returns them and the line that says so."""
    if not data.left_out:
        return [], []
    what = (f"session '{name}': its last turn record is damaged (it fails authentication)"
            if data.left_out == "damaged" else f"session '{name}': the write of its last turn was cut short")
    taken = _journal_tail(settings, data)
    if not taken:
        return [], [f"{what}; the file reads as it was before that turn (its journal holds nothing more)"]
    return taken, [f"{what}; its {len(taken)} message(s) were taken back from the session's journal "
                   "(the file is written whole at the next write)"]


def _journal_tail(settings, data: SessionData) -> list[Message]:
    """The messages the session's journal has live after `data.history` (none when the journal
    does not continue it exactly, or cannot be read whole)."""
    from chatcli.core import journal as rules
    from chatcli.core.errors import ChatcliError

    if not data.transcript_id or not ID_RE.fullmatch(data.transcript_id):
        return []
    try:
        state = rules.replay(Home.of(settings).journal(data.transcript_id).read().events)
    except (ChatcliError, OSError):
        return []
    hashes = rules.history_hashes(data.history)
    if len(state.live) <= len(hashes) or state.live[: len(hashes)] != hashes:
        return []
    taken, missing = state.history(state.live[len(hashes):])
    return [] if missing else taken
