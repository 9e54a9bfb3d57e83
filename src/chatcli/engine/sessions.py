"""Named-session operations on a live conversation: save, load, attach, fork… (SPEC §5).

Each is one function over a Conversation and its SessionStore; the /session table
(commands/session.py, and through it the REPL, MCP and ACP) and the CLI twins call these. Every check that decides
whether a file may be written happens under that session's lock.
"""

from __future__ import annotations

import contextlib
import datetime
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from chatcli.core import retention
from chatcli.core.errors import ChatcliError, UsageError
from chatcli.core.messages import shared_prefix
from chatcli.core.names import AUTOSAVE_PREFIX, MIRROR_PREFIX, autosave_name, is_trivial, validate_name, validate_user_target
from chatcli.core.session import SessionData
from chatcli.store.atomic import unwritable
from chatcli.store.sessions import SessionError, SessionExists, SessionInfo, SessionNotFound

if TYPE_CHECKING:  # annotations only: scripts that list sessions need no conversation machinery
    from chatcli.engine.conversation import Conversation


@dataclass(frozen=True)
class Outcome:
    """What an operation did, in words for the user, plus any side notes (one line each)."""

    text: str
    notes: tuple[str, ...] = ()


# The session operations return values: what happened, in fields a surface can use (MCP, ACP,
# the gateway, scripts), with `text`, the one sentence the terminal shows, made from them.
# `notes` are side lines (merged, kept as an autosave, too large…), one each.

@dataclass(frozen=True)
class Bound:
    """save, load, attach (and a resume at start-up): the conversation is now `name`'s."""

    how: str  # "saved" | "loaded" | "attached" | "created" | "already" | "resumed"
    name: str
    messages: int
    # Why a loaded session is continued unbound: the store's protection ("made read-only"…),
    # or "machine" for one chatcli made. None: bound.
    unbound: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        count = f"({self.messages} messages)"
        text = {
            "saved": f"Session '{self.name}' saved {count}.",
            "loaded": f"Session '{self.name}' loaded {count}.",
            "resumed": f"Resumed session '{self.name}' {count}.",
            "attached": f"Attached to session '{self.name}' {count}.",
            "created": f"Attached to session '{self.name}' ({self.messages} messages; created).",
            "already": f"Already attached to session '{self.name}' {count}.",
        }[self.how]
        if self.unbound == "machine" and self.name.lower().startswith(AUTOSAVE_PREFIX):
            text += (" It is an autosave, so it is not bound: the conversation is kept in it again when it ends "
                     "(save it under a name of yours to bind it).")
        elif self.unbound == "machine":
            text += " It is made by chatcli, so it is not bound: save it under a name of yours to keep working in it."
        elif self.unbound:
            text += (f" It is not bound: {self.unbound}, so new turns are not written to it (save it under another "
                     "name to keep them).")
        return text


@dataclass(frozen=True)
class Detached:
    name: str | None  # the session it was bound to; None: it was not bound
    messages: int
    notes: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        if self.name is None:
            return "Not bound to a session."
        return (f"Detached from session '{self.name}'; the conversation stays in memory ({self.messages} "
                "messages).")


@dataclass(frozen=True)
class Status:
    name: str | None
    messages: int
    unsynced: int = 0  # messages not yet in the session's file
    writethrough: bool = True
    path: str = ""
    notes: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        if self.name is None:
            return f"Not bound to a session ({self.messages} messages in memory)."
        mode = "write-through on" if self.writethrough else "write-through off"
        pending = f", {self.unsynced} not yet written" if self.unsynced else ""
        return f"Bound to session '{self.name}' ({self.messages} messages{pending}, {mode}): {self.path}"


@dataclass(frozen=True)
class Cleared:
    notes: tuple[str, ...] = ()
    text: str = "New conversation started; history cleared."


@dataclass(frozen=True)
class Deleted:
    name: str
    was_active: bool  # the conversation was bound to it: cleared too
    journal: str | None = None  # the transcript journal removed with it
    notes: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        also = f" Its transcript journal {self.journal} was removed too." if self.journal else ""
        if self.was_active:
            return (f"Session '{self.name}' deleted. It was the active session: history cleared, new conversation "
                    f"started.{also}")
        return f"Session '{self.name}' deleted.{also}"


