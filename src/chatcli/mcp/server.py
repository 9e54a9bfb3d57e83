"""`chatcli mcp-server`: the conversation store over the Model Context Protocol (SPEC §1, §6, §11).

An MCP client (an editor, another agent) talks to chatcli's live conversations through two tools
and two resources, on stdio:

- `ask_chatcli(prompt, session="mcp")`: one chat turn in the live conversation `session`, with
  the same write-through and adoption as the REPL when it is bound to a saved session;
- `manage_session(action, session, name, query, to)`: save, load, attach, detach, status, list,
  delete, clear, search, fork — each runs the very `/session` command the REPL runs;
- `chatcli://sessions` and `chatcli://sessions/{name}`: the listing and one saved session.

Every live conversation keeps its journal and is mirrored to a rolling `mcp-<session>` session
after every turn and every action (CHATCLI_MCP_SESSION_AUTOSAVE, else CHATCLI_SESSION_AUTOSAVE),
so a conversation held only by a client is never lost. Failures come back as tool errors with a
clear text; the server itself never stops on one. stdout is the protocol: logs go to
`$CHATCLI_HOME/logs/mcp-server.log`.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Annotated

from pydantic import Field

from chatcli.commands.builtin import build_registry
from chatcli.config.settings import Settings
from chatcli.core.errors import ChatcliError
from chatcli.core.names import validate_name
from chatcli.core.session import encode_session
from chatcli.engine import sessions, upkeep
from chatcli.engine.conversation import Conversation, load_system_prompt

ACTIONS = ("save", "load", "attach", "detach", "status", "list", "delete", "clear", "search", "fork")
NEEDS_NAME = ("save", "load", "attach", "delete", "fork")
DEFAULT_SESSION = "mcp"
log = logging.getLogger("chatcli.mcp")


class Live:
    def __init__(self, conv: Conversation, mirror: sessions.Mirror) -> None:
        self.conv, self.mirror, self.lock = conv, mirror, threading.Lock()
        self.notes: list[str] = []  # said with the next answer (the conversation was continued…)


class Surface:
    """The live conversations of one server, by session id, each with its lock (a client may call
    tools concurrently; one conversation takes one turn at a time)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.registry = build_registry()
        self.system_prompt, warnings = load_system_prompt(settings)
        for warning in warnings:
            log.warning(warning)
        self.live: dict[str, Live] = {}
        self._guard = threading.Lock()

    def conversation(self, session: str) -> Live:
        validate_name(session)
        with self._guard:
            live = self.live.get(session)
            if live is None:
                conv = Conversation(self.settings, system_prompt=self.system_prompt, journal=True)
                live = self.live[session] = Live(conv, sessions.Mirror(conv, f"mcp-{session}"))
                if self.settings.mcp_autosave:  # a restarted server continues where it was
                    note = live.mirror.take_over()
                    if note:
                        live.notes.append(note)
            return live

    def ask(self, prompt: str, session: str) -> str:
        if not prompt.strip():
            raise ChatcliError("the prompt is empty")
        live = self.conversation(session)
        with live.lock:
            notes, live.notes = live.notes, []
            try:
                result = live.conv.send(prompt, on_notice=notes.append)
            finally:  # a failed turn keeps the question, and so does the mirror
                notes += self.mirror(live)
            notes += result.notes
        text = result.text + (" [interrupted]" if result.interrupted else "")
        return "\n".join([*(f"[{note}]" for note in notes), text]) if notes else text

    def manage(self, action: str, session: str, name: str, query: str, to: str) -> str:
        if action not in ACTIONS:
            raise ChatcliError(f"unknown action {action!r}: one of {', '.join(ACTIONS)}")
        argument = {"search": query, "fork": to or name}.get(action, name if action in NEEDS_NAME else "").strip()
        if action in NEEDS_NAME and not argument:
            raise ChatcliError(f"manage_session {action} needs {'to (or name)' if action == 'fork' else 'name'}")
        if action == "search" and not argument:
            raise ChatcliError("manage_session search needs query")
        live = self.conversation(session)
        with live.lock:
            notes = live.mirror.retire() if action == "clear" and self.settings.mcp_autosave else []
            line = f"/session {'new' if action == 'clear' else action} {argument}".strip()
            result = self.registry.dispatch(line, live.conv)
            if result.error:
                raise ChatcliError(result.text)
            if action == "clear" and self.settings.mcp_autosave:
                live.mirror.drop()  # kept above; a restart must not bring it back
            elif action != "delete":  # a deleted mirror stays deleted
                notes += self.mirror(live)
        return "\n".join([result.text, *notes])

    def mirror(self, live: Live) -> list[str]:
        """Keep the live conversation in its rolling `mcp-<session>` session (a machine session:
        it never binds, and the retention rules expire it)."""
        if not self.settings.mcp_autosave:
            return []
        notes = live.mirror.write()
        for note in notes:
            log.warning("%s: %s", live.mirror.name, note)
        return notes

    def listing(self) -> str:
        conv = self.conversation(DEFAULT_SESSION).conv
        rows = [{"name": i.name, "messages": i.messages, "size": i.size, "title": i.title, "modified": i.mtime,
                 **({"problem": i.problem} if i.problem else {})} for i in sessions.listing(conv)]
        return json.dumps(rows, ensure_ascii=False, indent=2)

    def saved(self, name: str) -> str:
        conv = self.conversation(DEFAULT_SESSION).conv
        data, _stamp = conv.store.load(validate_name(name))
        return json.dumps(encode_session(data), ensure_ascii=False, indent=2)


