"""The REPL loop: prompt, then run a slash command or a turn, then render. Built apart from running."""

from __future__ import annotations

import contextlib
import signal
import sys
import termios
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager

from prompt_toolkit import PromptSession
from prompt_toolkit.styles import Style

from chatcli.commands.builtin import build_registry
from chatcli.commands.registry import CommandRegistry, Result
from chatcli.config.settings import Settings
from chatcli.core.agent import WRITE, Approval, ask
from chatcli.core.errors import ChatcliError
from chatcli.engine.agent import Approve
from chatcli.engine import records, sessions, upkeep
from chatcli.engine.conversation import Conversation, load_system_prompt
from chatcli.render import wants_markdown
from chatcli.render.turn import drop_typed_keys, stream_turn
from chatcli.render.waiting import Waiting
from chatcli.repl.parts import PromptFileHistory, SlashCompleter, default_model_note, key_bindings, prompt_text
from chatcli.store.history import PromptHistory

STYLE = Style.from_dict({"session": "ansicyan", "mode": "ansiyellow bold", "model": "ansigreen bold", "arrow": ""})


class Terminal:
    """Where the REPL's own lines go: notices and errors, one line each."""

    def __init__(self, out=None) -> None:
        self.out = out or sys.stdout

    def say(self, text: str) -> None:
        if text:
            self.out.write(text.rstrip("\n") + "\n")
            self.out.flush()

    def error(self, text: str) -> None:
        self.say(f"error: {text}")

    def warn(self, text: str) -> None:
        self.say(f"warning: {text}")


def build_repl(settings: Settings) -> tuple[PromptSession, Conversation, CommandRegistry, Terminal]:
    terminal = Terminal()  # settings.warnings were reported by main, once
    system_prompt, warnings = load_system_prompt(settings)
    for warning in warnings:
        terminal.warn(warning)
    conversation = Conversation(settings, system_prompt=system_prompt, journal=True)
    read_only, history_covered = sessions.read_only_warning(conversation, settings.history_file)
    if read_only:
        terminal.warn(read_only)
    registry = build_registry()
    history_warn = (lambda _text: None) if history_covered else terminal.warn  # said once, just above
    session: PromptSession = PromptSession(
        history=PromptFileHistory(PromptHistory(settings.history_file, settings.history_max_size), history_warn),
        completer=SlashCompleter(registry, conversation),
        complete_while_typing=False,
        key_bindings=key_bindings(),
        style=STYLE,
        enable_history_search=False,
        prompt_continuation=lambda width, _line, _wrap: "." * (width - 1) + " ",
    )
    return session, conversation, registry, terminal


def run_repl(settings: Settings, start: dict | None = None, mode: str = "chat", yes: bool = False) -> int:
    session, conversation, registry, terminal = build_repl(settings)
    conversation.agent.switch(mode, conversation)  # --agent/--coder: refused here, before the prompt
    conversation.agent.approve_all = yes
    start = start or {}
    notes = sessions.start(conversation, **start)
    if not (start.get("resume") or start.get("name")):
        notes = [sessions.recent_note(conversation)]  # resuming is one command away
    for note in [default_model_note(settings), *notes]:
        if note:
            terminal.say(note)
    markdown = wants_markdown(sys.stdout, settings)
    approve = _approver(terminal, markdown)
    wait = _command_wait(markdown)
    background = Background(session, terminal)
    scheduler = Later(lambda: _scheduler(settings, registry, conversation, background))
    _after_first_draw(session, conversation, markdown=markdown, scheduler=scheduler)
    ended = _end_on_signals(session)
    try:
        while not ended.is_set():
            background.flush()  # what scheduled commands said during the last answer
            try:
                text = session.prompt(lambda: prompt_text(conversation))
            except KeyboardInterrupt:  # Ctrl-C at the prompt clears the line (or a signal ends it)
                continue
            except EOFError:  # Ctrl-D
                break
            except OSError:  # the terminal hung up under the prompt
                if ended.is_set():
                    break
                raise
            try:
                if _handle(text, conversation, registry, terminal, session.prompt, approve, wait):
                    break
            except KeyboardInterrupt:  # Ctrl-C outside an answer (while drawing, say): back to the prompt
                continue
            except Exception as exc:  # noqa: BLE001 - one bad turn must not end the conversation
                if settings.debug:
                    import traceback

                    traceback.print_exc()
                terminal.error(f"internal error: {type(exc).__name__}: {exc} (run with --debug for details)")
    finally:
        scheduler.stop()
        for signum in _END_SIGNALS:  # nothing interrupts the last write
            signal.signal(signum, signal.SIG_IGN)
        notes = sessions.finish(conversation)
        with contextlib.suppress(OSError):  # after SIGHUP there may be no terminal to tell
            for note in notes:
                terminal.say(note)
    return 0


