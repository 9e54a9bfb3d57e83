"""The conversation engine: holds the history, the provider and the session binding."""

from __future__ import annotations

import contextlib
import threading
from collections import namedtuple
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from chatcli.config.settings import Settings
from chatcli.core import checkpoints as rewind_points
from chatcli.core import journal as journal_rules
from chatcli.core.bootstrap import compose_system_prompt
from chatcli.core.compaction import estimate_tokens, plan_cut, recent_window
from chatcli.core.errors import ChatcliError, ProviderError
from chatcli.core.messages import History, Message, shared_prefix
from chatcli.core.names import is_machine_name
from chatcli.core.session import SessionData
from chatcli.engine import compaction, recall
from chatcli.engine.transcript import TranscriptSync, now_text
from chatcli.engine.transcript import new_id as new_transcript_id
from chatcli.providers.base import (
    Delta,
    Done,
    Provider,
    ProviderRegistry,
    Request,
    ToolCall,
    default_registry,
    streaming,
)
from chatcli.store.bootstrap import read_bootstrap
from chatcli.store.home import Home
from chatcli.store.sessions import SessionError, SessionStore, Stamp

# How many times in one turn the model may call tools before it must answer.
MAX_TOOL_ROUNDS = 4


def load_system_prompt(settings: Settings, cwd: Path | None = None) -> tuple[str, list[str]]:
    """The system prompt composed from the bootstrap files, and warnings about unreadable ones."""
    parts, warnings = read_bootstrap(settings.bootstrap_dirs(cwd))
    return compose_system_prompt(parts), warnings


# What the bound file holds (Conversation._note_file): as of `stamp`, the first `count` messages
# of `history` (at `version`) and, serialised, every other field (`head`).
FileMark = namedtuple("FileMark", "stamp history version count head")


@dataclass(frozen=True)
class TurnResult:
    text: str
    interrupted: bool = False
    done: Done | None = None
    # Lines about what happened to the session after the answer (merged, unbound, too large…).
    notes: tuple[str, ...] = ()

    @property
    def truncated(self) -> bool:
        """The answer stopped at the token limit rather than where the model meant to end."""
        return self.done is not None and self.done.stop_reason in ("length", "max_tokens")

    @property
    def window_full(self) -> bool:
        """The answer stopped because the message left it no more room in the context window."""
        return self.done is not None and self.done.stop_reason == "context_window"


