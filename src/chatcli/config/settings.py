"""Settings parsed once from environment and flags, with provider and model precedence (SPEC §2)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

from chatcli.config import paths
from chatcli.config.providers import (
    DEFAULT_BASE_URLS,
    DEFAULT_CONTEXT_WINDOWS,
    DEFAULT_MODELS,
    KEY_VARS,
    MODEL_VARS,
    canonical_provider,
)
from chatcli.core.errors import ConfigError
from chatcli.core.retention import describe_days, parse_days

DEFAULT_TIMEOUT = 120.0
DEFAULT_HISTORY_MAX_SIZE = 100 * 1024 * 1024
DEFAULT_SESSION_TTL_DAYS = 90.0
DEFAULT_AUTOSAVE_KEEP = 600
DEFAULT_CCR_TTL_DAYS = 7.0
DEFAULT_CCR_MAX_SIZE = 100 * 1024 * 1024
DEFAULT_LOG_MAX_SIZE = 1024 * 1024
DEFAULT_AUTO_COMPACT = 0.8
DEFAULT_AGENT_MAX_STEPS = 25
DEFAULT_AGENT_SHELL_TIMEOUT = 60.0
DEFAULT_AGENT_OUTPUT_LIMIT = 16_000
DEFAULT_MICROCOMPACT_TURNS = 10
MIN_CONTEXT_WINDOW = 256  # below this no prompt and answer fit beside a system prompt
_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2,
               "mib": 1024**2, "g": 1024**3, "gb": 1024**3, "gib": 1024**3}


def parse_size(text: str) -> int:
    """'100MB', '512k', '1048576' → bytes. Raises ValueError on anything else."""
    raw = text.strip().lower().replace(" ", "")
    digits = raw.rstrip("bkmgi")
    unit = raw[len(digits):]
    if not digits or unit not in _SIZE_UNITS:
        raise ValueError(text)
    value = float(digits)
    if value <= 0:
        raise ValueError(text)
    return int(value * _SIZE_UNITS[unit])


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    api_key: str | None


@dataclass(frozen=True)
class Proxies:
    """HTTP(S)_PROXY and NO_PROXY, parsed once. Loopback hosts are never proxied."""

    http: str | None = None
    https: str | None = None
    no_proxy: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "Proxies":
        def get(name: str) -> str | None:
            return env.get(name.lower()) or env.get(name.upper()) or None

        no_proxy = tuple(
            item.strip().lstrip(".").lower() for item in (get("no_proxy") or "").split(",") if item.strip()
        )
        return cls(http=get("http_proxy"), https=get("https_proxy"), no_proxy=no_proxy)

    def for_url(self, scheme: str, host: str) -> str | None:
        """The proxy URL to use for a request to `host`, or None to connect directly."""
        host = host.lower()
        if host in _LOOPBACK or host.startswith("127."):
            return None
        for entry in self.no_proxy:
            if entry == "*" or host == entry or host.endswith("." + entry):
                return None
        return self.https if scheme == "https" else self.http


_LOOPBACK = ("localhost", "::1")


@dataclass(frozen=True)
class Settings:
    home: Path
    provider: str
    model: str
    # Why this provider answers: "--provider", "LLM_PROVIDER", "OPENAI_API_KEY is set"… (chatcli doctor).
    provider_source: str = "default"
    timeout: float = DEFAULT_TIMEOUT
    raw: bool = False
    no_color: bool = False
    dumb_terminal: bool = False
    debug: bool = False
    history_file: Path = Path("~/.chatcli_history")
    history_max_size: int = DEFAULT_HISTORY_MAX_SIZE
    # CHATCLI_MAX_TOKENS: a cap on the length of each answer; None lets each provider decide.
    max_tokens: int | None = None
    # CHATCLI_SESSION_WRITETHROUGH: a bound session is written after every turn and newer
    # writes by other surfaces are adopted before every turn (off disables both directions).
    session_writethrough: bool = True
    # CHATCLI_SESSION_AUTOSAVE: unbound conversations are kept as autosave-… sessions.
    session_autosave: bool = True
    # CHATCLI_MCP_SESSION_AUTOSAVE (wins when set), else CHATCLI_SESSION_AUTOSAVE: the MCP
    # server and the ACP agent mirror each live conversation to a rolling mcp-<id> session.
    mcp_autosave: bool = True
    # CHATCLI_SESSION_TRANSCRIPT: every message is also appended to the session's journal.
    session_transcript: bool = True
    # CHATCLI_SESSION_TTL: machine sessions (autosave-…, mcp-…) not modified for this many days
    # are removed at start-up; 0 keeps them forever.
    session_ttl_days: float = DEFAULT_SESSION_TTL_DAYS
    # CHATCLI_SESSION_AUTOSAVE_KEEP: at most this many machine sessions per prefix, newest kept.
    autosave_keep: int = DEFAULT_AUTOSAVE_KEEP
    # CHATCLI_CCR_TTL and CHATCLI_CCR_MAX_SIZE: the recall store's entries expire after this
    # many days, and the oldest go when the store outgrows the cap.
    ccr_ttl_days: float = DEFAULT_CCR_TTL_DAYS
    ccr_max_size: int = DEFAULT_CCR_MAX_SIZE
    # CHATCLI_LOG_MAX_SIZE: a server's log under CHATCLI_HOME/logs is rotated past this size
    # (store.home.LOG_BACKUPS older copies are kept), so a flood of refused requests stays bounded.
    log_max_size: int = DEFAULT_LOG_MAX_SIZE
    # CHATCLI_CONTEXT_WINDOW: the model's context window in tokens (None: the provider's default).
    context_window: int | None = None
    # CHATCLI_LOCAL_THREADS: the threads the local model computes with (None: every core this
    # process may run on; fewer leave room for other work on a shared machine).
    local_threads: int | None = None
    local_seed: int | None = None  # CHATCLI_LOCAL_SEED: the same answer to the same conversation
    # CHATCLI_AUTO_COMPACT: compact automatically before a turn once the history fills this
    # fraction of the context window; 0 turns it off.
    auto_compact: float = DEFAULT_AUTO_COMPACT
    # CHATCLI_CHAT_TOOLS: chat mode offers the model the session tools (session_search, and
    # recall after a compaction); off for an endpoint that refuses requests carrying tools.
    chat_tools: bool = True
    # CHATCLI_PRICES: "model=IN/OUT,…" US dollars per million tokens, over the built-in table (core/costs.py).
    prices: tuple[tuple[str, float, float], ...] = ()
    # CHATCLI_MICROCOMPACT_TURNS: tool results older than this many turns are replaced by a stub
    # (their text kept in the recall store and the journal); 0 turns it off.
    microcompact_turns: int = DEFAULT_MICROCOMPACT_TURNS
    # CHATCLI_AGENT_MAX_STEPS: tool rounds an agent or coder turn may take before it must answer.
    agent_max_steps: int = DEFAULT_AGENT_MAX_STEPS
    # CHATCLI_AGENT_SHELL_TIMEOUT: seconds a run_shell command may take before it is stopped.
    agent_shell_timeout: float = DEFAULT_AGENT_SHELL_TIMEOUT
    # CHATCLI_AGENT_OUTPUT_LIMIT: characters of a tool's output the model is given (start and end).
    agent_output_limit: int = DEFAULT_AGENT_OUTPUT_LIMIT
    # CHATCLI_AGENT_DIRS: directories besides the working one the file tools may read and write.
    agent_dirs: tuple[Path, ...] = ()
    # CHATCLI_GATEWAY_ALLOW: the principals the chat gateway answers, "channel:sender" (or
    # "channel:*"), comma-separated; nobody else gets an answer.
    gateway_allow: tuple[str, ...] = ()
    # CHATCLI_GATEWAY_WEBHOOK_SECRET: the HMAC secret every webhook request is signed with.
    webhook_secret: str | None = field(default=None, repr=False)
    # TELEGRAM_BOT_TOKEN and TELEGRAM_API_URL: the gateway's Telegram bot, and a Bot API server
    # other than Telegram's (a local one).
    telegram_token: str | None = field(default=None, repr=False)
    telegram_api_url: str | None = None
    # SLACK_BOT_TOKEN, SLACK_APP_TOKEN and SLACK_API_URL: the gateway's Slack app (Socket Mode),
    # and a Web API other than Slack's.
    slack_bot_token: str | None = field(default=None, repr=False)
    slack_app_token: str | None = field(default=None, repr=False)
    slack_api_url: str | None = None
    # WHATSAPP_TOKEN, WHATSAPP_PHONE_NUMBER_ID, WHATSAPP_APP_SECRET, WHATSAPP_VERIFY_TOKEN and
    # WHATSAPP_API_URL: the gateway's WhatsApp number on the Cloud API (its access token, the id
    # of the number it answers from, the app secret deliveries are signed with, the token the
    # webhook's verification handshake must bring), and a Graph API other than Meta's.
    whatsapp_token: str | None = field(default=None, repr=False)
    whatsapp_phone_number_id: str | None = None
    whatsapp_app_secret: str | None = field(default=None, repr=False)
    whatsapp_verify_token: str | None = field(default=None, repr=False)
    whatsapp_api_url: str | None = None
    # CHATCLI_ENCRYPTION_KEY: the master key sealing sessions, journals and recall entries.
    encryption_key: bytes | None = field(default=None, repr=False)
    # CHATCLI_STORE: a PostgreSQL address to keep sessions on (None: the files under home).
    store: str | None = field(default=None, repr=False)
    proxies: Proxies = field(default_factory=Proxies)
    # The environment this was parsed from; only config reads it (endpoints, per-provider models).
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    # Problems with optional settings, each reported once; the default was used instead.
    warnings: tuple[str, ...] = ()

    @classmethod
    def load(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        provider: str | None = None,
        model: str | None = None,
        timeout: float | None = None,
        raw: bool = False,
        debug: bool = False,
    ) -> "Settings":
        env = dict(os.environ if env is None else env)
        warnings: list[str] = []
        chosen, chosen_because = _select_provider(env, provider)
        if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
            raise ConfigError(f"--timeout must be a positive number of seconds, not {timeout:g}")
        history_max = DEFAULT_HISTORY_MAX_SIZE
        if env.get("HISTORY_MAX_SIZE"):
            try:
                history_max = parse_size(env["HISTORY_MAX_SIZE"])
            except ValueError:
                warnings.append(
                    f"HISTORY_MAX_SIZE={env['HISTORY_MAX_SIZE']!r} is not a size like 100MB; using 100MB"
                )
        local_model = env.get("CHATCLI_LOCAL_MODEL", "").strip()
        if local_model and not _runs_locally(local_model):
            warnings.append(f"CHATCLI_LOCAL_MODEL={local_model!r} is not a .gguf file; using the bundled model")
        max_tokens = _whole(env, "CHATCLI_MAX_TOKENS", warnings, "a positive whole number",
                            "using each provider's default")
        writethrough = _flag(env, "CHATCLI_SESSION_WRITETHROUGH", True, warnings)
        ttl = _days(env, "CHATCLI_SESSION_TTL", DEFAULT_SESSION_TTL_DAYS, warnings)
        ccr_ttl = _days(env, "CHATCLI_CCR_TTL", DEFAULT_CCR_TTL_DAYS, warnings)
        keep = _whole(env, "CHATCLI_SESSION_AUTOSAVE_KEEP", warnings, "a whole number of sessions",
                      f"using {DEFAULT_AUTOSAVE_KEEP}", least=0)
        keep = DEFAULT_AUTOSAVE_KEEP if keep is None else keep
        ccr_max = _size(env, "CHATCLI_CCR_MAX_SIZE", DEFAULT_CCR_MAX_SIZE, "100MB", warnings)
        log_max = _size(env, "CHATCLI_LOG_MAX_SIZE", DEFAULT_LOG_MAX_SIZE, "1MB", warnings)
        context_window = _whole(env, "CHATCLI_CONTEXT_WINDOW", warnings,
                                f"a number of tokens of at least {MIN_CONTEXT_WINDOW}", "using the provider's default",
                                least=MIN_CONTEXT_WINDOW)
        local_threads = _whole(env, "CHATCLI_LOCAL_THREADS", warnings, "a positive number", "using every core")
        local_seed = _whole(env, "CHATCLI_LOCAL_SEED", warnings, "a whole number from 0 to 4294967294",
                            "a new seed for every answer", least=0)
        if local_seed is not None and local_seed >= 2**32 - 1:  # 2**32 - 1 is llama.cpp's "pick one"
            warnings.append(f"CHATCLI_LOCAL_SEED={local_seed} is not a whole number from 0 to 4294967294; "
                            "a new seed for every answer")
            local_seed = None
        prices: tuple = ()
        if env.get("CHATCLI_PRICES", "").strip():
            from chatcli.core.costs import parse_prices

            try:
                prices = tuple((model, rate_in, rate_out)
                               for model, (rate_in, rate_out) in parse_prices(env["CHATCLI_PRICES"]).items())
            except ValueError as exc:
                warnings.append(f"CHATCLI_PRICES: {str(exc)!r} is not model=IN/OUT (US dollars per million tokens); "
                                "using the built-in prices")
        auto_compact = _fraction(env, "CHATCLI_AUTO_COMPACT", DEFAULT_AUTO_COMPACT, warnings)
        steps = _whole(env, "CHATCLI_AGENT_MAX_STEPS", warnings, "a positive whole number",
                       f"using {DEFAULT_AGENT_MAX_STEPS}")
        output_limit = _whole(env, "CHATCLI_AGENT_OUTPUT_LIMIT", warnings, "a number of characters of at least 200",
                              f"using {DEFAULT_AGENT_OUTPUT_LIMIT:,}", least=200)
        shell_timeout = _seconds(env, "CHATCLI_AGENT_SHELL_TIMEOUT", DEFAULT_AGENT_SHELL_TIMEOUT, warnings)
        microcompact = _whole(env, "CHATCLI_MICROCOMPACT_TURNS", warnings, "a whole number of turns (0: off)",
                              f"using {DEFAULT_MICROCOMPACT_TURNS}", least=0)
        agent_dirs = tuple(Path(os.path.expanduser(part.strip()))
                           for part in env.get("CHATCLI_AGENT_DIRS", "").split(os.pathsep) if part.strip())
        encryption_key = paths.encryption_key(env)  # a bad key stops here, before anything is read
        store = paths.session_store(env)  # as does a store that is not one
        autosave = _flag(env, "CHATCLI_SESSION_AUTOSAVE", True, warnings)
        mcp_autosave = _flag(env, "CHATCLI_MCP_SESSION_AUTOSAVE", autosave, warnings)
        transcript = _flag(env, "CHATCLI_SESSION_TRANSCRIPT", True, warnings)
        settings = cls(
            home=paths.chatcli_home(env),
            session_writethrough=writethrough,
            session_autosave=autosave,
            mcp_autosave=mcp_autosave,
            session_transcript=transcript,
            session_ttl_days=ttl,
            autosave_keep=keep,
            ccr_ttl_days=ccr_ttl,
            ccr_max_size=ccr_max,
            log_max_size=log_max,
            context_window=context_window,
            local_threads=local_threads,
            local_seed=local_seed,
            auto_compact=auto_compact,
            chat_tools=_flag(env, "CHATCLI_CHAT_TOOLS", True, warnings),
            prices=prices,
            microcompact_turns=DEFAULT_MICROCOMPACT_TURNS if microcompact is None else microcompact,
            agent_max_steps=steps or DEFAULT_AGENT_MAX_STEPS,
            agent_shell_timeout=shell_timeout,
            agent_output_limit=output_limit or DEFAULT_AGENT_OUTPUT_LIMIT,
            agent_dirs=agent_dirs,
            gateway_allow=tuple(part.strip() for part in env.get("CHATCLI_GATEWAY_ALLOW", "").split(",")
                                if part.strip()),
            webhook_secret=env.get("CHATCLI_GATEWAY_WEBHOOK_SECRET") or None,
            telegram_token=env.get("TELEGRAM_BOT_TOKEN") or None,
            telegram_api_url=env.get("TELEGRAM_API_URL") or None,
            slack_bot_token=env.get("SLACK_BOT_TOKEN") or None,
            slack_app_token=env.get("SLACK_APP_TOKEN") or None,
            slack_api_url=env.get("SLACK_API_URL") or None,
            whatsapp_token=env.get("WHATSAPP_TOKEN") or None,
            whatsapp_phone_number_id=env.get("WHATSAPP_PHONE_NUMBER_ID") or None,
            whatsapp_app_secret=env.get("WHATSAPP_APP_SECRET") or None,
            whatsapp_verify_token=env.get("WHATSAPP_VERIFY_TOKEN") or None,
            whatsapp_api_url=env.get("WHATSAPP_API_URL") or None,
            encryption_key=encryption_key,
            store=store,
            provider=chosen,
            provider_source=chosen_because,
            model="",
            timeout=timeout or DEFAULT_TIMEOUT,
            raw=raw,
            no_color=bool(env.get("NO_COLOR")),
            dumb_terminal=env.get("TERM", "") == "dumb",
            debug=debug,
            history_file=paths.history_file(env),
            history_max_size=history_max,
            max_tokens=max_tokens,
            proxies=Proxies.from_env(env),
            env=env,
            warnings=tuple(warnings),
        )
        return replace(settings, model=settings.model_for(chosen, model))

    def with_provider(self, provider: str) -> "Settings":
        """These settings for another provider (/provider): its own model, by <PROVIDER>_MODEL or default.

        --model and LLM_MODEL are not carried over: they were chosen for the first provider.
        """
        provider = canonical_provider(provider)
        return replace(self, provider=provider, provider_source="/provider",
                       model=self.model_for(provider, general=False))

    def with_model(self, model: str) -> "Settings":
        """These settings with another model for the same provider (/model)."""
        return replace(self, model=self.model_for(self.provider, model))

    def model_for(self, provider: str, explicit: str | None = None, *, general: bool = True) -> str:
        """--model, else LLM_MODEL, else <PROVIDER>_MODEL, else the provider's default.

        The local provider runs GGUF files only: an explicit model that is not a `.gguf`
        path is a usage error, while an LLM_MODEL meant for a hosted provider is passed over.
        """
        explicit = (explicit or "").strip()
        if explicit:
            if provider == "local" and not _runs_locally(explicit):
                raise ConfigError(
                    f"the local provider runs .gguf files; '{explicit}' is not one "
                    "(choose a hosted provider with --provider, or give a .gguf path)"
                )
            return explicit
        chain = (self.env.get("LLM_MODEL") if general else None, self.env.get(MODEL_VARS[provider]))
        for candidate in chain:
            candidate = (candidate or "").strip()
            if candidate and (provider != "local" or _runs_locally(candidate)):
                return candidate
        return DEFAULT_MODELS[provider]

    def endpoint(self, provider: str | None = None) -> Endpoint:
        provider = provider or self.provider
        env = self.env
        if provider == "openai":
            base = env.get("OPENAI_BASE_URL") or env.get("OPENAI_API_URL") or DEFAULT_BASE_URLS["openai"]
        elif provider == "anthropic":
            base = env.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URLS["anthropic"]
        elif provider == "ollama":
            base = env.get("OLLAMA_BASE_URL") or DEFAULT_BASE_URLS["ollama"]
            # Ollama is usually given as http://host:11434; its OpenAI-compatible API lives under /v1.
            if not urlsplit(base).path.strip("/"):
                base = base.rstrip("/") + "/v1"
        else:
            base = ""
        key = env.get(KEY_VARS[provider]) if provider in KEY_VARS else None
        return Endpoint(base_url=base.rstrip("/"), api_key=key or None)

    @property
    def context_tokens(self) -> int:
        """The context window of the current model, in tokens."""
        return self.context_window or DEFAULT_CONTEXT_WINDOWS.get(self.provider, 8192)

    def session_report(self, sessions_at: str) -> list[tuple[str, str, str]]:
        """(variable, effective value, where it came from) for every session setting (/config session).
        `sessions_at` is the caller's to give: where the store keeps sessions (a directory in
        CHATCLI_HOME, or a server) is the store's to say, and config sits below the store."""
        def source(var: str) -> str:
            if not self.env.get(var, "").strip():
                return "default"
            invalid = any(warning.startswith(f"{var}=") for warning in self.warnings)
            return "default; the environment's value is invalid" if invalid else "environment"

        def on(value: bool) -> str:
            return "on" if value else "off"

        return [
            ("CHATCLI_HOME", str(self.home), source("CHATCLI_HOME")),
            *([("sessions directory", sessions_at, "CHATCLI_HOME")] if self.store is None else
              [("sessions server", sessions_at, "CHATCLI_STORE")]),
            ("CHATCLI_SESSION_WRITETHROUGH", on(self.session_writethrough), source("CHATCLI_SESSION_WRITETHROUGH")),
            ("CHATCLI_SESSION_AUTOSAVE", on(self.session_autosave), source("CHATCLI_SESSION_AUTOSAVE")),
            ("CHATCLI_SESSION_TRANSCRIPT", on(self.session_transcript), source("CHATCLI_SESSION_TRANSCRIPT")),
            ("CHATCLI_SESSION_TTL", f"{describe_days(self.session_ttl_days)} (machine sessions)"
             if self.session_ttl_days else "0 (machine sessions never expire)",
             source("CHATCLI_SESSION_TTL")),
            ("CHATCLI_SESSION_AUTOSAVE_KEEP", f"{self.autosave_keep} per prefix",
             source("CHATCLI_SESSION_AUTOSAVE_KEEP")),
            ("HISTORY_MAX_SIZE", f"{self.history_max_size} bytes (a save above it warns)", source("HISTORY_MAX_SIZE")),
            ("CHATCLI_CONTEXT_WINDOW", f"{self.context_tokens} tokens", source("CHATCLI_CONTEXT_WINDOW")),
            ("CHATCLI_AUTO_COMPACT", f"at {self.auto_compact:.0%} of the context window" if self.auto_compact
             else "off", source("CHATCLI_AUTO_COMPACT")),
        ]

    @property
    def model_label(self) -> str:
        """The model as the prompt shows it: a GGUF path is shown by its file name."""
        if self.provider == "local":
            return Path(self.model).name.removesuffix(".gguf")
        return self.model

    def project_root(self, cwd: Path | None = None) -> Path | None:
        """The nearest directory at or above `cwd` that holds `.git`, if any."""
        here = (cwd or Path.cwd()).resolve()
        for directory in (here, *here.parents):
            if (directory / ".git").exists():
                return directory
        return None

    def bootstrap_dirs(self, cwd: Path | None = None) -> list[Path]:
        """Where bootstrap files are looked for, first match per file wins."""
        root = self.project_root(cwd)
        dirs = [root] if root else []
        if self.home not in dirs:
            dirs.append(self.home)
        return dirs


