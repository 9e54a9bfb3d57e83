"""Redaction of strings that look like credentials, for anything written to disk as typed."""

from __future__ import annotations

import re

REDACTED = "[REDACTED]"

# Shapes of common API credentials. Deliberately specific: ordinary prose must survive.
_PATTERNS = [
    re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{16,}"),           # Anthropic
    re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),  # OpenAI
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),            # GitHub tokens
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{30,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),                      # AWS access key id
    re.compile(r"\bAIza[0-9A-Za-z_\-]{35}"),                  # Google API key
    re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"),           # Slack
    re.compile(r"\bhf_[A-Za-z0-9]{30,}"),                     # Hugging Face
    re.compile(r"\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"),  # JWT
    re.compile(r"\b[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"),   # Stripe
    re.compile(r"\bxai-[A-Za-z0-9]{20,}"),                   # xAI
    re.compile(r"\bgsk_[A-Za-z0-9]{20,}"),                   # Groq
    re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}"),              # GitLab
    re.compile(r"\bnpm_[A-Za-z0-9]{30,}"),                   # npm
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


def redact_secrets(text: str) -> str:
    """Return `text` with anything that looks like a credential replaced by [REDACTED]."""
    for pattern in _PATTERNS:
        text = pattern.sub(REDACTED, text)
    text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    text = _ASSIGN.sub(lambda m: m.group(1) + REDACTED, text)
    text = _BARE_KEY.sub(lambda m: m.group(1) + REDACTED, text)
    return text
