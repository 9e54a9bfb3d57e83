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
  runs, `clear` being `/session new`; a fork with `name` copies that saved session, as
  `chatcli session fork` does, and leaves the live conversation alone;
- `chatcli://sessions` and `chatcli://sessions/{name}`: the listing and one saved session.

Every live conversation is hosted by engine/hosted.py: it keeps its journal and is mirrored to a
rolling `mcp-<session>` session after every turn and every action (CHATCLI_MCP_SESSION_AUTOSAVE,
else CHATCLI_SESSION_AUTOSAVE), so a conversation held only by a client is never lost. Failures come back as tool errors with a
clear text; the server itself never stops on one. A client's cancel (notifications/cancelled)
stops a turn at once, as Ctrl-C does in the REPL: the model's stream is closed, the partial
answer kept marked interrupted, and the conversation free for the next call. stdout is the
protocol: logs go to `$CHATCLI_HOME/logs/mcp-server.log`.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from chatcli import __version__
from chatcli.commands import session as session_commands
from chatcli.config.settings import Settings
from chatcli.core.errors import ChatcliError
from chatcli.core.names import validate_name
from chatcli.core.session import encode_session
from chatcli.engine import sessions, upkeep
from chatcli.engine.conversation import Conversation
from chatcli.engine.hosted import Host
from chatcli.providers.base import Stop

ACTIONS = tuple(session_commands.BY_MCP_ACTION)  # from the /session table: one list for every surface
DEFAULT_SESSION = "mcp"
# How long a stopping server waits for the turns its clients left running to stop (a cancelled
# one stops at once; one stalled in a tool is kept as far as it got).
FINISH_WAIT = 1.5
log = logging.getLogger("chatcli.mcp")


class Surface:
    """The MCP server's live conversations, hosted by id (engine/hosted.py); each takes one turn
    or action at a time (a client may call tools concurrently)."""

    def __init__(self, settings: Settings, allow_writes: bool = False, workdir: Path | None = None) -> None:
        self.settings = settings
        self.host = Host(settings, warn=log.warning)  # mirrors: mcp-<session>
        self.allow_writes = allow_writes
        self.workdir = workdir  # where agent_task works (None: the server's working directory)

    def ask(self, prompt: str, session: str, mode: str = "chat", stop: Stop | None = None) -> str:
        """One turn in `session`: chat (ask_chatcli), or agent/coder (agent_task), after which
        the conversation is back in chat mode. `stop` is the client's cancel."""
        if not prompt.strip():
            raise ChatcliError("the prompt is empty")
        hosted = self.host.open(session)
        with hosted.lock:
            if stop is not None and stop.is_set():  # cancelled while another call held the conversation
                raise ChatcliError("cancelled before it started")
            agent = hosted.conv.agent
            agent.writes = agent.approve_all = self.allow_writes
            agent.root = agent.root or self.workdir
            agent.switch(mode, hosted.conv)
            try:
                return hosted.answer(prompt, stop=stop)
            finally:
                agent.mode = "chat"

    def manage(self, action: str, session: str, params: dict[str, str]) -> str:
        sub = session_commands.BY_MCP_ACTION.get(action)
        if sub is None:
            raise ChatcliError(f"unknown action {action!r}: one of {', '.join(ACTIONS)}")
        argument = next((params[p].strip() for p in sub.mcp_params if params.get(p, "").strip()), "")
        if sub.mcp_params and not argument:
            wanted = " or ".join(f"'{p}'" for p in sub.mcp_params)
            what = "the words to search for" if sub.mcp_params == ("query",) else "a session name"
            raise ChatcliError(f"the {action} action needs {wanted} ({what})")
        if sub.name == "fork" and params.get("name", "").strip():
            return self.fork_saved(params["name"].strip(), argument)
        hosted = self.host.open(session)
        with hosted.lock:
            return session_commands.run_hosted(hosted, sub, argument)

    def fork_saved(self, source: str, target: str) -> str:
        """manage_session fork with `name`: the saved session `source` copied to `target` by a
        conversation of its own, as `chatcli session fork` copies it; no live conversation is
        opened or changed."""
        conv = Conversation(self.settings, registry=self.host.registry, journal=True)
        return sessions.fork_saved(conv, source, target).text

    def wait_for_turns(self) -> None:
        """Before the server's last writes: the turns its clients left running stop (they
        were cancelled with the server's requests) and let go of their conversations."""
        deadline = time.monotonic() + FINISH_WAIT
        for hosted in list(self.host.live.values()):
            if hosted.lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
                hosted.lock.release()

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


def _text(description: str | None = None) -> Any:
    """A text parameter. A number sent for it is taken as its text: clients that type values as
    they read them (the MCP Inspector's `--tool-arg name=2024`) send one where a name goes."""
    return Field(description=description, coerce_numbers_to_str=True)


def _invalid(error) -> str:
    """A pydantic ValidationError of a call's arguments as one line of words, without pydantic's
    layout and links: "'prompt' is required", "'session' should be a valid string"."""
    said = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"])
        message = " ".join(str(item["msg"]).split())
        if item["type"] == "missing":
            what = "is required"
        elif message.startswith("Input should "):
            what = message[len("Input "):]
        else:
            what = f"is invalid ({message[:1].lower()}{message[1:]})"
        said.append(f"'{where}' {what}" if where else what)
    return "; ".join(said) or "invalid arguments"


