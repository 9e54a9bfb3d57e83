"""/web: the user's sessions as a page in their browser (engine/webview.py), served by this
process on 127.0.0.1 through a one-time link; the conversation is bound as `web-<id>`."""

from __future__ import annotations

import os
import weakref
from typing import TYPE_CHECKING

from chatcli.commands.mistyped import unknown_action
from chatcli.commands.registry import CommandRegistry, Result
from chatcli.core.errors import UsageError
from chatcli.engine import sessions

if TYPE_CHECKING:
    from chatcli.engine.conversation import Conversation
    from chatcli.engine.webview import WebView

_served: weakref.WeakKeyDictionary[Conversation, WebView] = weakref.WeakKeyDictionary()

# The page's session is made at /web and removed when it ends unused, rather than made at the
# first turn after it: a name bound before its file exists is a state every binding step
# (adopt, write-through, merge, the journal's claim) and every surface would have to know,
# while a session made now is bound like any other and the page marks it "this conversation"
# from the start. It ends unused when nothing was written to it since (engine.webview.
# remove_if_unused): checked at /web stop, and when the conversation ends (its finalizer runs
# when it is dropped or the process exits, after the REPL's last write). A crash leaves an
# empty session behind, which --continue passes over (engine.sessions.most_recent).
# {conversation: (the session made for its page, empty, and the finalizer that removes it)}
_made: weakref.WeakKeyDictionary[Conversation, tuple[str, weakref.finalize]] = weakref.WeakKeyDictionary()


def web_command(conv: Conversation, args: str) -> Result:
    words = args.split()
    if words == ["stop"]:
        view = _served.pop(conv, None)
        if view is None:
            return Result("The sessions page is not being served.")
        view.stop()
        lines = ["The sessions page is closed; its links no longer open it."]
        removed = _remove_unused(conv)
        if removed:
            lines.append(f"Session '{removed}' was never chatted in, so it was removed.")
        return Result("\n".join(lines))
    if words and words[0].lower() != "stop":
        raise unknown_action("web", words[0].lower(), ("stop",))
    if words:
        raise UsageError("usage: /web (a one-time link to your sessions' page) · /web stop")
    lines = []
    if conv.session_name is None:  # bound, as every web conversation: written each turn, no autosave copy
        outcome = sessions.attach(conv, f"web-{os.urandom(4).hex()}")
        lines.append(outcome.text)
        written = conv.sync_stamp  # the file as /web wrote it
        if outcome.how == "created" and outcome.messages == 0 and written is not None:
            from chatcli.engine.webview import remove_if_unused

            # The finalizer holds the store, never the conversation. One made earlier for this
            # conversation (detached from since) keeps its own finalizer.
            _made[conv] = (outcome.name, weakref.finalize(conv, remove_if_unused, conv.store, outcome.name, written))
    view = _served.get(conv)
    if view is None:
        from chatcli.engine.webview import WebView

        view = _served[conv] = WebView(conv)
    lines.append(f"Your sessions (list, read, search): {view.link()}")
    lines.append("The link opens the page once, in one browser, on this machine; /web again gives another, "
                 "/web stop closes the page.")
    return Result("\n".join(lines))


def _remove_unused(conv: Conversation) -> str | None:
    """The page's session, removed now if nothing was chatted in it; its name, or None."""
    made = _made.get(conv)
    if made is None:
        return None
    name, finalizer = made
    if conv.session_name == name and conv.history:
        return None  # turns not written yet (write-through off): the last write at the end decides
    _made.pop(conv, None)
    if not finalizer():  # written to since: a session like any other from now on
        return None
    if conv.session_name == name:
        sessions.detach(conv)  # the conversation (empty) stays; the session it was bound to is gone
    return name


def register(registry: CommandRegistry) -> None:
    registry.command("web", "/web [stop]",
                     "a page of your sessions in your browser (list, read, search), on this machine")(web_command)


__all__ = ["register", "web_command"]
