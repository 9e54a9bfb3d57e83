"""`chatcli doctor`: which provider would answer, whether it does, and how long it took.

The first thing to run when something is wrong. Each check is a value (a name, ok or not, one
line); the front end prints them. Nothing is written but a probe file, removed at once, in
CHATCLI_HOME (or, before it exists, in the nearest folder above it, where it would be created).
The checks talk to the real provider: one answer of one token.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from chatcli.config.settings import Settings
from chatcli.core.errors import ChatcliError
from chatcli.core.messages import Message
from chatcli.providers.base import Delta, Done, ProviderRegistry, Request, default_registry, streaming
from chatcli.store.atomic import unwritable
from chatcli.store.home import Home, session_named

PROBE = "Say hello."
# What a crashed llama.cpp most often means, and what to do about it (both steps: `make clean`
# alone would reinstall the same wheel from the cache).
_CRASH_HINT = ("llama.cpp was probably built for another CPU: rebuild it portable by removing the "
               "llama-cpp-python-* folders of chatcli's wheel cache (~/.cache/chatcli/wheels by default), "
               "then `make clean run` (see the README)")


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    text: str
    # False for what chatting does not depend on (the offline model when a hosted provider
    # answers, a home where nothing can be saved): a warning, not a failure.
    needed: bool = True


def diagnose(settings: Settings, registry: ProviderRegistry | None = None) -> Iterator[Check]:
    """The checks, in order, each as soon as it is done (a model load takes a moment)."""
    registry = registry or default_registry()
    yield _provider_check(settings)
    yield _home_check(settings)
    if settings.provider == "local":
        yield from _local_checks(settings, registry)
        return
    yield _answer_check(settings, registry, settings.provider)
    local = settings.with_provider("local")
    yield from (Check(f"{check.name} (offline)", check.ok, check.text, needed=False)
                for check in _local_checks(local, registry))


def _provider_check(settings: Settings) -> Check:
    text = f"{settings.provider}, model {settings.model_label} ({settings.provider_source})"
    endpoint = settings.endpoint()
    if endpoint.base_url:
        text += f"; endpoint {endpoint.base_url}"
    if settings.provider in ("openai", "anthropic") and not endpoint.api_key:
        return Check("provider", False, text + f"; no {settings.provider.upper()}_API_KEY is set")
    return Check("provider", True, text)


def _home_check(settings: Settings) -> Check:
    layout = Home.of(settings)
    home = layout.root
    sealed = "encrypted (CHATCLI_ENCRYPTION_KEY)" if settings.encryption_key else "not encrypted"
    cause = unwritable(home, create=False)
    if cause is not None:
        return Check("home", False, f"{home}: cannot write there ({cause}); chatting works, but nothing is saved",
                     needed=False)
    if not home.exists():
        return Check("home", True, f"{home}: not created yet (it will be on the first save), {sealed}")
    try:
        layout.check_key()
        count = _session_count(layout.sessions_dir) if settings.store is None else len(layout.sessions().list())
    except ChatcliError as exc:
        return Check("home", False, str(exc))
    return Check("home", True, f"{home}: writable, {count} session(s), {sealed}")


def _session_count(sessions: Path) -> int:
    try:
        with os.scandir(sessions) as entries:
            return sum(1 for entry in entries if session_named(entry.name) is not None)
    except OSError:  # none yet, or not ours to read: the home check says what matters
        return 0


def _local_checks(settings: Settings, registry: ProviderRegistry) -> Iterator[Check]:
    try:
        provider = registry.create(settings)
    except ChatcliError as exc:
        yield Check("local model", False, str(exc))
        return
    path = Path(provider.path)
    size = path.stat().st_size / 1e6
    started = time.perf_counter()
    try:
        ready = provider.warm()
    except ChatcliError as exc:
        yield Check("local model", False, _with_hint(str(exc)))
        return
    loaded = time.perf_counter() - started
    kernels = ", ".join(cpu_kernels(ready.get("system_info", ""))) or "unknown"
    yield Check("local model", True, f"{path.name} ({size:.0f} MB): worker started and model loaded in "
                                     f"{loaded:.2f} s; llama.cpp CPU kernels: {kernels}")
    yield _answer_check(settings, registry, "local", provider)


def _answer_check(settings: Settings, registry: ProviderRegistry, name: str, provider=None) -> Check:
    """One answer of one token from the provider, timed."""
    label = "answer"
    try:
        provider = provider or registry.create(settings)
        request = Request(model=settings.model, messages=[Message("user", PROBE)], max_tokens=1,
                          timeout=min(settings.timeout, 60.0))
        seconds, text = _first_token(provider, request)
    except ChatcliError as exc:
        return Check(label, False, _with_hint(str(exc)) if name == "local" else str(exc))
    if text is None:
        return Check(label, False, f"{name} answered nothing to {PROBE!r} in {seconds:.2f} s")
    return Check(label, True, f"{name} answered one token in {seconds:.2f} s: {text.strip()!r}")


def _first_token(provider, request: Request) -> tuple[float, str | None]:
    started = time.perf_counter()
    with streaming(provider, request) as events:
        for event in events:
            if isinstance(event, Delta) and event.text:
                return time.perf_counter() - started, event.text
            if isinstance(event, Done):
                break
    return time.perf_counter() - started, None


def cpu_kernels(system_info: str) -> list[str]:
    """The SIMD kernels llama.cpp reports as built in ("AVX2 = 1 | AVX512 = 0 | …" → AVX2)."""
    names = re.findall(r"\b([A-Z][A-Z0-9_]*) = 1\b", system_info)
    return list(dict.fromkeys(name for name in names if name not in ("LLAMAFILE", "OPENMP", "REPACK")))


def _with_hint(text: str) -> str:
    if "crashed (signal" not in text:
        return text
    return f"{text.removesuffix('; the conversation is kept')}; {_CRASH_HINT}"