def _server_class():
    """MCPServer, with the errors a client shows said in one line: a tool's own error and an
    argument that does not fit as `<tool>: <what>` (the SDK gives pydantic's several lines with a
    link for the latter), an unknown prompt as invalid params naming the prompts (the SDK
    answers "Internal server error")."""
    from mcp import MCPError
    from mcp.server import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
    from mcp.types import INVALID_PARAMS
    from pydantic import ValidationError

    class Server(MCPServer):
        async def call_tool(self, name, arguments, context=None):
            try:
                return await super().call_tool(name, arguments, context)
            except UnexpectedToolError:
                raise  # a crash: its text stays in the log
            except ToolError as exc:
                cause = exc.__cause__
                if isinstance(cause, ValidationError):
                    raise ToolError(f"{name}: {_invalid(cause)}") from cause
                if isinstance(cause, ToolError):  # ours: the SDK put "Error executing tool …" before it
                    raise ToolError(f"{name}: {cause}") from cause
                raise

        async def get_prompt(self, name, arguments=None, context=None):
            names = [prompt.name for prompt in await self.list_prompts()]
            if name not in names:
                known = f"the prompts are {', '.join(names)}" if names else "this server has no prompts"
                raise MCPError(INVALID_PARAMS, f"unknown prompt {name!r}: {known}")
            return await super().get_prompt(name, arguments, context)

    return Server


def build_server(settings: Settings, allow_writes: bool = False, workdir: Path | None = None):
    import anyio
    from mcp.server.mcpserver.exceptions import ResourceError, ToolError

    surface = Surface(settings, allow_writes, workdir)
    server = _server_class()(name="chatcli", version=__version__, instructions=(
        "chatcli's conversations: ask_chatcli runs a chat turn in a live conversation (default 'mcp'), "
        "agent_task an agent turn with tools in the server's working directory; "
        "manage_session saves, loads, attaches, forks, searches and lists the sessions shared with the "
        "chatcli terminal and editor surfaces."))

    def failing(exc: BaseException) -> ToolError:
        log.info("tool error (%s)", type(exc).__name__)  # not its text: it may quote what was sent
        return ToolError(str(exc))

    async def turn(prompt: str, session: str, mode: str) -> str:
        """One turn in a worker thread. A client's cancel (the SDK cancels this handler on
        notifications/cancelled) stops it at once instead of waiting for the thread: the stop
        closes the model's stream, and the turn, ending as Ctrl-C ends it, lets go of the
        conversation for the next call."""
        stop = Stop()
        try:
            return await anyio.to_thread.run_sync(surface.ask, prompt, session, mode, stop, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            stop.set()
            raise
        except ChatcliError as exc:
            raise failing(exc) from None

    @server.tool(description="Send a prompt to chatcli and get the answer: one chat turn in the live "
                             "conversation `session` (default 'mcp'), which keeps its history across calls. "
                             "When that conversation is attached to a saved session, the turn is written to "
                             "it at once, and turns written there by other surfaces are taken in first.")
    async def ask_chatcli(prompt: Annotated[str, _text()],
                          session: Annotated[str, _text()] = DEFAULT_SESSION) -> str:
        return await turn(prompt, session, "chat")

    @server.tool(description="Run a task with chatcli's agent: one turn in the live conversation `session` "
                             "(default 'mcp') in which the model may call tools in the server's working directory "
                             "(read_file, list_dir, grep; with --allow-writes also run_shell, and in coder mode "
                             "write_file and edit_file) until it answers. Returns the tool lines and the answer.")
    async def agent_task(
            task: Annotated[str, _text()],
            session: Annotated[str, _text("the live conversation (as in ask_chatcli)")] = DEFAULT_SESSION,
            mode: Annotated[str, Field(json_schema_extra={"enum": ["agent", "coder"]})] = "agent") -> str:
        if mode not in ("agent", "coder"):  # ask_chatcli is chat; this tool is the others
            raise failing(ChatcliError(f"unknown mode {mode!r}: agent or coder"))
        return await turn(task, session, mode)

    @server.tool(description=_described())
    async def manage_session(
            action: Annotated[str, Field(json_schema_extra={"enum": list(ACTIONS)})],
            session: Annotated[str, _text("the live conversation (as in ask_chatcli)")] = DEFAULT_SESSION,
            name: Annotated[str, _text("the saved session: save, load, attach, delete; fork: the session to "
                                       "copy (without it, the live conversation)")] = "",
            query: Annotated[str, _text("words to search for: search")] = "",
            to: Annotated[str, _text("the new session's name: fork")] = "") -> str:
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
    finally:
        surface.wait_for_turns()
        # A bound conversation's unwritten turns (write-through off) go to its session now;
        # an unbound one was mirrored by its last turn or action (a mirror deleted stays deleted),
        # or, with mirrors off, is kept as an autosave now, as the REPL keeps it
        for session, note in surface.host.finish(unbound=not settings.mcp_autosave):
            log.info("%s: %s", session, note)
    return 0


__all__ = ["ACTIONS", "Surface", "build_server", "run_mcp_server"]
