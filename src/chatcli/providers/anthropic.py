"""Anthropic's Messages API over streaming HTTP (ANTHROPIC_BASE_URL honoured)."""

from __future__ import annotations

from collections.abc import Iterator

from chatcli.core.errors import ProviderError
from chatcli.core.messages import Message, call_arguments, call_name
from chatcli.providers.base import Delta, Done, Request, ToolCall
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
    supports_tools = True
    # The Messages API refuses a history whose tool_use blocks name tools the request does not define.
    defines_called_tools = True

    def stream(self, request: Request) -> Iterator[Delta | ToolCall | Done]:
        system_parts = [request.system] if request.system else []
        messages: list[dict] = []
        for message in request.messages:
            if message.role == "system":
                system_parts.append(message.content)
                continue
            turn = _wire(message)
            if turn is None:
                continue
            if messages and _results(messages[-1]) and _results(turn):
                messages[-1]["content"] += turn["content"]  # the results of one call turn go together
            else:
                messages.append(turn)
        if messages and messages[0]["role"] != "user":
            # The API wants a user turn first; a history may start with the assistant (a
            # compaction summary): a short user turn says what follows, and nothing is dropped.
            messages.insert(0, {"role": "user", "content": "(The conversation so far follows.)"})
        payload: dict = {
            "model": request.model,
            "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
            "messages": messages,
            "stream": True,
        }
        if system_parts:
            payload["system"] = "\n\n".join(system_parts)
        if request.tools:
            payload["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.parameters}
                                for t in request.tools]
            if request.tool_choice == "none":
                payload["tool_choice"] = {"type": "none"}
        headers = {"anthropic-version": API_VERSION}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        response = post_stream(
            self.name, f"{self.base_url}/v1/messages", headers, payload, request.timeout,
            proxies=self.proxies, on_retry=request.on_retry, stop=request.stop,
        )
        stop_reason = None
        input_tokens = output_tokens = None
        calls: dict[int, dict] = {}  # tool_use blocks, by index, their input arriving as JSON pieces
        received = False
        for event, data in iter_sse(self.name, response, request.timeout):
            received = True
            body = parse_json(self.name, data)
            kind = body.get("type", event)
            if kind == "content_block_delta":
                delta = body.get("delta")
                if not isinstance(delta, dict):
                    raise malformed(self.name, data)
                if delta.get("type") == "text_delta" and isinstance(delta.get("text"), str) and delta["text"]:
                    yield Delta(delta["text"])
                elif delta.get("type") == "input_json_delta" and body.get("index") in calls:
                    calls[body["index"]]["arguments"] += str(delta.get("partial_json") or "")
            elif kind == "content_block_start":
                block = _dict(body.get("content_block"))
                if block.get("type") == "tool_use":
                    calls[body.get("index")] = {"id": str(block.get("id") or ""), "name": str(block.get("name") or ""),
                                                "arguments": ""}
            elif kind == "content_block_stop" and body.get("index") in calls:
                call = calls.pop(body["index"])
                yield ToolCall(call["id"], call["name"], call["arguments"] or "{}")
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
        # An over-long request is refused with HTTP 400, so an empty stream here is a cut connection.
        raise incomplete(self.name, empty=not received)


def _wire(message: Message) -> dict | None:
    """A history message as a Messages API turn: tool calls become tool_use blocks, and tool
    results user turns of tool_result blocks. None for what the API rejects (an empty turn)."""
    if message.role == "tool":
        result = {"type": "tool_result", "tool_use_id": message.tool_call_id or "", "content": message.content}
        if message.extra.get("is_error") is True:
            result["is_error"] = True  # a failed or refused call, as the API lets it say
        return {"role": "user", "content": [result]}
    if message.role not in ("user", "assistant"):
        return None
    calls = [c for c in message.tool_calls or () if isinstance(c, dict)] if message.role == "assistant" else []
    if not calls:
        # Empty turns (an answer interrupted before its first word) are rejected by the API.
        return {"role": message.role, "content": message.content} if message.content else None
    blocks: list[dict] = [{"type": "text", "text": message.content}] if message.content else []
    for call in calls:
        # `input` is an object, whichever shape the call is stored in; what the model wrote that
        # was no JSON object goes as {} (the API takes nothing else).
        blocks.append({"type": "tool_use", "id": call.get("id") or "", "name": call_name(call),
                       "input": call_arguments(call)})
    return {"role": "assistant", "content": blocks}


def _results(turn: dict) -> bool:
    content = turn.get("content")
    return isinstance(content, list) and all(block.get("type") == "tool_result" for block in content)


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}
