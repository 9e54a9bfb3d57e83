"""An answer shown in a chat while it streams, the way both chat adapters edit their message:
the text so far is shown at most once every EDIT_EVERY seconds (channels limit edit rates),
best effort (a failed edit costs the preview, never the answer, which is sent whole at the
end), and the pieces a channel's message limit cuts a long reply into."""

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


def parts(text: str, limit: int) -> list[str]:
    """`text` in pieces of at most `limit` characters, cut at line ends where it can."""
    out = []
    while len(text) > limit:
        cut = text.rfind("\n", 0, limit)
        cut = cut if cut > limit // 2 else limit
        out.append(text[:cut])
        text = text[cut:].lstrip("\n")
    return [*out, text] if text else out


__all__ = ["EDIT_EVERY", "Preview", "parts"]
