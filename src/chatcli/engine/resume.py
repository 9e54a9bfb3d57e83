"""A turn on a large session that does not wait for the whole file (`chatcli --session big -p …`).

Reading 100,000 messages takes longer than the model needs to start answering, and a request
carries only the messages that open the history (system messages, summaries) and its latest
ones. So a one-shot attaching a large session (from store/sessions.py's CHUNKED_FROM) reads the
file's two ends (store/session_ends.py) and reads the rest in a background thread; its turn:

1. plans the request from the ends, as the whole history would plan it (the walk back from the
   end stops inside the tail, or this is not done);
2. appends the question to the session file in place, fsync'd: it is on disk before the model
   is asked, as the journal line puts it there in the ordinary turn;
3. sends the request and streams the answer;
4. then takes the whole history (waiting for the background read if it is still going), and
   does what the ordinary turn did before asking, in its order, knowing the file holds the
   question: the window notes, the /rewind checkpoint and the journal lines (journal hashes
   number repeated messages across the whole history, so they wait for it);
5. records the answer as every turn does.

Everything else that needs the history (search, fork, export, /rewind, adoption, a compaction)
asks for `Conversation.history`, which waits for the read. The early request is made only when
its plan cannot differ from the ordinary one: a chat turn, on a session whose journal's last
line vouches for the file (same length, same last message), whose tail alone is more than the
context window (a session just loaded is then never compacted at its first turn: the latest
messages that fit are sent), with no attachments and nothing a microcompact would stub, on a
provider that is not told of every tool the history called; anything else waits for the whole
history as before. The tools offered follow from the messages read (the recall tool is offered
when a summary or stub among them names a recall entry).

The second way, for a session whose journal has not recorded it (one another program wrote,
with no journal yet): recording 100,000 messages in a new journal takes seconds, and the
journal line that makes the question durable comes after them. So a chat turn on such a long
history (RECORD_LATER_FROM messages) names the new journal in the file (which rewrites it in
chatcli's layout, so that turns are appended to it in place), appends the question to the file
before asking (the turn's /rewind checkpoint is the new journal's first line, naming the
messages before the question, which follow it), appends the answer after it, and only then
records the history, the question and the answer in the journal (`record_later`, with a
progress line first when it is long). Killed while it records, the journal is completed at the
next start's first sync, as any journal that lacks messages the file holds, the checkpoint in
place.

A file damaged in its middle (its ends read, its whole not) is found when the rest is read,
after the answer: the turn then ends with that error, the question stays appended after the
file's last message (the damage is left as it was, for the user to mend), and nothing else is
written to it.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chatcli.core import checkpoints as rewind_points
from chatcli.core import journal as rules
from chatcli.core import request_window
from chatcli.core.messages import Message
from chatcli.core.names import is_machine_name
from chatcli.store.journal import ID_RE
from chatcli.store.sessions import SessionError

if TYPE_CHECKING:
    from chatcli.core.session import SessionData
    from chatcli.engine.conversation import Conversation
    from chatcli.engine.turn import Round
    from chatcli.providers.base import Stop
    from chatcli.store.session_ends import Ends
    from chatcli.store.sessions import Stamp

# Bytes of the file's end read per token of the context window (a message's tokens are counted
# as its characters / 4, and JSON adds its keys and escapes), and at least TAIL_MIN.
TAIL_BYTES_PER_TOKEN = 6
TAIL_MIN = 1 << 20


class Unread(LookupError):
    """A plan reached the part of the history that is not read yet."""


class Pending:
    """A session whose ends are read and whose whole history is being read in the background."""

    def __init__(self, name: str, ends: Ends, stamp: Stamp, count: int, fd: int, st: os.stat_result,
                 bind: Callable[[Conversation, SessionData], list[str]], store) -> None:
        self.name, self.ends, self.stamp, self.count = name, ends, stamp, count
        self._bind = bind
        self.whole = False  # read whole and bound (or continued unbound, as a load would)
        self._data: SessionData | None = None
        self._error: BaseException | None = None
        # Decoding holds the interpreter's lock: the read waits until the early request is sent
        # (`go`), so that planning it does not share the lock with 100,000 messages being built;
        # it then overlaps the model's answer, which the main thread only waits for.
        self._go = threading.Event()
        self._done = threading.Event()  # the read ended, read or not (a join interrupted by Ctrl-C cannot tell)
        self._thread = threading.Thread(target=self._read, args=(store, fd, st), name="chatcli-session-read",
                                        daemon=True)
        self._thread.start()

    def go(self) -> None:
        self._go.set()

    def _read(self, store, fd: int, st: os.stat_result) -> None:
        try:
            self._go.wait()
            self._data = store.load_opened(self.name, fd, st)
        except BaseException as exc:  # noqa: BLE001 - said by whoever waits for it
            self._error = exc
        finally:
            self._done.set()

    def settle(self, conv: Conversation) -> list[str]:
        """Wait for the whole session and bind it, as a load would have; what the user is to be
        told of it (a file made read-only meanwhile is continued unbound, and says so). A
        session that cannot be read whole after all is unbound (nothing more is written to it)
        and its error raised. Ctrl-C while it waits (the rest of a read that takes about half a
        second at 100,000 messages) is raised once the history is whole: the turn then keeps
        the answer it has shown (engine/turn.py)."""
        self._go.set()
        stopped = None
        while True:
            try:
                while not self._done.is_set():
                    self._done.wait()
                break
            except KeyboardInterrupt as exc:
                stopped = exc
        if self._error is not None or self._data is None:
            conv.binding.unbind()
            error = self._error
            if isinstance(error, SessionError):
                raise error
            raise SessionError(f"session '{self.name}' could not be read whole: {error}")
        with _ctrl_c_held() as held:  # half a binding could not keep the answer shown
            notes = self._bind(conv, self._data)
            self.whole = True
        stopped = stopped or (KeyboardInterrupt() if held else None)
        if stopped is not None:
            conv.settled_notes.extend(notes)
            raise stopped
        return notes


@contextlib.contextmanager
def _ctrl_c_held():
    """Ctrl-C during the block is held until it ends (the list it yields says whether one came),
    on the main thread while Ctrl-C raises KeyboardInterrupt there; elsewhere the block runs as
    it is. The session read whole is bound in it: a KeyboardInterrupt halfway would leave the
    turn unable to keep the answer it has shown."""
    import signal

    held: list[bool] = []
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield held
        return
    signal.signal(signal.SIGINT, lambda _signum, _frame: held.append(True))
    try:
        yield held
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def open_pending(conv: Conversation, name: str,
                 bind: Callable[[Conversation, SessionData], list[str]]) -> Pending | None:
    """Read session `name`'s ends and start reading the rest, when a turn on it may be asked
    early (see the module's docstring); None otherwise (the caller loads it whole)."""
    settings, store = conv.settings, conv.store
    if conv.read_only or conv.hidden is not None or not settings.session_writethrough or conv.agent.tagged \
            or store.protected(name) or is_machine_name(name):  # (one chatcli made is continued unbound)
        return None
    opened = store.open_ends(name, max(TAIL_MIN, settings.context_tokens * TAIL_BYTES_PER_TOKEN))
    if opened is None:
        return None
    ends, stamp, fd, st = opened
    count = _vouched_count(conv, ends)
    if count is None or ends.data.attachments:
        store.close_opened(fd)
        return None
    pending = Pending(name, ends, stamp, count, fd, st, bind, store)
    conv.session = ends.data
    conv.binding.name = name
    conv.pending = pending
    return pending


def _vouched_count(conv: Conversation, ends: Ends) -> int | None:
    """How many messages the file holds, as its journal's last line says, when that line is a
    `synced` line that ends on the file's last message with nothing dead: the file is then the
    journal's live history (and a mismatch is found when the whole is read and journaled)."""
    transcript_id = ends.data.transcript_id
    if not transcript_id or not ID_RE.fullmatch(transcript_id) or not ends.tail:
        return None
    from chatcli.store.home import Home

    found = Home.of(conv.settings).journal(transcript_id).last_event()
    if found is None:
        return None
    event = found[0]
    count, last = event.get("count"), event.get("last")
    if event.get("type") != rules.SYNCED or event.get("dead") != 0 or not isinstance(count, int) \
            or not isinstance(last, str) or count < len(ends.front) + len(ends.tail) + 1:
        return None
    if last.partition(".")[0] != rules.content_digest(ends.tail[-1]):
        return None
    return count


class Known(Sequence):
    """The history as far as it is read: the front, an unread middle (asking for it raises
    Unread), the tail, then the new question."""

    def __init__(self, pending: Pending, question: Message) -> None:
        ends = pending.ends
        self._front, self._tail, self._question = ends.front, ends.tail, question
        self._tail_from = pending.count - len(ends.tail)

    def __len__(self) -> int:
        return self._tail_from + len(self._tail) + 1

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if index < len(self._front):
            return self._front[index]
        if index < self._tail_from:
            raise Unread(index)
        if index < self._tail_from + len(self._tail):
            return self._tail[index - self._tail_from]
        if index == len(self) - 1:
            return self._question
        raise IndexError(index)


@dataclass
class Early:
    question: Message
    stamp: Stamp  # the file's, with the question appended
    count: int  # the messages the file held before it, as its journal said
    round: Round
    pending: Pending


def ask_early(conv: Conversation, text: str, on_text: Callable[[str], None],
              notice: Callable[[str], None], stop: Stop | None = None) -> Early | None:
    """Send the turn's first request from the session's ends (see the module's docstring), the
    question appended to the file first; None when it is not to be done (nothing was written)."""
    pending = conv.pending
    if pending is None:
        return None
    from chatcli.engine import memory, turn
    from chatcli.providers.base import Request

    settings, agent = conv.settings, conv.agent
    window_tokens = settings.context_tokens
    if sum(map(request_window.message_tokens, pending.ends.tail)) <= window_tokens:
        return None  # the whole might fit the window, or call for a compaction: planned on the whole
    conv.pacing.extra_system = memory.prompt(settings) if conv.memory else ""
    if turn._too_long(conv, text) is not None:
        return None
    provider = conv.provider
    if getattr(provider, "defines_called_tools", False):
        return None  # its tools list names every tool the whole history called
    # Whether a summary or a microcompact stub names recall entries (the recall tool is then
    # offered), as the messages read say: one named only in the unread middle is offered from
    # the next turn (its text is not in this request either).
    tools, callable_now = agent.offered(conv, _tool_state(pending))
    if settings.auto_compact:
        conv.pacing.share = settings.auto_compact  # a session just loaded sends its latest messages
    question = Message("user", text, meta=agent.meta())
    system = "\n\n".join(part for part in (conv.system_prompt, conv.pacing.extra_system) if part)
    known = Known(pending, question)
    try:
        window = request_window.fit(known, turn._budget(conv, turn._overhead(system, tools)))
        messages = window.messages(known)
    except Unread:
        return None
    if window.over or any(_stubbable(message) for message in messages[:-1]):
        return None
    stamp = _append_question(conv, pending, question)
    if stamp is None:
        return None
    request = Request(model=settings.model, messages=messages, system=system, timeout=settings.timeout,
                      max_tokens=settings.max_tokens, on_retry=notice, tools=tools,
                      tool_choice="auto" if callable_now else "none", stop=stop)
    pending.go()
    return Early(question, stamp, pending.count, turn.stream_round(conv, request, on_text), pending)


def _tool_state(pending: Pending) -> tuple[bool, frozenset[str]]:
    from chatcli.engine.agent import _scan

    summary, called = _scan([*pending.ends.front, *pending.ends.tail])
    return summary, frozenset(called)


def _stubbable(message: Message) -> bool:
    from chatcli.engine import microcompact

    return microcompact._stubbable(message)


def _append_question(conv: Conversation, pending: Pending, question: Message) -> Stamp | None:
    """The question appended to the session file, under its lock, while the file is still the
    one whose ends were read; the file's new stamp, or None (nothing written)."""
    store = conv.store
    try:
        with store.lock(pending.name):
            if store.stamp(pending.name) != pending.stamp:
                return None
            return store.append(pending.name, [question], pending.count, pending.stamp)
    except SessionError:
        return None


def catch_up(conv: Conversation, text: str, early: Early, notice: Callable[[str], None]) -> tuple[Message, None]:
    """After the early request: the whole history, then what the ordinary turn does before it
    asks (engine/turn.py's `_prepare`), in its order, with the question already in the file."""
    from chatcli.engine import turn

    conv.settle()
    say_settled(conv, notice)
    if len(conv.history) != early.count and conv.session_name is not None:
        # The journal's count was not the file's: the listing gets the true one.
        store = conv.store
        store.catalog.note_appended(conv.session_name, early.stamp, None if store.private else len(conv.history) + 1)
    for note in turn._auto_compact(conv, text):  # a session just loaded: says what is sent, compacts nothing
        notice(note)
    turn._plan(conv, text)
    for note in conv.checkpoint(rewind_points.label_of(text)):
        notice(note)
    join_question(conv, early)
    for note in conv.sync_transcript():
        notice(note)
    return early.question, None


def say_settled(conv: Conversation, notice: Callable[[str], None]) -> None:
    """Say what taking the whole session had to say (`Conversation.settled_notes`), once."""
    notes, conv.settled_notes = conv.settled_notes, []
    for note in notes:
        notice(note)


def join_question(conv: Conversation, early: Early) -> None:
    """The question, in the file already, joins the history read whole (unless it has): the
    binding knows the file as it is now. A session continued unbound (made read-only while it
    was read) keeps it in memory only."""
    history = conv.history
    if history and history[-1] is early.question:
        return
    history.append(early.question)
    binding = conv.binding
    if conv.session_name is None:
        return
    binding.stamp, binding.synced_count = early.stamp, len(history)
    if binding.file is not None:
        binding.file = binding.file._replace(stamp=early.stamp, count=len(history))


# A history its journal has not recorded, from this many messages, is recorded after the answer;
# from PROGRESS_FROM messages (about a second of recording on a slow machine), a line says so
# first. Said before, from the turn's own thread: a surface's notices (an editor's, an MCP
# client's) are not to be sent from another thread.
RECORD_LATER_FROM = 2_000
PROGRESS_FROM = 20_000


@dataclass
class Later:
    """A turn whose journal is recorded after its answer: the checkpoint taken before its
    question (`label`), where its question is in the history (`at`), and whether that
    checkpoint is in the journal already, ahead of the messages it names (`ahead`)."""

    label: str
    at: int
    ahead: bool = False


def ask_before_recording(conv: Conversation, label: str) -> Later | None:
    """Before the question joins the history: when the bound session's journal has recorded
    none of it and it is long, name the new journal in the file (written whole, in chatcli's
    layout, so that turns are appended to it) and leave the recording for after the answer
    (see the module's docstring); None (nothing done) otherwise."""
    transcript, binding = conv.transcript, conv.binding
    if transcript is None or not transcript.enabled or transcript.id is not None or conv.read_only \
            or conv.session_name is None or not conv.settings.session_writethrough or conv.agent.tagged \
            or len(conv.history) < RECORD_LATER_FROM or binding.unsynced:
        return None
    binding.claim_journal()
    if transcript.id is None or binding.file is None or binding.file.count != len(conv.history):
        return None  # not named, or the file cannot take the turn appended: recorded now, as always
    # The checkpoint goes first, as the journal's first line (one small fsync'd write): a stop
    # or a kill before the history is all recorded leaves it where the next start's sync
    # completes the journal.
    return Later(label, len(conv.history), conv.checkpoint_ahead(label, len(conv.history)))


def question_kept(conv: Conversation, later: Later) -> bool:
    """Append the question (the history's last message) to the session file; whether it is
    there (the caller records the journal now instead when it is not)."""
    conv.binding.write_through()
    return not conv.binding.unsynced


def record_later(conv: Conversation, later: Later, notice: Callable[[str], None]) -> list[str]:
    """After the answer was written to the file: the journal records the history, the question
    and what followed (the turn's /rewind checkpoint ahead of them, or, when the journal could
    not take it first, between). Returns the lines to say."""
    count = len(conv.history)
    if count >= PROGRESS_FROM:
        notice(f"Recording session '{conv.session_name}' in its transcript journal ({count:,} messages; the answer "
               "is saved in the session, and the journal is completed at the next start if this is stopped)…")
    if later.ahead:
        return conv.sync_transcript()
    history, binding = conv.history, conv.binding
    turn = history[later.at:]
    # The journal had lines already (another surface named it first): the history as it was
    # before the question, with the checkpoint taken then (the ordinary turn's order), then the
    # question and what followed: the same list, shortened and grown again, so that the second
    # sync hashes only what was added back.
    del history[later.at:]
    try:
        notes = conv.checkpoint(later.label)
    finally:
        history.extend(turn)
        if binding.file is not None and binding.file.history is history:
            binding.file = binding.file._replace(version=history.version)  # the file holds it as it is again
    return notes + conv.sync_transcript()


__all__ = ["Early", "Later", "Pending", "ask_before_recording", "ask_early", "catch_up", "join_question",
           "open_pending", "question_kept", "record_later", "say_settled"]
