"""OpenAI-compatible Chat Completions over streaming HTTP (OpenAI, Ollama, vLLM, llama.cpp, LM Studio…)."""

from __future__ import annotations

from collections.abc import Iterator

from chatcli.config import Settings
from chatcli.core.errors import ProviderError
from chatcli.core.messages import Message
from chatcli.providers.base import Delta, Done, Request
from chatcli.providers.http import error_text, iter_sse, parse_json, post_stream

_OFFICIAL_HOST = "api.openai.com"


class OpenAIProvider:
    name = "openai"

    def __init__(self, settings: Settings) -> None:
        endpoint = settings.endpoint(self.name)
        self.base_url = endpoint.base_url
        self.api_key = endpoint.api_key
        self.env = settings.env
        # Self-hosted OpenAI-compatible servers usually need no key; OpenAI itself does.
        if not self.api_key and _OFFICIAL_HOST in self.base_url:
            raise ProviderError(
                "openai: OPENAI_API_KEY is not set (or point OPENAI_BASE_URL at a server that needs no key)"
            )

    def stream(self, request: Request) -> Iterator[Delta | Done]:
        messages = [{"role": "system", "content": request.system}] if request.system else []
        messages += [_wire(m) for m in request.messages]
        payload: dict = {"model": request.model, "messages": messages, "stream": True}
        if request.max_tokens:
            payload["max_tokens"] = request.max_tokens
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        response = post_stream(
            self.name, f"{self.base_url}/chat/completions", headers, payload, request.timeout, env=self.env
        )
        stop_reason = None
        usage: dict = {}
        for _event, data in iter_sse(self.name, response, request.timeout):
            if data.strip() == "[DONE]":
                break
            chunk = parse_json(self.name, data)
            if "error" in chunk:
                raise ProviderError(f"{self.name}: {error_text(chunk)}")
            for choice in chunk.get("choices") or ():
                text = (choice.get("delta") or {}).get("content")
                if text:
                    yield Delta(text)
                stop_reason = choice.get("finish_reason") or stop_reason
            usage = chunk.get("usage") or usage
        yield Done(stop_reason, usage.get("prompt_tokens"), usage.get("completion_tokens"))


class OllamaProvider(OpenAIProvider):
    """Ollama's OpenAI-compatible endpoint at OLLAMA_BASE_URL (default localhost:11434/v1), no key."""

    name = "ollama"


def _wire(message: Message) -> dict:
    out: dict = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = message.tool_calls
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    return out