class Conversation:
    """One live conversation. Front ends drive it; it never prints.

    The bootstrap system prompt is sent with every request and never enters `history`.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        system_prompt: str = "",
        registry: ProviderRegistry | None = None,
        journal: bool = False,
    ) -> None:
        self.settings = settings
        self.system_prompt = system_prompt
        self.registry = registry or default_registry()
        self.history = History()
        # The transcript journal (SPEC §7): kept by conversations that persist (the REPL, a bound
        # one-shot); None for a one-shot that writes nothing. Off with CHATCLI_SESSION_TRANSCRIPT.
        self.transcript: TranscriptSync | None = TranscriptSync(settings) if journal else None
        # The session fields carried with this conversation (title, attachments, unknown fields…).
        self.session = SessionData()
        # The name of the bound session (prompt shows `[name] model> `); None when unbound.
        self.session_name: str | None = None
        # The bound file as of our last read or write, and how many messages it then held.
        self.sync_stamp: Stamp | None = None
        self.synced_count = 0
        # The /rewind checkpoints, oldest first (SPEC §8): read when first needed (see
        # `checkpoints`). `_file_checkpoints` are those the session file holds (older versions
        # kept them there), written back as they are until the list is rewritten;
        # `foreign_checkpoints` are items in a shape this version does not read.
        self._checkpoints: list[rewind_points.Checkpoint] | None = []
        self._checkpoints_rewritten = False
        self._file_checkpoints: list = []
        self.foreign_checkpoints: list = []
        self.unreadable_checkpoints = 0
        # Set while a rewrite of the history (compaction, rewind) is not yet in the bound file:
        # how many messages the file held at our last write.
        self._rewrite_base: int | None = None
        # What the bound file holds, when a turn can be appended to it in place (see _note_file).
        self._file: FileMark | None = None
        self._full_window_said = False  # the "compacting would not help" note is given once
        self._too_large_said = False  # the "too large to summarise" note too
        # Why nothing can be saved this run (CHATCLI_HOME read-only, say), once a front end found
        # it at start-up and said so: no journal, no autosave, no write-through attempts.
        self.read_only: str | None = None
        self._loaded_mark: tuple | None = None  # see mark_loaded
        self._write_problem: str | None = None  # the last write-through failure said (said once)
        self._auto_compact_after = 0  # after a failed automatic compaction: not before this length
        self._window_from = 0  # this turn sends the history from here on (see _auto_compact)
        self._store: SessionStore | None = None
        self._provider: Provider | None = None
        self._provider_lock = threading.Lock()  # warm() may create it from a background thread

    @property
    def history(self) -> History:
        return self._history

    @history.setter
    def history(self, messages) -> None:
        self._history = messages if isinstance(messages, History) else History(messages)

    @property
    def provider(self) -> Provider:
        """The provider object, created on first use so start-up imports nothing heavy."""
        with self._provider_lock:
            if self._provider is None:
                self._provider = self.registry.create(self.settings)
            return self._provider

    def switch_provider(self, name: str) -> None:
        """Use another provider; its model follows SPEC §2 precedence for that provider."""
        self._replace(self.settings.with_provider(name))

    def switch_model(self, model: str) -> None:
        self._replace(self.settings.with_model(model))

    def _replace(self, settings: Settings) -> None:
        # Build the new provider first: a missing key or model file fails here and changes nothing.
        provider = self.registry.create(settings)
        with self._provider_lock:
            self.settings, self._provider = settings, provider

    @property
    def store(self) -> SessionStore:
        if self._store is None:
            self._store = Home.of(self.settings).sessions()
        return self._store

    # -- binding (SPEC §6.1) ----------------------------------------------------------------
    def bind(self, name: str | None, data: SessionData, stamp: Stamp | None) -> None:
        """Make `data` the live conversation, bound to `name` unless that is a machine-made session."""
        self.session = data
        self.history = data.history
        self.session_name = None if name is None or is_machine_name(name) else name
        self.sync_stamp = stamp if self.session_name else None
        self.synced_count = len(self.history)
        self._rewrite_base = None
        self._read_checkpoints(data)
        self._note_file(data, len(self.history), self.sync_stamp)
        if self.transcript is not None:
            self.transcript.attach(data.transcript_id)

    def _note_file(self, data: SessionData | None, count: int, stamp: Stamp | None) -> None:
        """The bound file, as of `stamp`, is `data`: the first `count` messages of the live history
        and `data`'s other fields. While only the history grows after that, a write-through
        appends the new messages to the file instead of rewriting it (`_append`)."""
        if data is None or stamp is None or not data.appendable or self.session_name is None:
            self._file = None
            return
        head = self.store.head(data)
        self._file = None if head is None else FileMark(stamp, self.history, self.history.version, count, head)

    def _append(self, data: SessionData, stamp: Stamp | None) -> Stamp | None:
        """Write a turn by appending its messages to the file, when the file is still the one
        `_note_file` saw (`stamp`), the history has only grown since, and nothing else changed.
        None when it cannot be done that way (the caller writes the file whole)."""
        mark = self._file
        if mark is None or stamp != mark.stamp:
            return None
        history, count = mark.history, mark.count
        if history is not self.history or mark.version != history.version or len(history) < count:
            return None
        if self.store.head(data) != mark.head:
            return None
        if len(history) == count:
            return stamp  # nothing new: the file already is this conversation
        return self.store.append(self.session_name, history[count:], count, stamp)

    def _read_checkpoints(self, data: SessionData) -> None:
        """The session's checkpoints are the file's (an older version's) and the journal's: read
        when /rewind needs them, never at a turn (a turn's checkpoint is one journal line)."""
        self._file_checkpoints = [item for item in data.checkpoints if rewind_points.is_ours(item)]
        self.foreign_checkpoints = [item for item in data.checkpoints if not rewind_points.is_ours(item)]
        self._checkpoints = None
        self._checkpoints_rewritten = False

    @property
    def checkpoints(self) -> list[rewind_points.Checkpoint]:
        """The /rewind checkpoints, oldest first: the session file's, then those its journal
        records, then any this process took that no journal holds."""
        if self._checkpoints is None:
            stored, _foreign, self.unreadable_checkpoints = rewind_points.decode(self._file_checkpoints)
            events = []
            if self.transcript is not None:
                from chatcli.store.journal import JournalError

                try:
                    events = self.transcript.recorded()
                except JournalError:
                    events = []  # rewind says why the journal cannot be read, and keeps what it can
            self._checkpoints = rewind_points.from_journal(events, stored)
        return self._checkpoints

    @checkpoints.setter
    def checkpoints(self, value: list[rewind_points.Checkpoint]) -> None:
        """A rewritten list (a /rewind dropped some, a compaction added one): the journal records
        it whole at the next sync."""
        self._checkpoints = value
        self._checkpoints_rewritten = True

    def unbind(self) -> None:
        self.session_name = None
        self.sync_stamp = None

    def snapshot(self, share: bool = False) -> SessionData:
        """The live conversation as a session document: carried fields plus the current history
        (the live list itself with `share`, for a document written at once: no copy per turn)."""
        s = self.session
        data = SessionData(self.history if share else list(self.history), s.title, s.transcript_id,
                           list(s.attachments), list(s.checkpoints), list(s.shared_memory), dict(s.extra), s.source)
        if self.transcript is not None and self.transcript.id:
            data.transcript_id = self.transcript.id
        # A rewritten list the journal could not take stays in the file until it can.
        mine = rewind_points.encode(self._checkpoints) if self._checkpoints_rewritten else self._file_checkpoints
        data.checkpoints = self.foreign_checkpoints + mine
        return data

    def checkpoint(self, label: str, command: bool = False) -> list[str]:
        """Remember the history as it is now, to come back to with /rewind: one journal line,
        written with the sync that precedes it, whose place in the journal says which history
        it is (another process rebuilds it from there). Without a journal (off, or failing),
        this process keeps the messages themselves."""
        time = now_text()
        line = journal_rules.checkpoint_line(time, label, command)
        notes = self.sync_transcript(extra=(line,))
        journaled = self.transcript is not None and self.transcript.enabled and self.transcript.problem is None
        if journaled and not self._checkpoints_rewritten and (self._checkpoints is None or not command):
            # In the journal now, with the rest: read again when /rewind next needs them (taking
            # it here would copy the whole history's hashes at every turn). A command's checkpoint
            # joins a list already read: the command works on it (/rewind keeps what it dropped).
            self._checkpoints = None
            return notes
        hashes = self.transcript.live_hashes(self.history) if journaled else None
        points = self.checkpoints
        point = rewind_points.take(time, label, self.history, hashes, points, command)
        self._checkpoints = rewind_points.capped([*points, point])
        return notes

    def sync_transcript(self, reason: str | None = None, hashes: Sequence[str] | None = None,
                        claim: bool = True, extra: Sequence[dict] = ()) -> list[str]:
        """Record in the journal whatever of the live history it lacks (a sync point); `reason`
        names what rewrote the history, if it was rewritten; `hashes` are the history's, if known.
        `claim=False` when the caller holds another session's lock (the claim takes this one's).
        `extra` events follow in the same write (a checkpoint), as does a rewritten checkpoint
        list not yet recorded."""
        if self.transcript is None:
            return []
        if claim and self.transcript.id is None and self.transcript.enabled and self.session_name \
                and (self.history or extra):
            self._claim_journal()
        rewritten = self._checkpoints_rewritten and self._checkpoints is not None and self.transcript.enabled
        if rewritten:
            extra = (journal_rules.checkpoints_line(rewind_points.encode(self._checkpoints), now_text()), *extra)
        notes = self.transcript.sync(self.history, reason, hashes, extra)
        if rewritten and self.transcript.problem is None:
            self._checkpoints_rewritten = False
            self._file_checkpoints = []  # the journal's list holds them now
        if self.transcript.id:
            self.session.transcript_id = self.transcript.id
        return notes

    def _claim_journal(self) -> None:
        """The first journal of a bound session is named in its file before anything is written
        to it, under the session's lock: two surfaces starting the session's first turns at
        once then share one journal, instead of each starting its own and one of them being
        left behind, an orphan holding a turn. Best effort: on any failure the sync starts a
        journal of its own, as before."""
        name = self.session_name
        try:
            with self.store.lock(name):
                if self.store.stamp(name) is None:
                    return
                data, stamp = self.store.load(name)
                if data.transcript_id:  # another surface got there first: write that one
                    self.transcript.attach(data.transcript_id)
                    return
                data.transcript_id = new_transcript_id()
                written = self.store.write(name, data)
        except SessionError:
            return
        self.transcript.attach(data.transcript_id)
        self.session.transcript_id = data.transcript_id
        if stamp == self.sync_stamp:  # the file was ours: this write changed nothing else
            self.sync_stamp = written
            if self._file is not None and self._file.stamp == stamp:
                self._note_file(data, self._file.count, written)

    @contextlib.contextmanager
    def transcript_copy(self) -> Iterator[str | None]:
        """For a copy of this conversation under another session (fork, save-as, attach-create
        while bound elsewhere): a new journal seeded with this one's events. The block writes the
        copy's file naming it; only if that succeeds does this conversation switch to it. Two
        sessions never write the same journal."""
        # The parent is complete before it is copied (a failure shows at the next sync).
        self.sync_transcript(claim=False)
        fork_id = self.transcript.seed_fork() if self.transcript is not None else None
        try:
            yield fork_id
        except BaseException:
            if self.transcript is not None:
                self.transcript.discard(fork_id)
            raise
        if self.transcript is not None:
            self.transcript.switch(fork_id)
        self.session.transcript_id = fork_id

    def leave_transcript(self) -> None:
        """Stop writing the journal of a session this conversation no longer writes (detached,
        or a machine session continued unbound): continue in a seeded copy of it."""
        with self.transcript_copy():
            pass

    def journaling(self) -> None:
        """Keep a journal from now on (a one-shot that became bound to a session)."""
        if self.transcript is None:
            self.transcript = TranscriptSync(self.settings)
            self.transcript.attach(self.session.transcript_id)
            if self.read_only:
                self.transcript.enabled = False

    @property
    def unsynced(self) -> int:
        """Messages of a bound conversation that are not yet in its file (a write failed, or
        write-through is off)."""
        return len(self.history) - self.synced_count if self.session_name else 0

    def adopt(self) -> list[str]:
        """Before a turn: take over what other surfaces wrote to the bound session since our last
        sync. Messages of ours not yet written are kept after the file's (and written next)."""
        name = self.session_name
        if name is None or not self.settings.session_writethrough:
            return []
        stamp = self.store.stamp(name)
        if stamp == self.sync_stamp:
            return []
        if stamp is None:
            self.unbind()
            return [f"Session '{name}' was deleted elsewhere; unbound (the conversation stays in memory)."]
        try:
            data, stamp = self.store.load(name)
        except SessionError as exc:
            self.unbind()
            return [f"{exc}; unbound so that it is not overwritten."]
        note = self._merge(name, data, "was updated elsewhere", stamp)
        self.sync_stamp = stamp
        return [note] if note else []

    def mark_loaded(self) -> None:
        """The history is a session's as it is on disk (just loaded, or just kept elsewhere)."""
        self._loaded_mark = (self.history, self.history.version, len(self.history))

    def unchanged_since_load(self) -> bool:
        """Nothing was added to or changed in the history since `mark_loaded`: keeping it again
        (an autosave on exit, before a load) would only copy a file that is already there."""
        mark = self._loaded_mark
        return mark is not None and mark[0] is self.history and mark[1:] == (self.history.version, len(self.history))

    def go_read_only(self, cause: str) -> None:
        """Nothing can be written this run (`cause`: "read-only file system"): chat on, in memory."""
        self.read_only = cause
        if self.transcript is not None:
            self.transcript.enabled = False
            self.transcript.forget_problem()

    def write_through(self, force: bool = False) -> list[str]:
        """After a turn (or on /session save): write the bound session at once.

        If another surface wrote meanwhile, merge instead of overwriting: the file's history
        first, then our messages that it does not have. `force` writes even when
        CHATCLI_SESSION_WRITETHROUGH is off (an explicit save).
        """
        name = self.session_name
        if name is None or not (force or self.settings.session_writethrough) or (self.read_only and not force):
            return []
        notes: list[str] = []
        store = self.store
        try:
            with store.lock(name):
                stamp = store.stamp(name)
                if stamp is None and not force:
                    self.unbind()
                    return [f"Session '{name}' was deleted elsewhere; unbound and not recreated "
                            "(the conversation stays in memory)."]
                if stamp is not None and stamp != self.sync_stamp:
                    data, stamp = store.load(name)
                    note = self._merge(name, data, "was also written by another surface", stamp)
                    notes += [note] if note else []
                data = self.snapshot(share=True)
                written = self._append(data, stamp)
                if written is None:
                    written = store.write(name, data)
                    self._note_file(data, len(self.history), written)
                else:
                    self._file = self._file._replace(stamp=written, count=len(self.history))
                stamp = written
        except SessionError as exc:
            # An explicit save (or the last write on exit) has no next turn to try again.
            problem = str(exc) if force else f"{exc} (the conversation is still in memory; the next turn tries again)"
            if problem == self._write_problem and not force:  # a full disk: said at the first turn
                return []
            self._write_problem = problem
            return [problem]
        self._write_problem = None
        if self.read_only:  # the home can be written after all (remounted, space freed): persist again
            self.read_only = None
            if self.transcript is not None:
                self.transcript.enabled = self.settings.session_transcript
        self.sync_stamp = stamp
        self.synced_count = len(self.history)
        self._rewrite_base = None
        return notes + self.size_notes(name, stamp)

    def _merge(self, name: str, data: SessionData, what: str, stamp: Stamp) -> str:
        """Make the history the file's, followed by our messages the file does not have yet.
        After a rewrite of ours not yet written (/compact, /rewind), ours comes first instead:
        the rewritten history, then what the file gained since our last write."""
        mine = self._checkpoints
        self.session = data
        if self._rewrite_base is not None:
            theirs = list(data.history[self._rewrite_base:])
            self.history = list(self.history) + theirs
            self._rewrite_base = len(data.history)  # still all to be written
            text = (f"Session '{name}' {what}: kept this conversation's rewritten history, then the "
                    f"file's {len(theirs)} new message(s).")
        else:
            ours = self.history[self.synced_count:]
            base = self.history[: self.synced_count]
            shared = shared_prefix(data.history, base)
            self.history = list(data.history) + ours
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
        self._note_file(data if self._rewrite_base is None else None, len(data.history), stamp)
        rewritten = self._checkpoints_rewritten
        self._read_checkpoints(data)
        if self.transcript is not None and data.transcript_id != self.transcript.id:
            self.transcript.attach(data.transcript_id)  # the session now names another journal
        if mine is not None and (rewritten or not (self.transcript is not None and self.transcript.enabled)):
            # Checkpoints no journal holds (it is off, or our rewrite of the list is not in it yet):
            # ours are kept, with those of the file we have not got.
            stored = {(c.time, c.label, c.size) for c in self.checkpoints}
            self.checkpoints = sorted([*self.checkpoints, *(c for c in mine if (c.time, c.label, c.size) not in stored)],
                                      key=lambda c: c.time)
        return text

    def replace_history(self, messages: list[Message], reason: str, hashes: Sequence[str] | None = None) -> list[str]:
        """Replace the history (a compaction, a rewind): journal it as a rewrite (`hashes` are the
        new history's, if known) and write a bound session at once."""
        if self._rewrite_base is None:
            self._rewrite_base = self.synced_count  # what the file held when we last wrote it
        self.history = messages
        self.synced_count = 0  # the file holds the replaced history: all of this is still to be written
        return self.sync_transcript(reason, hashes) + self.write_through()

    def size_notes(self, name: str, stamp: Stamp) -> list[str]:
        limit = self.settings.history_max_size
        if stamp.size <= limit:
            return []
        return [f"Session '{name}' is {stamp.size / 1e6:.1f} MB, above HISTORY_MAX_SIZE ({limit / 1e6:.1f} MB); "
                "/compact would shrink it. Nothing was truncated."]

    def warm(self) -> None:
        """Do the slow part of the first request now (load a local model); safe from a thread."""
        warm = getattr(self.provider, "warm", None)
        if warm:
            warm()

    def send(
        self,
        text: str,
        on_text: Callable[[str], None] = lambda _t: None,
        on_notice: Callable[[str], None] | None = None,
    ) -> TurnResult:
        """Run one turn. The user's message stays in the history whatever happens.

        Ctrl-C (KeyboardInterrupt) during the answer keeps the partial answer, marked
        `meta.interrupted`, and returns normally. A provider error keeps any partial answer
        the same way, then propagates.
        """
        notice = on_notice or (lambda _text: None)
        for note in self.adopt():
            notice(note)
        for note in self._auto_compact(text):
            notice(note)
        for note in self.checkpoint(rewind_points.label_of(text)):
            notice(note)
        self.history.append(Message("user", text))
        try:
            result = self._answer(on_text, notice)
        except BaseException:
            # The user's message is recorded even when the turn failed.
            for note in self.sync_transcript() + self.write_through():
                notice(note)
            raise
        finally:
            self._window_from = 0
        return replace(result, notes=tuple(self.sync_transcript() + self.write_through()))

    def _auto_compact(self, text: str) -> list[str]:
        """Before a turn: compact when the request would fill CHATCLI_AUTO_COMPACT of the context
        window (SPEC §8), and say so in one line. Only when it helps: the part a summary would
        replace must be at least a quarter of the request (otherwise it says so, once, and
        leaves the history alone; a compaction does not repeat at every turn). A failure is a
        note, the turn goes on, and the next attempt waits four turns; Ctrl-C or a signal stops
        the turn before anything was sent.

        Never compacted automatically: a session just loaded, at its first turn, and one whose
        older part is more than a summary request can carry. A turn whose request would not fit
        the window at all (those, or after a failed compaction) sends the latest messages that
        fit, after the system messages and summaries before them (`_sent`), and says so."""
        share = self.settings.auto_compact
        window = self.settings.context_tokens
        used = estimate_tokens(self.system_prompt, self.history, text)
        if not share or used < share * window:
            return []
        too_big = used > window
        if len(self.history) < self._auto_compact_after:  # a compaction failed lately: said then
            if too_big:
                self._window_view(text)
            return []
        cut = plan_cut(self.history, compaction.KEEP_RECENT)
        if cut is None:
            if too_big:
                self._window_view(text)
            return []  # nothing old enough to summarise
        percent = used * 100 // window
        summarisable = estimate_tokens("", [self.history[i] for i in cut.summarised]) <= window
        if self.unchanged_since_load() or not summarisable:
            # Not rewritten before the user has said a word in it, nor by a summary request that
            # no model would take: this turn sends the latest messages that fit, and says so.
            sent = self._window_view(text)
            later = ("later turns compact automatically" if summarisable else
                     "it is too large to summarise in one request, so later turns send their latest messages too")
            note = (f"This session holds about {used:,} tokens, {percent:,}% of the {window:,}-token context window. "
                    f"Nothing was compacted: this turn sends its latest {sent:,} of {len(self.history):,} messages "
                    f"(/compact summarises the older ones; {later}).")
            if not summarisable:
                if self._too_large_said:
                    return []  # said once: every turn of such a session does the same
                self._too_large_said = True
            return [note]
        left = estimate_tokens(self.system_prompt, [*(self.history[i] for i in cut.kept_system),
                                                    *self.history[cut.index:]], text)
        if used - left < used / 4:
            if too_big:
                self._window_view(text)
            if self._full_window_said:
                return []
            self._full_window_said = True
            return [f"The conversation is at about {percent:,}% of the {window:,}-token context window, mostly in "
                    "its latest messages; compacting the older ones would not free enough, so it was not done."]
        head = f"Automatic compaction (about {percent:,}% of the {window:,}-token context window)"
        try:
            outcome = compaction.compact(self, label="/compact (automatic)")
        except ChatcliError as exc:
            self._auto_compact_after = len(self.history) + 8
            if too_big:
                sent = self._window_view(text)
                return [f"{head} failed: {exc}; this turn sends the latest {sent:,} messages that fit (the next try "
                        "in four turns)."]
            return [f"{head} failed: {exc}; the whole history is sent (the next try in four turns)."]
        self._full_window_said = False
        return [f"{head}: {outcome.text[:1].lower()}{outcome.text[1:]}", *outcome.notes]

    def _window_view(self, text: str) -> int:
        """This turn sends only the latest messages that fit (see `_sent`); how many."""
        budget = int(self.settings.auto_compact * self.settings.context_tokens) \
            - estimate_tokens(self.system_prompt, (), text)
        self._window_from = recent_window(self.history, budget)
        return len(self.history) - self._window_from

    def _answer(self, on_text: Callable[[str], None], notice: Callable[[str], None]) -> TurnResult:
        """Stream the answer. When the provider can call tools and a summary names recall
        entries, the model may fetch them (SPEC §8.1): each call and its result join the
        history as a pair, and the model is asked again, at most MAX_TOOL_ROUNDS times."""
        parts: list[str] = []
        done: Done | None = None
        rounds = 0
        supports = getattr(self.provider, "supports_tools", False)
        try:
            while True:
                # Offered while a summary names recall entries, and described whenever the
                # history holds tool calls (Anthropic refuses tool blocks of undefined tools);
                # after MAX_TOOL_ROUNDS the model must answer in text.
                summary, called = recall.tool_state(self.history)
                tools = (recall.TOOL,) if supports and (summary or called) else ()
                choice = "auto" if summary and rounds < MAX_TOOL_ROUNDS else "none"
                request = Request(
                    model=self.settings.model,
                    messages=self._sent(),
                    system=self.system_prompt,
                    timeout=self.settings.timeout,
                    max_tokens=self.settings.max_tokens,
                    on_retry=notice,
                    tools=tools,
                    tool_choice=choice,
                )
                parts, calls = [], []
                with streaming(self.provider, request) as events:
                    for event in events:
                        if isinstance(event, Delta):
                            parts.append(event.text)
                            on_text(event.text)
                        elif isinstance(event, ToolCall):
                            calls.append(event)
                        elif isinstance(event, Done):
                            done = event
                if not calls or choice == "none":
                    break
                rounds += 1
                self._run_tools("".join(parts), calls, notice)
                if parts:
                    on_text("\n\n")
        except KeyboardInterrupt:
            answer = "".join(parts)
            self.history.append(Message("assistant", answer, meta={"interrupted": True}))
            return TurnResult(answer, interrupted=True)
        except ProviderError:
            if parts:
                self.history.append(Message("assistant", "".join(parts), meta={"interrupted": True}))
            raise
        answer = "".join(parts)
        self.history.append(Message("assistant", answer))
        return TurnResult(answer, done=done)

    def _sent(self) -> list[Message]:
        """The messages a request carries: the history, or on a first turn after a resume that
        does not fit (see _auto_compact) its latest part, after the system messages and
        summaries that came before it (as a compaction would keep them)."""
        start = self._window_from
        if not start:
            return list(self.history)
        kept = [m for m in self.history[:start] if m.role == "system" or m.is_summary]
        return kept + self.history[start:]

    def _run_tools(self, text: str, calls: list[ToolCall], notice: Callable[[str], None]) -> None:
        self.history.append(Message("assistant", text, tool_calls=[
            {"id": c.id, "type": "function", "name": c.name, "arguments": c.arguments} for c in calls]))
        for call in calls:
            result, problem = recall.answer(self.settings, call, self.history)
            notice(problem or f"The model read {result.splitlines()[0].removeprefix('Recall ')}")
            self.history.append(Message("tool", result, tool_call_id=call.id,
                                        extra={"is_error": True} if problem else None))
