"""`chatcli -p TEXT` and piped prompts: ask once, stream the answer, exit. Writes a session only
when asked to (--session, --continue)."""

from __future__ import annotations

import sys
from typing import TextIO

from chatcli.cli import silence_stdout
from chatcli.config.settings import Settings
from chatcli.core.agent import Approval, ask
from chatcli.core.errors import ChatcliError, UsageError
from chatcli.engine import sessions
from chatcli.engine.conversation import Conversation, load_system_prompt
from chatcli.render.turn import drop_typed_keys, stream_turn


def compose_prompt(flag: str | None, piped: str | None) -> str:
    """`-p` text, with piped text appended after a blank line; piped text alone is the prompt."""
    parts = [part for part in (flag, piped) if part is not None and part.strip()]
    if not parts:
        raise UsageError("nothing to ask: give -p TEXT or pipe text on stdin")
    return "\n\n".join(part.strip("\n") for part in parts)


def run_oneshot(settings: Settings, flag: str | None, piped: str | None, start: dict | None = None,
                mode: str = "chat", yes: bool = False) -> int:
    """Without --session/--continue nothing is written; with them the turn goes to that session.
    In agent or coder mode a shell command or file write asks on the terminal (stdin a
    terminal), is approved by --yes, or else is refused and the model told so."""
    prompt = compose_prompt(flag, piped)
    system_prompt, warnings = load_system_prompt(settings)
    for warning in warnings:
        sys.stderr.write(f"chatcli: warning: {warning}\n")
    conversation = Conversation(settings, system_prompt=system_prompt)
    conversation.agent.switch(mode, conversation)
    recording = bool(start and (start.get("name") or start.get("resume")))
    if recording:  # a turn to record: can it be?
        warning, _ = sessions.read_only_warning(conversation)
        if warning:
            sys.stderr.write(f"chatcli: warning: {warning}\n")
    for note in sessions.start(conversation, **(start or {}), early=True):
        sys.stderr.write(note + "\n")
    loaded_unbound = conversation.session_name is None and bool(conversation.history)  # bound: not read yet
    # A large session read from its ends (engine/resume.py) is bound once it is read whole, at
    # the turn: a file made read-only meanwhile is then continued unbound, and says so.
    attached_early = conversation.pending is not None
    conversation.agent.approve_all = yes
    approve = _ask_on_terminal if sys.stdin.isatty() else None
    out = _Output(sys.stdout, keep_going=recording)
    try:
        result = stream_turn(conversation, prompt, out, approve=approve)
    except _OutputGone:  # nothing to keep the turn in: it stopped at the first write that failed
        return _not_shown(out.failure, None)
    loaded_unbound = loaded_unbound or (attached_early and conversation.session_name is None)
    if result.interrupted:
        return 130
    code = _recorded(conversation, loaded_unbound)
    if out.failure is not None:
        return _not_shown(out.failure, conversation.session_name if code == 0 else None, code)
    return code


def _recorded(conversation: Conversation, loaded_unbound: bool) -> int:
    """The exit code once the turn is recorded, or said not to be (one line)."""
    if conversation.binding.unsynced:  # a one-shot has no next turn to try again
        sys.stderr.write(f"chatcli: error: this turn could not be written to session '{conversation.session_name}'\n")
        return 1
    if loaded_unbound:
        kept = sessions.keep_continued_autosave(conversation)  # chatcli's own autosave: kept as the REPL keeps it
        if kept is not None:
            for line in kept:
                sys.stderr.write(line + "\n")
            return 0
        # Asked to record the turn in a session that could not be bound (read-only, a link).
        sys.stderr.write("chatcli: error: this turn was not written to a session (see the note above)\n")
        return 1
    return 0


class _OutputGone(ChatcliError):
    """Standard output failed during a turn that nothing records: the turn stops there."""


class _Output:
    """Standard output for the answer. When it cannot be written (its reader went away, as with
    `| head`, or the disk is full) the rest is not written. A turn recorded in a session is
    still received whole and kept as if it had been shown, rather than cut short and recorded as
    a question without its answer; a turn nothing records stops there (`_OutputGone`), as a
    program whose reader left does."""

    def __init__(self, stream: TextIO, keep_going: bool) -> None:
        self.stream, self.keep_going = stream, keep_going
        self.failure: OSError | None = None

    def write(self, text: str) -> int:
        if self.failure is None:
            try:
                return self.stream.write(text)
            except OSError as exc:
                self._failed(exc)
        return len(text)

    def flush(self) -> None:
        if self.failure is None:
            try:
                self.stream.flush()
            except OSError as exc:
                self._failed(exc)

    def _failed(self, exc: OSError) -> None:
        self.failure = exc
        if not self.keep_going:
            raise _OutputGone(str(exc)) from exc

    def isatty(self) -> bool:
        return self.failure is None and self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()


def _not_shown(failure: OSError, kept_in: str | None, code: int = 0) -> int:
    """The exit of a turn whose answer could not all be written out: quietly 141 when the reader
    went away (what `| head` asks for), else one line saying why, and where the answer is kept
    (`kept_in`, when it was); `code`, when the turn's recording already failed (and said so)."""
    silence_stdout()
    if code:
        return code
    if isinstance(failure, BrokenPipeError):
        return 141
    kept = f" (the answer is kept in session '{kept_in}')" if kept_in else ""
    try:
        sys.stderr.write(f"chatcli: error: the answer could not be written out: {failure.strerror or failure}{kept}\n")
    except (OSError, ValueError):
        pass
    return 1


def _ask_on_terminal(question: Approval) -> str:
    """The approval question on stderr, answered on stdin (a terminal): y / n / always. What was
    typed before the question is dropped: it was not an answer to it."""
    if question.detail:
        sys.stderr.write(question.detail.rstrip("\n") + "\n")
    sys.stderr.write(f"{question.tool}: {question.title}\n")
    drop_typed_keys(sys.stdin)

    def read(prompt: str) -> str:
        sys.stderr.write(prompt)
        sys.stderr.flush()
        line = sys.stdin.readline()
        if not line:
            sys.stderr.write("\n")  # Ctrl-D: what follows starts on its own line
            raise EOFError
        return line

    return ask(read, "Allow? (y)es / (n)o / (a)lways: ")
