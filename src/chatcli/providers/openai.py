"""OpenAI-compatible Chat Completions over streaming HTTP (OpenAI, Ollama, vLLM, llama.cpp, LM Studio…)."""

from __future__ import annotations

from collections.abc import Iterator

from chatcli.core.errors import ProviderError
from chatcli.core.messages import Message
from chatcli.providers.base import Delta, Done, Request
from chatcli.providers.http import (
    HostedProvider,
    error_text,
    incomplete,
    iter_sse,
    malformed,
    parse_json,
    post_stream,
)


class OpenAIProvider(HostedProvider):
    name = "openai"
    key_var = "OPENAI_API_KEY"
    official_host = "api.openai.com"
    missing_key_hint = " (or point OPENAI_BASE_URL at a server that needs no key)"

    def stream(self, request: Request) -> Iterator[Delta | Done]:
        messages = [{"role": "system", "content": request.system}] if request.system else []
        messages += [_wire(m) for m in request.messages]
        payload: dict = {"model": request.model, "messages": messages, "stream": True}
        if request.max_tokens:
            payload["max_tokens"] = request.max_tokens
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        response = post_stream(
            self.name, f"{self.base_url}/chat/completions", headers, payload, request.timeout,
            proxies=self.proxies, on_retry=request.on_retry,
        )
        stop_reason = None
        finished = False
        usage: dict = {}
        for _event, data in iter_sse(self.name, response, request.timeout):
            if data.strip() == "[DONE]":
                finished = True
                break
            chunk = parse_json(self.name, data)
            if "error" in chunk:
                raise ProviderError(f"{self.name}: {error_text(chunk)}")
            choices = chunk.get("choices") or []
            if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
                raise malformed(self.name, data)
            for choice in choices:
                delta = choice.get("delta") or {}
                text = delta.get("content") if isinstance(delta, dict) else None
                if isinstance(text, str) and text:
                    yield Delta(text)
                stop_reason = choice.get("finish_reason") or stop_reason
            if isinstance(chunk.get("usage"), dict):
                usage = chunk["usage"]
        # Some compatible servers end with finish_reason and no [DONE]; neither means a cut stream.
        if not finished and stop_reason is None:
            raise incomplete(self.name)
        yield Done(stop_reason, usage.get("prompt_tokens"), usage.get("completion_tokens"))


class OllamaProvider(OpenAIProvider):
    """Ollama's OpenAI-compatible endpoint at OLLAMA_BASE_URL (default localhost:11434/v1), no key."""

    name = "ollama"
    key_var = ""
    official_host = ""


def _wire(message: Message) -> dict:
    out: dict = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = message.tool_calls
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    return out
