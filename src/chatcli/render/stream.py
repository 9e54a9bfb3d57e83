"""Streamed answers: rich Markdown with a spinner on a terminal, plain text otherwise."""

from __future__ import annotations

import sys
from typing import Protocol, TextIO

from chatcli.config.settings import Settings
from chatcli.core.line_breaks import keep_line_breaks
from chatcli.core.terminal import printable

INTERRUPTED = "[interrupted]"
TRUNCATED = "[the answer stopped at the token limit; CHATCLI_MAX_TOKENS raises it]"
WINDOW_FULL = "[the answer stopped where the context window was full; a shorter message leaves it more room]"
THINKING = " thinking…"  # beside the spinner, until an answer's first token


class StreamRenderer(Protocol):
    def start(self) -> None: ...
    def feed(self, text: str) -> None: ...
    def finish(self, interrupted: bool = False) -> None: ...
    def note(self, text: str) -> None: ...


class PlainStream:
    """Writes text exactly as it arrives: for pipes, --raw and NO_COLOR.

    Markers such as [interrupted] go to stderr, so that redirected output holds only the answer.
    """

    def __init__(self, out: TextIO | None = None, notes: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.notes = notes or sys.stderr
        self._last = "\n"

    def start(self) -> None:
        pass

    def feed(self, text: str) -> None:
        text = printable(text)  # what the model wrote cannot drive the terminal
        self.out.write(text)
        self.out.flush()
        self._last = text[-1:] or self._last

    def finish(self, interrupted: bool = False) -> None:
        if self._last != "\n":
            self.out.write("\n")
            self._last = "\n"
        self.out.flush()
        if interrupted:
            self.note(INTERRUPTED)

    def note(self, text: str) -> None:
        if self._last != "\n" and self.out.isatty():  # on a terminal a note starts its own line
            self.out.write("\n")
            self.out.flush()
            self._last = "\n"
        self.notes.write(printable(text) + "\n")
        self.notes.flush()


class MarkdownStream:
    """A spinner until the first token, then Markdown rendered as it arrives.

    Finished blocks (text before a blank line outside a code fence) are printed for good;
    only the block still being written is redrawn, so long answers never make the live
    area taller than the screen. Both go through keep_line_breaks, so a line the model
    ended looks the same while it streams and once printed.
    """

    def __init__(self, out: TextIO | None = None) -> None:
        from rich.console import Console

        self.console = Console(file=out or sys.stdout, highlight=False)
        self._live = None
        self._pending = ""
        self._printed_any = False
        self._separate_next = True

    def start(self) -> None:
        self._live = spinner(self.console, THINKING)
        self._live.start()

    def feed(self, text: str) -> None:
        from rich.markdown import Markdown

        self._pending += printable(text)  # rich lets escape sequences through
        cut = _last_block_boundary(self._pending)
        separate = True
        if not cut and self._pending.count("\n") > max(self.console.height - 4, 4) and not _in_fence(self._pending):
            # One block taller than the screen (a long list): the live area cannot redraw what
            # has scrolled away, so print its finished lines now and keep only the last one live.
            cut, separate = self._pending.rfind("\n") + 1, False
        done, self._pending = self._pending[:cut], self._pending[cut:]
        # The live area first: a print redraws it below, and it must not show the printed block again.
        self._live.update(Markdown(keep_line_breaks(self._pending)))
        if done:
            self._print(done, separate=separate)

    def finish(self, interrupted: bool = False) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        if self._pending.strip():
            self._print(self._pending)
            self._pending = ""
        if interrupted:
            self.note(INTERRUPTED)

    def note(self, text: str) -> None:
        if self._pending.strip():  # the text before the note comes before it on screen too
            self._print(self._pending)
            self._pending = ""
            if self._live is not None:
                from rich.text import Text

                self._live.update(Text(""))
        self.console.print(printable(text), style="dim", markup=False, highlight=False)

    def _print(self, block: str, separate: bool = True) -> None:
        from rich.markdown import Markdown

        if not block.strip():
            return
        if self._printed_any and self._separate_next:
            self.console.print()
        self._separate_next = separate
        self.console.print(Markdown(keep_line_breaks(block.strip("\n"))))
        self._printed_any = True


def spinner(console, text: str):
    """The spinner shown while nothing else is (before an answer's first token, while a command
    waits): a transient live area, erased when stopped. Returned not yet started."""
    from rich.live import Live
    from rich.spinner import Spinner

    return Live(Spinner("dots", text=text, style="cyan"), console=console, transient=True, refresh_per_second=12)


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
        and not settings.dumb_terminal
    )


def _in_fence(text: str) -> bool:
    fences = sum(1 for line in text.splitlines() if line.strip().startswith(("```", "~~~")))
    return fences % 2 == 1


def make_renderer(out: TextIO, settings: Settings) -> StreamRenderer:
    return MarkdownStream(out) if wants_markdown(out, settings) else PlainStream(out)
