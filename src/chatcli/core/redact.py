"""Redaction of strings that look like credentials, for anything written to disk as typed,
and of the exact secret values a caller knows (a daemon's own tokens), for what it prints or logs."""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import quote

REDACTED = "[REDACTED]"
# A known value shorter than this is redacted where it is a word of its own, not inside other
# words: a verify token "v" would otherwise turn "conversation" into "con[REDACTED]ersation".
WHOLE_WORD_BELOW = 8

# Shapes of common API credentials. Deliberately specific: ordinary prose must survive.
# `_B` rather than `\b`: a key glued to a name by "_" (`OPENAI_KEY_sk-…`) or to a word is still
# a key; only a letter or digit just before the prefix makes it part of something else.
_B = r"(?<![A-Za-z0-9])"
_PATTERNS = [re.compile(_B + shape) for shape in (
    r"sk-ant-[A-Za-z0-9_\-]{16,}",                          # Anthropic
    r"sk-(?:proj-|svcacct-|admin-|or-v1-)?[A-Za-z0-9_\-]{20,}",  # OpenAI, OpenRouter
    r"gh[pousr]_[A-Za-z0-9]{30,}",                          # GitHub tokens
    r"github_pat_[A-Za-z0-9_]{30,}",
    r"(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}(?![0-9A-Z])",  # AWS key ids (long-term, temporary, …)
    r"AIza[0-9A-Za-z_\-]{35}",                              # Google API key
    r"xox[abeoprs]-[A-Za-z0-9\-]{10,}",                     # Slack tokens
    r"xapp-[0-9]-[A-Za-z0-9\-]{10,}",                       # Slack app-level tokens
    r"hf_[A-Za-z0-9]{30,}",                                 # Hugging Face
    r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*",  # JWT (header.payload.signature)
    r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,}",                # Stripe
    r"xai-[A-Za-z0-9]{20,}",                                # xAI
    r"gsk_[A-Za-z0-9]{20,}",                                # Groq
    r"glpat-[A-Za-z0-9_\-]{20,}",                           # GitLab
    r"npm_[A-Za-z0-9]{30,}",                                # npm
)] + [
    # A pasted private key, whole block.
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)"),
]
# `Bearer <token>` and `api_key=…`-style assignments: keep the name, hide the value.
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._\-+/=]{16,}")
# The name may be quoted, as in pasted JSON or YAML: {"api_key": "…"}.
_ASSIGN = re.compile(
    r"(?i)\b([A-Z0-9_-]*(?:api[_-]?key|_key|secret|token|password|passwd)[A-Z0-9_]*['\"]?\s*[=:]\s*)"
    r"(['\"])?(?(2)[^'\"\n]{6,}\2|[^\s'\",}]{8,})"
)
# A bare `key=…` only when the value looks machine-made (has a digit): "The key: patience" stays.
_BARE_KEY = re.compile(r"(?i)\b(key\s*[=:]\s*)(['\"]?)(?=[^\s'\"]*\d)[^\s'\"]{12,}\2")


def redact_secrets(text: str, known: Iterable[str] = ()) -> str:
    """Return `text` with anything that looks like a credential, and each of the `known` values
    (also as it is written in a URL), replaced by [REDACTED]."""
    for value in sorted({form for value in known if value for form in (value, quote(value, safe=""))},
                        key=len, reverse=True):  # longest first: a secret holding another goes whole
        if len(value) < WHOLE_WORD_BELOW:  # a short one (a verify token "v") only where it stands alone
            text = re.sub(rf"(?<![^\W_]){re.escape(value)}(?![^\W_])", REDACTED, text)
        else:
            text = text.replace(value, REDACTED)
    for pattern in _PATTERNS:
        text = pattern.sub(REDACTED, text)
    text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    text = _ASSIGN.sub(lambda m: m.group(1) + REDACTED, text)
    text = _BARE_KEY.sub(lambda m: m.group(1) + REDACTED, text)
    return text
