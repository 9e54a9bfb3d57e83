"""An answer shown in a chat while it streams, the way both chat adapters edit their message:
the text so far is shown at most once every EDIT_EVERY seconds (channels limit edit rates),
best effort (a failed edit costs the preview, never the answer, which is sent whole at the
end: by a last edit, or as new messages when that edit fails), and the pieces a channel's
message limit cuts a long reply into. A channel gives `Streamer` two calls: send a message
(returning what names it) and edit one."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

EDIT_EVERY = 1.0


class Preview:
    def __init__(self, show: Callable[[str], None], limit: int) -> None:
        """`show(text)` puts the text so far on screen (sends the message, or edits it)."""
        self.show, self.limit = show, limit
        self.text = ""
        self.last = 0.0
        self.lock = threading.Lock()

    def feed(self, piece: str) -> None:
        """From the worker thread that runs the turn: more of the answer."""
        with self.lock:
            self.text += piece
            if time.monotonic() - self.last < EDIT_EVERY or not self.text.strip():
                return
            self.last = time.monotonic()
            shown = self.text[:self.limit]
        try:
            self.show(shown)
        except Exception:  # noqa: BLE001 - best effort, see the module's note
            pass


class Streamer:
    """One answer's message in a chat: sent at its first words, edited as more come, and made
    the whole reply at the end. `send(text)` posts a message and returns its handle;
    `edit(handle, text)` changes it. Both are called from worker threads."""

    def __init__(self, send: Callable[[str], object], edit: Callable[[object, str], None], limit: int) -> None:
        self.send, self.edit, self.limit = send, edit, limit
        self.sent: object = None
        self.shown = ""
        self.preview = Preview(self._show, limit)
        self.feed = self.preview.feed

    def _show(self, shown: str) -> None:
        if shown == self.shown:
            return
        if self.sent is None:
            self.sent = self.send(shown)
        else:
            self.edit(self.sent, shown)
        self.shown = shown

    def finish(self, reply: str) -> None:
        with self.preview.lock:  # no preview edit lands after the last one
            pieces = parts(reply, self.limit) or ["(no answer)"]
            try:
                self._show(pieces[0])
            except Exception:  # noqa: BLE001 - the preview stays; the answer follows as a new message
                self.send(pieces[0])
            for piece in pieces[1:]:
                self.send(piece)


def parts(text: str, limit: int) -> list[str]:
    """`text` in pieces of at most `limit` characters, each cut at the last paragraph break
    that leaves it at least half full, or else at a line end, or else between words, and only
    as a last resort inside a word (one of more than half the limit)."""
    out = []
    while len(text) > limit:
        for mark in ("\n\n", "\n", " "):
            cut = text.rfind(mark, 0, limit)
            if cut > limit // 2:
                rest = text[cut + len(mark):]
                break
        else:
            cut, rest = limit, text[limit:]
        out.append(text[:cut].rstrip("\n"))
        text = rest.lstrip("\n")  # a next line's own indent stays (code)
    return [*out, text] if text else out


__all__ = ["EDIT_EVERY", "Preview", "Streamer", "parts"]
