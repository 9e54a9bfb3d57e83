"""`chatcli gateway`: the daemon that serves the Conversation Hub to chat channels. The webhook
adapter runs now; Telegram and Slack join it next (issue 18). It stops on SIGTERM or Ctrl-C,
ending every conversation as a REPL's ends (bound ones written, unbound ones in their mirrors).
Its log is `$CHATCLI_HOME/logs/gateway.log`: refusals and failures, never what was said."""

from __future__ import annotations

import logging
import signal
import sys
import threading

from chatcli.config.settings import Settings
from chatcli.core.errors import UsageError
from chatcli.engine import upkeep
from chatcli.gateway.hub import ConversationHub

log = logging.getLogger("chatcli.gateway")


def parse_address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    try:
        number = int(port)
        if not 0 <= number < 65536:
            raise ValueError
    except ValueError:
        raise UsageError(f"--webhook {text}: give HOST:PORT, such as 127.0.0.1:8787") from None
    return host or "127.0.0.1", number


def run_gateway(settings: Settings, webhook: str | None) -> int:
    if webhook is None:
        raise UsageError("no adapter to run: give --webhook HOST:PORT")
    if not settings.webhook_secret:
        raise UsageError("CHATCLI_GATEWAY_WEBHOOK_SECRET is not set: the webhook adapter cannot check its requests' "
                         "signatures, so it does not start")
    host, port = parse_address(webhook)
    upkeep.log_to_file(settings, "gateway.log", log.name)
    upkeep.start_sweep(settings, on_error=lambda exc: log.warning("retention sweep: %s", exc))
    if not settings.gateway_allow:
        sys.stderr.write("chatcli gateway: warning: CHATCLI_GATEWAY_ALLOW is empty: every sender will be refused\n")
    from chatcli.gateway.webhook import WebhookServer

    hub = ConversationHub(settings, settings.gateway_allow, warn=log.warning)
    try:
        server = WebhookServer(hub, settings.webhook_secret, host, port, log=log.warning)
    except OSError as exc:
        hub.close()
        raise UsageError(f"--webhook {webhook}: cannot listen there ({exc.strerror or exc})") from None
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda _signum, _frame: stop.set())
    server.start()
    sys.stderr.write(f"chatcli gateway: webhook listening on {server.address}\n")
    sys.stderr.flush()
    log.info("gateway started: webhook on %s", server.address)
    try:
        stop.wait()
    finally:
        server.stop()
        for thread, note in hub.close():
            log.info("%s: %s", thread, note)
    return 0


__all__ = ["parse_address", "run_gateway"]
