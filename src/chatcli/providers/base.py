"""The provider contract (one streaming method) and the registry built-in providers join."""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from chatcli.config.settings import Settings
from chatcli.core.messages import Message


@dataclass(frozen=True)
class Tool:
    """A function the model may call: its name, what it does, and its JSON Schema parameters."""

    name: str
    description: str
    parameters: dict


class Stop:
    """Stops a turn that runs in another thread (an MCP or ACP client cancelled it): `set()`,
    from any thread, marks it and closes the stream in flight at once, even one waiting for a
    model that says nothing (the HTTP providers shut their socket down), so that the turn ends
    now, as Ctrl-C ends it in the REPL, and not when the model speaks again."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._close: Callable[[], None] | None = None

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep `seconds`, or less if the stop comes first; whether it came."""
        return self._event.wait(seconds)

    def set(self) -> None:
        with self._lock:
            self._event.set()
            close = self._close
        if close is not None:
            close()

    def hold(self, close: Callable[[], None] | None) -> None:
        """`close` stops the stream now in flight (None: none is, and what closed the last one
        is let go): called by `set`, or at once if the stop came already. It must not raise."""
        with self._lock:
            self._close = close
            came = self._event.is_set()
        if came and close is not None:
            close()


@dataclass(frozen=True)
class Request:
    model: str
    messages: list[Message]
    system: str = ""
    timeout: float = 120.0
    max_tokens: int | None = None
    # Told when a request is retried (rate limit, overload), so the user is not left waiting in silence.
    on_retry: Callable[[str], None] | None = None
    # Functions offered to the model (providers with `supports_tools`; others ignore them).
    tools: tuple[Tool, ...] = ()
    # "auto": the model may call them; "none": it must answer in text (they are still described,
    # because a history holding tool calls needs them defined).
    tool_choice: str = "auto"
    # Set from another thread to stop this request's stream (see Stop and `streaming`).
    stop: Stop | None = None


@dataclass(frozen=True)
class Delta:
    """A piece of answer text, in order."""

    text: str


@dataclass(frozen=True)
class ToolCall:
    """The model calls a function; `arguments` is the JSON text it wrote. Comes before Done."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Done:
    """The end of an answer, with what the provider reported about it."""

    stop_reason: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None


class Provider(Protocol):
    name: str

    def stream(self, request: Request) -> Iterator[Delta | ToolCall | Done]:
        """Yield Delta events as text arrives, any ToolCall events, then one Done. Raise
        ProviderError on failure."""
        ...


ProviderFactory = Callable[[Settings], Provider]


@contextlib.contextmanager
def streaming(provider: Provider, request: Request) -> Iterator[Iterator[Delta | ToolCall | Done]]:
    """`provider.stream(request)`, closed when the block ends however it ends: an answer left
    early (Ctrl-C, a cancel, an error in the caller) is stopped at its source at once, not when
    the garbage collector gets to it (the local model's worker would go on generating).

    With `request.stop`, a stop ends the stream as Ctrl-C does (KeyboardInterrupt: the turn keeps
    the partial answer, marked interrupted): before it opens, between its events, and when the
    stream fails because the stop closed it."""
    stop = request.stop
    if stop is not None and stop.is_set():
        raise KeyboardInterrupt
    events = provider.stream(request)
    try:
        yield events if stop is None else _until(stop, events)
    except Exception:
        if stop is not None and stop.is_set():
            raise KeyboardInterrupt from None
        raise
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()
        if stop is not None:
            stop.hold(None)


def _until(stop: Stop, events: Iterator[Delta | ToolCall | Done]) -> Iterator[Delta | ToolCall | Done]:
    for event in events:
        if stop.is_set():
            raise KeyboardInterrupt
        yield event


@dataclass
class ProviderRegistry:
    """Provider name → factory. Factories import their module only when called."""

    factories: dict[str, ProviderFactory] = field(default_factory=dict)

    def register(self, name: str, factory: ProviderFactory) -> None:
        self.factories[name] = factory

    def names(self) -> list[str]:
        return list(self.factories)

    def create(self, settings: Settings) -> Provider:
        return self.factories[settings.provider](settings)


def _lazy(module: str, cls: str) -> ProviderFactory:
    def factory(settings: Settings) -> Provider:
        return getattr(importlib.import_module(module), cls)(settings)

    return factory


def default_registry() -> ProviderRegistry:
    """The built-in providers, registered the way a plugin would register its own."""
    registry = ProviderRegistry()
    registry.register("openai", _lazy("chatcli.providers.openai", "OpenAIProvider"))
    registry.register("anthropic", _lazy("chatcli.providers.anthropic", "AnthropicProvider"))
    registry.register("ollama", _lazy("chatcli.providers.openai", "OllamaProvider"))
    registry.register("local", _lazy("chatcli.providers.local", "LocalProvider"))
    return registry
