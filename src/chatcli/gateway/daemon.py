"""`chatcli gateway`: the daemon that serves the Conversation Hub to chat channels through its
adapters (a signed JSON webhook, Telegram, Slack, WhatsApp), configured by flags, environment variables and
$CHATCLI_HOME/gateway.toml (config/gateway.py). It stops on SIGTERM or Ctrl-C,
ending every conversation as a REPL's ends (bound ones written, unbound ones in their mirrors).
Its log is `$CHATCLI_HOME/logs/gateway.log`: refusals and failures, never what was said.

Its tokens and secrets are never said either: each configured value (and anything shaped like a
credential) is redacted from every line of the log, from a thread's crash on stderr and from the
error it stops with, whatever library quoted it. A token the service refuses at start, or a
service that cannot be reached, is one line naming the setting (exit code 2), said before the
adapter would say it is ready."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Mapping

from chatcli.config import gateway as gateway_config
from chatcli.config.gateway import GatewayConfig
from chatcli.config.settings import Settings
from chatcli.core.errors import ChatcliError, UsageError
from chatcli.core.redact import redact_secrets
from chatcli.engine import upkeep
from chatcli.gateway.hub import ConversationHub

log = logging.getLogger("chatcli.gateway")


def parse_address(text: str, what: str = "--webhook") -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    try:
        number = int(port)
        if not 0 <= number < 65536:
            raise ValueError
    except ValueError:
        raise UsageError(f"{what} {text}: give HOST:PORT, such as 127.0.0.1:8787") from None
    return host or "127.0.0.1", number


def run_gateway(settings: Settings, webhook: str | None, telegram: bool = False, slack: bool = False,
                env: Mapping[str, str] | None = None, whatsapp: str | None = None) -> int:
    """Start the adapters asked for (by flags; without any, those gateway.toml has a table for;
    `whatsapp`: its HOST:PORT, or "" for gateway.toml's or the default),
    each refused in one line when it cannot run (no secret, no token, its extra not installed),
    then serve until SIGTERM, SIGINT or SIGHUP."""
    config = gateway_config.load(settings, os.environ if env is None else env)
    secrets = tuple(getattr(config.settings, gateway_config.KEYS[key][1]) or "" for key in gateway_config.SECRETS)

    def redact(text: str) -> str:
        return redact_secrets(text, secrets)

    try:
        return _serve(config, webhook, telegram, slack, whatsapp, redact)
    except ChatcliError as exc:
        # Said as main says it, the token taken out; what it was raised from may quote the token.
        exc.args = (redact(str(exc)),)
        raise exc from None
    except Exception as exc:  # noqa: BLE001 - main's "internal error", without the token a library put in it
        if config.settings.debug:
            sys.stderr.write(redact(traceback.format_exc()))
        else:
            sys.stderr.write(f"chatcli: internal error: {type(exc).__name__}: {redact(str(exc))} "
                             "(run with --debug for details)\n")
        return 1


def _serve(config: GatewayConfig, webhook: str | None, telegram: bool, slack: bool, whatsapp: str | None,
           redact: Callable[[str], str]) -> int:
    settings = config.settings
    if webhook is None and not telegram and not slack and whatsapp is None:
        if not config.adapters:
            raise UsageError("no adapter to run: give --webhook HOST:PORT, --telegram, --slack and/or --whatsapp, or "
                             f"give each a table in {config.path}")
        if "webhook" in config.adapters and not config.listen:
            raise UsageError(f"{config.path}: [webhook] has no listen address (such as listen = \"127.0.0.1:8787\")")
        webhook = config.listen if "webhook" in config.adapters else None
        telegram, slack = "telegram" in config.adapters, "slack" in config.adapters
        whatsapp = "" if "whatsapp" in config.adapters else None
    _check(config, webhook, telegram, slack, whatsapp is not None)
    _check_allowed(config)
    what = "--webhook" if webhook is None or webhook != config.listen else f"{config.path}: webhook.listen"
    address = parse_address(webhook, what) if webhook is not None else None
    whatsapp_what = "--whatsapp"
    if whatsapp == "":
        from chatcli.gateway.whatsapp import DEFAULT_LISTEN

        whatsapp_what = f"{config.path}: whatsapp.listen" if config.whatsapp_listen else whatsapp_what
        whatsapp = config.whatsapp_listen or DEFAULT_LISTEN
    whatsapp_address = parse_address(whatsapp, whatsapp_what) if whatsapp is not None else None
    upkeep.log_to_file(settings, "gateway.log", log.name)
    _redact_output(redact)
    if config.found:
        log.info("read %s (%s from it; set variables win)", config.path, ", ".join(config.from_file) or "nothing")
    upkeep.start_sweep(settings, on_error=lambda exc: log.warning("retention sweep: %s", exc))
    if not settings.gateway_allow:
        sys.stderr.write(f"chatcli gateway: warning: CHATCLI_GATEWAY_ALLOW (or allow in {config.path}) is empty: "
                         "every sender will be refused\n")
    hub = ConversationHub(settings, settings.gateway_allow, warn=log.warning)
    setting = _setting(config)
    scheduler = _scheduler(settings)
    server = socket = phone = None
    # A stop asked for while the adapters start is kept until they have (a WhatsApp lane may be
    # sending a spooled answer already): never a kill in the middle of it.
    signals = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    stop = threading.Event()
    for signum in signals:
        signal.signal(signum, lambda _signum, _frame: stop.set())
    try:
        scheduler.start()
        if whatsapp_address is not None:
            phone = _whatsapp(hub, config, whatsapp_address, whatsapp_what, setting)
        if address is not None:
            from chatcli.gateway.webhook import WebhookServer

            try:
                server = WebhookServer(hub, settings.webhook_secret, *address, log=log.warning)
            except OSError as exc:
                raise UsageError(f"{what} {webhook}: cannot listen there ({exc.strerror or exc})") from None
            server.start()
            _say(f"webhook listening on {server.address}")
        if slack:
            from chatcli.gateway.slack import build as build_slack

            socket = build_slack(hub, settings.slack_bot_token, settings.slack_app_token, settings.slack_api_url,
                                 log=log.warning, setting=setting)
            socket.connect()  # its own threads
            _say("slack connected in Socket Mode")
        if telegram:
            from chatcli.gateway.telegram import build, serve

            poller = build(hub, settings.telegram_token, settings.telegram_api_url, log=log.warning,
                           setting=setting)
            if not stop.is_set():
                serve(poller, signals, ready=lambda: _say("telegram polling for updates"))
        else:
            stop.wait()
    finally:
        scheduler.stop()
        if socket is not None:
            socket.close()
        if phone is not None:
            phone.stop()
        if server is not None:
            server.stop()
        for thread, note in hub.close():
            log.info("%s: %s", thread, note)
    return 0


def _whatsapp(hub: ConversationHub, config: GatewayConfig, address: tuple[str, int], what: str,
              setting: Callable[[str], str]):
    """The WhatsApp adapter, serving once Meta accepted the token and the number's id."""
    from chatcli.gateway.whatsapp import Graph, WhatsAppAdapter, check_number
    from chatcli.store.home import Home

    settings = config.settings
    graph = Graph(settings.whatsapp_token, settings.whatsapp_phone_number_id, settings.whatsapp_api_url,
                  settings.proxies)
    number, refused = check_number(graph, setting, warn=lambda line: _say(f"warning: whatsapp: {line}"))
    try:
        adapter = WhatsAppAdapter(hub, graph, Home.of(settings).spool("whatsapp"), settings.whatsapp_app_secret,
                                  settings.whatsapp_verify_token, *address, log=log.warning, setting=setting,
                                  refused=refused)
    except OSError as exc:
        raise UsageError(f"{what} {address[0]}:{address[1]}: cannot listen there ({exc.strerror or exc})") from None
    adapter.start()
    _say(f"whatsapp webhook listening on {adapter.address} for {number}")
    return adapter


def _check(config: GatewayConfig, webhook: str | None, telegram: bool, slack: bool, whatsapp: bool = False) -> None:
    """Refuse, in one line, an adapter that cannot run."""
    settings = config.settings

    def missing(*pairs: tuple[str, str | None, str]) -> str | None:
        names = [var for var, value, _key in pairs if not value]
        if not names:
            return None
        keys = " or ".join(key for var, value, key in pairs if not value)
        where = f" (nor {keys} in {config.path})"
        return f"{' and '.join(names)} {'is' if len(names) == 1 else 'are'} not set{where}"

    if webhook is not None and (why := missing(("CHATCLI_GATEWAY_WEBHOOK_SECRET", settings.webhook_secret,
                                                 "webhook.secret"))):
        raise UsageError(f"{why}: the webhook adapter cannot check its requests' signatures, so it does not start")
    if telegram and (why := missing(("TELEGRAM_BOT_TOKEN", settings.telegram_token, "telegram.token"))):
        raise UsageError(f"{why}: the Telegram adapter does not start")
    if telegram:
        try:
            import telegram.ext as _telegram  # noqa: F401 - the extra is there
        except ImportError:
            raise UsageError(f"the Telegram adapter needs python-telegram-bot: {sys.executable} -m pip install 'chatcli[telegram]'") from None
    if slack and (why := missing(("SLACK_BOT_TOKEN", settings.slack_bot_token, "slack.bot_token"),
                                 ("SLACK_APP_TOKEN", settings.slack_app_token, "slack.app_token"))):
        raise UsageError(f"{why}: the Slack adapter does not start")
    if slack:
        try:
            import slack_bolt as _slack  # noqa: F401 - the extra is there
        except ImportError:
            raise UsageError(f"the Slack adapter needs slack-bolt: {sys.executable} -m pip install 'chatcli[slack]'") from None
    if whatsapp and (why := missing(
            ("WHATSAPP_TOKEN", settings.whatsapp_token, "whatsapp.token"),
            ("WHATSAPP_PHONE_NUMBER_ID", settings.whatsapp_phone_number_id, "whatsapp.phone_number_id"),
            ("WHATSAPP_APP_SECRET", settings.whatsapp_app_secret, "whatsapp.app_secret"),
            ("WHATSAPP_VERIFY_TOKEN", settings.whatsapp_verify_token, "whatsapp.verify_token"))):
        raise UsageError(f"{why}: the WhatsApp adapter does not start")


def _setting(config: GatewayConfig) -> Callable[[str], str]:
    """How a variable is named to the user: itself, or its key in gateway.toml when it came from there."""
    keys = {var: ".".join(part for part in key if part)
            for key, (var, _field) in gateway_config.KEYS.items() if var}
    return lambda var: f"{keys[var]} in {config.path}" if var in config.from_file else var


class _RedactingFormatter(logging.Formatter):
    """A handler's formatter, whose whole line (a traceback included) is redacted."""

    def __init__(self, inner: logging.Formatter | None, redact: Callable[[str], str]) -> None:
        super().__init__()
        self.inner, self.redact = inner or logging.Formatter(), redact

    def format(self, record: logging.LogRecord) -> str:
        return self.redact(self.inner.format(record))


def _redact_output(redact: Callable[[str], str]) -> None:
    """Every log line, and a thread's crash on stderr, without the tokens (the SDKs log
    exceptions that may quote a request's URL, and the Bot API's URLs hold the token)."""
    for handler in logging.getLogger().handlers:
        handler.setFormatter(_RedactingFormatter(handler.formatter, redact))

    def thread_crashed(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit:
            return
        name = args.thread.name if args.thread is not None else "a thread"
        text = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))
        sys.stderr.write(redact(f"Exception in thread {name}:\n{text}"))

    threading.excepthook = thread_crashed