class Background:
    """Lines from background work (scheduled commands): printed above the prompt when one is on
    screen, else before the next one (never into an answer being written)."""

    def __init__(self, session: PromptSession, terminal: Terminal) -> None:
        self.session, self.terminal = session, terminal
        self.pending: list[str] = []
        self.lock = threading.Lock()

    def say(self, text: str) -> None:
        lines = text.splitlines() or [""]
        line = lines[0] if len(lines) == 1 else f"{lines[0]} (+{len(lines) - 1} more lines: /schedule shows its last result)"
        with self.lock:
            self.pending.append(line)
        app = self.session.app
        loop = app.loop if app.is_running else None
        if loop is not None and not loop.is_closed():
            from prompt_toolkit.application import run_in_terminal

            loop.call_soon_threadsafe(lambda: run_in_terminal(self.flush))

    def flush(self) -> None:
        with self.lock:
            lines, self.pending = self.pending, []
        for line in lines:
            self.terminal.say(line)


class Later:
    """Background work made and started once the first prompt is drawn (see _after_first_draw),
    and stopped when the REPL ends, if it was started."""

    def __init__(self, make: Callable[[], object]) -> None:
        self.make, self.made = make, None

    def start(self) -> None:
        self.made = self.make()
        self.made.start()

    def stop(self) -> None:
        if self.made is not None:
            self.made.stop()


def _scheduler(settings: Settings, registry: CommandRegistry, conversation: Conversation, background: Background):
    """The /schedule runner (engine/schedule.py): its jobs run through this REPL's commands."""
    from chatcli.engine.schedule import Scheduler

    def run(command: str) -> tuple[str, bool]:
        result = registry.dispatch(command, conversation)
        return result.text, result.error

    return Scheduler(settings, run, background.say)


class EndRequested(KeyboardInterrupt):
    """SIGTERM or SIGHUP: stop like Ctrl-C (an answer in flight is kept as interrupted), then leave."""


_END_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _end_on_signals(session: PromptSession) -> threading.Event:
    """SIGTERM/SIGHUP end the REPL; `ended` is the flag the main loop checks before each prompt.

    At the prompt the running application is asked to leave through its own loop (the way asyncio
    delivers signals): an exception raised from the handler could land inside a finaliser run by
    the event loop, where Python prints it as "Exception ignored" and carries on, and the REPL would
    then wait for input that never comes. During an answer the handler raises, which stops the
    stream; should that raise be swallowed the same way, the answer ends and the loop still leaves.
    """
    ended = threading.Event()

    def leave(app) -> None:
        with contextlib.suppress(Exception):  # already leaving: nothing to do
            app.exit(exception=EndRequested())

    def handler(_signum, _frame) -> None:
        ended.set()
        app = session.app
        loop = app.loop if app.is_running else None
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(leave, app)
            return
        raise EndRequested

    for signum in _END_SIGNALS:
        signal.signal(signum, handler)
    return ended


Wait = Callable[[str], AbstractContextManager]


def _handle(text: str, conversation: Conversation, registry: CommandRegistry, terminal: Terminal,
            ask: Callable[[str], str], approve: Approve | None = None,
            wait: Wait = lambda _name: contextlib.nullcontext()) -> bool:
    """Run one line the user typed; True when the REPL should end."""
    if not text.strip():
        return False
    if registry.is_command(text):
        result = _dispatch(registry, text, conversation, wait)
        _show(terminal, result)
        if result.ask and not result.error:
            try:
                answer = ask(result.ask).strip()
            except (KeyboardInterrupt, EOFError):  # Ctrl-C or Ctrl-D: the question is dropped
                answer = ""
            if answer:
                result = _dispatch(registry, f"{result.follow} {answer}", conversation, wait)
                _show(terminal, result)
            elif result.unanswered:
                terminal.say(result.unanswered)
        if result.send and not result.error:  # /agent TASK: the task is this mode's first turn
            _turn(conversation, result.send, terminal, approve)
        return result.exit
    _turn(conversation, registry.as_prompt(text), terminal, approve)
    return False


