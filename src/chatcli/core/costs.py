"""What a request costs: tokens in and out, and an estimate in US dollars from a price
table. Pure: no I/O.

Prices are per million tokens, as the providers listed them when this table was written
(PRICES_AS_OF); CHATCLI_PRICES ("model=IN/OUT,…") sets or overrides any model's. The local model
and Ollama cost nothing; a model with no price has tokens but no cost. When a provider does not
report its token counts, they are estimated (about four characters a token) and said so.
"""

from __future__ import annotations

from dataclasses import dataclass

PRICES_AS_OF = "2026-11"
# model (or its prefix, longest first) → (USD per million input tokens, per million output tokens)
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    "claude-opus-4": (15.00, 75.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-haiku-4": (1.00, 5.00),
    "claude-3-5-haiku": (0.80, 4.00),
}
FREE_PROVIDERS = ("local", "ollama")
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class Usage:
    """One request: its tokens (reported, or estimated), and its cost when the model has a price."""

    provider: str
    model: str
    input_tokens: int
    output_tokens: int
    estimated: bool
    cost: float | None  # USD


def estimate_tokens(chars: int) -> int:
    return (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def price(provider: str, model: str, overrides: dict[str, tuple[float, float]] | None = None
          ) -> tuple[float, float] | None:
    if overrides and model in overrides:
        return overrides[model]
    if provider in FREE_PROVIDERS:
        return (0.0, 0.0)
    for name in sorted(PRICES, key=len, reverse=True):
        if model == name or model.startswith(name + "-") or model.startswith(name + "."):
            return PRICES[name]
    return None


def usage(provider: str, model: str, reported_in: int | None, reported_out: int | None, sent_chars: int,
          answer_chars: int, overrides: dict[str, tuple[float, float]] | None = None) -> Usage:
    estimated = reported_in is None or reported_out is None
    tokens_in = reported_in if reported_in is not None else estimate_tokens(sent_chars)
    tokens_out = reported_out if reported_out is not None else estimate_tokens(answer_chars)
    rates = price(provider, model, overrides)
    cost = None if rates is None else (tokens_in * rates[0] + tokens_out * rates[1]) / 1_000_000
    return Usage(provider, model, tokens_in, tokens_out, estimated, cost)


def parse_prices(text: str) -> dict[str, tuple[float, float]]:
    """CHATCLI_PRICES: "gpt-4o=2.5/10,my-model=0/0" → {model: (in, out)}; ValueError otherwise."""
    prices = {}
    for part in text.split(","):
        if not part.strip():
            continue
        model, eq, rates = part.partition("=")
        given_in, slash, given_out = rates.partition("/")
        if not eq or not slash or not model.strip():
            raise ValueError(part)
        rate_in, rate_out = float(given_in), float(given_out)
        if not (rate_in >= 0 and rate_out >= 0):
            raise ValueError(part)
        prices[model.strip()] = (rate_in, rate_out)
    return prices


def money(cost: float | None) -> str:
    if cost is None:
        return "no price known"
    return f"${cost:.4f}" if cost < 1 else f"${cost:,.2f}"


def tokens(count: int) -> str:
    return f"{count / 1000:.1f}k" if count >= 1000 else str(count)


__all__ = ["PRICES", "PRICES_AS_OF", "Usage", "estimate_tokens", "money", "parse_prices", "price", "tokens", "usage"]