@dataclass(frozen=True)
class Forked:
    parent: str | None  # None: the conversation was not saved
    name: str
    messages: int
    notes: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        origin = f"'{self.parent}'" if self.parent else "the unsaved conversation"
        return (f"Session forked.\n  from:     {origin}\n  to:       '{self.name}'\n  messages: {self.messages}\n"
                "Now working in the fork; the original is untouched.")


SessionResult = Bound | Detached | Status | Cleared | Deleted | Forked


def save(conv: Conversation, name: str) -> Bound:
    validate_user_target(name)
    if name == conv.session_name:
        # Our own session: the same merge-safe write as after a turn, even with write-through off.
        notes = conv.binding.write_through(force=True)
        if conv.binding.unsynced:
            raise SessionError(notes[-1] if notes else f"session '{name}' could not be written")
        return Bound("saved", name, len(conv.history), notes=tuple(notes))
    notes: list[str] = conv.sync_transcript()

    def keep_previous(previous: SessionData) -> None:
        # Replacing another session: what it held that this conversation lacks is kept first.
        if shared_prefix(previous.history, data.history) < len(previous.history):
            kept = autosave(conv, previous, f"not saving over '{name}'")
            notes.append(f"Session '{name}' held {len(previous.history)} other messages; "
                         f"they were kept as '{kept}'.")

    own = conv.own_checkpoints()  # the same conversation, under another name: its /rewind points too
    with _document_for(conv, copy=conv.session_name is not None) as data:
        stamp = conv.store.save(name, data, before_replace=keep_previous)
    conv.binding.bind(name, data, stamp)
    conv.carry_checkpoints(own)
    notes += conv.binding.size_notes(name, stamp)
    return Bound("saved", name, len(data.history), notes=tuple(notes))


def load(conv: Conversation, name: str) -> Bound:
    validate_name(name)
    if conv.hidden is not None and conv.hidden(name):
        raise SessionNotFound(f"session '{name}' does not exist")  # as for any name it may not know
    data, stamp = conv.store.load(name)  # fails before anything in memory changes
    notes = _keep_unsaved(conv, f"'{name}'")
    unbound, taken = _bind_loaded(conv, name, data, stamp)
    return Bound("loaded", name, len(data.history), unbound, (*notes, *taken, *_reattach(conv)))


def _bind_loaded(conv: Conversation, name: str, data: SessionData, stamp) -> tuple[str | None, list[str]]:
    """Bind to a session just loaded, unless it is chatcli's own or must not be replaced (made
    read-only, a link): then it is continued unbound, in a copy of its journal. Returns why it
    is not bound (Bound.unbound), or None, and what the user is told of the file as read."""
    protected = conv.store.protected(name)
    if protected:  # bind does this for a bound session; the copy continued here copies the journal too
        conv.binding.take_back_journal(name, data)
    taken = conv.binding.bind(None if protected else name, data, stamp)
    conv.binding.mark_loaded()
    if conv.session_name is not None:
        return None, taken
    conv.leave_transcript()  # continued unbound: not in its journal
    if not protected and name.lower().startswith(AUTOSAVE_PREFIX):
        conv.binding.loaded_autosave = (name, stamp)  # kept back in it at the end, not copied
    return protected or "machine", taken


def _reattach(conv: Conversation) -> list[str]:
    """The loaded session's /context attachments, attached again (engine/contexts.py)."""
    if not conv.session.attachments:
        return []
    from chatcli.engine import contexts

    return contexts.reattach(conv)


def _keep_in_loaded_autosave(conv: Conversation) -> str | None:
    """An autosave loaded and continued is kept in that same autosave when the conversation ends
    or is replaced (one conversation, one copy), while its file is still as loaded; None when
    there is none, or it changed or went meanwhile (then a new autosave keeps the conversation)."""
    mark = conv.binding.loaded_autosave
    if mark is None or conv.read_only:
        return None
    name, stamp = mark
    store = conv.store
    try:
        with store.lock(name):
            if store.stamp(name) != stamp:
                return None
            written = store.write(name, conv.snapshot())
    except SessionError:
        return None
    conv.binding.loaded_autosave = (name, written)
    conv.binding.mark_loaded()
    return name


