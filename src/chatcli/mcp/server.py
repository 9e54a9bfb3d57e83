"""`chatcli mcp-server`: the conversation store over the Model Context Protocol (SPEC §1, §6, §11).

An MCP client (an editor, another agent) talks to chatcli's live conversations through two tools
and two resources, on stdio:

- `ask_chatcli(prompt, session="mcp")`: one chat turn in the live conversation `session`, with
  the same write-through and adoption as the REPL when it is bound to a saved session;
- `agent_task(task, session="mcp", mode="agent")`: one agent (or coder) turn in that conversation,
  the model calling tools in the server's working directory: reading only, unless the server was
  started with `--allow-writes` (then shell commands and file writes run without asking: there
  is no one to ask);
- `manage_session(action, session, name, query, to)`: save, load, attach, detach, status, list,
  delete, clear, search, fork — the rows of the `/session` table (commands/session.py) the REPL
  runs, `clear` being `/session new`;
- `chatcli://sessions` and `chatcli://sessions/{name}`: the listing and one saved session.

Every live conversation is hosted by engine/hosted.py: it keeps its journal and is mirrored to a
rolling `mcp-<session>` session after every turn and every action (CHATCLI_MCP_SESSION_AUTOSAVE,
else CHATCLI_SESSION_AUTOSAVE), so a conversation held only by a client is never lost. Failures come back as tool errors with a
clear text; the server itself never stops on one. stdout is the protocol: logs go to
`$CHATCLI_HOME/logs/mcp-server.log`.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated

from pydantic import Field

from chatcli.commands import session as session_commands
from chatcli.config.settings import Settings
from chatcli.core.errors import ChatcliError
from chatcli.core.names import validate_name
from chatcli.core.session import encode_session
from chatcli.engine import upkeep
from chatcli.engine.hosted import Host

ACTIONS = tuple(session_commands.BY_MCP_ACTION)  # from the /session table: one list for every surface
DEFAULT_SESSION = "mcp"
log = logging.getLogger("chatcli.mcp")


class Surface:
    """The MCP server's live conversations, hosted by id (engine/hosted.py); each takes one turn
    or action at a time (a client may call tools concurrently)."""

    def __init__(self, settings: Settings, allow_writes: bool = False, workdir: Path | None = None) -> None:
        self.settings = settings
        self.host = Host(settings, warn=log.warning)  # mirrors: mcp-<session>
        self.allow_writes = allow_writes
        self.workdir = workdir  # where agent_task works (None: the server's working directory)

    def ask(self, prompt: str, session: str, mode: str = "chat") -> str:
        """One turn in `session`: chat (ask_chatcli), or agent/coder (agent_task), after which
        the conversation is back in chat mode."""
        if not prompt.strip():
            raise ChatcliError("the prompt is empty")
        hosted = self.host.open(session)
        with hosted.lock:
            agent = hosted.conv.agent
            agent.writes = agent.approve_all = self.allow_writes
            agent.root = agent.root or self.workdir
            agent.switch(mode, hosted.conv)
            try:
                return hosted.answer(prompt)
            finally:
                agent.mode = "chat"

    def manage(self, action: str, session: str, params: dict[str, str]) -> str:
        sub = session_commands.BY_MCP_ACTION.get(action)
        if sub is None:
            raise ChatcliError(f"unknown action {action!r}: one of {', '.join(ACTIONS)}")
        argument = next((params[p].strip() for p in sub.mcp_params if params.get(p, "").strip()), "")
        if sub.mcp_params and not argument:
            raise ChatcliError(f"manage_session {action} needs {' (or '.join(sub.mcp_params)}"
                               f"{')' * (len(sub.mcp_params) - 1)}")
        hosted = self.host.open(session)
        with hosted.lock:
            return session_commands.run_hosted(hosted, sub, argument)

    def listing(self) -> str:
        """The saved sessions, read from the store: no live conversation is opened for it."""
        rows = [{"name": i.name, "messages": i.messages, "size": i.size, "title": i.title, "modified": i.mtime,
                 **({"problem": i.problem} if i.problem else {})} for i in self.host.store.list()]
        return json.dumps(rows, ensure_ascii=False, indent=2)

    def saved(self, name: str) -> str:
        data, _stamp = self.host.store.load(validate_name(name))
        return json.dumps(encode_session(data), ensure_ascii=False, indent=2)


def _described() -> str:
    """manage_session's description, from the /session table."""
    parts = []
    for action, sub in session_commands.BY_MCP_ACTION.items():
        argument = f" {sub.mcp_params[0].upper()}" if sub.mcp_params else ""
        parts.append(f"{action}{argument}: {sub.summary.split(' (also')[0]}")
    return ("Manage chatcli sessions for the live conversation `session` (default 'mcp'). Actions: "
            + "; ".join(parts) + ". Before a clear, an unsaved conversation is kept as an autosave-… session.")


