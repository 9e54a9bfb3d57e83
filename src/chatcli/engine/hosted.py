"""Live conversations hosted for surfaces that are not a terminal: the MCP server, the ACP agent,
and later the chat gateway (SPEC §6.2, §11).

A surface names its conversations by an id (MCP's `session` parameter, an editor's session id).
The `Host` keeps one `Hosted` conversation per id, each with its journal and its rolling mirror,
`mcp-<id>` (`mcp-acp-<id>` for an editor's): after every turn and every session action the
mirror is rewritten, so a conversation that only a client holds is never lost, and a restarted
server continues where it was. Gate CHATCLI_MCP_SESSION_AUTOSAVE (when set it wins; otherwise
CHATCLI_SESSION_AUTOSAVE).

A mirror is chatcli's own record of a live conversation, not a session the user chose: it is
never bound, never written through, and never moves the latest-session pointer that the REPL's
"most recent session" line follows (`chatcli --continue` passes over mirrors too). When the
conversation is attached to a session of the user's, the turns go there and the mirror only
names that session (so a restart attaches again).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path

from chatcli.config.settings import Settings
from chatcli.core.errors import UsageError
from chatcli.core.names import MIRROR_PREFIX, validate_name
from chatcli.core.session import SessionData
from chatcli.engine import sessions
from chatcli.engine.agent import Approve
from chatcli.engine.conversation import Conversation, load_system_prompt
from chatcli.engine.turn import TurnResult
from chatcli.providers.base import ProviderRegistry, Stop
from chatcli.store.home import Home
from chatcli.store.session_file import StoreUnavailable
from chatcli.store.sessions import SessionError

# An editor's conversations (the ACP agent's) are mirrored as mcp-acp-<id>: its ids never meet
# an MCP client's session names.
EDITOR_PREFIX = MIRROR_PREFIX + "acp-"
# Editor sessions of older versions were mirrored under this prefix; still found on load.
OLD_EDITOR_PREFIX = "autosave-acp-"
ATTACHED = "chatcli_attached"  # a mirror's field: the session of the user's it is attached to


class Mirror:
    """The rolling machine session that holds a live conversation no session of the user's holds.
    If another process wrote it since this one did (two servers on one id), this conversation
    moves to a new name rather than overwrite it: nothing is lost."""

    def __init__(self, conv: Conversation, name: str) -> None:
        self.conv = conv
        self.base = self.name = name
        self.stamp = None  # the file as this process last wrote or read it

    def take_over(self, name: str | None = None) -> str | None:
        """Continue the conversation the mirror (or the mirror `name` of an older version) holds,
        if there is one; a line saying so."""
        name = name or self.name
        store = self.conv.store
        try:
            if store.stamp(name) is None:
                return None
            data, stamp = store.load(name)
        except StoreUnavailable:
            raise  # not "no conversation": a new one would fork the mirror once the store is back
        except SessionError as exc:
            return f"{exc}; starting a new conversation (the file is left as it is)"
        if name == self.name:
            self.stamp = stamp
        attached = data.extra.pop(ATTACHED, None)
        if isinstance(attached, str) and attached and store.exists(attached):
            try:  # it was attached to a session of the user's: attach again
                return sessions.attach(self.conv, attached).text
            except StoreUnavailable:
                raise  # as above: not a conversation to start anew
            except (SessionError, UsageError) as exc:
                return f"{exc}; continuing from '{name}'"
        taken = self.conv.binding.bind(name, data, stamp)  # a machine session: loaded, never bound
        self.conv.leave_transcript()  # a journal of its own, seeded from the mirror's
        return " ".join([f"Continued from '{name}' ({len(data.history)} messages).", *taken])

    def write(self) -> list[str]:
        """Rewrite the mirror. A conversation attached to a session of the user's is written there
        by the turn itself; its mirror then only says which session that is."""
        conv = self.conv
        if not conv.history and conv.session_name is None:
            return []
        if conv.session_name is not None:  # titled, so that listings say where the conversation is
            notes = []
            snapshot = SessionData(title=f"attached to '{conv.session_name}'", extra={ATTACHED: conv.session_name})
        else:
            notes = conv.sync_transcript()
            snapshot = conv.snapshot()
            snapshot.extra.pop(ATTACHED, None)
        store = conv.store
        try:
            moved = None
            for attempt in range(100):
                with store.lock(self.name):
                    current = store.stamp(self.name)
                    if current is None or current == self.stamp:
                        self.stamp = store.write(self.name, snapshot, latest=False)
                        break
                moved = self.name = f"{self.base}-{attempt + 2}"  # written by another process meanwhile
                self.stamp = None
        except SessionError as exc:
            return [*notes, f"the conversation could not be kept in '{self.name}': {exc}"]
        if moved:
            notes.append(f"'{self.base}' was written by another process; this conversation is kept in '{moved}'.")
        return notes

    def retire(self) -> list[str]:
        """Before the conversation is cleared: keep it one last time under a name of its own, so
        that the next conversation's turns do not overwrite it."""
        notes = self.write()
        # With autosave on, /session new keeps it as an autosave itself; with it off, here.
        if self.conv.history and self.conv.session_name is None and not self.conv.settings.session_autosave:
            try:
                kept = sessions.autosave(self.conv, self.conv.snapshot())
                notes.append(f"The cleared conversation was kept as '{kept}'.")
            except SessionError as exc:
                notes.append(str(exc))
        return notes

    def drop(self) -> None:
        """After a clear: the mirror goes (what it held was kept by `retire`), so that a restart
        does not bring the cleared conversation back."""
        if self.stamp is not None:
            with contextlib.suppress(SessionError):
                self.conv.store.remove_if_unchanged(self.name, *self.stamp)
        self.name, self.stamp = self.base, None


