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


def run_gateway(settings: Settings, webhook: str | None, telegram: bool = False, slack: bool = False) -> int:
    """Start the adapters asked for, each refused in one line when it cannot run (no secret, no
    token, its extra not installed), then serve until SIGTERM, SIGINT or SIGHUP."""
    if webhook is None and not telegram and not slack:
        raise UsageError("no adapter to run: give --webhook HOST:PORT, --telegram and/or --slack")
    if webhook is not None and not settings.webhook_secret:
        raise UsageError("CHATCLI_GATEWAY_WEBHOOK_SECRET is not set: the webhook adapter cannot check its requests' "
                         "signatures, so it does not start")
    if telegram and not settings.telegram_token:
        raise UsageError("TELEGRAM_BOT_TOKEN is not set: the Telegram adapter does not start")
    if telegram:
        try:
            import telegram.ext  # noqa: F401
        except ImportError:
            raise UsageError("the Telegram adapter needs python-telegram-bot: pip install 'chatcli[telegram]'") from None
    if slack and not (settings.slack_bot_token and settings.slack_app_token):
        missing = " and ".join(var for var, value in (("SLACK_BOT_TOKEN", settings.slack_bot_token),
                                                       ("SLACK_APP_TOKEN", settings.slack_app_token)) if not value)
        raise UsageError(f"{missing} {'is' if ' and ' not in missing else 'are'} not set: the Slack adapter does not "
                         "start")
    if slack:
        try:
            import slack_bolt  # noqa: F401 - the extra is there
        except ImportError:
            raise UsageError("the Slack adapter needs slack-bolt: pip install 'chatcli[slack]'") from None
    address = parse_address(webhook) if webhook is not None else None
    upkeep.log_to_file(settings, "gateway.log", log.name)
    upkeep.start_sweep(settings, on_error=lambda exc: log.warning("retention sweep: %s", exc))
    if not settings.gateway_allow:
        sys.stderr.write("chatcli gateway: warning: CHATCLI_GATEWAY_ALLOW is empty: every sender will be refused\n")
    hub = ConversationHub(settings, settings.gateway_allow, warn=log.warning)
    server = socket = None
    try:
        if address is not None:
            from chatcli.gateway.webhook import WebhookServer

            try:
                server = WebhookServer(hub, settings.webhook_secret, *address, log=log.warning)
            except OSError as exc:
                raise UsageError(f"--webhook {webhook}: cannot listen there ({exc.strerror or exc})") from None
            server.start()
            _say(f"webhook listening on {server.address}")
        signals = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
        if slack:
            from chatcli.gateway.slack import build as build_slack

            socket = build_slack(hub, settings.slack_bot_token, settings.slack_app_token, settings.slack_api_url,
                                 log=log.warning)
            socket.connect()  # its own threads
            _say("slack connected in Socket Mode")
        if telegram:
            from chatcli.gateway.telegram import build

            application = build(hub, settings.telegram_token, settings.telegram_api_url, log=log.warning)
            _say("telegram polling for updates")
            application.run_polling(stop_signals=signals, timeout=5)
        else:
            stop = threading.Event()
            for signum in signals:
                signal.signal(signum, lambda _signum, _frame: stop.set())
            stop.wait()
    finally:
        if socket is not None:
            socket.close()
        if server is not None:
            server.stop()
        for thread, note in hub.close():
            log.info("%s: %s", thread, note)
    return 0


def _say(line: str) -> None:
    sys.stderr.write(f"chatcli gateway: {line}\n")
    sys.stderr.flush()
    log.info(line)


__all__ = ["parse_address", "run_gateway"]
