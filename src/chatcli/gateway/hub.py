"""The Conversation Hub (issue 18): the chat gateway's live conversations, one per principal (a
sender in a channel), hosted like MCP's and ACP's (engine/hosted.py) and remembered in hub.db
(store/hub.py). The gateway's adapters (webhook, Telegram, Slack) hand each message to
`ConversationHub.handle` and send back its reply; everything else is here, once.

- Only principals on the allow-list get an answer. An unlisted sender gets one refusal line,
  its first time; every attempt is counted in hub.db (and logged by the caller).
- A message is answered once: a channel redelivering it (a restart, a replayed webhook) gets
  no second answer.
- `/session attach|detach|status|save|list|new|load|search` run the one implementation every
  surface runs (commands/session.py); what would delete or export from a chat is refused.
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
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace

from chatcli.commands import session as session_commands
from chatcli.config.settings import Settings
from chatcli.core.errors import ChatcliError, UsageError
from chatcli.core.names import GATEWAY_PREFIX
from chatcli.engine import sessions
from chatcli.engine.hosted import Host, Hosted
from chatcli.providers.base import ProviderRegistry
from chatcli.store.home import Home
from chatcli.store.hub import Principal

# The /session actions a chat channel may run; the others (delete, fork, export, transcript)
# delete or write files on the daemon's machine and are for the terminal.
CHANNEL_ACTIONS = ("attach", "detach", "status", "save", "list", "new", "load", "search")
ROTATING = ("load", "new")
REFUSAL = "This chatcli does not answer you: your id is not on its allow-list."


@dataclass(frozen=True)
class Reply:
    text: str
    refused: bool = False


class ConversationHub:
    def __init__(self, settings: Settings, allowed: Collection[str], *, registry: ProviderRegistry | None = None,
                 warn: Callable[[str], None] = lambda _line: None) -> None:
        """`allowed`: "channel:sender" ids, or "channel:*" for every sender of a channel."""
        self.settings = settings
        self.allowed = frozenset(allowed)
        self.hub = Home.of(settings).hub()
        self.host = Host(settings, warn=warn, registry=registry, prefix=GATEWAY_PREFIX)
        self.warn = warn
        # Messages are answered one principal at a time per principal: a second message of the
        # same sender waits, and then finds the thread a /session load of the first moved to.
        self._principal_locks: dict[tuple[str, str], threading.Lock] = {}
        self._guard = threading.Lock()

    def allows(self, channel: str, sender: str) -> bool:
        return f"{channel}:{sender}" in self.allowed or f"{channel}:*" in self.allowed

    def handle(self, channel: str, sender: str, text: str, *, display: str = "",
               message_id: str | None = None, on_text: Callable[[str], None] | None = None) -> Reply | None:
        """The reply to one message, or None when none is due (already answered; an unlisted
        sender's later messages). Never raises for what the message says: errors are replies.
        `on_text` is given the answer's text as it streams (a channel that edits its message)."""
        if message_id is not None and not self.hub.first_delivery(channel, message_id):
            return None
        if not self.allows(channel, sender):
            first = self.hub.refuse(channel, sender, display)
            self.warn(f"refused a message from {channel}:{sender} (not on the allow-list)")
            return Reply(REFUSAL, refused=True) if first else None
        self.hub.principal(channel, sender, display)
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
        stripped = text.strip()
        command, _, args = stripped[1:].partition(" ") if stripped.startswith("/") \
            and not stripped.startswith("//") else ("", "", "")
        if not command:
            return hosted.answer(stripped[1:] if stripped.startswith("//") else text,
                                 on_text=on_text or (lambda _piece: None)), hosted
        pending, hosted.notes = hosted.notes, []  # the conversation was continued, re-attached…
        reply, hosted = self._command(principal, hosted, command.lower(), args.strip())
        return "\n".join([*(f"[{note}]" for note in pending), reply]), hosted

    def _lock_of(self, channel: str, sender: str) -> threading.Lock:
        with self._guard:
            return self._principal_locks.setdefault((channel, sender), threading.Lock())

    def _hosted(self, principal: Principal) -> Hosted:
        """The principal's live conversation: taken over from its mirror at the first message
        after a start; bound again to its persisted session when no mirror said so."""
        fresh = principal.thread not in self.host.live
        hosted = self.host.open(principal.thread)
        if fresh and principal.session and hosted.conv.session_name != principal.session:
            try:
                hosted.notes.append(sessions.attach(hosted.conv, principal.session).text)
            except ChatcliError as exc:
                hosted.notes.append(f"the binding to '{principal.session}' could not be restored: {exc}")
        return hosted

    def _command(self, principal: Principal, hosted: Hosted, command: str, args: str) -> tuple[str, Hosted]:
        if command == "newsession":
            command, args = "session", "new " + args
        if command != "session":
            raise UsageError(f"only /session commands work here ({', '.join(CHANNEL_ACTIONS)}); other text is "
                             "sent to the model (start it with // to send a leading /)")
        action, _, rest = args.partition(" ")
        action = action.lower() or "status"
        sub = session_commands.BY_NAME.get(action)
        if sub is None or action not in CHANNEL_ACTIONS:
            what = f"'/session {action}' is not available from a chat channel; use the terminal" if sub else \
                f"unknown action '{action}'"
            raise UsageError(f"{what} (here: {', '.join(CHANNEL_ACTIONS)})")
        if action not in ROTATING:
            return session_commands.run_hosted(hosted, sub, rest.strip()), hosted
        return self._rotate(principal, hosted, sub, rest.strip())

    def _rotate(self, principal: Principal, hosted: Hosted, sub, args: str) -> tuple[str, Hosted]:
        """Load or new in a new thread: on success the old conversation is kept as its surface
        leaves it (bound: written; unbound: its mirror, or an autosave with mirrors off) and the
        principal's thread moves on; on failure nothing changes."""
        nxt = replace(principal, generation=principal.generation + 1)
        fresh = self.host.open(nxt.thread, take_over=False)
        try:
            with fresh.lock:
                text = session_commands.run_hosted(fresh, sub, args)
        except BaseException:
            self.host.live.pop(nxt.thread, None)
            raise
        notes = hosted.finish()
        self.host.live.pop(principal.thread, None)
        self.hub.rotate(principal.channel, principal.sender)
        return "\n".join([text, *notes]), fresh

    def close(self) -> list[tuple[str, str]]:
        """The daemon stops: every conversation ends as a REPL's does (engine/hosted.py)."""
        try:
            return self.host.finish()
        finally:
            self.hub.close()


__all__ = ["CHANNEL_ACTIONS", "GATEWAY_PREFIX", "REFUSAL", "ConversationHub", "Reply"]
