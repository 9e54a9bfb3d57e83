"""The chat gateway's config file: `$CHATCLI_HOME/gateway.toml`.

A daemon's tokens are better kept in a private file than in the environment of every shell, so
`chatcli gateway` also reads this file. Each setting it holds has an environment variable, and a
variable that is set wins over the file (a one-off override needs no edit). With no adapter flag,
the daemon runs the adapters the file has a table for.

    allow = ["telegram:123456789", "slack:U0123ABCD", "webhook:*"]   # or one comma-separated string

    [webhook]
    listen = "127.0.0.1:8787"       # the address --webhook would give
    secret = "..."                  # CHATCLI_GATEWAY_WEBHOOK_SECRET

    [telegram]
    token = "123456:ABC..."         # TELEGRAM_BOT_TOKEN
    api_url = "http://127.0.0.1:8081/bot"   # TELEGRAM_API_URL, optional

    [slack]
    bot_token = "xoxb-..."          # SLACK_BOT_TOKEN
    app_token = "xapp-..."          # SLACK_APP_TOKEN
    api_url = "https://slack.com/api/"      # SLACK_API_URL, optional

    [whatsapp]
    listen = "127.0.0.1:8788"       # the address --whatsapp would give (the webhook Meta calls)
    token = "EAAG..."               # WHATSAPP_TOKEN
    phone_number_id = "1234567890"  # WHATSAPP_PHONE_NUMBER_ID
    app_secret = "..."              # WHATSAPP_APP_SECRET
    verify_token = "..."            # WHATSAPP_VERIFY_TOKEN
    api_url = "https://graph.facebook.com/v24.0"   # WHATSAPP_API_URL, optional

The file is only read, never written. It is refused, in one line, when it cannot be parsed,
names a key chatcli does not know (a typo would otherwise silently drop a token), is another
user's or may be changed by others (it decides who is answered and where tokens go), or holds
a secret while others may read it (as ssh refuses a readable private key).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from chatcli.config.settings import Settings
from chatcli.core.errors import ConfigError

FILE_NAME = "gateway.toml"
ADAPTERS = ("webhook", "telegram", "slack", "whatsapp")
# (table, key) → (the environment variable that wins over it, the Settings field it sets);
# a None field is read here and not kept in Settings (the webhook's address).
KEYS: dict[tuple[str, str], tuple[str | None, str | None]] = {
    ("", "allow"): ("CHATCLI_GATEWAY_ALLOW", "gateway_allow"),
    ("webhook", "listen"): (None, None),
    ("webhook", "secret"): ("CHATCLI_GATEWAY_WEBHOOK_SECRET", "webhook_secret"),
    ("telegram", "token"): ("TELEGRAM_BOT_TOKEN", "telegram_token"),
    ("telegram", "api_url"): ("TELEGRAM_API_URL", "telegram_api_url"),
    ("slack", "bot_token"): ("SLACK_BOT_TOKEN", "slack_bot_token"),
    ("slack", "app_token"): ("SLACK_APP_TOKEN", "slack_app_token"),
    ("slack", "api_url"): ("SLACK_API_URL", "slack_api_url"),
    ("whatsapp", "listen"): (None, None),
    ("whatsapp", "token"): ("WHATSAPP_TOKEN", "whatsapp_token"),
    ("whatsapp", "phone_number_id"): ("WHATSAPP_PHONE_NUMBER_ID", "whatsapp_phone_number_id"),
    ("whatsapp", "app_secret"): ("WHATSAPP_APP_SECRET", "whatsapp_app_secret"),
    ("whatsapp", "verify_token"): ("WHATSAPP_VERIFY_TOKEN", "whatsapp_verify_token"),
    ("whatsapp", "api_url"): ("WHATSAPP_API_URL", "whatsapp_api_url"),
}
SECRETS = (("webhook", "secret"), ("telegram", "token"), ("slack", "bot_token"), ("slack", "app_token"),
           ("whatsapp", "token"), ("whatsapp", "app_secret"), ("whatsapp", "verify_token"))


@dataclass(frozen=True)
class GatewayConfig:
    settings: Settings  # with the file's values where the environment set none
    path: Path
    found: bool  # the file exists
    adapters: tuple[str, ...] = ()  # the adapters the file has a table for
    listen: str | None = None  # [webhook] listen
    whatsapp_listen: str | None = None  # [whatsapp] listen
    from_file: tuple[str, ...] = ()  # the variables whose value came from the file


def file_path(settings: Settings) -> Path:
    return settings.home / FILE_NAME


def load(settings: Settings, env: Mapping[str, str]) -> GatewayConfig:
    """`settings` completed from gateway.toml (when there is one); ConfigError, in one line, for
    a file chatcli cannot use."""
    path = file_path(settings)
    try:
        with open(path, "rb") as handle:
            st = os.fstat(handle.fileno())
            data = handle.read()
    except FileNotFoundError:
        return GatewayConfig(settings, path, found=False)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    import tomllib

    try:
        table = tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    values = _flatten(path, table)
    mode = stat.S_IMODE(st.st_mode)
    # Whoever may change it decides who the gateway answers and where its tokens are sent.
    if st.st_uid != os.getuid():
        raise ConfigError(f"{path} belongs to another user: chatcli reads only a gateway.toml of your own")
    if mode & 0o022:
        raise ConfigError(f"{path} may be changed by others (mode {mode:04o}): chmod 600 {path}")
    if mode & 0o044 and any(key in values for key in SECRETS):
        raise ConfigError(f"{path} holds tokens but others may read it (mode {mode:04o}): chmod 600 {path}")
    changes: dict[str, object] = {}
    from_file = []
    for key, value in values.items():
        var, name = KEYS[key]
        if name is None or (var and env.get(var)):  # a variable that is set wins
            continue
        changes[name] = _allow(path, value) if key == ("", "allow") else _text(path, key, value)
        from_file.append(var)
    listen, whatsapp_listen = (values.get((name, "listen")) for name in ("webhook", "whatsapp"))
    return GatewayConfig(replace(settings, **changes), path, found=True,
                         adapters=tuple(name for name in ADAPTERS if name in table),
                         listen=_text(path, ("webhook", "listen"), listen) if listen is not None else None,
                         whatsapp_listen=(_text(path, ("whatsapp", "listen"), whatsapp_listen)
                                          if whatsapp_listen is not None else None),
                         from_file=tuple(from_file))


def _flatten(path: Path, table: dict) -> dict[tuple[str, str], object]:
    """{(table, key): value} for every key, refusing the ones chatcli does not know."""
    values: dict[tuple[str, str], object] = {}
    for name, value in table.items():
        if isinstance(value, dict) and name in ADAPTERS:
            values.update({(name, key): inner for key, inner in value.items()})
        else:
            values[("", name)] = value
    unknown = [".".join(part for part in key if part) for key in values if key not in KEYS]
    if unknown:
        known = ", ".join(".".join(part for part in key if part) for key in KEYS)
        raise ConfigError(f"{path}: unknown key {', '.join(sorted(unknown))} (known: {known})")
    return values


def _text(path: Path, key: tuple[str, str], value: object) -> str | None:
    if not isinstance(value, str):
        raise ConfigError(f"{path}: {'.'.join(part for part in key if part)} must be a string")
    return value.strip() or None


def _allow(path: Path, value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f'{path}: allow must be a list of "channel:sender" strings, or one comma-separated string')
    return tuple(item.strip() for item in value if item.strip())


__all__ = ["FILE_NAME", "GatewayConfig", "file_path", "load"]