def build_server(settings: Settings, allow_writes: bool = False, workdir: Path | None = None):
    from mcp.server import MCPServer
    from mcp.server.mcpserver.exceptions import ResourceError, ToolError

    surface = Surface(settings, allow_writes, workdir)
    server = MCPServer(name="chatcli", instructions=(
        "chatcli's conversations: ask_chatcli runs a chat turn in a live conversation (default 'mcp'), "
        "agent_task an agent turn with tools in the server's working directory; "
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

    @server.tool(description="Run a task with chatcli's agent: one turn in the live conversation `session` "
                             "(default 'mcp') in which the model may call tools in the server's working directory "
                             "(read_file, list_dir, grep; with --allow-writes also run_shell, and in coder mode "
                             "write_file and edit_file) until it answers. Returns the tool lines and the answer.")
    async def agent_task(
            task: str,
            session: Annotated[str, Field(description="the live conversation (as in ask_chatcli)")] = DEFAULT_SESSION,
            mode: Annotated[str, Field(json_schema_extra={"enum": ["agent", "coder"]})] = "agent") -> str:
        import anyio

        try:
            if mode not in ("agent", "coder"):  # ask_chatcli is chat; this tool is the others
                raise ChatcliError(f"unknown mode {mode!r}: agent or coder")
            return await anyio.to_thread.run_sync(surface.ask, task, session, mode)
        except ChatcliError as exc:
            raise failing(exc) from None

    @server.tool(description=_described())
    async def manage_session(
            action: Annotated[str, Field(json_schema_extra={"enum": list(ACTIONS)})],
            session: Annotated[str, Field(description="the live conversation (as in ask_chatcli)")] = DEFAULT_SESSION,
            name: Annotated[str, Field(description="the saved session: save, load, attach, delete, fork")] = "",
            query: Annotated[str, Field(description="words to search for: search")] = "",
            to: Annotated[str, Field(description="the new session's name: fork")] = "") -> str:
        import anyio

        params = {"name": name, "query": query, "to": to}
        try:
            return await anyio.to_thread.run_sync(surface.manage, action, session, params)
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


def run_mcp_server(settings: Settings, allow_writes: bool = False, workdir: Path | None = None) -> int:
    upkeep.log_to_file(settings, "mcp-server.log", log.name)
    upkeep.start_sweep(settings, on_error=lambda exc: log.warning("retention sweep: %s", exc))
    server, surface = build_server(settings, allow_writes, workdir)
    log.info("chatcli mcp-server started (provider %s, model %s)", settings.provider, settings.model)
    try:
        server.run()
    finally:  # a bound conversation's unwritten turns (write-through off) go to its session now;
        # an unbound one was mirrored by its last turn or action (a mirror deleted stays deleted),
        # or, with mirrors off, is kept as an autosave now, as the REPL keeps it
        for session, note in surface.host.finish(unbound=not settings.mcp_autosave):
            log.info("%s: %s", session, note)
    return 0


__all__ = ["ACTIONS", "Surface", "build_server", "run_mcp_server"]
