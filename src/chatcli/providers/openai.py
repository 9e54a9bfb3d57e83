"""OpenAI-compatible Chat Completions over streaming HTTP (OpenAI, Ollama, vLLM, llama.cpp, LM Studio…)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

from chatcli.core.errors import ProviderError
from chatcli.core.messages import Message, call_arguments_text, call_name, parse_arguments
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


def empty_stream(provider: str) -> ProviderError:
    # llama.cpp's Python server answers a request longer than its context window so (HTTP 200,
    # then an empty body): the likeliest cause, and what makes chatcli keep within it.
    return ProviderError(
        f"{provider}: the server answered with an empty stream, most likely because the request is longer "
        "than the model's context window (set CHATCLI_CONTEXT_WINDOW to the server's context size so "
        "chatcli compacts and trims the conversation to fit)"
    )


class OpenAIProvider(HostedProvider):
    name = "openai"
    key_var = "OPENAI_API_KEY"
    official_host = "api.openai.com"
    missing_key_hint = " (or point OPENAI_BASE_URL at a server that needs no key)"
    supports_tools = True

    def stream(self, request: Request) -> Iterator[Delta | ToolCall | Done]:
        messages = [{"role": "system", "content": request.system}] if request.system else []
        messages += [_wire(m) for m in request.messages]
        payload: dict = {"model": request.model, "messages": messages, "stream": True}
        if self.official_host in self.base_url:  # OpenAI streams token counts only when asked (/cost);
            payload["stream_options"] = {"include_usage": True}  # other servers may refuse the field
        if request.max_tokens:
            payload["max_tokens"] = request.max_tokens
        if request.tools:
            payload["tools"] = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                                   "parameters": t.parameters}} for t in request.tools]
            if request.tool_choice == "none":
                payload["tool_choice"] = "none"
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        response = post_stream(
            self.name, f"{self.base_url}/chat/completions", headers, payload, request.timeout,
            proxies=self.proxies, on_retry=request.on_retry, stop=request.stop,
        )
        stop_reason = None
        finished = False
        received = False
        usage: dict = {}
        calls: dict[int, dict] = {}  # tool calls arrive in pieces, by index
        for _event, data in iter_sse(self.name, response, request.timeout):
            received = True
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
                for piece in (delta.get("tool_calls") or []) if isinstance(delta, dict) else []:
                    _gather(calls, piece, self.name, data)
                stop_reason = choice.get("finish_reason") or stop_reason
            if isinstance(chunk.get("usage"), dict):
                usage = chunk["usage"]
        # Some compatible servers end with finish_reason and no [DONE]; neither means a cut stream.
        if not finished and stop_reason is None:
            raise incomplete(self.name) if received else empty_stream(self.name)
        for index in sorted(calls):
            call = calls[index]
            # A server that sends no id gets one unique across the turn's steps (its results answer by id).
            yield ToolCall(call["id"] or f"call_{os.urandom(6).hex()}", call["name"], call["arguments"] or "{}")
        yield Done(stop_reason, usage.get("prompt_tokens"), usage.get("completion_tokens"))


class OllamaProvider(OpenAIProvider):
    """Ollama's OpenAI-compatible endpoint at OLLAMA_BASE_URL (default localhost:11434/v1), no key."""

    name = "ollama"
    key_var = ""
    official_host = ""
    # Many Ollama models answer a request that offers tools with an error: offer none.
    supports_tools = False


def _gather(calls: dict[int, dict], piece: object, name: str, data: str) -> None:
    if not isinstance(piece, dict) or not isinstance(piece.get("function") or {}, dict):
        raise malformed(name, data)
    index = piece.get("index")
    if not isinstance(index, int):  # a server that does not number its calls: a new id starts a new one
        last = max(calls, default=None)
        index = last if last is not None and not (piece.get("id") and piece["id"] != calls[last]["id"]) \
            else len(calls)
    call = calls.setdefault(index, {"id": "", "name": "", "arguments": "", "cumulative": False})
    function = piece.get("function") or {}
    call["id"] = piece.get("id") or call["id"]
    call["name"] = _joined_name(call["name"], _text(function.get("name")))
    _join_arguments(call, _text(function.get("arguments")))


# Servers stream a tool call in different ways, and each way has to come out as the one call:
# - the name: once, in the first chunk (OpenAI); whole again in every chunk (llama.cpp's Python
#   server with chatml-function-calling); or in pieces. A piece that begins with the whole name
#   so far is that name again (repeated, or grown); any other piece continues it. (A name whose
#   next piece would begin with all of the name before it, "get" + "get_x" for "getget_x", is
#   read as a repeat; no tool is named so.)
# - the arguments: in pieces (OpenAI, llama.cpp); whole in one chunk; the whole text so far
#   again in every chunk (some providers do, and a concatenation would be "{…}{…}"); or pieces
#   followed by one closing chunk repeating all of them. A piece that begins with all the text so
#   far and is longer replaces it (and marks the call as sent whole each time); a piece that
#   says the same as a complete JSON object gathered already is a repeat; anything else is
#   appended. An appended piece cannot begin with all the text before it in JSON: after "{" or
#   '{"' comes no second "{".
def _joined_name(so_far: str, piece: str) -> str:
    return piece if piece.startswith(so_far) else so_far + piece


def _join_arguments(call: dict, piece: str) -> None:
    so_far = call["arguments"]
    if not piece:
        return
    if not so_far or (piece.startswith(so_far) and len(piece) > len(so_far)):
        call["cumulative"] = call["cumulative"] or bool(so_far)
        call["arguments"] = piece
    elif piece == so_far and call["cumulative"]:
        return
    elif _same_object(so_far, piece):
        return
    else:
        call["arguments"] = so_far + piece


def _same_object(so_far: str, piece: str) -> bool:
    """Whether `piece` holds the same JSON object as the complete arguments gathered so far."""
    if not so_far.lstrip().startswith("{") or not piece.lstrip().startswith("{"):
        return False
    gathered = parse_arguments(so_far)
    return gathered is not None and gathered == parse_arguments(piece)


def _text(value: object) -> str:
    """A streamed name or arguments piece as text: absent or null is none; an object (sent whole
    by a server that decodes the arguments for us) is written back as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def wire_call(call: dict) -> dict:
    """A stored tool call, in any shape a session file holds (core/messages.py), in the Chat
    Completions shape. There `arguments` is JSON text: the stored shape keeps an object, which
    OpenAI refuses with HTTP 400 and llama.cpp's server with a 500 (a validation error)."""
    return {"id": call.get("id") or "", "type": "function",
            "function": {"name": call_name(call), "arguments": call_arguments_text(call)}}


def _wire(message: Message) -> dict:
    out: dict = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [wire_call(c) if isinstance(c, dict) else c for c in message.tool_calls]
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    return out
