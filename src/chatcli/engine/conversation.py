"""The conversation engine: holds the history, the provider, the journal and the session binding.

A turn runs through engine/turn.py; the binding (attach, adopt, write-through) is
engine/binding.py's; this keeps what they share: the history, the carried session fields, the
journal and the /rewind checkpoints."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from chatcli.config.settings import Settings
from chatcli.core import checkpoints as rewind_points
from chatcli.core import journal as journal_rules
from chatcli.core.bootstrap import compose_system_prompt
from chatcli.core.messages import History
from chatcli.core.session import SessionData
from chatcli.engine import turn
from chatcli.engine.agent import Agent, Approve
from chatcli.engine.binding import Binding
from chatcli.engine.transcript import TranscriptSync, now_text
from chatcli.providers.base import Provider, ProviderRegistry, Stop, default_registry
from chatcli.store.bootstrap import read_bootstrap
from chatcli.store.home import Home
from chatcli.store.sessions import SessionStore, Stamp


def load_system_prompt(settings: Settings, cwd: Path | None = None) -> tuple[str, list[str]]:
    """The system prompt composed from the bootstrap files, and warnings about unreadable ones."""
    parts, warnings = read_bootstrap(settings.bootstrap_dirs(cwd))
    return compose_system_prompt(parts), warnings


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
        # A large session of which only the ends are read yet, the rest being read in the
        # background (engine/resume.py): the history is whole once it is asked for.
        self.pending = None
        self.settled_notes: list[str] = []
        self.history = History()
        # The transcript journal (SPEC §7): kept by conversations that persist (the REPL, a bound
        # one-shot); None for a one-shot that writes nothing. Off with CHATCLI_SESSION_TRANSCRIPT.
        self.transcript: TranscriptSync | None = TranscriptSync(settings) if journal else None
        # The session fields carried with this conversation (title, attachments, unknown fields…).
        self.session = SessionData()
        # Which session it is bound to, and what that file held at our last read or write.
        self.binding = Binding(self)
        # The /rewind checkpoints, oldest first (SPEC §8): read when first needed (see
        # `checkpoints`). `_file_checkpoints` are those the session file holds (older versions
        # kept them there), written back as they are until the list is rewritten;
        # `foreign_checkpoints` are items in a shape this version does not read.
        self._checkpoints: list[rewind_points.Checkpoint] | None = []
        self._checkpoints_rewritten = False
        self._file_checkpoints: list = []
        self.foreign_checkpoints: list = []
        self.unreadable_checkpoints = 0
        self.pacing = turn.Pacing()  # what its turns remember about the context window
        # Its mode (chat, agent, coder) and what its tools may do (engine/agent.py).
        self.agent = Agent()
        # Why nothing can be saved this run (CHATCLI_HOME read-only, say), once a front end found
        # it at start-up and said so: no journal, no autosave, no write-through attempts.
        self.read_only: str | None = None
        # Sessions this conversation may not see or load (None: every one). A chat sender's
        # conversation hides the other senders' threads (gateway/hub.py).
        self.hidden: Callable[[str], bool] | None = None
        # Whether the global memory (/memory) is offered to the model: the user's conversations
        # yes; a gateway guest's (someone else's) no.
        self.memory = True
        # The requests of the last turn, as /cost shows them (engine/costs.py).
        self.turn_costs: list = []
        self._store: SessionStore | None = None
        self._provider: Provider | None = None
        self._provider_lock = threading.Lock()  # warm() may create it from a background thread

    @property
    def session_name(self) -> str | None:
        """The name of the bound session (the prompt shows `[name] model> `); None when unbound."""
        return self.binding.name

    @property
    def sync_stamp(self) -> Stamp | None:
        return self.binding.stamp

    @property
    def history(self) -> History:
        if self.pending is not None:
            self.settle()
        return self._history

    def settle(self) -> None:
        """Wait for the session being read in the background, and take it whole (engine/resume.py).
        What the user is to be told of it (it could not be bound after all…) waits in
        `settled_notes` for the turn to say."""
        pending, self.pending = self.pending, None
        if pending is not None:
            self.settled_notes.extend(pending.settle(self))

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
        self.agent.tools_refused = False  # another endpoint or model: offered tools again

    @property
    def store(self) -> SessionStore:
        if self._store is None:
            self._store = Home.of(self.settings).sessions()
        return self._store

    # -- the session document and its checkpoints ------------------------------------------
    def read_checkpoints(self, data: SessionData) -> None:
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
            events = []
            if self.transcript is not None:
                from chatcli.store.journal import JournalError

                try:
                    events = self.transcript.recorded()
                except JournalError:
                    events = []  # rewind says why the journal cannot be read, and keeps what it can
            # An earlier version's checkpoints name messages with tool calls by their hashes then.
            items = journal_rules.rekeyed_items(self._file_checkpoints, journal_rules.earlier_aliases(events))
            stored, _foreign, self.unreadable_checkpoints = rewind_points.decode(items)
            self._checkpoints = rewind_points.from_journal(events, stored)
        return self._checkpoints

    @checkpoints.setter
    def checkpoints(self, value: list[rewind_points.Checkpoint]) -> None:
        """A rewritten list (a /rewind dropped some, a compaction added one): the journal records
        it whole at the next sync."""
        self._checkpoints = value
        self._checkpoints_rewritten = True

    def snapshot(self, share: bool = False, checkpoints: bool = True) -> SessionData:
        """The live conversation as a session document: carried fields plus the current history
        (the live list itself with `share`, for a document written at once: no copy per turn).

        A document written whole carries every checkpoint that has a hash list (SPEC §8: saved
        with the session), read from the journal when not at hand. `checkpoints=False` carries
        the file's as they are: a turn appended in place leaves them to the journal until the
        file is next written whole."""
        s = self.session
        data = SessionData(self.history if share else list(self.history), s.title, s.transcript_id,
                           list(s.attachments), list(s.checkpoints), list(s.shared_memory), dict(s.extra), s.source)
        if self.transcript is not None and self.transcript.id:
            data.transcript_id = self.transcript.id
        points = self._checkpoints_at_hand() if checkpoints else None
        if points is not None:
            mine = rewind_points.encode(points)
        else:  # a rewritten list the journal could not take stays in the file until it can
            mine = rewind_points.encode(self._checkpoints) if self._checkpoints_rewritten else self._file_checkpoints
        data.checkpoints = self.foreign_checkpoints + mine
        return data

    def _checkpoints_at_hand(self) -> list[rewind_points.Checkpoint] | None:
        """The checkpoints, for a document written whole, when a journal holds them: read already
        (a /rewind, a compaction), or read now when the journal is small enough to read at a turn
        (TRUST_FROM: what the first turn after a load reads anyway). None otherwise: the file's
        list is written as it is, and the journal holds the rest."""
        if self.transcript is None or not self.transcript.enabled or not self.transcript.id:
            return None
        if self._checkpoints is None and not self.transcript.small():
            return None
        return self.checkpoints

    def wrote_whole(self, data: SessionData) -> None:
        """The bound file was written whole from `data`: its checkpoints are the file's now (a
        turn appended next leaves them as they are)."""
        self._file_checkpoints = [item for item in data.checkpoints if rewind_points.is_ours(item)]

    def own_checkpoints(self) -> list[rewind_points.Checkpoint] | None:
        """The checkpoints no journal holds (it is off): this process's only copy of them, which a
        bind to a copy of this same conversation (save as, attach-create, fork) carries over
        (`carry_checkpoints`); None when a journal holds them."""
        if self.transcript is not None and self.transcript.enabled:
            return None
        return list(self._checkpoints or [])

    def carry_checkpoints(self, points: list[rewind_points.Checkpoint] | None) -> None:
        if points:
            self._checkpoints = points

    def checkpoint(self, label: str, command: bool = False) -> list[str]:
        """Remember the history as it is now, to come back to with /rewind: one journal line,
        written with the sync that precedes it, whose place in the journal says which history
        it is (another process rebuilds it from there). Without a journal (off, or failing),
        this process keeps the messages themselves."""
        time = now_text()
        line = journal_rules.checkpoint_line(time, label, command)
        notes = self.sync_transcript(extra=(line,))
        journaled = self.transcript is not None and self.transcript.enabled and self.transcript.problem is None
        small = self._checkpoints is not None and self.transcript is not None and self.transcript.small()
        if journaled and not self._checkpoints_rewritten and (self._checkpoints is None or not command) \
                and not small:
            # In the journal now, with the rest: read again when /rewind next needs them (taking
            # it here would copy the whole history's hashes at every turn). A command's checkpoint
            # joins a list already read: the command works on it (/rewind keeps what it dropped).
            # A list at hand for a small journal is kept up to date instead: a small session's
            # whole write at every turn stores it (see `_checkpoints_at_hand`).
            self._checkpoints = None
            return notes
        hashes = self.transcript.live_hashes(self.history) if journaled else None
        points = self.checkpoints
        point = rewind_points.take(time, label, self.history, hashes, points, command)
        self._checkpoints = rewind_points.capped([*points, point])
        return notes

    def checkpoint_ahead(self, label: str, at: int) -> bool:
        """The /rewind checkpoint of the history's first `at` messages, written to a journal that
        records nothing yet, ahead of them (engine/resume.py records a long history after the
        turn's answer; a stop while it does leaves the checkpoint in place); whether it was."""
        if self.transcript is None or self._checkpoints_rewritten:
            return False
        if not self.transcript.ahead(journal_rules.checkpoint_line(now_text(), label, count=at)):
            return False
        self._checkpoints = None  # read from the journal when /rewind needs them
        return True

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
            self.binding.claim_journal()
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

    def go_read_only(self, cause: str) -> None:
        """Nothing can be written this run (`cause`: "read-only file system"): chat on, in memory."""
        self.read_only = cause
        if self.transcript is not None:
            self.transcript.enabled = False
            self.transcript.forget_problem()

    def take_file_fields(self, data: SessionData) -> None:
        """After a merge with the bound file (Binding.merge): the file's checkpoints and journal
        are the conversation's now. Checkpoints no journal holds (it is off, or our rewrite of
        the list is not in it yet) are kept, with those of the file we have not got."""
        mine, rewritten = self._checkpoints, self._checkpoints_rewritten
        self.read_checkpoints(data)
        if self.transcript is not None and data.transcript_id != self.transcript.id:
            self.transcript.attach(data.transcript_id)  # the session now names another journal
        if mine is not None and (rewritten or not (self.transcript is not None and self.transcript.enabled)):
            stored = {(c.time, c.label, c.size) for c in self.checkpoints}
            self.checkpoints = sorted([*self.checkpoints, *(c for c in mine if (c.time, c.label, c.size) not in stored)],
                                      key=lambda c: c.time)

    def send(self, text: str, on_text: Callable[[str], None] = lambda _t: None,
             on_notice: Callable[[str], None] | None = None, approve: Approve | None = None,
             stop: Stop | None = None) -> turn.TurnResult:
        """Run one turn: engine/turn.py's pipeline (see `turn.run`)."""
        return turn.run(self, text, on_text, on_notice, approve, stop)

    def warm(self) -> None:
        """Do the slow part of the first request now (load a local model); safe from a thread."""
        warm = getattr(self.provider, "warm", None)
        if warm:
            warm()
