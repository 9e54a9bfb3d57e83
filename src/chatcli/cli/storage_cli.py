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
    actions = parser.add_subparsers(dest="action", metavar="[prune|rekey|migrate]", parser_class=parser_class)
    prune = actions.add_parser(
        "prune",
        help="list what the retention rules would remove, grouped by reason; --apply removes exactly that",
        description="Lists every file the retention rules would remove, grouped by reason. Nothing is "
        "removed without --apply; with it, exactly the listed files are removed (a file that changed "
        "since is kept and named). Exits 0 when the plan was carried out, 1 if a file could not be removed.",
    )
    prune.add_argument("--apply", action="store_true", help="remove the listed files")
    prune.add_argument("store", nargs="?", metavar="STORE", help=f"only this store: {', '.join(STORES)}")
    actions.add_parser(
        "rekey",
        help="re-seal every session, journal, recall entry, memory note and context under CHATCLI_NEW_ENCRYPTION_KEY",
        description="Re-seals every session file, transcript journal, recall entry, memory note and context "
        "snapshot under the key in "
        "CHATCLI_NEW_ENCRYPTION_KEY (CHATCLI_ENCRYPTION_KEY holds the current one; plaintext files are "
        "sealed too). Each file is replaced atomically; an interrupted rekey is finished by running it "
        "again. Run it while no chatcli is running, then set CHATCLI_ENCRYPTION_KEY to the new key.",
    )
    migrate = actions.add_parser(
        "migrate",
        help="copy every session to another store: --to files, or --to postgresql://…",
        description="Copies every session of the current store (CHATCLI_STORE) to another: the files under "
        "CHATCLI_HOME (--to files) or a PostgreSQL server (--to postgresql://user@host/database). Byte for "
        "byte, sealed ones sealed (with the same CHATCLI_ENCRYPTION_KEY), each verified by reading it back; "
        "the source is left as it is. A session already copied is skipped, so an interrupted migration is "
        "finished by running it again; one of the same name with other contents is left and named. Then set "
        "CHATCLI_STORE to the target.",
    )
    migrate.add_argument("--to", required=True, metavar="TARGET", help="files, or a postgresql:// address")
    return parser


def run_storage_command(args: argparse.Namespace, load_settings: Callable) -> int:
    if args.action == "rekey":
        return _rekey(load_settings(check_key=False))  # the rekey checks both keys itself
    if args.action == "migrate":
        return _migrate(load_settings(), args.to)
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


def _rekey(settings) -> int:
    import os

    from chatcli.config import paths
    from chatcli.core.errors import ConfigError
    from chatcli.store.home import Home
    from chatcli.store.rekey import rekey

    if settings.store is not None:
        raise ConfigError("storage rekey re-seals the files under CHATCLI_HOME, not the sessions on a PostgreSQL "
                          "server: move them here (storage migrate --to files), rekey with CHATCLI_STORE=files, "
                          "then move them back with the new key")
    new = paths.encryption_key(os.environ, "CHATCLI_NEW_ENCRYPTION_KEY")
    if new is None:
        raise ConfigError("set CHATCLI_NEW_ENCRYPTION_KEY to the new key (make one with: openssl rand -base64 32)")
    done = rekey(Home.of(settings), new)
    if any(done.resealed.values()) or done.already or not done.failed:  # not when the key check refused
        counts = ", ".join(f"{n} {store}" for store, n in done.resealed.items())
        sys.stdout.write(f"Re-sealed under the new key: {counts}; {done.already} file(s) already were.\n")
        if done.damaged:
            sys.stdout.write(f"Kept {done.damaged} damaged journal line(s) as they were: no key opens them, and "
                             "readers skip them.\n")
    for line in done.failed:
        sys.stderr.write(f"chatcli: error: {line}\n")
    if done.failed:
        sys.stderr.write(f"chatcli: error: {len(done.failed)} file(s) could not be re-sealed and were left "
                         "untouched; fix the key and run it again\n")
        return 1
    sys.stdout.write("Now set CHATCLI_ENCRYPTION_KEY to the new key.\n")
    return 0


def _migrate(settings, to: str) -> int:
    from chatcli.config import paths
    from chatcli.core.errors import ConfigError
    from chatcli.store.home import Home
    from chatcli.store.migrate import migrate

    target_store = paths.session_store({"CHATCLI_STORE": to})
    if target_store == settings.store:
        raise ConfigError("--to names the store sessions are in now (CHATCLI_STORE)")
    source = Home.of(settings)
    target = Home(settings.home, settings.encryption_key, target_store)
    target.check_key()  # the target must be sealed, if at all, with this key
    shown = "the files under CHATCLI_HOME" if target_store is None else target.sessions().db.where

    def progress(done: int, total: int) -> None:
        if sys.stderr.isatty() and (done == total or done % 100 == 0):
            sys.stderr.write(f"\rcopying sessions: {done:,}/{total:,}")
            sys.stderr.write("\n" if done == total else "")
            sys.stderr.flush()

    moved = migrate(source, target, progress)
    sys.stdout.write(f"Copied {moved.copied} session(s) ({moved.messages:,} messages) and {moved.journals} "
                     f"transcript journal(s) to {shown}, each read back and verified; {moved.already} session(s) "
                     f"and {moved.journals_already} journal(s) were there already.\n")
    if moved.journals_left:
        sys.stdout.write(f"{moved.journals_left} journal(s) of sessions left behind were not copied.\n")
    if moved.files or moved.files_already:
        sys.stdout.write(f"Copied {moved.files} file(s) of the recall store, memory, contexts, cost snapshots and "
                         f"the schedule; {moved.files_already} were there already.\n")
    if moved.files_skipped:
        sys.stdout.write(f"Left {moved.files_skipped} Go ChatCLI recall entr{'y' if moved.files_skipped == 1 else 'ies'} "
                         "behind: its plaintext has no sealed form, and the target is sealed.\n")
    if moved.senders:
        sys.stdout.write(f"Added {moved.senders} gateway sender(s) (their bindings and threads) to its hub.\n")
    for name in moved.conflicts:
        sys.stderr.write(f"chatcli: error: session '{name}': the target holds another version of it (another "
                         "session of that name, or this one changed since it was copied); left as it is in both\n")
    for line in moved.failed:
        sys.stderr.write(f"chatcli: error: {line}\n")
    if moved.conflicts or moved.failed:
        return 1
    sys.stdout.write("The source is unchanged. Now set CHATCLI_STORE to " + ("files" if target_store is None else "that address") + ".\n")
    return 0