def attach(conv: Conversation, name: str, early: bool = False) -> Bound:
    """Bind to `name`: load it when it exists, create it from this conversation when it does not.
    `early` (a one-shot about to ask): a large session's ends are read, the rest in the
    background, and its first turn may be asked before that is done (engine/resume.py)."""
    validate_user_target(name)
    if name == conv.session_name:
        return Bound("already", name, len(conv.history), notes=tuple(conv.binding.adopt()))
    store = conv.store
    # On a home that cannot be written, not even a lock file can be made: a session is read as it is.
    with (contextlib.nullcontext() if conv.read_only else store.lock(name)):
        if store.stamp(name) is None:
            if conv.read_only:
                raise SessionError(f"session '{name}' does not exist, and cannot be created: CHATCLI_HOME cannot be "
                                   f"written ({conv.read_only})")
            own = conv.own_checkpoints()
            with _document_for(conv, copy=conv.session_name is not None) as data:
                stamp = store.write(name, data)
            conv.binding.bind(name, data, stamp)
            conv.carry_checkpoints(own)
            return Bound("created", name, len(data.history))
        if early and not conv.history:
            from chatcli.engine import resume

            def bind_whole(c: Conversation, whole: SessionData) -> list[str]:
                unbound, taken = _bind_loaded(c, name, whole, pending.stamp)
                if unbound is None:
                    return taken
                return [*taken, Bound("attached", name, len(whole.history), unbound).text]

            pending = resume.open_pending(conv, name, bind_whole)
            if pending is not None:
                return Bound("attached", name, pending.count)
        data, stamp = store.load(name)
    notes = _keep_unsaved(conv, f"'{name}'")
    unbound, taken = _bind_loaded(conv, name, data, stamp)
    return Bound("attached", name, len(data.history), unbound, (*notes, *taken, *_reattach(conv)))


def detach(conv: Conversation) -> Detached:
    if conv.session_name is None:
        return Detached(None, len(conv.history))
    name = conv.session_name
    notes = conv.binding.write_through() if conv.binding.unsynced else []
    conv.binding.unbind()
    conv.leave_transcript()  # later turns are not that session's
    return Detached(name, len(conv.history), tuple(notes))


def status(conv: Conversation) -> Status:
    notes = tuple(conv.binding.adopt())
    name = conv.session_name
    return Status(name, len(conv.history), conv.binding.unsynced, conv.settings.session_writethrough,
                  conv.store.where(name) if name is not None else "", notes)


def new(conv: Conversation) -> Cleared:
    notes = _keep_unsaved(conv, "a new conversation")
    conv.binding.bind(None, SessionData(), None)
    return Cleared(notes)


def delete(conv: Conversation, name: str) -> Deleted:
    """Delete a session and, with it, the transcript journal it names (and that journal's text in
    the search index): what the user deleted does not stay behind, and no orphan journal is left
    for a later sweep. A journal another session file also names (a copy made by hand) is kept."""
    from chatcli.engine import records

    validate_name(name)
    store = conv.store
    journal_id, stamp = None, store.stamp(name)
    rows = store.entries() if stamp is not None else {}
    row = rows.get(name)
    if row and (row[0], row[1]) == (stamp.mtime_ns, stamp.size) and row[5]:
        journal_id = row[5]  # the listing catalog knows it (a 100,000-message file is not read)
    elif stamp is not None:  # sealed (the catalog keeps no contents), not catalogued yet, or naming none: read it
        try:
            # A file another program wrote back without naming its journal: the one chatcli named there.
            journal_id = store.load(name)[0].transcript_id or store.catalog.remembered_journal(name)
        except SessionError:  # unreadable: it goes all the same; its journal, unknown, is left to the sweeps
            journal_id = None
    store.delete(name)
    store.catalog.forget_journals([name])
    # No other session names it, as far as the catalog read above knows (with encryption on it
    # knows no contents: journals are one per session, chatcli never shares one).
    unshared = all(other[5] != journal_id for other_name, other in rows.items() if other_name != name)
    removed = bool(journal_id and unshared and records.remove_journal(conv.settings, journal_id))
    active = name == conv.session_name
    if active:
        conv.binding.bind(None, SessionData(), None)  # what was deleted on purpose is not autosaved
    return Deleted(name, active, journal_id if removed else None)



