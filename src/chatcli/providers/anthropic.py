"""Anthropic's Messages API over streaming HTTP (ANTHROPIC_BASE_URL honoured)."""

from __future__ import annotations

from collections.abc import Iterator

from chatcli.config import Settings
from chatcli.core.errors import ProviderError
from chatcli.providers.base import Delta, Done, Request
from chatcli.providers.http import error_text, iter_sse, parse_json, post_stream

API_VERSION = "2023-06-01"
# The Messages API requires max_tokens; this is what a request asks for unless told otherwise.
DEFAULT_MAX_TOKENS = 8192


class AnthropicProvider:
    name = "anthropic"

    def __init__(self, settings: Settings) -> None:
        endpoint = settings.endpoint(self.name)
        self.base_url = endpoint.base_url
        self.api_key = endpoint.api_key
        self.env = settings.env
        if not self.api_key and "api.anthropic.com" in self.base_url:
            raise ProviderError("anthropic: ANTHROPIC_API_KEY is not set")

    def stream(self, request: Request) -> Iterator[Delta | Done]:
        system_parts = [request.system] if request.system else []
        messages = []
        for message in request.messages:
            if message.role == "system":
                system_parts.append(message.content)
            elif message.role in ("user", "assistant") and message.content:
                # Empty turns (an answer interrupted before its first word) are rejected by the API.
                messages.append({"role": message.role, "content": message.content})
        while messages and messages[0]["role"] != "user":
            messages.pop(0)
        payload: dict = {
            "model": request.model,
            "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
            "messages": messages,
            "stream": True,
        }
        if system_parts:
            payload["system"] = "\n\n".join(system_parts)
        headers = {"anthropic-version": API_VERSION}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        response = post_stream(
            self.name, f"{self.base_url}/v1/messages", headers, payload, request.timeout, env=self.env
        )
        stop_reason = None
        input_tokens = output_tokens = None
        for event, data in iter_sse(self.name, response, request.timeout):
            body = parse_json(self.name, data)
            kind = body.get("type", event)
            if kind == "content_block_delta":
                delta = body.get("delta") or {}
                if delta.get("type") == "text_delta" and delta.get("text"):
                    yield Delta(delta["text"])
            elif kind == "message_start":
                usage = (body.get("message") or {}).get("usage") or {}
                input_tokens = usage.get("input_tokens")
            elif kind == "message_delta":
                stop_reason = (body.get("delta") or {}).get("stop_reason") or stop_reason
                output_tokens = (body.get("usage") or {}).get("output_tokens", output_tokens)
            elif kind == "error":
                raise ProviderError(f"{self.name}: {error_text(body)}")
            elif kind == "message_stop":
                break
        yield Done(stop_reason, input_tokens, output_tokens)