def _dispatch(registry: CommandRegistry, line: str, conversation: Conversation, wait: Wait) -> Result:
    """Run a command line; keys typed meanwhile wait for the next prompt, as during an answer."""
    command = registry.find(line.split(maxsplit=1)[0])
    waiting = wait(f"/{command.name}") if command is not None else contextlib.nullcontext()
    with waiting, _no_echo():
        return registry.dispatch(line, conversation)


def _command_wait(markdown: bool) -> Wait:
    """What a command runs under: where answers show a spinner until their first token, a command
    still running after a moment shows it too (/compact waits for the model's summary)."""
    if not markdown:
        return lambda _name: contextlib.nullcontext()
    return lambda name: Waiting(sys.stdout, f" working on {name}…")


def _turn(conversation: Conversation, text: str, terminal: Terminal, approve: Approve | None = None) -> None:
    try:
        stream_turn(conversation, text, sys.stdout, guard=_no_echo, approve=approve)
    except ChatcliError as exc:
        terminal.error(str(exc))


def _approver(terminal: Terminal, markdown: bool) -> Approve:
    """The REPL's approval question for a tool call: the diff or the command, then y / n / always.
    Keys typed before the question are dropped (they were typed for the prompt, not as an
    answer); the answers go to no prompt history; Ctrl-D is no, Ctrl-C stops the turn."""
    asker: list[PromptSession] = []

    def approve(question: Approval) -> str:
        if question.detail:
            if markdown and question.kind == WRITE:
                from rich.console import Console
                from rich.syntax import Syntax

                Console(file=terminal.out).print(Syntax(question.detail.rstrip("\n"), "diff", theme="ansi_dark",
                                                        word_wrap=True))  # a long line is not cut
            else:
                terminal.say(question.detail)
        terminal.say(f"{question.tool}: {question.title}")
        if not asker:
            asker.append(PromptSession())
        _drop_typed_ahead(asker[0])
        return ask(asker[0].prompt)

    return approve


def _drop_typed_ahead(session: PromptSession) -> None:
    """Forget keys typed before now: those the terminal holds, and those prompt_toolkit read
    with the last line and keeps for the next prompt on this input."""
    from prompt_toolkit.input.typeahead import clear_typeahead

    drop_typed_keys(sys.stdin)
    clear_typeahead(session.input)


@contextlib.contextmanager
def _no_echo():
    """Keys typed during an answer are not echoed over it; they stay queued for the next prompt."""
    try:
        fd = sys.stdin.fileno()
        saved = termios.tcgetattr(fd)
    except (OSError, ValueError, termios.error):
        yield
        return
    quiet = list(saved)
    quiet[3] &= ~termios.ECHO
    termios.tcsetattr(fd, termios.TCSANOW, quiet)
    try:
        yield
    finally:
        with contextlib.suppress(OSError, termios.error):  # the terminal may be gone (SIGHUP)
            termios.tcsetattr(fd, termios.TCSANOW, saved)


def _debug_report(exc: BaseException) -> None:
    import traceback

    traceback.print_exception(exc)


def _show(terminal: Terminal, result: Result) -> None:
    if result.error:
        terminal.error(result.text)
    else:
        terminal.say(result.text)


def _after_first_draw(session: PromptSession, conversation: Conversation, *, markdown: bool,
                      scheduler: Later | None = None) -> None:
    """Once the first prompt is on screen: sweep expired machine sessions (SPEC §10) and load
    what the first answer needs (a local model, the Markdown renderer) while the user types.

    Both threads start only then: started earlier, their work (llama_cpp pulls in numpy; the
    sweep stats every session file) competes with the main thread for the GIL and delays the
    prompt.
    """

    def warm() -> None:
        try:
            if markdown:
                import rich.live  # noqa: F401
                import rich.markdown  # noqa: F401
            conversation.warm()
        except Exception:  # noqa: BLE001 - the first turn reports the same failure properly
            pass
        try:  # a resumed session's journal, and every saved session: a first search finds them indexed
            transcript = conversation.transcript.id if conversation.transcript is not None else None
            records.warm_index(conversation.settings, transcript, conversation.store)
        except Exception:  # noqa: BLE001 - a search reports the same failure properly
            pass

    def start(_app) -> None:
        session.app.after_render -= start
        settings = conversation.settings
        upkeep.start_sweep(settings, on_error=_debug_report if settings.debug else None)
        threading.Thread(target=warm, name="chatcli-warm", daemon=True).start()
        if scheduler is not None:
            scheduler.start()

    session.app.after_render += start
