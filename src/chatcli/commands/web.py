"""/web: the user's sessions as a page in their browser (engine/webview.py), served by this
process on 127.0.0.1 through a one-time link; the conversation is bound as `web-<id>`."""

from __future__ import annotations

import os
import weakref
from typing import TYPE_CHECKING

from chatcli.commands.registry import CommandRegistry, Result
from chatcli.core.errors import UsageError
from chatcli.engine import sessions

if TYPE_CHECKING:
    from chatcli.engine.conversation import Conversation
    from chatcli.engine.webview import WebView

_served: weakref.WeakKeyDictionary[Conversation, WebView] = weakref.WeakKeyDictionary()


def web_command(conv: Conversation, args: str) -> Result:
    words = args.split()
    if words == ["stop"]:
        view = _served.pop(conv, None)
        if view is None:
            return Result("The sessions page is not being served.")
        view.stop()
        return Result("The sessions page is closed; its links no longer open it.")
    if words:
        raise UsageError("usage: /web (a one-time link to your sessions' page) · /web stop")
    lines = []
    if conv.session_name is None:  # bound, as every web conversation: written each turn, no autosave copy
        lines.append(sessions.attach(conv, f"web-{os.urandom(4).hex()}").text)
    view = _served.get(conv)
    if view is None:
        from chatcli.engine.webview import WebView

        view = _served[conv] = WebView(conv)
    lines.append(f"Your sessions (list, read, search): {view.link()}")
    lines.append("The link opens the page once, in one browser, on this machine; /web again gives another, "
                 "/web stop closes the page.")
    return Result("\n".join(lines))


def register(registry: CommandRegistry) -> None:
    registry.command("web", "/web [stop]",
                     "a page of your sessions in your browser (list, read, search), on this machine")(web_command)


__all__ = ["register", "web_command"]
