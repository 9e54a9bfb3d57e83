"""/session …, /newsession and /config session: written once, rendered by every surface."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from chatcli.commands.listing import format_listing
from chatcli.commands.registry import CommandRegistry, Result
from chatcli.core.errors import UsageError
from chatcli.core.names import is_machine_name
from chatcli.engine import records, sessions

if TYPE_CHECKING:
    from chatcli.engine.conversation import Conversation

SUBCOMMANDS = ("save", "load", "attach", "detach", "status", "list", "delete", "new", "fork", "export",
               "transcript", "search")
_NEEDS_NAME = {"save", "load", "attach", "delete", "fork"}
TRANSCRIPT_ACTIONS = ("search", "show", "export", "stats")
USAGE = ("/session save|load|attach|delete|fork <name> · /session detach|status|list|new · "
         "/session export md|jsonl [path] · /session transcript search|show|export|stats · /session search <words>")


def session_command(conv: Conversation, args: str) -> Result:
    words = args.split()
    if not words:
        return Result(sessions.status(conv).text + f"\nUsage: {USAGE}")
    action, rest = words[0].lower(), words[1:]
    if action not in SUBCOMMANDS:
        raise UsageError(f"unknown /session action '{action}'; usage: {USAGE}")
    if action == "search":
        return Result(_search_sessions(conv, args.split(None, 1)[1] if rest else ""))
    if action == "export":
        return Result(_export(conv, rest, "/session export md|jsonl [path]"))
    if action == "transcript":
        return Result(transcript_command(conv, args.split(None, 1)[1] if rest else ""))
    if action in _NEEDS_NAME:
        if len(rest) != 1:
            raise UsageError(f"usage: /session {action} <name>")
        outcome = getattr(sessions, action)(conv, rest[0])
    elif rest:
        raise UsageError(f"usage: /session {action}")
    elif action == "list":
        return Result(format_listing(sessions.listing(conv), conv.session_name))
    else:
        outcome = getattr(sessions, action)(conv)
    return Result("\n".join((outcome.text, *outcome.notes)))


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
    return _with_source(rec, records.exported(rec, path))


def transcript_command(conv: Conversation, args: str) -> str:
    """/session transcript search <words> | show <pos> [count] | export [md|jsonl] [path] | stats."""
    usage = "/session transcript search <words> | show <pos> [count] | export [md|jsonl] [path] | stats"
    words = args.split()
    if not words or words[0].lower() not in TRANSCRIPT_ACTIONS:
        raise UsageError(f"usage: {usage}")
    action, rest = words[0].lower(), words[1:]
    if action == "stats" and not rest:
        return records.stats(_current(conv))
    if action == "search" and rest:
        rec = _current(conv)
        hits = records.search(conv.settings, rec, args.split(None, 1)[1])
        return _with_source(rec, records.format_hits(hits) or "No message matches.")
    if action == "show" and 1 <= len(rest) <= 2 and all(word.isascii() and word.isdigit() for word in rest):
        count = int(rest[1]) if len(rest) > 1 else 10
        rec = _current(conv)
        return _with_source(rec, records.show(rec, int(rest[0]), max(count, 1)))
    if action == "export":
        if rest and rest[0].lower() not in records.FORMATS:
            rest = ["md", *rest]  # a path alone: Markdown
        return _export(conv, rest or ["md"], "/session transcript export [md|jsonl] [path]")
    raise UsageError(f"usage: {usage}")


def _search_sessions(conv: Conversation, query: str) -> str:
    if not query.strip():
        raise UsageError("usage: /session search <words>")
    return format_session_hits(records.search_sessions(conv.settings, conv.store, query))


def format_session_hits(groups: list[records.SessionHits]) -> str:
    if not groups:
        return "No saved session matches."
    lines = []
    for group in groups:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(group.mtime)) if group.mtime else ""
        lines.append(f"{group.name}  ({when})")
        lines += [f"  #{pos} {role} …{snippet.strip()}…" for pos, role, snippet in group.hits]
    return "\n".join(lines)


def config_command(conv: Conversation, args: str) -> Result:
    if args.strip().lower() not in ("", "session"):
        raise UsageError("usage: /config session")
    rows = conv.settings.session_report(conv.store.root)
    rows.append(("bound session", conv.session_name or "(none)", "this conversation"))
    transcript = conv.transcript.id if conv.transcript is not None and conv.transcript.enabled else None
    rows.append(("transcript journal", transcript or "(none yet)", "this conversation"))
    width = max(len(name) for name, _, _ in rows)
    return Result("\n".join(f"  {name.ljust(width)}  {value}  ({source})" for name, value, source in rows))


def _complete(conv: Conversation, prefix: str) -> list[str]:
    words = prefix.split(" ")
    action = words[0].lower()
    if len(words) == 1:
        return [f"{candidate} " if candidate in _NEEDS_NAME else candidate
                for candidate in SUBCOMMANDS if candidate.startswith(action)]
    if len(words) == 2 and action in ("load", "attach", "delete"):
        try:
            infos = conv.store.list()
        except Exception:  # noqa: BLE001 - completion never fails loudly
            return []
        names = [info.name for info in infos
                 if (info.messages is not None or action == "delete")
                 and not (action == "attach" and is_machine_name(info.name))]
        return [f"{words[0]} {name}" for name in names if name.startswith(words[1])]
    return []


def register(registry: CommandRegistry) -> None:
    registry.command("session", "/session <action> [name]",
                     "save, load, attach, fork, list, delete, search, export sessions; their transcripts",
                     complete=_complete)(session_command)
    registry.command("newsession", "/newsession", "start a new conversation (same as /session new)")(
        lambda conv, _args: Result(sessions.new(conv).text)
    )
    registry.command("config", "/config session", "show the session settings and where each came from")(
        config_command
    )
