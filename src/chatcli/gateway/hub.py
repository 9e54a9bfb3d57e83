"""The Conversation Hub: the chat gateway's live conversations, one per principal (a
sender in a channel), hosted like MCP's and ACP's (engine/hosted.py) and remembered in hub.db
(store/hub.py). The gateway's adapters (webhook, Telegram, Slack, WhatsApp) hand each message to
`ConversationHub.handle` and send back its reply; everything else is here, once.

- Only principals on the allow-list get an answer. An unlisted sender gets one refusal line,
  its first time; every attempt is counted in hub.db (and logged by the caller). A sender
  admitted by a wildcard only is a guest: its own conversation, no access to the sessions.
- A message is answered once: a channel redelivering it (a restart, a replayed webhook) gets
  no second answer; one a killed daemon never finished answering is answered when it comes again.
- `/session attach|detach|status|save|list|new|load|search` run the one implementation every
  surface runs (commands/session.py); what would delete, export or overwrite from a chat is
  refused, and a sender never sees another sender's threads.
- The principal's binding is persisted after every message. A restarted daemon takes each
  thread's mirror over (which re-attaches a bound one), and with mirrors off it attaches the
  persisted binding again itself.
- `/session load` and `/session new` rotate the principal's thread: the loaded or new
  conversation lives in a new thread, and the old thread's backlog stays in its own mirror
  (retention expires it), never spliced onto the loaded session.
- Turns write through to a bound session and adopt what other surfaces wrote, as the REPL's do;
  an unbound principal's conversation is kept in its machine mirror `mcp-gw-<thread>`.
"""

from __future__ import annotations

import os
import re
import secrets
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace

from chatcli.commands import session as session_commands
from chatcli.commands.registry import CommandRegistry
from chatcli.config.settings import Settings
from chatcli.core.errors import ChatcliError, UsageError
from chatcli.core.names import GATEWAY_PREFIX
from chatcli.core.terminal import printable
from chatcli.engine import sessions
from chatcli.engine.hosted import Host, Hosted
from chatcli.providers.base import ProviderRegistry
from chatcli.store.home import Home
from chatcli.store.hub import BUSY, NEW, Principal

# The /session actions a sender on the allow-list may run from a chat; the others (delete,
# fork, export, transcript) delete or write files on the daemon's machine and are for the
# terminal. A sender admitted only by a wildcard ("telegram:*") is a guest: it has its own
# conversation and no access to the session store (GUEST_ACTIONS), and no session tools.
CHANNEL_ACTIONS = ("attach", "detach", "status", "save", "list", "new", "load", "search")
GUEST_ACTIONS = ("status", "new")
ROTATING = ("load", "new")
REFUSAL = "This chatcli does not answer you: your id ({principal}) is not on its allow-list."


@dataclass(frozen=True)
class Reply:
    text: str
    refused: bool = False
    busy: bool = False  # that message is being answered now (a retry that came too soon): no reply


BUSY_REPLY = Reply("", busy=True)


