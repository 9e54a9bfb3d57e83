"""`chatcli session list|show|search|export|transcript|delete|fork` for scripts: the same functions as /session, printed plainly."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from chatcli.commands.listing import format_listing, rendered_key, saved_listing
from chatcli.config import paths
from chatcli.store.home import Home

if TYPE_CHECKING:
    import argparse


def build_parser(parser_class: type[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    parser = parser_class(prog="chatcli session", description="Manage saved sessions without the REPL.")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION",
                                    parser_class=parser_class)
    listing = actions.add_parser("list", help="every saved session, newest first")
    listing.add_argument("--json", action="store_true", help="one JSON array, for scripts")
    show = actions.add_parser("show", help="print a session's messages")
    show.add_argument("name")
    show.add_argument("--json", action="store_true", help="the whole v2 document")
    delete = actions.add_parser("delete", help="delete a session")
    delete.add_argument("name")
    fork = actions.add_parser("fork", help="copy a session to a new name")
    fork.add_argument("source")
    fork.add_argument("target")
    export = actions.add_parser("export", help="write a session's complete transcript as Markdown or JSON lines",
                                description="Exports the session's journal (every message ever recorded, "
                                "compacted ones included), or its history when it has no journal. Without a "
                                "path the file goes to the working directory as "
                                "chatcli-<session>-<YYYYMMDD-HHMMSS>.<md|jsonl>, mode 0600.")
    export.add_argument("name")
    export.add_argument("format", choices=("md", "jsonl"))
    export.add_argument("path", nargs="?")
    search = actions.add_parser("search", help="ranked search across every saved session",
                                description="BM25 over the messages of every saved session (not system "
                                "prompts), case- and accent-folded; results grouped by session, best first.")
    search.add_argument("query", nargs="+")
    search.add_argument("--json", action="store_true", help="one JSON array, for scripts")
    transcript = actions.add_parser(
        "transcript", help="a session's complete record: search WORDS, show [N [COUNT]], stats",
        description="What /session transcript does in the REPL, on a saved session: its journal (every message "
        "ever recorded, compacted ones included), or its history when it has no journal. Messages are "
        "numbered as `session search` and `session show` number them.")
    transcript.add_argument("name")
    transcript.add_argument("what", choices=("search", "show", "stats"), metavar="{search,show,stats}")
    transcript.add_argument("words", nargs="*", help="search: the words; show: from position N (default 1), "
                            "COUNT messages (default 10)")
    return parser


def run_session_command(args: argparse.Namespace, load_settings: Callable) -> int:
    """list and show need only the sessions directory; delete and fork act on a conversation
    and load the full settings (so `session list` starts as fast as a listing can)."""
    home = Home(paths.chatcli_home(os.environ), paths.encryption_key(os.environ), paths.session_store(os.environ))
    # As every command does: a wrong or missing key stops (once: load_settings below skips it).
    home.check_key()
    store = home.sessions()
    out = sys.stdout
    if args.action == "list" and not args.json:
        # The plain listing is kept as rendered text while the sessions directory is unchanged
        # (the catalog's own rule): a repeated `chatcli session list` only prints it. The
        # rendering depends on the local time zone, which is part of the key.
        key = rendered_key(store.private)
        text = saved_listing(str(store.root), key) if store.root is not None else None
        if text is None:
            text = format_listing(store.list(), None) + "\n"
            store.catalog.save_rendered(key, text)
        out.write(text)
    elif args.action == "list":  # --json
        import datetime

        rows = [{"name": i.name, "messages": i.messages, "size": i.size, "title": i.title,
                 "modified": datetime.datetime.fromtimestamp(i.mtime).astimezone().isoformat(timespec="seconds"),
                 **({"problem": i.problem} if i.problem else {})} for i in store.list()]
        out.write(json.dumps(rows, ensure_ascii=False, indent=2) + "\n")
    elif args.action == "show":
        data, _ = store.load(args.name)
        if data.left_out:  # shown with its last turn, taken back from the journal (the file is left as it is)
            from chatcli.engine.binding import taken_back

            taken, notes = taken_back(load_settings(check_key=False), args.name, data)
            data.history.extend(taken)
            for note in notes:
                sys.stderr.write(f"chatcli: warning: {note}\n")
        if args.json:
            from chatcli.core.session import encode_session

            out.write(json.dumps(encode_session(data), ensure_ascii=False, indent=2) + "\n")
        else:
            from chatcli.core.export import call_names, plain_block
            from chatcli.engine.records import numbering

            out.write(f"# {args.name}: {data.title or '(untitled)'} — {len(data.history)} messages\n")
            from chatcli.engine.costs import session_cost

            settings = load_settings(check_key=False)
            cost = session_cost(settings, data, args.name)
            if cost:
                out.write(cost + "\n")
            # Numbered as search hits and `transcript show` number them (the journal's positions).
            number = numbering(settings, data.transcript_id, len(data.history))
            for position, (message, name) in enumerate(zip(data.history, call_names(data.history)), 1):
                out.write(f"\n{plain_block(number(position), message, name=name)}\n")
    elif args.action in ("export", "search", "transcript"):
        from chatcli.engine import records

        settings = load_settings(check_key=False)
        if args.action == "transcript":
            out.write(_transcript(settings, store, args) + "\n")
            return 0
        if args.action == "export":
            data, _ = store.load(args.name)
            rec = records.record(settings, data, data.transcript_id)
            path = records.export(rec, args.format, args.name, args.path)
            if rec.journal is None:
                sys.stderr.write(f"chatcli: note: exported {rec.source}\n")
            out.write(records.exported(rec, path, args.format) + "\n")
            return 0
        groups = records.search_sessions(settings, store, " ".join(args.query),
                                         notice=lambda line: sys.stderr.write(f"chatcli: warning: {line}\n"))
        if args.json:
            rows = [{"session": g.name, "score": g.score, "hits": [{"pos": pos, "role": role, "snippet": snip}
                                                                   for pos, role, snip in g.hits]}
                    for g in groups]
            out.write(json.dumps(rows, ensure_ascii=False, indent=2) + "\n")
        else:
            out.write(records.format_session_hits(groups) + "\n")
    else:  # delete and fork act on a conversation, exactly as /session does
        from chatcli.engine import sessions
        from chatcli.engine.conversation import Conversation

        conv = Conversation(load_settings(check_key=False), journal=True)  # a fork seeds its journal from the source
        if args.action == "delete":
            out.write(sessions.delete(conv, args.name).text + "\n")
            return 0
        out.write(sessions.fork_saved(conv, args.source, args.target).text + "\n")
    return 0


def _transcript(settings, store, args: argparse.Namespace) -> str:
    """`chatcli session transcript NAME search|show|stats`: what /session transcript says of the
    live conversation, said of a saved session (show starts at #1 unless told)."""
    from chatcli.commands.session import read_record
    from chatcli.core.errors import UsageError
    from chatcli.engine import records

    def record() -> records.Record:
        data, _ = store.load(args.name)
        return records.record(settings, data, data.transcript_id)

    words = args.words or (["1"] if args.what == "show" else [])
    text = read_record(settings, record, args.what, words)
    if text is None:
        raise UsageError("usage: chatcli session transcript NAME search WORDS… | show [N [COUNT]] | stats")
    return text
