"""`chatcli acp`: chatcli as an Agent Client Protocol agent on stdio, for editors such as Zed (SPEC §1, §11).

Each editor session is one live conversation with its journal. The prompt box sends chat turns,
streamed back as `agent_message_chunk` updates; text starting with `/session`, `/newsession`,
`/compact` or `/rewind` runs the very command the REPL runs, for that editor session, and the
answer comes back in the stream. `session/load` restores a saved (or mirrored `mcp-…`) session
by name and replays its user and assistant messages. `session/cancel` stops the answer in flight,
which is kept (marked interrupted), as Ctrl-C does in the REPL. When the editor goes away, every
conversation ends as a REPL does: a bound one is written, an unbound one kept as an autosave.

stdout is the protocol: logs go to `$CHATCLI_HOME/logs/acp.log`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from dataclasses import dataclass, field

from chatcli import __version__
from chatcli.commands.builtin import build_registry
from chatcli.config.settings import Settings
from chatcli.core.errors import ChatcliError
from chatcli.engine import sessions, upkeep
from chatcli.engine.conversation import Conversation, load_system_prompt
from chatcli.store.atomic import ensure_private_dir

# The commands the prompt box runs (the others belong to the terminal).
COMMANDS = ("session", "newsession", "compact", "rewind")
log = logging.getLogger("chatcli.acp")


@dataclass
class Live:
    conv: Conversation
    cancelled: threading.Event = field(default_factory=threading.Event)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


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
    from acp.schema import AgentCapabilities, AvailableCommand, Implementation, UnstructuredCommandInput

    registry = build_registry()

    class ChatcliAgent(acp.Agent):
        def __init__(self) -> None:
            self.conn = None
            self.live: dict[str, Live] = {}

        def on_connect(self, conn) -> None:
            self.conn = conn

        async def initialize(self, protocol_version, client_capabilities=None, client_info=None, **kwargs):
            return acp.InitializeResponse(
                protocol_version=acp.PROTOCOL_VERSION,
                agent_capabilities=AgentCapabilities(load_session=True),
                agent_info=Implementation(name="chatcli", title="chatcli", version=__version__),
            )

        def _conversation(self, cwd: str | None) -> Conversation:
            system_prompt, warnings = load_system_prompt(settings, _path(cwd))
            for warning in warnings:
                log.warning(warning)
            return Conversation(settings, system_prompt=system_prompt, journal=True)

        async def new_session(self, cwd, additional_directories=None, mcp_servers=None, **kwargs):
            session_id = os.urandom(8).hex()
            self.live[session_id] = Live(self._conversation(cwd))
            self._announce_commands(session_id)
            return acp.NewSessionResponse(session_id=session_id)

        async def load_session(self, cwd, session_id, mcp_servers=None, additional_directories=None, **kwargs):
            conv = self._conversation(cwd)
            try:
                outcome = await asyncio.to_thread(sessions.load, conv, session_id)
            except ChatcliError as exc:
                raise acp.RequestError.invalid_params({"message": str(exc)}) from None
            self.live[session_id] = Live(conv)
            for note in outcome.notes:
                log.info("load %s: %s", session_id, note)
            for message in conv.history:  # the conversation so far, as the editor shows it
                if message.role == "user":
                    await self.conn.session_update(session_id=session_id,
                                                   update=acp.update_user_message_text(message.content))
                elif message.role == "assistant" and message.content:
                    await self.conn.session_update(session_id=session_id,
                                                   update=acp.update_agent_message_text(message.content))
            self._announce_commands(session_id)
            return acp.LoadSessionResponse()

        def _announce_commands(self, session_id: str) -> None:
            commands = [AvailableCommand(name=c.name, description=c.summary,
                                         input=UnstructuredCommandInput(hint=c.usage.partition(" ")[2] or "(none)"))
                        for c in registry.commands.values() if c.name in COMMANDS]

            async def send() -> None:  # after the response that names the session
                await asyncio.sleep(0)
                await self.conn.session_update(session_id=session_id,
                                               update=acp.helpers.update_available_commands(commands))

            asyncio.get_running_loop().create_task(send())

        async def prompt(self, session_id, prompt, **kwargs):
            live = self.live.get(session_id)
            if live is None:
                raise acp.RequestError.invalid_params({"message": f"unknown session {session_id!r}"})
            text = prompt_text(prompt)
            async with live.lock:
                live.cancelled.clear()
                word = text.strip().split(maxsplit=1)[0].lstrip("/") if text.strip().startswith("/") else ""
                if registry.is_command(text) and word in COMMANDS:
                    result = await asyncio.to_thread(registry.dispatch, text.strip(), live.conv)
                    reply = f"error: {result.text}" if result.error else result.text
                    await self._say(session_id, reply)
                    return acp.PromptResponse(stop_reason="end_turn")
                return await self._turn(session_id, live, registry.as_prompt(text))

        async def _turn(self, session_id: str, live: Live, text: str):
            loop = asyncio.get_running_loop()
            pending: list[asyncio.Future] = []

            def on_text(chunk: str) -> None:
                if live.cancelled.is_set():
                    raise KeyboardInterrupt  # the engine keeps the partial answer, marked interrupted
                pending.append(asyncio.run_coroutine_threadsafe(
                    self.conn.session_update(session_id=session_id, update=acp.update_agent_message_text(chunk)),
                    loop))

            def notice(line: str) -> None:
                pending.append(asyncio.run_coroutine_threadsafe(self._say(session_id, f"[{line}]\n"), loop))

            try:
                result = await asyncio.to_thread(live.conv.send, text, on_text, notice)
            except ChatcliError as exc:
                await asyncio.gather(*map(asyncio.wrap_future, pending))
                await self._say(session_id, f"\nerror: {exc}")
                return acp.PromptResponse(stop_reason="end_turn")
            await asyncio.gather(*map(asyncio.wrap_future, pending))
            for note in result.notes:
                await self._say(session_id, f"\n[{note}]")
            stop = "cancelled" if live.cancelled.is_set() or result.interrupted else "end_turn"
            if result.truncated and stop == "end_turn":
                stop = "max_tokens"
            return acp.PromptResponse(stop_reason=stop)

        async def cancel(self, session_id, **kwargs):
            live = self.live.get(session_id)
            if live is not None:
                live.cancelled.set()

        async def _say(self, session_id: str, text: str) -> None:
            if text:
                await self.conn.session_update(session_id=session_id, update=acp.update_agent_message_text(text))

        def finish(self) -> None:
            """The editor went away: end every conversation as the REPL does (nothing is lost)."""
            for session_id, live in self.live.items():
                try:
                    for note in sessions.finish(live.conv):
                        log.info("%s: %s", session_id, note)
                except Exception as exc:  # noqa: BLE001 - one conversation's failure must not cost the others
                    log.warning("%s: could not be kept: %s", session_id, exc)

    return ChatcliAgent()


def _path(cwd: str | None):
    from pathlib import Path

    return Path(cwd) if cwd and os.path.isdir(cwd) else None


def run_acp(settings: Settings) -> int:
    import acp

    logs = settings.home / "logs"
    ensure_private_dir(logs)
    # The SDK logs at WARNING (its INFO lines may carry requests); chatcli's own lines at INFO.
    logging.basicConfig(filename=str(logs / "acp.log"), level=logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    log.setLevel(logging.INFO)
    upkeep.start_sweep(settings, on_error=lambda exc: log.warning("retention sweep: %s", exc))
    agent = build_agent(settings)
    log.info("chatcli acp started (provider %s, model %s)", settings.provider, settings.model)
    try:
        asyncio.run(acp.run_agent(agent))
    finally:
        agent.finish()
    return 0


__all__ = ["COMMANDS", "build_agent", "prompt_text", "run_acp"]
