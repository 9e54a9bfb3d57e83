"""Named sessions for a live conversation: save, load, attach, fork…, write-through and adoption (SPEC §5, §6.1).

Each operation is one function over a Conversation and its SessionStore; the /session
commands, the CLI twins and (later) the MCP and ACP servers all call these.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from chatcli.core.errors import UsageError
from chatcli.core.names import autosave_name, is_trivial, validate_name, validate_user_target
from chatcli.core.session import SessionData
from typing import TYPE_CHECKING
from chatcli.store.sessions import SessionError, SessionInfo

if TYPE_CHECKING:  # annotations only: scripts that list sessions need no conversation machinery
    from chatcli.engine.conversation import Conversation


@dataclass(frozen=True)
class Outcome:
    """What an operation did, in words for the user, plus any side notes (one line each)."""

    text: str
    notes: tuple[str, ...] = ()


def save(conv: Conversation, name: str) -> Outcome:
    validate_user_target(name)
    store = conv.store
    data = conv.session.copy()
    data.history = list(conv.history)
    # Our own bound file, unchanged since we synced, needs no re-read before overwriting.
    ours = name == conv.session_name and store.stamp(name) == conv.sync_stamp
    with store.lock(name):
        stamp = store.save(name, data, check_existing=not ours)
    conv.bind(name, data, stamp)
    return Outcome(f"Session '{name}' saved ({len(data.history)} messages).", conv.size_notes(name, stamp))


def load(conv: Conversation, name: str) -> Outcome:
    validate_name(name)
    data, stamp = conv.store.load(name)  # fails before anything in memory changes
    notes = _keep_unsaved(conv, name)
    conv.bind(name, data, stamp)
    text = f"Session '{name}' loaded ({len(data.history)} messages)."
    if conv.session_name is None:
        text += " It is made by chatcli, so it is not bound: save it under a name of yours to keep working in it."
    return Outcome(text, notes)


def attach(conv: Conversation, name: str) -> Outcome:
    """Bind to `name`: load it when it exists, create it from this conversation when it does not."""
    validate_user_target(name)
    if conv.store.exists(name):
        data, stamp = conv.store.load(name)
        notes = _keep_unsaved(conv, name)
        conv.bind(name, data, stamp)
        return Outcome(f"Attached to session '{name}' ({len(data.history)} messages).", notes)
    data = conv.session.copy()
    data.history = list(conv.history)
    with conv.store.lock(name):
        stamp = conv.store.save(name, data)
    conv.bind(name, data, stamp)
    return Outcome(f"Attached to session '{name}' ({len(data.history)} messages; created).")


def detach(conv: Conversation) -> Outcome:
    if conv.session_name is None:
        return Outcome("Not bound to a session.")
    name = conv.session_name
    conv.unbind()
    return Outcome(f"Detached from session '{name}'; the conversation stays in memory ({len(conv.history)} messages).")


def status(conv: Conversation) -> Outcome:
    count = len(conv.history)
    if conv.session_name is None:
        return Outcome(f"Not bound to a session ({count} messages in memory).")
    mode = "write-through on" if conv.settings.session_writethrough else "write-through off"
    return Outcome(
        f"Bound to session '{conv.session_name}' ({count} messages, {mode}): {conv.store.path(conv.session_name)}"
    )


def new(conv: Conversation) -> Outcome:
    conv.bind(None, SessionData(), None)
    return Outcome("New conversation started; history cleared.")


def delete(conv: Conversation, name: str) -> Outcome:
    validate_name(name)
    with conv.store.lock(name):
        conv.store.delete(name)
    if name == conv.session_name:
        new(conv)
        return Outcome(f"Session '{name}' deleted. It was the active session: history cleared, new conversation started.")
    return Outcome(f"Session '{name}' deleted.")


def fork(conv: Conversation, name: str) -> Outcome:
    """An independent copy of the current conversation (saved or not) under `name`; continue there."""
    validate_user_target(name)
    if conv.store.exists(name):
        raise UsageError(f"session '{name}' already exists; fork to a new name")
    parent = conv.session_name
    data = conv.session.copy()
    data.history = list(conv.history)
    data.transcript_id = None  # the fork gets a journal of its own
    with conv.store.lock(name):
        stamp = conv.store.save(name, data)
    conv.bind(name, data, stamp)
    origin = f"'{parent}'" if parent else "the unsaved conversation"
    return Outcome(
        f"Session forked.\n  from:     {origin}\n  to:       '{name}'\n  messages: {len(data.history)}\n"
        "Now working in the fork; the original is untouched."
    )


def listing(conv: Conversation) -> list[SessionInfo]:
    return conv.store.list()


def most_recent(conv: Conversation) -> str | None:
    sessions = [info for info in conv.store.list() if info.messages is not None]
    return sessions[0].name if sessions else None


def _keep_unsaved(conv: Conversation, replacing: str) -> tuple[str, ...]:
    """Before a load replaces the history: keep an unbound, non-trivial conversation as an autosave."""
    if conv.session_name is not None or is_trivial(conv.history) or not conv.settings.session_autosave:
        return ()
    data = conv.session.copy()
    data.history = list(conv.history)
    name = autosave_name(datetime.datetime.now(), conv.store.exists)
    try:
        conv.store.save(name, data)
    except SessionError as exc:
        raise SessionError(f"{exc}; not loading '{replacing}', so the unsaved conversation is not lost") from None
    return (f"The unsaved conversation was kept as '{name}'.",)




def start(conv: Conversation, *, resume: bool = False, name: str | None = None) -> list[str]:
    """Bind at start-up: `--session NAME` attaches (creating it), `--continue` loads the newest session."""
    if name:
        return [attach(conv, name).text]
    if resume:
        newest = most_recent(conv)
        if newest is None:
            return ["No saved session to continue; starting a new conversation."]
        outcome = load(conv, newest)
        return [outcome.text.replace("loaded", "resumed", 1), *outcome.notes]
    return []