_FALSE = ("false", "0", "off", "no", "disabled")
_TRUE = ("true", "1", "on", "yes", "enabled")


def _flag(env: Mapping[str, str], var: str, default: bool, warnings: list[str]) -> bool:
    value = env.get(var, "").strip().lower()
    if not value:
        return default
    if value in _FALSE:
        return False
    if value in _TRUE:
        return True
    warnings.append(f"{var}={env[var]!r} is not on/off (true|1|on|yes or false|0|off|no|disabled); "
                    f"using {'on' if default else 'off'}")
    return default


def _number(env: Mapping[str, str], var: str, warnings: list[str], read, says: str, otherwise: str):
    """`read(text)` of the variable, or None when unset or bad (`read` raises ValueError); a bad
    one is said once: "VAR='x' is not `says`; `otherwise`"."""
    text = env.get(var, "").strip()
    if not text:
        return None
    try:
        return read(text)
    except ValueError:
        warnings.append(f"{var}={env[var]!r} is not {says}; {otherwise}")
        return None


def _whole(env: Mapping[str, str], var: str, warnings: list[str], says: str, otherwise: str,
           least: int = 1) -> int | None:
    """A whole number of at least `least` (`1_000` too), or None when unset or bad."""
    def read(text: str) -> int:
        value = int(text)
        if value < least:
            raise ValueError(text)
        return value

    return _number(env, var, warnings, read, says, otherwise)


