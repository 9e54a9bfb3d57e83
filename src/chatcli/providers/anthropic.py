"""Anthropic's Messages API over streaming HTTP (ANTHROPIC_BASE_URL honoured)."""

from __future__ import annotations

from collections.abc import Iterator

from chatcli.core.errors import ProviderError
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

API_VERSION = "2023-06-01"
# The Messages API requires max_tokens. 4096 is the ceiling every Claude model accepts;
# CHATCLI_MAX_TOKENS raises it for the models that allow more.
DEFAULT_MAX_TOKENS = 4096


class AnthropicProvider(HostedProvider):
    name = "anthropic"
    key_var = "ANTHROPIC_API_KEY"
    official_host = "api.anthropic.com"

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
            self.name, f"{self.base_url}/v1/messages", headers, payload, request.timeout,
            proxies=self.proxies, on_retry=request.on_retry,
        )
        stop_reason = None
        input_tokens = output_tokens = None
        for event, data in iter_sse(self.name, response, request.timeout):
            body = parse_json(self.name, data)
            kind = body.get("type", event)
            if kind == "content_block_delta":
                delta = body.get("delta")
                if not isinstance(delta, dict):
                    raise malformed(self.name, data)
                if delta.get("type") == "text_delta" and isinstance(delta.get("text"), str) and delta["text"]:
                    yield Delta(delta["text"])
            elif kind == "message_start":
                usage = _dict(_dict(body.get("message")).get("usage"))
                input_tokens = usage.get("input_tokens")
            elif kind == "message_delta":
                stop_reason = _dict(body.get("delta")).get("stop_reason") or stop_reason
                output_tokens = _dict(body.get("usage")).get("output_tokens", output_tokens)
            elif kind == "error":
                raise ProviderError(f"{self.name}: {error_text(body)}")
            elif kind == "message_stop":
                yield Done(stop_reason, input_tokens, output_tokens)
                return
        raise incomplete(self.name)


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}
