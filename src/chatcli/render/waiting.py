"""The answer's spinner for work that shows nothing until it ends: a slash command such as
/compact, which waits for the model's summary."""

from __future__ import annotations

import threading
from typing import TextIO

from chatcli.render.stream import spinner

# Work that ends sooner draws nothing: most commands take milliseconds, and a spinner drawn and
# erased at once would only flicker.
DELAY = 0.3


class Waiting:
    """`with Waiting(out, text):` draws the spinner beside `text` once the work has gone on for
    `delay` seconds, and erases it when the work ends (returns, raises, or is interrupted)."""

    def __init__(self, out: TextIO, text: str, delay: float = DELAY) -> None:
        self.out, self.text, self.delay = out, text, delay
        self._lock = threading.Lock()
        self._ended = False
        self._live = None
        self._timer: threading.Timer | None = None

    def __enter__(self) -> Waiting:
        self._timer = threading.Timer(self.delay, self._draw)
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._timer.cancel()
        with self._lock:  # the spinner is either never drawn or fully drawn before it is erased
            self._ended = True
            if self._live is not None:
                self._live.stop()
                self._live = None

    def _draw(self) -> None:
        from rich.console import Console

        with self._lock:
            if self._ended:
                return
            self._live = spinner(Console(file=self.out, highlight=False), self.text)
            self._live.start()
