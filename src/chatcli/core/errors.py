"""The error types every layer raises; each carries one line a user can act on."""

from __future__ import annotations


class ChatcliError(Exception):
    """An expected failure, shown to the user as one line (exit code 1)."""

    exit_code = 1


class UsageError(ChatcliError):
    """The user asked for something malformed: a bad flag, value or name (exit code 2)."""

    exit_code = 2


class ConfigError(UsageError):
    """A setting (environment variable or flag) has a value chatcli cannot use."""


class ProviderError(ChatcliError):
    """A model provider failed: bad key, unreachable host, HTTP error, timeout."""

    # Set when the provider refused the request itself as malformed (HTTP 400, 413, 422, or a
    # 500 reporting a validation error): the same request would be refused again.
    refused_request = False
