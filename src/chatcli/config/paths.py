"""Where chatcli keeps things, from the environment alone (light: no settings machinery).

`Settings` uses these, and so does `chatcli session list`, which needs a path and nothing else.
What lies inside CHATCLI_HOME is store.home's to say.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path


def expanded(path: str, env: Mapping[str, str]) -> str:
    """expanduser against the HOME of `env` (not necessarily this process's), as a string."""
    if path == "~" or path.startswith("~/"):
        home = env.get("HOME") or os.path.expanduser("~")
        path = home + path[1:]
    return os.path.expanduser(path)


def expand(path: str, env: Mapping[str, str]) -> Path:
    from pathlib import Path  # not at import: `session list`'s fast path does without it

    return Path(expanded(path, env))


def chatcli_home_text(env: Mapping[str, str]) -> str:
    """CHATCLI_HOME as a string (for `session list`'s fast path, which does not load pathlib)."""
    return expanded(env.get("CHATCLI_HOME") or "~/.chatcli", env)


def chatcli_home(env: Mapping[str, str]) -> Path:
    return expand(chatcli_home_text(env), env)


def history_file(env: Mapping[str, str]) -> Path:
    return expand(env.get("HISTORY_FILE") or "~/.chatcli_history", env)


def session_store(env: Mapping[str, str]) -> str | None:
    """CHATCLI_STORE: where sessions are kept. Unset, empty or `files`: the files under
    CHATCLI_HOME (None). A `postgresql://` (or `postgres://`) address: that PostgreSQL server
    (store.pg_sessions). Anything else raises ConfigError: sessions are never written somewhere
    the user did not mean."""
    text = env.get("CHATCLI_STORE", "").strip()
    if text in ("", "files"):
        return None
    if text.startswith(("postgresql://", "postgres://")):
        return text
    from chatcli.core.errors import ConfigError

    raise ConfigError("CHATCLI_STORE must be 'files' or a PostgreSQL address (postgresql://user@host/database), "
                      f"not {text.split('://')[0] + '://…' if '://' in text else repr(text)}")


def encryption_key(env: Mapping[str, str], var: str = "CHATCLI_ENCRYPTION_KEY") -> bytes | None:
    """The master key (SPEC §9): base64 of exactly 32 bytes, or None when the variable is unset.
    Anything else raises ConfigError: never a silent fall-back to plaintext. That includes a
    variable set to nothing (`CHATCLI_ENCRYPTION_KEY=`, a secret manager that returned no value):
    it says "encrypt" with no key, so it stops rather than writing plaintext (unset it to mean
    "no encryption")."""
    text = env.get(var)
    if text is None:
        return None
    import base64
    import binascii

    from chatcli.core.errors import ConfigError

    hint = "(make one with: openssl rand -base64 32)"
    text = text.strip()
    if not text:
        raise ConfigError(f"{var} is set but empty; set it to a key {hint}, or unset it to store plaintext")
    try:
        key = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(f"{var} is not base64 {hint}") from None
    if len(key) != 32:
        raise ConfigError(f"{var} must be 32 bytes in base64, not {len(key)} {hint}")
    return key
