"""Start-up upkeep shared by the REPL and the servers: the retention sweep (SPEC §10).

The sweep runs in a daemon thread so that it never delays a prompt or a server's first
answer; each removal is one unlink under the session's lock, so stopping mid-way (the
process exiting) leaves nothing half-done, and the next start carries on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from chatcli.config.settings import Settings


def sweep(settings: Settings) -> None:
    """Remove what the start-up rules (TTL, count backstop, lost temporary files) remove now."""
    from chatcli.store.storage import Storage

    Storage(settings).sweep()


def start_sweep(settings: Settings, on_error: Callable[[BaseException], None] | None = None) -> threading.Thread:
    """Sweep in the background. Failures are not the user's concern at start-up (`/storage`
    shows what could not be removed); `on_error` sees them, for --debug."""

    def run() -> None:
        try:
            sweep(settings)
        except Exception as exc:  # noqa: BLE001 - a sweep that fails must not disturb the session
            if on_error is not None:
                on_error(exc)

    thread = threading.Thread(target=run, name="chatcli-sweep", daemon=True)
    thread.start()
    return thread


def log_to_file(settings: Settings, filename: str, logger: str) -> None:
    """The servers' logging (stdout is their protocol): `$CHATCLI_HOME/logs/<filename>`, 0600.
    The SDKs log at WARNING (their INFO lines may carry requests); chatcli's own at INFO."""
    import logging
    import os

    from chatcli.store.atomic import PRIVATE_FILE, ensure_private_dir
    from chatcli.store.home import Home

    logs = Home.of(settings).logs_dir
    ensure_private_dir(logs)
    path = logs / filename
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE))
    os.chmod(path, PRIVATE_FILE)
    logging.basicConfig(filename=str(path), level=logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    logging.getLogger(logger).setLevel(logging.INFO)