def _seconds(env: Mapping[str, str], var: str, default: float, warnings: list[str]) -> float:
    """A positive number of seconds (`60` or `60s`), else `default`."""
    def read(text: str) -> float:
        value = float(text.lower().removesuffix("s"))
        if not (math.isfinite(value) and value > 0):
            raise ValueError(text)
        return value

    value = _number(env, var, warnings, read, "a number of seconds", f"using {default:g}")
    return default if value is None else value


def _fraction(env: Mapping[str, str], var: str, default: float, warnings: list[str]) -> float:
    """A share like 80%, 0.8 or 80 (read as a percentage); off/false/0 give 0."""
    value = env.get(var, "").strip().lower()
    if not value:
        return default
    if value in _FALSE:
        return 0.0
    try:
        number = float(value.removesuffix("%"))
        if value.endswith("%") or number > 1:
            number /= 100
        if not 0 <= number <= 1:
            raise ValueError
        return number
    except ValueError:
        warnings.append(f"{var}={env[var]!r} is not a share of the context window like 80% or 0.8 "
                        f"(off disables); using {default:.0%}")
        return default


def _size(env: Mapping[str, str], name: str, default: int, shown: str, warnings: list[str]) -> int:
    """A size setting (`100MB`, `512k`), or `default` (`shown`) with a warning when it is not one."""
    if not env.get(name, "").strip():
        return default
    try:
        return parse_size(env[name])
    except ValueError:
        warnings.append(f"{name}={env[name]!r} is not a size like {shown}; using {shown}")
        return default


def _days(env: Mapping[str, str], var: str, default: float, warnings: list[str]) -> float:
    value = env.get(var, "").strip()
    if not value:
        return default
    try:
        return parse_days(value)
    except ValueError:
        warnings.append(f"{var}={env[var]!r} is not a number of days like 90d, 30d or 90 (0 disables); "
                        f"using {describe_days(default)}")
        return default


def _runs_locally(model: str) -> bool:
    return model.lower().endswith(".gguf") or model == DEFAULT_MODELS["local"]




def _select_provider(env: Mapping[str, str], flag: str | None) -> tuple[str, str]:
    """The provider (SPEC §2 precedence) and why it was chosen, in words."""
    if flag:
        return canonical_provider(flag), "--provider"
    if env.get("LLM_PROVIDER", "").strip():
        return canonical_provider(env["LLM_PROVIDER"]), "LLM_PROVIDER"
    for provider, var in KEY_VARS.items():
        if env.get(var, "").strip():
            return provider, f"{var} is set"
    return "local", "no provider is configured"
