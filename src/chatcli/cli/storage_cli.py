"""`chatcli storage [prune [--apply] [store]]`: /storage without a REPL, for cron and scripts."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from chatcli.commands.storage import storage
from chatcli.store.storage import STORES


def build_parser(parser_class: type[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    parser = parser_class(
        prog="chatcli storage",
        description="What chatcli keeps under CHATCLI_HOME, one line per store (the same as /storage).",
    )
    actions = parser.add_subparsers(dest="action", metavar="[prune]", parser_class=parser_class)
    prune = actions.add_parser(
        "prune",
        help="list what the retention rules would remove, grouped by reason; --apply removes exactly that",
        description="Lists every file the retention rules would remove, grouped by reason. Nothing is "
        "removed without --apply; with it, exactly the listed files are removed (a file that changed "
        "since is kept and named). Exits 0 when the plan was carried out, 1 if a file could not be removed.",
    )
    prune.add_argument("--apply", action="store_true", help="remove the listed files")
    prune.add_argument("store", nargs="?", metavar="STORE", help=f"only this store: {', '.join(STORES)}")
    return parser


def run_storage_command(args: argparse.Namespace, load_settings: Callable) -> int:
    words = []
    if args.action == "prune":
        words = ["prune", *([args.store] if args.store else []), *(["--apply"] if args.apply else [])]
    result = storage(load_settings(), words, limit=None)
    if result.error:  # the summary line goes to stderr too, where cron looks
        first, _, rest = result.text.partition("\n")
        sys.stderr.write(f"chatcli: error: {first}\n")
        sys.stdout.write(rest + "\n")
        return 1
    sys.stdout.write(result.text + "\n")
    return 0