CHANNELS = ("webhook", "telegram", "slack", "whatsapp")


def _scheduler(settings: Settings):
    """The /schedule jobs run while the daemon runs, as in a REPL; what they say is logged."""
    from chatcli.commands.builtin import build_registry
    from chatcli.engine.conversation import Conversation
    from chatcli.engine.schedule import Scheduler

    registry, conversation = build_registry(), Conversation(settings)

    def run(command: str) -> tuple[str, bool]:
        result = registry.dispatch(command, conversation)
        return result.text, result.error

    return Scheduler(settings, run, lambda line: log.info("%s", line))


def _check_allowed(config: GatewayConfig) -> None:
    """Refuse an allow-list entry that admits nobody (a typo would refuse its sender for good)."""
    for entry in config.settings.gateway_allow:
        channel, colon, sender = entry.partition(":")
        if not colon or channel not in CHANNELS or not sender.strip():
            raise UsageError(f"allow-list entry {entry!r} (CHATCLI_GATEWAY_ALLOW, or allow in {config.path}) is not "
                             f"channel:sender with a channel of {', '.join(CHANNELS)} (such as telegram:123456789 "
                             "or webhook:*)")


def _say(line: str) -> None:
    sys.stderr.write(f"chatcli gateway: {line}\n")
    sys.stderr.flush()
    log.info(line)


__all__ = ["parse_address", "run_gateway"]
