"""`chatcli acp`: chatcli as an Agent Client Protocol agent on stdio, for editors such as Zed (SPEC §1, §11).

Each editor session is one live conversation with its journal, hosted by engine/hosted.py and
mirrored to `mcp-acp-<session id>` after every turn and command (CHATCLI_MCP_SESSION_AUTOSAVE, else
CHATCLI_SESSION_AUTOSAVE). The prompt box sends chat turns, streamed back as
`agent_message_chunk` updates; text starting with `/session`, `/newsession`, `/compact` or
`/rewind` runs the very command the REPL runs, for that editor session, and the answer comes
back in the stream. `session/load` restores an editor session from its mirror, or any saved
session by name, and replays its user and assistant messages. `session/list` lists the editor
sessions of this agent. `session/cancel` stops the answer in flight at once, closing the model's
stream, and keeps it (marked interrupted), as Ctrl-C does in the REPL, and ends any prompt
waiting behind it before it starts: the next prompt starts without waiting. When the editor goes away, every conversation ends as a REPL's does: a bound
one is written, an unbound one mirrored.

stdout is the protocol: logs go to `$CHATCLI_HOME/logs/acp.log`.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import logging
import os
import threading
import time
from dataclasses import dataclass, field

from chatcli import __version__
from chatcli.commands import session as session_commands
from chatcli.commands.builtin import build_registry
from chatcli.commands.registry import Result
from chatcli.config.settings import Settings
from chatcli.core.errors import ChatcliError
from chatcli.core.session import make_title
from chatcli.engine import upkeep
from chatcli.engine.hosted import EDITOR_PREFIX, Host, Hosted
from chatcli.providers.base import Stop

# The commands the prompt box runs (the others belong to the terminal).
COMMANDS = ("session", "newsession", "compact", "rewind")
# How long leaving waits for answers in flight to stop (a stalled one is kept as far as it got).
FINISH_WAIT = 1.5
log = logging.getLogger("chatcli.acp")


@dataclass
class Live:
    """An editor session: its hosted conversation (engine/hosted.py), where the editor works,
    and the turn in flight."""

    hosted: Hosted
    cwd: str  # absolute, as session/list reports it
    updated: float = field(default_factory=time.time)  # the last prompt's end (or the session's start)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    worker: asyncio.Future | None = None  # the turn in flight (it may outlive a cancelled prompt for a moment)
    halt: Stop | None = None  # the stop of the turn in `thread`: leaving sets it
    thread: threading.Thread | None = None
    # The prompts not yet answered (the one running, those waiting behind it): each one's stop,
    # and the event that answers it at once. session/cancel sets both, for every one of them.
    prompts: dict[Stop, asyncio.Event] = field(default_factory=dict)

    def info(self, session_id: str):
        """This session as session/list shows it."""
        from acp.schema import SessionInfo

        conv = self.hosted.conv
        updated = datetime.datetime.fromtimestamp(self.updated, datetime.timezone.utc)
        title = conv.session.title or make_title(list(conv.history))
        return SessionInfo(session_id=session_id, cwd=self.cwd, title=title, updated_at=updated.isoformat(timespec="seconds"))


def in_daemon_thread(fn, *args) -> tuple[asyncio.Future, threading.Thread]:
    """Run `fn` in a daemon thread: an answer stalled on the network never holds the process
    back when the editor goes away (asyncio.to_thread's threads are joined at exit)."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(error: BaseException | None, result=None) -> None:
        if not future.done():
            future.set_exception(error) if error is not None else future.set_result(result)

    def run() -> None:
        try:
            outcome = (None, fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            outcome = (exc, None)
        with contextlib.suppress(RuntimeError):  # the loop is gone: the agent is shutting down
            loop.call_soon_threadsafe(settle, *outcome)

    thread = threading.Thread(target=run, name="chatcli-acp-turn", daemon=True)
    thread.start()
    return future, thread


async def _settled(future: asyncio.Future, answered: asyncio.Event) -> bool:
    """Wait for `future` unless the prompt is answered (cancelled) first: whether it settled.
    `future` is left running either way."""
    waiter = asyncio.ensure_future(answered.wait())
    try:
        await asyncio.wait({future, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    return future.done()


async def _acquire(lock: asyncio.Lock, answered: asyncio.Event) -> bool:
    """Take `lock` unless the prompt is answered (cancelled) first: whether it was taken."""
    acquire = asyncio.ensure_future(lock.acquire())
    taken = False
    try:
        taken = await _settled(acquire, answered)
        return taken
    finally:
        if not acquire.done():
            acquire.cancel()  # Lock.acquire passes the lock on if it was about to be this prompt's
        elif not taken and not acquire.cancelled():
            lock.release()  # taken just as this prompt was itself cancelled


def prompt_text(blocks) -> str:
    """The text of a prompt's content blocks (resources are quoted by their text or link)."""
    parts = []
    for block in blocks:
        text = getattr(block, "text", None)
        if text is None and getattr(block, "resource", None) is not None:
            text = getattr(block.resource, "text", None)
        if text is None and getattr(block, "uri", None):
            text = f"[{getattr(block, 'name', '') or block.uri}]({block.uri})"
        if text:
            parts.append(text)
    return "\n".join(parts)


def build_agent(settings: Settings):
    import acp
    from acp.schema import (AgentCapabilities, AvailableCommand, Implementation, SessionCapabilities,
                            SessionListCapabilities, UnstructuredCommandInput)

    registry = build_registry()
    host = Host(settings, warn=log.warning, prefix=EDITOR_PREFIX)

    class ChatcliAgent(acp.Agent):
        def __init__(self) -> None:
            self.conn = None
            self.live: dict[str, Live] = {}
            self.tasks: set[asyncio.Task] = set()
            self.host = host

        def on_connect(self, conn) -> None:
            self.conn = conn

        async def initialize(self, protocol_version, client_capabilities=None, client_info=None, **kwargs):
            return acp.InitializeResponse(
                protocol_version=acp.PROTOCOL_VERSION,
                agent_capabilities=AgentCapabilities(
                    load_session=True, session_capabilities=SessionCapabilities(list=SessionListCapabilities())),
                agent_info=Implementation(name="chatcli", title="chatcli", version=__version__),
            )

        async def new_session(self, cwd, additional_directories=None, mcp_servers=None, **kwargs):
            session_id = os.urandom(8).hex()
            self.live[session_id] = Live(host.open(session_id, _path(cwd), take_over=False), _absolute(cwd))
            self._announce_commands(session_id)
            return acp.NewSessionResponse(session_id=session_id)

        async def load_session(self, cwd, session_id, mcp_servers=None, additional_directories=None, **kwargs):
            """An editor session of this agent (live, or kept in its mcp-acp-<id> mirror), or any
            saved session by name."""
            live = self.live.get(session_id)
            if live is None:
                try:
                    hosted, note = await asyncio.to_thread(host.resume, session_id, _path(cwd))
                except ChatcliError as exc:
                    raise acp.RequestError.invalid_params({"message": str(exc)}) from None
                live = self.live[session_id] = Live(hosted, _absolute(cwd))
                log.info("load %s: %s", session_id, note)
            for message in live.hosted.conv.history:  # the conversation so far, as the editor shows it
                if message.role == "user":
                    await self.conn.session_update(session_id=session_id,
                                                   update=acp.update_user_message_text(message.content))
                elif message.role == "assistant" and message.content:
                    await self.conn.session_update(session_id=session_id,
                                                   update=acp.update_agent_message_text(message.content))
            self._announce_commands(session_id)
            return acp.LoadSessionResponse()

        async def list_sessions(self, cwd=None, cursor=None, **kwargs):
            """The editor sessions of this agent, the latest first (`cwd`: those working there);
            one page.

            Saved sessions are not listed, on purpose: they are the store every surface shares
            (the terminal's, MCP clients', other editors'), none has a working directory to
            report (SessionInfo requires one, and editors filter by it), and the editor's
            history would fill with conversations that are not its own. `/session list` in
            the prompt box lists them, and session/load opens any of them by name."""
            wanted = _absolute(cwd) if cwd else None
            rows = sorted(self.live.items(), key=lambda item: item[1].updated, reverse=True)
            return acp.schema.ListSessionsResponse(sessions=[
                live.info(session_id) for session_id, live in rows if wanted in (None, live.cwd)])

        def _announce_commands(self, session_id: str) -> None:
            commands = [AvailableCommand(name=c.name, description=c.summary,
                                         input=UnstructuredCommandInput(hint=_hint(c)))
                        for c in registry.commands.values() if c.name in COMMANDS]

            async def send() -> None:  # after the response that names the session
                await asyncio.sleep(0)
                await self.conn.session_update(session_id=session_id,
                                               update=acp.helpers.update_available_commands(commands))

            task = asyncio.get_running_loop().create_task(send())
            self.tasks.add(task)  # held until done (the loop keeps only a weak reference)
            task.add_done_callback(self.tasks.discard)

        async def prompt(self, session_id, prompt, **kwargs):
            live = self.live.get(session_id)
            if live is None:
                raise acp.RequestError.invalid_params({"message": f"unknown session {session_id!r}"})
            text = prompt_text(prompt)
            # Made before this prompt waits for the one before it, so that a cancel sent meanwhile
            # stops this one too; each prompt has its own, never one a cancel has set already.
            halt, answered = Stop(), asyncio.Event()
            live.prompts[halt] = answered
            try:
                if not await _acquire(live.lock, answered):
                    return acp.PromptResponse(stop_reason="cancelled")
                try:
                    # A cancelled turn winding down (its stream is closed already, but a tool may run on).
                    if live.worker is not None and not await _settled(live.worker, answered):
                        return acp.PromptResponse(stop_reason="cancelled")
                    if halt.is_set():
                        return acp.PromptResponse(stop_reason="cancelled")
                    return await self._prompt(session_id, live, text, halt, answered)
                finally:
                    live.lock.release()
            finally:
                del live.prompts[halt]
                live.updated = time.time()

        async def _prompt(self, session_id: str, live: Live, text: str, halt: Stop, answered: asyncio.Event):
            """A prompt: a prompt-box command, or a turn."""
            if not text.strip():
                await self._say(session_id, "error: the prompt is empty")
                return acp.PromptResponse(stop_reason="end_turn")
            word = text.strip().split(maxsplit=1)[0].lstrip("/") if text.strip().startswith("/") else ""
            if registry.is_command(text) and word.lower() in COMMANDS:
                result = await asyncio.to_thread(_command, registry, live.hosted, text.strip())
                reply = f"error: {result.text}" if result.error else result.text
                await self._say(session_id, reply)
                return acp.PromptResponse(stop_reason="end_turn")
            if registry.is_command(text):  # a terminal command, or none at all: say so, as the REPL does
                here = ", ".join("/" + name for name in COMMANDS)
                await self._say(session_id, f"error: '/{word}' is not a command of the prompt box (here: {here}); "
                                            "start a message with // to send it as text")
                return acp.PromptResponse(stop_reason="end_turn")
            return await self._turn(session_id, live, registry.as_prompt(text), halt, answered)

        async def _turn(self, session_id: str, live: Live, text: str, halt: Stop, answered: asyncio.Event):
            loop = asyncio.get_running_loop()
            pending: list[asyncio.Future] = []
            live.halt = halt

            def on_text(chunk: str) -> None:
                pending.append(asyncio.run_coroutine_threadsafe(
                    self.conn.session_update(session_id=session_id, update=acp.update_agent_message_text(chunk)),
                    loop))

            def notice(line: str) -> None:
                pending.append(asyncio.run_coroutine_threadsafe(self._say(session_id, f"[{line}]\n"), loop))

            live.worker, live.thread = in_daemon_thread(functools.partial(live.hosted.send, stop=halt), text, on_text, notice)
            if not await _settled(live.worker, answered):  # cancelled while waiting for the model: answer now
                # The turn keeps its mirror when it ends; a failure after the cancel is not the
                # editor's concern (retrieved, so that asyncio does not report it).
                live.worker.add_done_callback(lambda future: future.exception())
                return acp.PromptResponse(stop_reason="cancelled")
            worker, live.worker, live.halt = live.worker, None, None
            await asyncio.gather(*map(asyncio.wrap_future, pending))
            try:
                result = worker.result()
            except ChatcliError as exc:
                await self._say(session_id, f"\nerror: {exc}")
                return acp.PromptResponse(stop_reason="end_turn")
            for note in result.notes:
                await self._say(session_id, f"\n[{note}]")
            stop_reason = "cancelled" if halt.is_set() or result.interrupted else "end_turn"
            if (result.truncated or result.window_full) and stop_reason == "end_turn":
                stop_reason = "max_tokens"
            return acp.PromptResponse(stop_reason=stop_reason)

        async def cancel(self, session_id, **kwargs):
            live = self.live.get(session_id)
            for halt, answered in list(live.prompts.items()) if live is not None else ():
                halt.set()  # the turn ends now, its stream closed, as Ctrl-C ends it; a waiting prompt never starts
                answered.set()

        async def _say(self, session_id: str, text: str) -> None:
            if text:
                await self.conn.session_update(session_id=session_id, update=acp.update_agent_message_text(text))

        def finish(self) -> None:
            """The editor went away (or a signal came): a bound conversation is written one last
            time, an unbound one kept in its mirror (with mirrors off, as an autosave). An answer
            in flight stops."""
            for live in self.live.values():
                if live.halt is not None:
                    live.halt.set()
            deadline = time.monotonic() + FINISH_WAIT
            for live in self.live.values():  # an answer in flight stops at once (one in a tool, when it ends)
                if live.thread is not None:
                    live.thread.join(max(0.0, deadline - time.monotonic()))
            for session_id, note in host.finish():
                log.info("%s: %s", session_id, note)

    return ChatcliAgent()


def _hint(command) -> str:
    """What the editor shows after the command's name: for /session, its actions (the table's)."""
    if command.details:
        return "|".join(usage.split()[1] for usage, _summary in command.details) + " …"
    return command.usage.partition(" ")[2] or "(none)"


def _command(registry, hosted: Hosted, line: str):
    """A prompt-box command, run as the REPL runs it; /session and /newsession as a hosted
    conversation's (its mirror kept after, dropped after a clear), the others then keep the
    mirror too."""
    word, _, args = line.partition(" ")
    name = word.lstrip("/").lower()
    if name in ("session", "newsession"):
        try:
            text = session_commands.run_hosted_line(hosted, name, args)
        except ChatcliError as exc:
            return Result(str(exc), error=True)
        if text is not None:
            return Result(text)
    result = registry.dispatch(line, hosted.conv)
    hosted.keep()
    return result


def _absolute(cwd: str | None) -> str:
    """Where an editor session works, as an absolute path (the protocol asks for one)."""
    return os.path.abspath(cwd) if cwd else os.getcwd()


def _path(cwd: str | None):
    from pathlib import Path

    return Path(cwd) if cwd and os.path.isdir(cwd) else None


def run_acp(settings: Settings) -> int:
    import signal

    import acp

    upkeep.log_to_file(settings, "acp.log", log.name)
    upkeep.start_sweep(settings, on_error=lambda exc: log.warning("retention sweep: %s", exc))
    agent = build_agent(settings)
    log.info("chatcli acp started (provider %s, model %s)", settings.provider, settings.model)

    async def serve() -> None:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGHUP):  # stop serving, then keep every conversation
            loop.add_signal_handler(signum, task.cancel)
        try:
            await acp.run_agent(agent)
        except asyncio.CancelledError:
            log.info("stopped by a signal")

    try:
        asyncio.run(serve())
    finally:
        agent.finish()
    return 0


__all__ = ["COMMANDS", "build_agent", "prompt_text", "run_acp"]