class Hosted:
    """One live conversation of a surface, by id: one turn or action at a time (`lock`)."""

    def __init__(self, host: Host, id: str, conv: Conversation) -> None:
        self.host, self.id, self.conv = host, id, conv
        self.mirror = Mirror(conv, host.prefix + id)
        self.lock = threading.Lock()
        self.notes: list[str] = []  # said with the next answer (the conversation was continued…)

    def keep(self) -> list[str]:
        """Rewrite the mirror (after a turn or an action), when mirrors are on; what went wrong
        is logged too."""
        notes = self.mirror.write() if self.host.settings.mcp_autosave else []
        for note in notes:
            self.host.warn(f"{self.mirror.name}: {note}")
        return notes

    def send(self, text: str, on_text: Callable[[str], None] = lambda _t: None,
             on_notice: Callable[[str], None] | None = None, approve: Approve | None = None,
             stop: Stop | None = None) -> TurnResult:
        """One turn (the run-turn pipeline every surface calls), then the mirror. A failed turn
        keeps the question, and so does the mirror; the mirror's notes join the result's. `stop`
        is the client's cancel: the turn ends at once, its partial answer kept as interrupted."""
        try:
            result = self.conv.send(text, on_text, on_notice, approve, stop)
        finally:
            kept = self.keep()  # logged there, also when the turn failed
        return result.with_notes(kept) if kept else result

    def answer(self, text: str, on_text: Callable[[str], None] = lambda _t: None, stop: Stop | None = None) -> str:
        """One turn as a server replies with it: what happened to the conversation since (it was
        continued, re-attached…) and during the turn, each as a `[line]`, then the answer."""
        notes, self.notes = self.notes, []
        result = self.send(text, on_text, on_notice=notes.append, stop=stop)
        said = result.text + (" [interrupted]" if result.interrupted else "")
        return "\n".join([*(f"[{note}]" for note in [*notes, *result.notes]), said])

    def clear(self, run: Callable[[], object]) -> tuple[object, list[str]]:
        """`run` clears the conversation (/session new): the mirror keeps it one last time first,
        then goes, so that a restart does not bring the cleared conversation back."""
        mirrored = self.host.settings.mcp_autosave
        notes = self.mirror.retire() if mirrored else []
        outcome = run()
        if mirrored:
            self.mirror.drop()
        return outcome, notes

    def finish(self) -> list[str]:
        """The surface goes away: a bound conversation is written one last time (as a REPL's is),
        an unbound one kept in its mirror, or, with mirrors off, as an autosave (as a REPL's is)."""
        if self.conv.session_name is not None or not self.host.settings.mcp_autosave:
            return sessions.finish(self.conv)
        return self.keep()


