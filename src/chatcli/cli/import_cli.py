"""`chatcli import SOURCE [PATH] [--dry-run]`: another tool's conversations as sessions, with a
progress bar on a terminal (engine/importing.py does the work; /session import is the same)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from chatcli.store.sources import SOURCES, source

BAR = 24  # characters of the bar
REDRAW = 0.1  # seconds between two drawings


def build_parser(parser_class: type[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    parser = parser_class(
        prog="chatcli import",
        description="Make another tool's saved conversations into chatcli sessions, each with its journal and "
        "search index. Importing again adds what is new and nothing twice. Without SOURCE, lists the "
        "sources and where each is looked for.",
    )
    parser.add_argument("source", nargs="?", metavar="SOURCE", help=", ".join(SOURCES))
    parser.add_argument("path", nargs="?", metavar="PATH", help="where to read (default: where the tool keeps them)")
    parser.add_argument("--dry-run", action="store_true", help="list what would be made; write nothing")
    parser.add_argument("--debug", action="store_true", help="tracebacks on errors")
    return parser


def run_import_command(args: argparse.Namespace, load_settings: Callable) -> int:
    from chatcli.engine.importing import run_import, sources_table

    settings = load_settings()
    if args.source is None:
        sys.stdout.write(sources_table(settings) + "\n")
        return 0
    bar = Bar(source(args.source).LABEL) if sys.stderr.isatty() else None
    try:
        report = run_import(settings, args.source, args.path, dry_run=args.dry_run,
                            progress=bar.draw if bar else None)
    finally:
        if bar is not None:
            bar.clear()
    sys.stdout.write(report.text() + "\n")
    return 130 if report.stopped else 1 if report.failed else 0


class Bar:
    """One line on stderr, redrawn in place: `[#####-----] 12/40 files · 31 conversations · 10,234 messages`."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.drawn = 0.0
        self.width = 0

    def draw(self, done: int, total: int, conversations: int, messages: int) -> None:
        now = time.monotonic()
        if now - self.drawn < REDRAW and done < total:
            return
        self.drawn = now
        filled = BAR * done // total if total else 0
        line = (f"Importing {self.label} [{'#' * filled}{'-' * (BAR - filled)}] {done}/{total} "
                f"file{'' if total == 1 else 's'} · {conversations:,} conversation{'' if conversations == 1 else 's'}"
                f" · {messages:,} message{'' if messages == 1 else 's'}")
        self.width = max(self.width, len(line))
        sys.stderr.write("\r" + line.ljust(self.width))
        sys.stderr.flush()

    def clear(self) -> None:
        if self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            sys.stderr.flush()
