"""Streamed answers: rich Markdown with a spinner on a terminal, plain text otherwise."""

from __future__ import annotations

import sys
from typing import Protocol, TextIO

from chatcli.config import Settings

INTERRUPTED = "[interrupted]"


class StreamRenderer(Protocol):
    def start(self) -> None: ...
    def feed(self, text: str) -> None: ...
    def finish(self, interrupted: bool = False) -> None: ...


class PlainStream:
    """Writes text exactly as it arrives: for pipes, --raw and NO_COLOR."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self._last = "\n"

    def start(self) -> None:
        pass

    def feed(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
        self._last = text[-1:] or self._last

    def finish(self, interrupted: bool = False) -> None:
        if interrupted:
            self.out.write(("" if self._last == "\n" else "\n") + INTERRUPTED + "\n")
        elif self._last != "\n":
            self.out.write("\n")
        self.out.flush()


class MarkdownStream:
    """A spinner until the first token, then Markdown rendered as it arrives.

    Finished blocks (text before a blank line outside a code fence) are printed for good;
    only the block still being written is redrawn, so long answers never make the live
    area taller than the screen.
    """

    def __init__(self, out: TextIO | None = None) -> None:
        from rich.console import Console

        self.console = Console(file=out or sys.stdout, highlight=False)
        self._live = None
        self._pending = ""
        self._printed_any = False

    def start(self) -> None:
        from rich.live import Live
        from rich.spinner import Spinner

        self._live = Live(
            Spinner("dots", text=" thinking…", style="cyan"),
            console=self.console,
            transient=True,
            refresh_per_second=12,
        )
        self._live.start()

    def feed(self, text: str) -> None:
        from rich.markdown import Markdown

        self._pending += text
        cut = _last_block_boundary(self._pending)
        if cut > 0:
            done, self._pending = self._pending[:cut], self._pending[cut:]
            self._print(done)
        self._live.update(Markdown(self._pending))

    def finish(self, interrupted: bool = False) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        if self._pending.strip():
            self._print(self._pending)
            self._pending = ""
        if interrupted:
            self.console.print(INTERRUPTED, style="dim")

    def _print(self, block: str) -> None:
        from rich.markdown import Markdown

        if not block.strip():
            return
        if self._printed_any:
            self.console.print()
        self.console.print(Markdown(block.strip("\n")))
        self._printed_any = True


def _last_block_boundary(text: str) -> int:
    """Offset just after the last blank line that is not inside a ``` fence, or 0."""
    boundary = 0
    in_fence = False
    offset = 0
    previous_blank = False
    for line in text.splitlines(keepends=True):
        offset += len(line)
        if not line.endswith("\n"):
            break
        stripped = line.strip()
        if stripped.startswith("```") or stripped.startswith("~~~"):
            in_fence = not in_fence
        blank = not stripped
        if blank and not in_fence and not previous_blank:
            boundary = offset
        previous_blank = blank
    return boundary


def wants_markdown(out: TextIO, settings: Settings) -> bool:
    """Markdown on a real terminal; plain text for pipes, --raw, NO_COLOR and TERM=dumb."""
    return (
        out.isatty()
        and not settings.raw
        and not settings.no_color
        and settings.env.get("TERM", "") != "dumb"
    )


def make_renderer(out: TextIO, settings: Settings) -> StreamRenderer:
    return MarkdownStream(out) if wants_markdown(out, settings) else PlainStream(out)