def fork(conv: Conversation, name: str) -> Forked:
    """An independent copy of the current conversation (saved or not) under `name`; continue there."""
    validate_user_target(name)
    notes = tuple(conv.binding.adopt())  # fork what the session is now, not what this window last saw
    parent = conv.session_name
    own = conv.own_checkpoints()
    with _document_for(conv, copy=True) as data:
        data.title = None
        try:
            stamp = conv.store.create(name, data)
        except SessionExists:
            raise UsageError(f"session '{name}' already exists; fork to a new name") from None
    conv.binding.bind(name, data, stamp)
    conv.carry_checkpoints(own)
    return Forked(parent, name, len(data.history), notes)


def fork_saved(conv: Conversation, source: str, target: str) -> Outcome:
    """An independent copy of the saved session `source` under `target` (`chatcli session fork`,
    the MCP server's fork of a named session): `conv`, a conversation of the caller's own, loads
    it and forks it, so that a live conversation is never touched."""
    validate_user_target(target)  # said before the source is read
    load(conv, source)
    forked = fork(conv, target)
    return Outcome(f"Session '{source}' forked to '{target}' ({forked.messages} messages).", forked.notes)


def listing(conv: Conversation) -> list[SessionInfo]:
    infos = conv.store.list()
    return infos if conv.hidden is None else [info for info in infos if not conv.hidden(info.name)]


def most_recent(conv: Conversation) -> tuple[str | None, list[str]]:
    """The newest readable session that holds messages (the one last chatted in), and the newer
    ones passed over because they cannot be read."""
    skipped: list[str] = []
    store = conv.store
    for info in store.list(fresh=True):  # correctness over speed: every file is stat'ed
        problem = info.problem
        if info.name.lower().startswith(MIRROR_PREFIX):
            # A server's mirror is its record of a live conversation, not a session the user
            # left: the latest-session pointer passes over it too (engine/hosted.py).
            continue
        # --continue means "where I left off": an empty session (made by --session NEW or /web,
        # then never chatted in) holds nothing to continue, and a demanding user expects it to
        # be passed over for the last conversation they had, not to resume zero messages.
        if info.messages == 0:
            continue
        if info.messages is not None:
            return info.name, skipped
        if store.private and not problem:  # encryption on: the listing does not open files; this does
            try:
                if not store.load(info.name)[0].history:
                    continue
                return info.name, skipped
            except SessionError as exc:
                problem = str(exc)
        skipped.append(f"Skipped session '{info.name}', newer but unreadable: {problem}")
        if len(skipped) == 5:
            skipped.append("Stopped looking after 5 unreadable sessions (chatcli session list shows them all).")
            break
    return None, skipped


def read_only_warning(conv: Conversation, also: Path | None = None) -> tuple[str | None, bool]:
    """At the start of an interactive run: if CHATCLI_HOME cannot be written (a read-only file
    system, no permission), the conversation goes on in memory and this returns the one warning
    that says so (else None), and whether it also covers `also`: another file the front end
    writes (the prompt history) whose directory cannot be written either."""
    home = conv.settings.home
    cause = unwritable(home)
    if cause is None:
        return None, False
    conv.go_read_only(cause)
    what, covered = "sessions, transcripts", also is not None and unwritable(also.parent) is not None
    if covered:
        what += f", prompt history {also}"
    return (f"CHATCLI_HOME {home} cannot be written ({cause}): you can chat, but nothing is saved this run "
            f"({what})"), covered


def recent_note(conv: Conversation) -> str | None:
    """One line naming the most recent session and how to resume it, from the store's pointer
    (no listing: this is on the way to the first prompt). None when there is nothing worth
    naming, including a machine session the start-up sweep is about to remove."""
    info = conv.store.latest()
    if info is None:
        return None
    now = time.time()
    if retention.machine_prefix(info.name) and retention.expired(info.mtime, now, conv.settings.session_ttl_days):
        return None
    count = "" if info.messages is None else f"{info.messages} message{'s' if info.messages != 1 else ''}, "
    return (f"Most recent session: '{info.name}' ({count}saved {retention.describe_age(now - info.mtime)}); "
            f"resume it with chatcli -c or /session load {info.name}.")


