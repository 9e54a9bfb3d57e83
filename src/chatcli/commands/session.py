"""/session …, /newsession and /config session: written once, rendered by every surface.

`SUBCOMMANDS` is the one table of /session actions: adding a row gives the REPL its dispatch,
/help line and completion, the ACP agent its announced hint and the MCP server its
`manage_session` action (see the row's fields)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chatcli.commands.listing import format_listing
from chatcli.commands.mistyped import unknown_action
from chatcli.commands.registry import Command, CommandRegistry, Result
from chatcli.core.errors import UsageError
from chatcli.core.names import is_machine_name, validate_name
from chatcli.engine import records, sessions

if TYPE_CHECKING:
    from chatcli.engine.conversation import Conversation
    from chatcli.config.settings import Settings
    from chatcli.engine.hosted import Hosted

TRANSCRIPT_ACTIONS = ("search", "show", "export", "stats")


@dataclass(frozen=True)
class Subcommand:
    """One `/session` action: the one row every surface reads. The REPL dispatches, completes and
    lists it in /help from here; the ACP agent announces it; the MCP server's `manage_session`
    offers it as `mcp` (None: not offered there), its argument given by the first of the tool's
    `mcp_params` that is set."""

    name: str
    args: str  # as usage shows them: "<name>", "md|jsonl [path]", "" (none)
    summary: str
    run: Callable[[Conversation, str], str]  # the words after the action → the reply
    names: str = ""  # the argument completes to session names: "any", "readable", "attachable"
    mcp: str | None = None
    mcp_params: tuple[str, ...] = ()

    @property
    def usage(self) -> str:
        return f"/session {self.name} {self.args}".rstrip()


def _one_name(name: str, operation) -> Callable[[Conversation, str], str]:
    def run(conv: Conversation, args: str) -> str:
        given = args.strip()
        if not given:
            raise UsageError(f"usage: /session {name} <name>")
        if len(given.split()) > 1:  # "my notes" is one name with a space: refused, saying what is allowed
            validate_name(given)
        return _said(operation(conv, given))

    return run


def _no_argument(name: str, operation) -> Callable[[Conversation, str], str]:
    def run(conv: Conversation, args: str) -> str:
        if args.split():
            raise UsageError(f"usage: /session {name}")
        return _said(operation(conv))

    return run


def _said(outcome: sessions.SessionResult) -> str:
    return "\n".join((outcome.text, *outcome.notes))


def _list(conv: Conversation, args: str) -> str:
    if args.split():
        raise UsageError("usage: /session list")
    return format_listing(sessions.listing(conv), conv.session_name)


def _search(conv: Conversation, query: str) -> str:
    if not query.strip():
        raise UsageError("usage: /session search <words>")
    return records.format_session_hits(records.search_sessions(conv.settings, conv.store, query, hidden=conv.hidden))


def _import(conv: Conversation, args: str) -> str:
    """/session import SOURCE [PATH] [--dry-run]: `chatcli import`'s report (without its bar)."""
    import shlex

    from chatcli.engine.importing import run_import, sources_table

    if not args.strip():  # as `chatcli import` alone: the sources, and where each is looked for
        return sources_table(conv.settings) + "\nUsage: /session import SOURCE [PATH] [--dry-run]"
    try:
        words = shlex.split(args)  # a PATH with spaces in quotes
    except ValueError as exc:
        raise UsageError(f"/session import: {exc}") from None
    dry_run = "--dry-run" in words
    words = [word for word in words if word != "--dry-run"]
    if not words or len(words) > 2 or any(word.startswith("-") for word in words):
        from chatcli.store.sources import SOURCES

        raise UsageError(f"usage: /session import SOURCE [PATH] [--dry-run] (SOURCE: {', '.join(SOURCES)})")
    return run_import(conv.settings, words[0], words[1] if len(words) > 1 else None, dry_run=dry_run).text()


def _export_command(conv: Conversation, args: str) -> str:
    return _export(conv, args.split(), "/session export md|jsonl [path]")