class Host:
    """The live conversations of one server, by id. `open` makes or finds one; a new one takes
    over its mirror (a restarted server continues where it was)."""

    def __init__(self, settings: Settings, warn: Callable[[str], None] = lambda _line: None,
                 registry: ProviderRegistry | None = None, prefix: str = MIRROR_PREFIX) -> None:
        self.settings = settings
        # Mirrors are `prefix` + id: the MCP server's `mcp-<session>`, the ACP agent's
        # `mcp-acp-<id>` (an editor's ids never meet an MCP client's session names).
        self.prefix = prefix
        self.warn = warn
        self.registry = registry  # the providers (tests give a fake model)
        self.live: dict[str, Hosted] = {}
        self._prompts: dict[Path | None, str] = {}
        self._guard = threading.RLock()  # `live` changes whole: resume opens under it
        self._store = None

    @property
    def store(self):
        """The session store, for what reads it without a conversation (a listing, one saved
        session): reading opens no live conversation and writes nothing."""
        if self._store is None:
            self._store = Home.of(self.settings).sessions()
        return self._store

    def _system_prompt(self, cwd: Path | None) -> str:
        if cwd not in self._prompts:
            prompt, warnings = load_system_prompt(self.settings, cwd)
            for warning in warnings:
                self.warn(warning)
            self._prompts[cwd] = prompt
        return self._prompts[cwd]

    def open(self, id: str, cwd: Path | None = None, *, take_over: bool = True) -> Hosted:
        validate_name(id)
        validate_name(self.prefix + id)  # its mirror's name: said now, not at the first turn
        with self._guard:
            hosted = self.live.get(id)
            if hosted is None:
                conv = Conversation(self.settings, system_prompt=self._system_prompt(cwd), registry=self.registry,
                                    journal=True)
                hosted = self.live[id] = Hosted(self, id, conv)
                if take_over and self.settings.mcp_autosave:
                    try:
                        note = hosted.mirror.take_over()
                    except BaseException:  # the store cannot be reached: this message fails, the next tries again
                        self.live.pop(id, None)
                        raise
                    if note:
                        hosted.notes.append(note)
            return hosted

    def resume(self, id: str, cwd: Path | None = None) -> tuple[Hosted, str]:
        """A conversation of this surface by id (live, or kept in its mirror), or else any saved
        session by that name, loaded into a new live conversation named `id`. Raises ChatcliError
        when there is none."""
        name = id  # what is loaded when no mirror holds it
        if id.lower().startswith(self.prefix) and len(id) > len(self.prefix):
            id = id[len(self.prefix):]  # a mirror loaded by the name listings show: continue it, not a copy
        with self._guard:  # another resume of the same id waits: it never sees it half-loaded
            hosted = self.live.get(id)
            if hosted is not None:
                return hosted, f"'{id}' is live"
            hosted = self.open(id, cwd, take_over=False)
            try:
                note = hosted.mirror.take_over() or hosted.mirror.take_over(OLD_EDITOR_PREFIX + id)
                if note is None:
                    note = sessions.load(hosted.conv, name).text
            except BaseException:
                self.live.pop(id, None)
                raise
            return hosted, note

    def finish(self, unbound: bool = True) -> list[tuple[str, str]]:
        """Every conversation ends as a REPL's does (see Hosted.finish); (id, line) pairs. One
        conversation's failure does not cost the others. `unbound=False` leaves the unbound ones
        as their last turn or action kept them (a mirror deleted on purpose stays deleted)."""
        said = []
        for id, hosted in list(self.live.items()):
            if not unbound and hosted.conv.session_name is None:
                continue
            try:
                said += [(id, note) for note in hosted.finish()]
            except Exception as exc:  # noqa: BLE001 - the others are still kept
                said.append((id, f"could not be kept: {exc}"))
        return said