def start(conv: Conversation, *, resume: bool = False, name: str | None = None, early: bool = False) -> list[str]:
    """Bind at start-up: `--session NAME` attaches (creating it), `--continue` loads the newest
    session. `early`: see `attach`."""
    if name:
        outcome = attach(conv, name, early)
        if conv.session_name:
            conv.journaling()  # a bound conversation keeps its journal, one-shot or not
        return [outcome.text, *outcome.notes]
    if resume:
        newest, skipped = most_recent(conv)
        if newest is None:
            return [*skipped, "No saved session to continue; starting a new conversation."]
        if newest.lower().startswith(AUTOSAVE_PREFIX):
            # Continued unbound and kept in it again at the end (keep_continued_autosave), in a
            # copy of its journal as the REPL keeps one: a one-shot keeps a journal for it too.
            conv.journaling()
        outcome = load(conv, newest)
        if conv.session_name:
            conv.journaling()
        # load's own words, and why it is not bound if it is not (chatcli's own, read-only, a link)
        return [*skipped, replace(outcome, how="resumed").text, *outcome.notes]
    return []


def finish(conv: Conversation) -> list[str]:
    """When an interactive conversation ends (exit, Ctrl-D, SIGTERM, SIGHUP): a bound one is
    written one last time; an unbound, non-trivial one is kept as an autosave (SPEC §6.2), unless
    it is a loaded session as it is on disk. Returns the line that says where the conversation went."""
    name = conv.session_name
    try:
        journal_notes = conv.sync_transcript()
    except ChatcliError as exc:  # the journal's store is not there (a server down): the document is written next
        journal_notes = [f"The transcript journal could not be written ({exc})."]
    if name is not None:
        if conv.read_only and conv.binding.unsynced:
            return [*journal_notes, f"The last {conv.binding.unsynced} message(s) were not written to session '{name}' "
                                    f"({conv.read_only})."]
        try:
            notes = journal_notes + (conv.binding.write_through(force=True) if conv.binding.unsynced else [])
        except ChatcliError as exc:  # not a store's failure the binding handles: kept below all the same
            notes = [*journal_notes, f"Session '{name}' could not be written ({exc})."]
        if not conv.binding.unsynced:  # an empty one says nothing (a /web page's, unused, goes next)
            return [*notes, f"Conversation saved in session '{name}' (chatcli --session {name} resumes it)."] \
                if conv.history else notes
        if not conv.settings.session_autosave:
            return [*notes, f"Session '{name}' could not be written; the last turns are lost "
                            "(CHATCLI_SESSION_AUTOSAVE is off)."]
        try:  # nothing is lost by accident: what the session could not take goes to an autosave
            with _document_for(conv, copy=True) as data:  # with a journal of its own
                kept = autosave(conv, data, None)
        except ChatcliError as exc:  # SessionError; JournalError from the autosave's journal copy
            if (rescued := _kept_here(conv, exc)) is not None:
                return [*notes, rescued]
            return [*notes, f"Session '{name}' could not be written, nor an autosave ({exc}); the last turns are lost."]
        conv.binding.unbind()
        conv.binding.mark_loaded()  # what it holds now is in the autosave
        return [*notes, f"Session '{name}' could not be written; the conversation was kept as '{kept}' instead "
                        "(chatcli --continue resumes it)."]
    if is_trivial(conv.history) or conv.binding.unchanged_since_load():
        return journal_notes
    if conv.read_only:
        return [*journal_notes, f"The conversation was not kept ({conv.read_only})."]
    if not conv.settings.session_autosave:
        return [*journal_notes, "The conversation was not kept (CHATCLI_SESSION_AUTOSAVE is off)."]
    try:
        return [*journal_notes, _keep_unbound(conv)]
    except ChatcliError as exc:
        if (rescued := _kept_here(conv, exc)) is not None:
            return [*journal_notes, rescued]
        where = f"; its journal {conv.transcript.id} holds it" if conv.transcript and conv.transcript.id \
            and not journal_notes else ""
        return [*journal_notes, f"The conversation could not be kept: {exc}{where}."]