SUBCOMMANDS: tuple[Subcommand, ...] = (
    Subcommand("save", "<name>", "write the conversation to a session and bind to it",
               _one_name("save", sessions.save), mcp="save", mcp_params=("name",)),
    Subcommand("load", "<name>", "replace the conversation with a saved session's and bind to it",
               _one_name("load", sessions.load), names="readable", mcp="load", mcp_params=("name",)),
    Subcommand("attach", "<name>", "bind to a session: load it, or create it from this conversation",
               _one_name("attach", sessions.attach), names="attachable", mcp="attach", mcp_params=("name",)),
    Subcommand("detach", "", "keep the conversation in memory, bound to no session",
               _no_argument("detach", sessions.detach), mcp="detach"),
    Subcommand("status", "", "whether, and to which session, the conversation is bound",
               _no_argument("status", sessions.status), mcp="status"),
    Subcommand("list", "", "every saved session: messages, last change, title", _list, mcp="list"),
    Subcommand("delete", "<name>", "delete a session, and the journal only it names",
               _one_name("delete", sessions.delete), names="any", mcp="delete", mcp_params=("name",)),
    Subcommand("new", "", "clear the history and start a new conversation (also /newsession)",
               _no_argument("new", sessions.new), mcp="clear"),
    Subcommand("fork", "<name>", "an independent copy of the conversation under a new name; continue there",
               _one_name("fork", sessions.fork), mcp="fork", mcp_params=("to",)),
    Subcommand("export", "md|jsonl [path]", "export the full transcript", _export_command),
    Subcommand("transcript", "search|show|export|stats …", "search, show, export the full transcript",
               lambda conv, args: transcript_command(conv, args)),
    Subcommand("search", "<words>", "ranked search across every saved session", _search, mcp="search",
               mcp_params=("query",)),
    Subcommand("import", "SOURCE [PATH] [--dry-run]", "make another tool's conversations into sessions",
               _import),
)
BY_NAME = {sub.name: sub for sub in SUBCOMMANDS}
BY_MCP_ACTION = {sub.mcp: sub for sub in SUBCOMMANDS if sub.mcp}
USAGE = " · ".join(sub.usage for sub in SUBCOMMANDS)


def _action(args: str) -> tuple[str, str]:
    """The words after /session: its action (lower case) and the rest."""
    action, rest = (args.split(None, 1) + ["", ""])[:2]
    return action.lower(), rest.strip()


def session_command(conv: Conversation, args: str) -> Result:
    action, rest = _action(args)
    if not action:
        return Result(sessions.status(conv).text + f"\nUsage: {USAGE}")
    sub = BY_NAME.get(action)
    if sub is None:
        raise unknown_action("session", action, BY_NAME)
    return Result(sub.run(conv, rest))


def run_hosted(hosted: Hosted, sub: Subcommand, args: str) -> str:
    """A /session action for a hosted conversation (MCP, ACP, the gateway), under its caller's
    hold of it: then its mirror is kept. `new` keeps the cleared conversation one last time and
    drops the mirror, so that a restart does not bring it back; a deleted mirror stays deleted."""
    if sub.name == "new":
        if args.split():  # refused before the mirror keeps anything
            raise UsageError("usage: /session new")
        text, notes = hosted.clear(lambda: sub.run(hosted.conv, args))
        return "\n".join([text, *notes])
    text = sub.run(hosted.conv, args)
    notes = [] if sub.name == "delete" else hosted.keep()
    return "\n".join([text, *notes])


def _current(conv: Conversation) -> records.Record:
    """The live conversation's complete record, its journal brought up to date first (a journal
    that could not be written is read as far as it goes, and the record says so)."""
    conv.sync_transcript()
    transcript = conv.transcript
    rec = records.record(conv.settings, conv.snapshot(), transcript.id if transcript is not None else None)
    if transcript is not None and transcript.problem and rec.journal is not None:
        rec.caveat = f"its latest messages could not be recorded: {transcript.problem}"
    return rec


def _with_source(rec: records.Record, text: str) -> str:
    """Say where the text came from when it is not simply the journal."""
    if rec.journal is None:
        return f"(From {rec.source}.)\n{text}"
    if rec.caveat:
        return f"(From {rec.source}; {rec.caveat}.)\n{text}"
    return text


def _export(conv: Conversation, words: list[str], usage: str) -> str:
    if not words or len(words) > 2:
        raise UsageError(f"usage: {usage}")
    rec = _current(conv)
    path = records.export(rec, words[0], conv.session_name or "unsaved", words[1] if len(words) > 1 else None)
    return _with_source(rec, records.exported(rec, path, words[0]))


READINGS = ("stats", "search", "show")


