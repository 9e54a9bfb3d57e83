"""Keeps a conversation's transcript journal in step with its live history (SPEC §7).

`sync(history)` runs at each sync point (the end of every chat turn, and before a session
document that names the journal is written). It compares the whole live history with what
the journal last recorded: a pure extension appends the new messages; anything else appends
the messages the journal has never seen plus one rewrite event.

Cost per turn does not grow with the journal: the journal is read once (the first sync after
a load), then only what other writers appended since; and while the history list has only
grown since the last sync (`History.version` unchanged), only the new tail is hashed.
"""

from __future__ import annotations

import array
import collections
import contextlib
import datetime
import operator
import os
import struct
from collections.abc import Sequence

from chatcli.config.settings import Settings
from chatcli.core import journal as rules
from chatcli.core.errors import ChatcliError
from chatcli.core.messages import History, Message
from chatcli.store.home import Home
from chatcli.store.journal import ID_RE, Journal, JournalError, Reading


# A sync that records more messages than this (a whole history another program wrote) makes and
# writes their lines a chunk at a time: 100,000 lines at once would hold every line's dictionary.
STREAMED_LINES = 2_000

# The size from which a journal's last `synced` line is trusted at the first sync after a load
# rather than the journal read whole (see TranscriptSync._trust): ~1,000 messages of 1 KB.
TRUST_FROM = 1 << 20


def now_text() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def new_id() -> str:
    return os.urandom(12).hex()


def continues(journal: Journal, history: Sequence[Message]) -> bool:
    """Whether `history` (a session file that names no journal) continues the conversation
    `journal` records, so that the session may take the journal back: the journal recorded at
    least two of its messages that are not system messages, wherever they are (another program
    added turns after them, or compacted or trimmed the older ones before them), or all of them.
    Taking back too readily costs little (a session made again under the same name, starting
    with the very same exchange, continues in the old journal, which records the change as a
    rewrite); not taking back leaves the journal an orphan that pruning deletes, with the
    originals of every compaction in it."""
    try:
        state = rules.replay(journal.read().events)
    except ChatcliError:  # unreadable (damaged, another key): not a record to take back blindly
        return False
    if not state.positions:
        return False
    known = [digest in state.positions for digest in rules.history_hashes(history)]
    told = [index for index, message in enumerate(history) if message.role != "system"]
    return (bool(known) and all(known)) or sum(1 for index in told if known[index]) >= 2



SCANNED_LOOKUPS = 64  # new messages a sync looks up one by one in a trusted prefix (`_prime`)
_CONTENT = operator.attrgetter("content")
_LENGTH = struct.Struct("q")


def _found(packed: bytes, value: int, end: int):
    """The positions before `end` of `value` among the 8-byte integers `packed` holds."""
    needle, limit = _LENGTH.pack(value), 8 * end
    at = packed.find(needle, 0, limit)
    while at >= 0:
        if at % 8 == 0:
            yield at // 8
            at = packed.find(needle, at + 8, limit)
        else:  # the bytes straddle two lengths
            at = packed.find(needle, at + 1, limit)


