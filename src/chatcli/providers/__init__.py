"""Network (and local-model) adapters: turn a request into a stream of events. No disk, no printing."""

from chatcli.providers.base import Delta, Done, Provider, ProviderRegistry, Request, default_registry

__all__ = ["Delta", "Done", "Provider", "ProviderRegistry", "Request", "default_registry"]
