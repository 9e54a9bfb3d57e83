"""The conversation engine: holds the history, the provider and the session binding."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from chatcli.config import Settings
from chatcli.core.bootstrap import compose_system_prompt
from chatcli.core.errors import ProviderError
from chatcli.core.messages import Message
from chatcli.providers.base import Delta, Done, Provider, ProviderRegistry, Request, default_registry
from chatcli.store.bootstrap import read_bootstrap


def load_system_prompt(settings: Settings, cwd: Path | None = None) -> tuple[str, list[str]]:
    """The system prompt composed from the bootstrap files, and warnings about unreadable ones."""
    parts, warnings = read_bootstrap(settings.bootstrap_dirs(cwd))
    return compose_system_prompt(parts), warnings


@dataclass(frozen=True)
class TurnResult:
    text: str
    interrupted: bool = False
    done: Done | None = None

    @property
    def truncated(self) -> bool:
        """The answer stopped at the token limit rather than where the model meant to end."""
        return self.done is not None and self.done.stop_reason in ("length", "max_tokens")


class Conversation:
    """One live conversation. Front ends drive it; it never prints.

    The bootstrap system prompt is sent with every request and never enters `history`.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        system_prompt: str = "",
        registry: ProviderRegistry | None = None,
    ) -> None:
        self.settings = settings
        self.system_prompt = system_prompt
        self.registry = registry or default_registry()
        self.history: list[Message] = []
        # The name of the bound session; the session commands set it (prompt shows `[name] model> `).
        self.session_name: str | None = None
        self._provider: Provider | None = None
        self._provider_lock = threading.Lock()  # warm() may create it from a background thread

    @property
    def provider(self) -> Provider:
        """The provider object, created on first use so start-up imports nothing heavy."""
        with self._provider_lock:
            if self._provider is None:
                self._provider = self.registry.create(self.settings)
            return self._provider

    def switch_provider(self, name: str) -> None:
        """Use another provider; its model follows SPEC §2 precedence for that provider."""
        self._replace(self.settings.with_provider(name))

    def switch_model(self, model: str) -> None:
        self._replace(self.settings.with_model(model))

    def _replace(self, settings: Settings) -> None:
        # Build the new provider first: a missing key or model file fails here and changes nothing.
        provider = self.registry.create(settings)
        with self._provider_lock:
            self.settings, self._provider = settings, provider

    def warm(self) -> None:
        """Do the slow part of the first request now (load a local model); safe from a thread."""
        warm = getattr(self.provider, "warm", None)
        if warm:
            warm()

    def send(
        self,
        text: str,
        on_text: Callable[[str], None] = lambda _t: None,
        on_notice: Callable[[str], None] | None = None,
    ) -> TurnResult:
        """Run one turn. The user's message stays in the history whatever happens.

        Ctrl-C (KeyboardInterrupt) during the answer keeps the partial answer, marked
        `meta.interrupted`, and returns normally. A provider error keeps any partial answer
        the same way, then propagates.
        """
        self.history.append(Message("user", text))
        request = Request(
            model=self.settings.model,
            messages=list(self.history),
            system=self.system_prompt,
            timeout=self.settings.timeout,
            max_tokens=self.settings.max_tokens,
            on_retry=on_notice,
        )
        parts: list[str] = []
        done: Done | None = None
        try:
            for event in self.provider.stream(request):
                if isinstance(event, Delta):
                    parts.append(event.text)
                    on_text(event.text)
                elif isinstance(event, Done):
                    done = event
        except KeyboardInterrupt:
            answer = "".join(parts)
            self.history.append(Message("assistant", answer, meta={"interrupted": True}))
            return TurnResult(answer, interrupted=True)
        except ProviderError:
            if parts:
                self.history.append(Message("assistant", "".join(parts), meta={"interrupted": True}))
            raise
        answer = "".join(parts)
        self.history.append(Message("assistant", answer))
        return TurnResult(answer, done=done)