class ConversationHub:
    def __init__(self, settings: Settings, allowed: Collection[str], *, registry: ProviderRegistry | None = None,
                 warn: Callable[[str], None] = lambda _line: None) -> None:
        """`allowed`: "channel:sender" ids, or "channel:*" for every sender of a channel (guests).
        Raises HubError now when hub.db cannot be used (a daemon refuses to start)."""
        self.settings = settings
        self.allowed = frozenset(allowed)
        self.hub = Home.of(settings).hub()
        self.hub.principals()  # opened now: a hub.db chatcli cannot use stops the start, not each message
        # Named senders' conversations, and guests' (no tools that read other sessions).
        self.hosts = {False: Host(settings, warn=warn, registry=registry, prefix=GATEWAY_PREFIX),
                      True: Host(replace(settings, chat_tools=False), warn=warn, registry=registry,
                                 prefix=GATEWAY_PREFIX)}
        self.warn = warn
        # This hub's claims on messages it is answering (store/hub.py: Hub.claim).
        self.owner = f"{os.getpid()}:{secrets.token_hex(6)}"
        # Messages are answered one principal at a time per principal: a second message of the
        # same sender waits, and then finds the thread a /session load of the first moved to.
        self._principal_locks: dict[tuple[str, str], threading.Lock] = {}
        self._guard = threading.Lock()

    def allows(self, channel: str, sender: str) -> bool:
        return f"{channel}:{sender}" in self.allowed or f"{channel}:*" in self.allowed

    def is_guest(self, channel: str, sender: str) -> bool:
        return f"{channel}:{sender}" not in self.allowed

    def handle(self, channel: str, sender: str, text: str, *, display: str = "",
               message_id: str | None = None, on_text: Callable[[str], None] | None = None,
               instead: str | None = None, on_reply: Callable[[Reply], None] | None = None,
               on_turn: Callable[[], None] | None = None) -> Reply | None:
        """The reply to one message, or None when none is due (already answered; an unlisted
        sender's later messages), or BUSY_REPLY while another try of it is being answered.
        Never raises for what the message says: errors are replies. A message whose answer was
        cut short (a daemon killed during its turn) is answered when its channel brings it again.
        `on_text` is given the answer's text as it streams (a channel that edits its message).
        `instead`: the reply to a message the hub cannot read (an image, a voice note), given
        without a model turn to a sender the allow-list admits. `on_reply` is given the reply
        before the message counts as answered (a channel that keeps it until it is sent): when
        it raises, the message is not answered and a retry answers it. `on_turn` is called when
        the message is about to be answered (a channel's typing indicator), never for one that
        gets no answer or a refusal."""
        if not text.strip():
            return None  # nothing to answer
        key = None if message_id is None else f"{sender}/{message_id}"  # a sender's ids are its own
        if key is not None:
            state = self.hub.claim(channel, key, self.owner)
            if state != NEW:
                return BUSY_REPLY if state == BUSY else None
        try:
            reply = self._handle(channel, sender, text, display, on_text, instead, on_turn)
            if reply is not None and on_reply is not None:
                on_reply(reply)
        except BaseException:
            if key is not None:
                self.hub.release(channel, key)  # not answered: a retry answers it
            raise
        if key is not None:
            self.hub.answered(channel, key)
        return reply

    def _handle(self, channel: str, sender: str, text: str, display: str,
                on_text: Callable[[str], None] | None, instead: str | None = None,
                on_turn: Callable[[], None] | None = None) -> Reply | None:
        if not self.allows(channel, sender):
            first = self.hub.refuse(channel, sender, display)
            shown = printable(f"{channel}:{sender}")[:200]
            self.warn(f"refused a message from {shown} (not on the allow-list)")
            return Reply(REFUSAL.format(principal=shown), refused=True) if first else None
        self.hub.principal(channel, sender, display)
        if instead is not None:
            return Reply(instead)
        if on_turn is not None:
            on_turn()
        with self._lock_of(channel, sender):  # across its thread's rotations
            principal = self.hub.get(channel, sender)
            hosted = self._hosted(principal)
            try:
                with hosted.lock:
                    reply, hosted = self._answer(principal, hosted, text, on_text)
            except ChatcliError as exc:
                reply = f"error: {exc}"
            self.hub.bind(channel, sender, hosted.conv.session_name)
        return Reply(self._shown(reply))

    def _shown(self, text: str) -> str:
        """The reply as a chat shows it: the daemon's paths (a session file in a status line, an
        error naming a file) are said relative to $CHATCLI_HOME and ~, not as this machine's
        absolute paths, which are not the channel's business."""
        for path, shown in ((str(self.settings.home), "$CHATCLI_HOME"), (os.path.expanduser("~"), "~")):
            if len(path) > 1:
                text = re.sub(re.escape(path) + r"(?![\w.-])", lambda _match, shown=shown: shown, text)
        return text

    def _answer(self, principal: Principal, hosted: Hosted, text: str,
                on_text: Callable[[str], None] | None) -> tuple[str, Hosted]:
        if not CommandRegistry.is_command(text):  # as the REPL reads it: a path or //text is for the model
            return hosted.answer(CommandRegistry.as_prompt(text), on_text=on_text or (lambda _piece: None)), hosted
        command, _, args = text.strip()[1:].partition(" ")
        pending, hosted.notes = hosted.notes, []  # the conversation was continued, re-attached…
        command = command.partition("@")[0].lower()  # Telegram's /session@botname
        reply, hosted = self._command(principal, hosted, command, args.strip())
        return "\n".join([*(f"[{note}]" for note in pending), reply]), hosted

    def _lock_of(self, channel: str, sender: str) -> threading.Lock:
        with self._guard:
            return self._principal_locks.setdefault((channel, sender), threading.Lock())

    def _host(self, principal: Principal) -> Host:
        return self.hosts[self.is_guest(principal.channel, principal.sender)]

    def _open(self, principal: Principal, *, take_over: bool = True) -> Hosted:
        """The principal's thread, which sees no other sender's threads."""
        hosted = self._host(principal).open(principal.thread, take_over=take_over)
        hosted.conv.memory = not self.is_guest(principal.channel, principal.sender)  # your notes are yours
        own = principal.mirrors.lower()
        hosted.conv.hidden = lambda name: name.lower().startswith(GATEWAY_PREFIX) and not name.lower().startswith(own)
        return hosted

    def _hosted(self, principal: Principal) -> Hosted:
        """The principal's live conversation: taken over from its mirror at the first message
        after a start; bound again to its persisted session when no mirror said so, unless that
        session was deleted meanwhile (it is not made again: the sender is told, and unbound)."""
        fresh = principal.thread not in self._host(principal).live
        hosted = self._open(principal)
        if fresh and principal.session and hosted.conv.session_name != principal.session:
            if not hosted.conv.store.exists(principal.session):
                hosted.notes.append(f"the session '{principal.session}' this chat was bound to no longer exists; "
                                    "this chat is not bound now")
                return hosted
            try:
                hosted.notes.append(sessions.attach(hosted.conv, principal.session).text)
            except ChatcliError as exc:
                hosted.notes.append(f"the binding to '{principal.session}' could not be restored: {exc}")
        return hosted

    def _command(self, principal: Principal, hosted: Hosted, command: str, args: str) -> tuple[str, Hosted]:
        if command not in ("session", "newsession"):
            raise UsageError(f"only /session commands work here ({', '.join(self._actions(principal))}); other "
                             "text is sent to the model (start it with // to send a leading /)")
        action, sub, rest = session_commands.hosted_action(command, args)
        action = action or "status"
        sub = sub or session_commands.BY_NAME.get(action)
        allowed = self._actions(principal)
        if sub is None or action not in allowed:
            if sub is None:
                what = f"unknown action '{action}'"
            elif action in CHANNEL_ACTIONS:  # a guest's
                what = f"'/session {action}' is not available from this chat: it is for senders the allow-list names"
            else:
                what = f"'/session {action}' is not available from this chat; use the terminal"
            raise UsageError(f"{what} (here: {', '.join(allowed)})")
        if action == "save":
            self._refuse_overwrite(hosted, rest)
        if action not in ROTATING:
            return session_commands.run_hosted(hosted, sub, rest), hosted
        return self._rotate(principal, hosted, sub, rest)

    def _actions(self, principal: Principal) -> tuple[str, ...]:
        return GUEST_ACTIONS if self.is_guest(principal.channel, principal.sender) else CHANNEL_ACTIONS

    @staticmethod
    def _refuse_overwrite(hosted: Hosted, name: str) -> None:
        """From a chat, /session save writes the bound session or a new one, never over another."""
        name = name.strip()
        if name and name != hosted.conv.session_name and hosted.conv.store.exists(name):
            raise UsageError(f"session '{name}' exists; from a chat, /session save does not replace another session "
                             f"(/session attach {name} continues it; or save under a new name)")

    def _rotate(self, principal: Principal, hosted: Hosted, sub, args: str) -> tuple[str, Hosted]:
        """Load or new in a new thread: on success the old conversation is kept as its surface
        leaves it (bound: written; unbound: its mirror, or an autosave with mirrors off) and the
        principal's thread moves on; on failure nothing changes."""
        nxt = replace(principal, generation=principal.generation + 1)
        host = self._host(principal)
        fresh = self._open(nxt, take_over=False)
        try:
            with fresh.lock:
                text = session_commands.run_hosted(fresh, sub, args)
        except BaseException:
            host.live.pop(nxt.thread, None)
            raise
        notes = hosted.finish()
        host.live.pop(principal.thread, None)
        self.hub.rotate(principal.channel, principal.sender)
        return "\n".join([text, *notes]), fresh

    def close(self) -> list[tuple[str, str]]:
        """The daemon stops: every conversation ends as a REPL's does (engine/hosted.py)."""
        try:
            return [*self.hosts[False].finish(), *self.hosts[True].finish()]
        finally:
            self.hub.close()


__all__ = ["BUSY_REPLY", "CHANNEL_ACTIONS", "GATEWAY_PREFIX", "GUEST_ACTIONS", "REFUSAL", "ConversationHub", "Reply"]