def read_record(settings: Settings, record: Callable[[], records.Record], action: str,
                rest: list[str]) -> str | None:
    """stats | search WORDS | show POS [COUNT] on a record, made by `record` once the words are
    right: /session transcript on the live conversation, `chatcli session transcript` on a saved
    session. None when the words are not one of those forms (the caller says its usage)."""
    if action == "stats" and not rest:
        return records.stats(record())
    if action == "search" and rest:
        rec = record()
        return _with_source(rec, records.format_hits(records.search(settings, rec, " ".join(rest)))
                            or "No message matches.")
    if action == "show" and 1 <= len(rest) <= 2 and all(word.isascii() and word.isdigit() for word in rest):
        rec = record()
        return _with_source(rec, records.show(rec, int(rest[0]), max(int(rest[1]) if len(rest) > 1 else 10, 1)))
    return None


def transcript_command(conv: Conversation, args: str) -> str:
    """/session transcript search <words> | show <pos> [count] | export [md|jsonl] [path] | stats."""
    usage = "/session transcript search <words> | show <pos> [count] | export [md|jsonl] [path] | stats"
    words = args.split()
    if not words:
        raise UsageError(f"usage: {usage}")
    if words[0].lower() not in TRANSCRIPT_ACTIONS:
        raise unknown_action("session transcript", words[0].lower(), TRANSCRIPT_ACTIONS)
    action, rest = words[0].lower(), words[1:]
    if action in READINGS and (text := read_record(conv.settings, lambda: _current(conv), action, rest)) is not None:
        return text
    if action == "export":
        if rest and rest[0].lower() not in records.FORMATS:
            rest = ["md", *rest]  # a path alone: Markdown
        return _export(conv, rest or ["md"], "/session transcript export [md|jsonl] [path]")
    raise UsageError(f"usage: {usage}")


def config_command(conv: Conversation, args: str) -> Result:
    words = args.lower().split()
    if words and words[0] != "session":
        raise unknown_action("config", words[0], ("session",))
    if len(words) > 1:
        raise UsageError("usage: /config session")
    rows = conv.settings.session_report(conv.store.location)
    rows.append(("bound session", conv.session_name or "(none)", "this conversation"))
    transcript = conv.transcript.id if conv.transcript is not None and conv.transcript.enabled else None
    rows.append(("transcript journal", transcript or "(none yet)", "this conversation"))
    width = max(len(name) for name, _, _ in rows)
    return Result("\n".join(f"  {name.ljust(width)}  {value}  ({source})" for name, value, source in rows))


def _newsession(conv: Conversation, args: str) -> str:
    if args.split():
        raise UsageError("usage: /newsession")
    return BY_NAME["new"].run(conv, "")


def hosted_action(command: str, args: str) -> tuple[str, Subcommand | None, str]:
    """What `/session …` or `/newsession` typed on a hosted surface asks for: the action's name
    (lower case; "" for none), its subcommand (None for an unknown action) and its arguments."""
    if command == "newsession":
        if args.split():
            raise UsageError("usage: /newsession")
        return "new", BY_NAME["new"], ""
    action, rest = _action(args)
    return action, BY_NAME.get(action), rest


def run_hosted_line(hosted: Hosted, command: str, args: str) -> str | None:
    """`/session …` or `/newsession` typed on a hosted surface (the ACP prompt box), run with
    run_hosted. None when the words name no action: the registry's own reply (the status and
    usage, or the unknown-action error) is then the one to give."""
    _action_name, sub, rest = hosted_action(command, args)
    return None if sub is None else run_hosted(hosted, sub, rest)


def _complete(conv: Conversation, prefix: str) -> list[str]:
    words = prefix.split() + ([""] if not prefix.strip() or prefix.endswith(" ") else [])
    action = words[0].lower()
    if len(words) == 1:
        return [f"{sub.name} " if sub.args else sub.name for sub in SUBCOMMANDS if sub.name.startswith(action)]
    sub = BY_NAME.get(action)
    if len(words) == 2 and sub is not None and sub.names:
        try:
            infos = conv.store.list()
        except Exception:  # noqa: BLE001 - completion never fails loudly
            return []
        names = [info.name for info in infos
                 if (info.messages is not None or sub.names == "any")
                 and not (sub.names == "attachable" and is_machine_name(info.name))]
        return [f"{words[0]} {name}" for name in names if name.startswith(words[1])]
    return []


def register(registry: CommandRegistry) -> None:
    registry.add(Command("session", session_command, "/session <action> [name]",
                         "named sessions and their transcripts",
                         complete=_complete, details=tuple((sub.usage, sub.summary) for sub in SUBCOMMANDS)))
    registry.command("newsession", "/newsession", "start a new conversation (same as /session new)")(
        lambda conv, args: Result(_newsession(conv, args))
    )
    registry.command("config", "/config session", "show the session settings and where each came from")(
        config_command
    )
