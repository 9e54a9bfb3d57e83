"""Typed settings from the environment and flags; the one layer that knows paths."""

from chatcli.config.settings import PROVIDERS, Endpoint, Proxies, Settings, canonical_provider

__all__ = ["PROVIDERS", "Endpoint", "Proxies", "Settings", "canonical_provider"]