def build_server(settings: Settings):
    from mcp.server import MCPServer
    from mcp.server.mcpserver.exceptions import ResourceError, ToolError

    surface = Surface(settings)
    server = MCPServer(name="chatcli", instructions=(
        "chatcli's conversations: ask_chatcli runs a chat turn in a live conversation (default 'mcp'); "
        "manage_session saves, loads, attaches, forks, searches and lists the sessions shared with the "
        "chatcli terminal and editor surfaces."))

    def failing(exc: BaseException) -> ToolError:
        log.info("tool error (%s)", type(exc).__name__)  # not its text: it may quote what was sent
        return ToolError(str(exc))

    @server.tool(description="Send a prompt to chatcli and get the answer: one chat turn in the live "
                             "conversation `session` (default 'mcp'), which keeps its history across calls. "
                             "When that conversation is attached to a saved session, the turn is written to "
                             "it at once, and turns written there by other surfaces are taken in first.")
    async def ask_chatcli(prompt: str, session: str = DEFAULT_SESSION) -> str:
        import anyio

        try:
            return await anyio.to_thread.run_sync(surface.ask, prompt, session)
        except ChatcliError as exc:
            raise failing(exc) from None

    @server.tool(description="Manage chatcli sessions for the live conversation `session` (default 'mcp'): "
                             "save NAME, load NAME, attach NAME (load, or create from this conversation), "
                             "detach, status, list, delete NAME, clear (start over; the conversation is kept "
                             "in its mcp-<session> mirror), search QUERY (across saved sessions), fork TO.")
    async def manage_session(action: Annotated[str, Field(json_schema_extra={"enum": list(ACTIONS)})],
                             session: str = DEFAULT_SESSION, name: str = "", query: str = "",
                             to: str = "") -> str:
        import anyio

        try:
            return await anyio.to_thread.run_sync(surface.manage, action, session, name, query, to)
        except ChatcliError as exc:
            raise failing(exc) from None

    @server.resource("chatcli://sessions", name="sessions", mime_type="application/json",
                     description="Every saved session: name, message count, size, title, last change.")
    def sessions_resource() -> str:
        try:
            return surface.listing()
        except ChatcliError as exc:
            raise ResourceError(str(exc)) from None

    @server.resource("chatcli://sessions/{name}", name="session", mime_type="application/json",
                     description="One saved session, in the v2 session format.")
    def session_resource(name: str) -> str:
        try:
            return surface.saved(name)
        except ChatcliError as exc:
            raise ResourceError(str(exc)) from None

    return server, surface


def run_mcp_server(settings: Settings) -> int:
    upkeep.log_to_file(settings, "mcp-server.log", log.name)
    upkeep.start_sweep(settings, on_error=lambda exc: log.warning("retention sweep: %s", exc))
    server, _surface = build_server(settings)
    log.info("chatcli mcp-server started (provider %s, model %s)", settings.provider, settings.model)
    server.run()
    return 0


__all__ = ["ACTIONS", "Surface", "build_server", "run_mcp_server"]