def _kept_here(conv: Conversation, failure: ChatcliError) -> str | None:
    """A conversation ending while its server store cannot take it (down, restarting): kept in
    this machine's files instead (an autosave under CHATCLI_HOME, sealed as the store is), so
    that nothing is lost; `storage migrate` takes it to the server. The line that says so; None
    when the sessions are files already, or these cannot be written either."""
    from chatcli.store.home import Home

    home = Home.of(conv.settings)
    if home.store is None:
        return None
    here = Home(home.root, home.key).sessions()
    data = conv.snapshot()
    data.transcript_id = None  # its journal is on the server: the document holds every message itself
    try:
        name = autosave(conv, data, None, store=here)
    except SessionError:
        return None
    return (f"{failure}: the conversation was kept in this machine's files instead, as '{name}' "
            f"({here.path(name)}); `CHATCLI_STORE=files chatcli storage migrate --to <the server's address>` "
            "copies it there.")


def _keep_unbound(conv: Conversation) -> str:
    """Keep an unbound conversation: in the autosave it continues, while that is as loaded, else
    in a new one. The line that says where; SessionError when it cannot be written."""
    if (kept := _keep_in_loaded_autosave(conv)) is not None:
        return f"Conversation kept in session '{kept}' (chatcli --continue resumes it)."
    return f"Conversation kept as session '{autosave(conv, conv.snapshot(), None)}' (chatcli --continue resumes it)."


def keep_continued_autosave(conv: Conversation) -> list[str] | None:
    """A turn asked of chatcli's own autosave, resumed unbound (`chatcli -c -p`, as the REPL's
    exit line says to): kept where the REPL keeps it when it ends, in that same autosave (or a
    new one when it changed meanwhile). The lines that say where; None when this conversation
    is no resumed autosave, or it could not be kept (the caller says the turn was not written)."""
    if conv.binding.loaded_autosave is None or conv.read_only or not conv.settings.session_autosave:
        return None
    notes = conv.sync_transcript()
    try:
        return [*notes, _keep_unbound(conv)]
    except SessionError:
        return None


@contextlib.contextmanager
def _document_for(conv: Conversation, *, copy: bool) -> Iterator[SessionData]:
    """The conversation as a document for another session's file. A copy (a fork, or a save or
    attach while bound elsewhere) names a journal of its own, seeded with this one's, which the
    conversation switches to only once the block has written the file."""
    if not copy:
        yield conv.snapshot()
        return
    with conv.transcript_copy() as fork_id:
        data = conv.snapshot()
        data.transcript_id = fork_id
        yield data


def _keep_unsaved(conv: Conversation, replacing: str) -> tuple[str, ...]:
    """Before a load replaces the history, keep what would otherwise be lost: an unbound,
    non-trivial conversation, or turns of a bound one that never reached its file. It goes to
    the bound session when that can be written, else to a new autosave."""
    if conv.session_name is not None:
        if not conv.binding.unsynced:
            return ()
        notes = conv.binding.write_through(force=not conv.settings.session_writethrough)
        if not conv.binding.unsynced:
            return tuple(notes)
    elif is_trivial(conv.history) or not conv.settings.session_autosave or conv.binding.unchanged_since_load():
        return ()  # nothing of its own: a loaded session as it is on disk is no loss
    notes = conv.sync_transcript()
    if (kept := _keep_in_loaded_autosave(conv)) is not None:
        return (*notes, f"The conversation was kept in '{kept}'.")
    kept = autosave(conv, conv.snapshot(), f"not switching to {replacing}")
    return (*notes, f"The unsaved conversation was kept as '{kept}'.")


def autosave(conv: Conversation, data: SessionData, refusing: str | None = None, store=None) -> str:
    """Write `data` as a new autosave-YYYYMMDD-HHMMSS[-N] session and return its name.
    `refusing` names what is not done because of a failure (so nothing is lost); None when
    nothing is held back (leaving). `store`: another than the conversation's (this machine's
    files, while its server cannot be reached)."""
    store = conv.store if store is None else store
    now = datetime.datetime.now()
    for _ in range(100):
        name = autosave_name(now, store.exists)
        try:
            store.create(name, data)
        except SessionExists:
            continue  # another process took that name in the meantime
        except SessionError as exc:
            raise SessionError(f"{exc}; {refusing}, so nothing is lost" if refusing else str(exc)) from None
        return name
    raise SessionError("could not find a free autosave name" + (f"; {refusing}" if refusing else ""))