class TranscriptSync:
    """One conversation's side of its journal. A journal belongs to one session: the one whose
    file names it (or, before any, the unsaved conversation that started it). Whenever the
    conversation becomes a copy (fork, save-as, detach, continuing a machine session), it moves
    to a new journal seeded with the old one's events (`seed_fork` then `switch`)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.home = Home.of(settings)
        self.enabled = settings.session_transcript
        self.id: str | None = None
        self._problem: str | None = None  # the last problem reported (said once)
        self._reset()

    def _reset(self) -> None:
        # Lines of the journal found damaged or out of place (as far as it was read), and how
        # many of them a `synced` line records as said: more than said is said once, and the
        # next `synced` line records it, so that later processes say nothing of it again.
        self._damaged = self._stray = 0
        self._damage_recorded = 0
        self._loaded = False  # the journal's state (live hashes, known set) has been read
        self._offset = 0
        self._identity: tuple[int, int] | None = None  # (device, inode) of the file we read
        self._live: list[str] = []  # the live history as the journal records it
        self._known: set[str] = set()
        # What our last sync saw: the list object, its version and length, and its hashes.
        self._list: History | None = None
        self._version = -1
        self._hashes: list[str] = []
        self._counts: dict[str, int] = {}
        # Trusted from the journal's last line (`_trust`) rather than read: the first `_base`
        # messages of the history are the journal's live ones, not hashed (`_hashes` holds the
        # hashes of those after them); `_dead` hashes of the journal are not live; `_last` is
        # the live history's last hash.
        self._base = 0
        self._dead = 0
        self._last = ""
        self._lengths: bytes | None = None  # the trusted prefix's content lengths, packed (`_occurrences`)
        self._by_length: dict[int, list[int]] | None = None

    def small(self) -> bool:
        """The journal is small enough to read whole at a turn (under TRUST_FROM, what the first
        turn after a load reads anyway): as far as this process knows it, or by its size."""
        if self._loaded:
            return self._offset < TRUST_FROM
        try:
            return self.home.journal(self.id).size() < TRUST_FROM if self.id else True
        except (OSError, JournalError):
            return True

    @property
    def journal(self) -> Journal | None:
        return self.home.journal(self.id) if self.enabled and self.id else None

    def attach(self, transcript_id: str | None) -> None:
        """Follow the journal a session names (it was loaded): read at the next sync. An id
        that cannot name a journal file (another tool's) gets a fresh journal instead."""
        if transcript_id is not None and not ID_RE.fullmatch(transcript_id):
            transcript_id = None
        if transcript_id != self.id or transcript_id is None:
            self.id = transcript_id
            self._reset()

    def seed_fork(self) -> str | None:
        """Create a new journal seeded with this one's events and return its id, without
        switching to it (the caller switches once the copy's session file is written)."""
        if not self.enabled:
            return None
        fork_id = new_id()
        parent = self.journal
        if parent is not None and parent.exists():
            with contextlib.suppress(JournalError):  # unseeded, it records the live history at its first sync
                self.home.journal(fork_id).seed_fork(parent, now_text())
        return fork_id

    def discard(self, fork_id: str | None) -> None:
        """Remove a seeded journal that no session came to name (the copy failed)."""
        if fork_id:
            with contextlib.suppress(OSError, JournalError):
                self.home.journal(fork_id).remove()

    def switch(self, fork_id: str | None) -> None:
        """Write the seeded journal from now on."""
        self.id = fork_id
        self._reset()

    def sync(self, history: Sequence[Message], reason: str | None = None,
             hashes: Sequence[str] | None = None, extra: Sequence[dict] = ()) -> list[str]:
        """Record what the journal lacks. Never raises: a journal problem is a note (one line),
        and the session file is written all the same. `reason` goes on a rewrite event;
        `hashes`, when the caller knows them, are `history`'s (they spare hashing it)."""
        if not self.enabled:
            return []
        if self.id is None:
            if not history and not extra:
                return []
            self.id = new_id()
        try:
            notes = self._sync(history, reason, hashes, extra)
            self._problem = None
            return notes
        except JournalError as exc:
            self._list = None  # compare everything next time
            return self._report(f"{exc} (the transcript will be completed at the next sync)")
        except Exception as exc:  # noqa: BLE001 - a journal must never cost a turn
            self._list = None
            return self._report(f"transcript journal {self.id}: {type(exc).__name__}: {exc} "
                                "(the transcript will be completed at the next sync)")
        except BaseException:  # interrupted mid-sync: start from the file next time
            self._reset()
            raise

    def _report(self, problem: str) -> list[str]:
        """A journal problem, said once: the same one again at the next turns (a full disk, a
        read-only home) is not repeated until a sync has worked in between."""
        if problem == self._problem:
            return []
        self._problem = problem
        return [problem]

    def forget_problem(self) -> None:
        self._problem = None

    @property
    def problem(self) -> str | None:
        """Why the last sync could not record what it should have (None when it did)."""
        return self._problem

    def _damage_note(self) -> list[str]:
        """Damage found in the journal (any kind of line: a message, a checkpoint, a `synced`
        line) that no `synced` line records as said, said once."""
        if self._damaged + self._stray <= self._damage_recorded:
            return []
        self._damage_recorded = self._damaged + self._stray  # written with this sync's `synced` line
        skipped = Reading(damaged=self._damaged, stray=self._stray).describe_skipped()
        return [f"transcript journal {self.id}: skipped {skipped} that cannot be read or do not belong there; "
                "any message they held was recorded again from this conversation (a /rewind point they held is "
                "gone), and recording goes on"]

    def _trust(self, journal: Journal, history: Sequence[Message]) -> None:
        """Before the first sync after a load: when the journal's last line is the `synced` line
        a sync left, nothing was written since, and it describes the live history the journal
        records. If that is the start of `history` (same length, same last message) and the
        journal holds nothing besides, it is taken as recorded without reading or hashing it:
        a turn then costs the same on a 100,000-message session as on a new one. Anything else
        reads the journal as before.

        Reading a journal whole checks every line (SPEC §7: damage is found, said once, and what
        it cost is recorded again). Below TRUST_FROM bytes that costs little and is still done
        at the first sync; above, damage is found when the journal is next read whole (/rewind,
        export, /storage, the search index)."""
        found = journal.last_event()
        if found is None or not isinstance(history, History) or found[1] < TRUST_FROM:
            return
        event, size, identity = found
        count, last = event.get("count"), event.get("last")
        if event["type"] != rules.SYNCED or event["dead"] != 0 or not 0 < count <= len(history):
            return
        self._base = count
        if self._hash_in_prefix(history, count - 1) != last:
            self._base = 0
            return
        self._loaded, self._offset, self._identity = True, size, identity
        self._damaged, self._stray = rules.damage_said(event), 0
        self._damage_recorded = self._damaged
        self._hashes = self._live = []
        self._known, self._counts, self._dead, self._last = set(), {}, 0, last
        self._list, self._version = history, history.version

    def _hash_in_prefix(self, history: Sequence[Message], index: int) -> str:
        """The journal hash of `history[index]`, within the trusted prefix, without hashing the
        others: only messages of the same length of content can be the same message."""
        message = history[index]
        digest = rules.content_digest(message)
        seen = self._occurrences(history, message, digest, index)
        return digest if seen == 0 else f"{digest}.{seen}"

    def _occurrences(self, history: Sequence[Message], message: Message, digest: str, end: int) -> int:
        """How many of the trusted prefix's first `end` messages are `message` (by `digest`).
        Only a message whose content is as long can be it. The prefix's lengths are packed once
        (8 bytes each, in C: 4 ms at 100,000 messages) and a lookup finds its length there with
        bytes.find (tens of µs), so that a turn costs no more on a long session than a short
        one; a sync with a long tail to look up (`_prime`) groups them by length first."""
        lengths = self._packed_lengths(history)
        content, role = message.content, message.role
        if self._by_length is not None:
            positions = (position for position in self._by_length.get(len(content), ()) if position < end)
        else:
            positions = _found(lengths, len(content), end)
        return sum(1 for position in positions if history[position].content == content
                   and history[position].role == role and rules.content_digest(history[position]) == digest)

    def _packed_lengths(self, history: Sequence[Message]) -> bytes:
        """The trusted prefix's content lengths, 8 bytes each (made once)."""
        if self._lengths is None:
            self._lengths = array.array("q", map(len, map(_CONTENT, history[: self._base]))).tobytes()
        return self._lengths

    def _prime(self, history: Sequence[Message], start: int) -> None:
        """Occurrence counts, in the trusted prefix, of the messages after `start`."""
        if len(history) - start > SCANNED_LOOKUPS and self._by_length is None and self._base:
            index: dict[int, list[int]] = {}
            for position, length in enumerate(array.array("q", self._packed_lengths(history))):
                index.setdefault(length, []).append(position)
            self._by_length = index
        for message in history[start:]:
            digest = rules.content_digest(message)
            if digest not in self._counts:
                self._counts[digest] = self._occurrences(history, message, digest, self._base)

    def _materialise(self, history: Sequence[Message]) -> None:
        """Hash the trusted prefix after all (a checkpoint's hash list needs it)."""
        prefix = rules.history_hashes(history[: self._base])
        self._hashes = self._live = prefix + self._hashes
        self._known.update(prefix)
        self._counts = rules.occurrence_counts(self._hashes)
        self._base, self._lengths, self._by_length = 0, None, None

    def _sync(self, history: Sequence[Message], reason: str | None, known: Sequence[str] | None,
              extra: Sequence[dict] = ()) -> list[str]:
        journal = self.home.journal(self.id)
        notes: list[str] = []
        if not self._loaded:
            self._trust(journal, history)
        with journal.appending(self._offset if self._loaded else 0) as append:
            if self._loaded and (append.identity != self._identity or append.replaced):
                # Deleted, replaced or truncated under us: record the whole live history again.
                self._reset()
                append.reread()
            tail = None
            if self._only_grew(history, append.new):
                n = self._base + len(self._hashes)
                if self._base:
                    self._prime(history, n)
                # Occurrence counts change only if the write succeeds: new counts go to the front map.
                counts = collections.ChainMap({}, self._counts)
                tail = rules.history_hashes(history[n:], counts)
                if any(digest in self._known for digest in tail):  # messages it holds, back again
                    tail = None
            if tail is None and self._base:  # trusted, not read: this sync needs the journal's whole state
                self._reset()
                append.reread()
            if tail is not None:
                fresh, rewrite, hashes = range(n, n + len(tail)), False, None
                count, last, dead = n + len(tail), tail[-1] if tail else self._last, self._dead
            else:
                self._absorb(append.new)
                self._offset = append.new.end
                if known is not None and len(known) == len(history):
                    hashes = list(known)
                    counts = collections.ChainMap(rules.occurrence_counts(hashes), {})
                else:
                    counts = collections.ChainMap({}, {})
                    hashes = rules.history_hashes(history, counts)
                fresh, rewrite = rules.plan_sync(self._live, self._known, hashes)
                tail = None
                count, last = len(hashes), hashes[-1] if hashes else ""
                dead = len(self._known) + len(fresh) - count
            notes = self._damage_note()
            time = now_text()
            digest = (lambda i: tail[i - n]) if hashes is None else hashes.__getitem__
            recorded = self._base + len(self._known)  # message lines in the journal before these
            streamed = len(fresh) > STREAMED_LINES
            if streamed:  # a whole history at once: its lines made and written a chunk at a time
                for start in range(0, len(fresh), STREAMED_LINES):
                    append.write([rules.message_line(digest(i), history[i], time)
                                  for i in fresh[start:start + STREAMED_LINES]], durable=False)
                events = []  # (the search index reads so many at the next search)
            else:
                events = [rules.message_line(digest(i), history[i], time) for i in fresh]
            if rewrite:
                events.append(rules.rewrite_line(hashes, time, reason))
            events.extend(extra)
            if events or notes or streamed:  # damage said is recorded as said, even when nothing else is written
                events.append(rules.synced_line(count, last, dead, self._damaged + self._stray))
                append.write(events)
            self._offset = append.size
            self._identity = append.identity
        if fresh:  # searchable at once: the index takes this sync's messages (when it is up to date)
            from chatcli.engine.records import index_recorded

            index_recorded(self.settings, journal, recorded, self._offset, events)
        self._dead, self._last = dead, last
        if hashes is None:
            self._counts.update(counts.maps[0])
        else:
            self._counts = counts.maps[0]
        if hashes is None:  # `_live` and `_hashes` are one list: extend it
            self._hashes.extend(tail)
            self._known.update(tail)
        else:
            self._known.update(hashes[i] for i in fresh)
            self._hashes = self._live = hashes
        self._list = history if isinstance(history, History) else None
        self._version = history.version if isinstance(history, History) else -1
        return notes

    def live_hashes(self, history: Sequence[Message]) -> tuple[str, ...] | None:
        """The hashes of `history` as the journal records them, if the last sync recorded exactly
        this history (None otherwise: not synced, or changed since)."""
        if self.enabled and not history:
            return ()
        if (self.enabled and self._loaded and history is self._list and isinstance(history, History)
                and history.version == self._version and len(history) == self._base + len(self._hashes)):
            if self._base:
                self._materialise(history)
            return tuple(self._hashes)
        return None

    def events(self) -> list[dict]:
        """Every event of the journal (a missing one has none). Read once: a sync after this
        reads only what was appended since. Raises JournalError."""
        journal = self.journal
        if journal is None:
            return []
        reading = journal.read()
        if not self._loaded and reading.identity is not None:
            self._absorb(reading)
            self._offset, self._identity = reading.end, reading.identity
        return reading.events

    def ahead(self, event: dict) -> bool:
        """Write `event` (a checkpoint of a history's first `count` messages) as the first line of a journal that holds
        nothing yet, fsync'd, before the messages it names are recorded; whether it was (not
        when the journal holds anything, or cannot be written: the caller records it as before)."""
        if not self.enabled or self.id is None:
            return False
        try:
            with self.home.journal(self.id).appending(0) as append:
                if append.size:
                    return False
                append.write([event])
        except JournalError:
            return False
        self._reset()  # the next sync reads the journal from its start, this line with it
        return True

    def recorded(self) -> list[dict]:
        """Every event of the journal, even while journaling is off (its checkpoints are still
        there to restore). Raises JournalError."""
        if self.enabled:
            return self.events()
        return self.home.journal(self.id).read().events if self.id else []

    def _only_grew(self, history: Sequence[Message], new) -> bool:
        """Nothing but appends since our last sync, on both sides: the history list is the one
        we hashed, unmodified but for appends, and no one else wrote the journal. Then only the
        tail needs hashing and comparing (a turn costs the same at any size)."""
        return (self._loaded and not new.events and not (new.foreign or new.stray or new.damaged)
                and isinstance(history, History)
                and history is self._list and history.version == self._version
                and len(history) >= self._base + len(self._hashes) and self._live is self._hashes)

    def _absorb(self, new) -> None:
        """Bring the journal's state up to date with events read (all of them, the first time)."""
        said = [rules.damage_said(event) for event in new.events if event["type"] == rules.SYNCED]
        if not self._loaded:
            self._damaged, self._stray, self._damage_recorded = new.damaged, new.stray, (said[-1] if said else 0)
        else:  # lines other writers appended: their damage adds up; their `synced` line may have said it
            self._damaged += new.damaged
            self._stray += new.stray
            if said:
                self._damage_recorded = max(self._damage_recorded, said[-1])
        if self._loaded and not new.events:
            return
        state = rules.Replay()
        if self._loaded:
            state.live = list(self._live)
            state.positions = dict.fromkeys(self._known, 0)
        state.apply(new.events)
        self._live, self._known, self._loaded = state.live, set(state.positions), True


__all__ = ["TranscriptSync", "continues", "new_id", "now_text"]
