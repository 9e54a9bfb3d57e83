"""One turn on a terminal: spinner, streamed answer, then the notes about it. Shared by cli and repl."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TextIO

from chatcli.core.agent import Approval
from chatcli.core.errors import ChatcliError
from chatcli.engine.agent import Approve
from chatcli.engine.conversation import Conversation
from chatcli.engine.turn import TurnResult
from chatcli.render.stream import TRUNCATED, WINDOW_FULL, make_renderer


def stream_turn(
    conversation: Conversation,
    text: str,
    out: TextIO,
    guard: Callable[[], AbstractContextManager] = contextlib.nullcontext,
    approve: Approve | None = None,
) -> TurnResult:
    """Send `text` and render the answer as it arrives. A provider error ends the partial line
    and propagates (the caller says it in one line); anything else is marked interrupted.
    `approve` asks the user about a tool call: the answer so far is finished on screen first,
    and what follows is drawn after the question."""
    renderer = make_renderer(out, conversation.settings)
    renderer.start()

    def asked(question: Approval) -> str:
        renderer.finish()
        try:
            return approve(question)
        finally:
            renderer.start()

    try:
        with guard():
            result = conversation.send(text, on_text=renderer.feed, on_notice=renderer.note,
                                       approve=asked if approve is not None else None)
    except ChatcliError:
        renderer.finish()  # the error line that follows says the answer failed; no second marker
        raise
    except BaseException:
        renderer.finish(interrupted=True)  # stop the spinner before anything else is printed
        raise
    renderer.finish(interrupted=result.interrupted)
    if result.truncated:
        renderer.note(TRUNCATED)
    elif result.window_full:
        renderer.note(WINDOW_FULL)
    for note in result.notes:
        renderer.note(note)
    return result


def drop_typed_keys(stream) -> None:
    """Forget what was typed on a terminal and not yet read: before an approval question, keys
    typed earlier must not answer it."""
    import termios

    with contextlib.suppress(OSError, ValueError, termios.error):
        termios.tcflush(stream.fileno(), termios.TCIFLUSH)
