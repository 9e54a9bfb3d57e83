"""Fake model servers on 127.0.0.1: scripted OpenAI-compatible and Anthropic streaming endpoints.

Only the language model is fake; chatcli's real HTTP client talks to these over TCP.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    """One scripted response. `chunks` stream as SSE; a non-200 `status` sends `error` instead."""

    chunks: list[str] = field(default_factory=list)
    status: int = 200
    error: str = "fake failure"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds between chunks
    hang_after: bool = False  # keep the stream open after the chunks (until the server stops)
    stall_before: float = 0.0  # seconds before sending any response at all
    cut: bool = False  # end the stream after the chunks, without the closing events
    error_event: str | None = None  # an in-stream error after the chunks
    finish_reason: str = "stop"  # OpenAI finish_reason (Anthropic: "length" becomes "max_tokens")
    frames: list[str] | None = None  # exact SSE frames to send instead of the generated ones
    content_type: str = "text/event-stream"
    tool_calls: list[dict] = field(default_factory=list)  # {id, name, arguments (JSON text)}, after the text


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict


class QuietHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 on 127.0.0.1 for the fakes: nothing logged; `body()` is the request's bytes."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))

    def reply_json(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class Served:
    """A fake served on 127.0.0.1 by `self.httpd` in `self.thread`, for a `with` block."""

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


class FakeModelServer(Served):
    """`kind` is 'openai' or 'anthropic'. Unscripted requests get an echo of the last user message."""

    def __init__(self, kind: str = "openai") -> None:
        self.kind = kind
        self.replies: deque[Reply] = deque()
        self.requests: list[Seen] = []
        self._stop = threading.Event()
        server = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                body = json.loads(self.body() or b"{}")
                server.requests.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                reply = server.replies.popleft() if server.replies else server.echo(body)
                if reply.stall_before:
                    server._stop.wait(reply.stall_before)
                if reply.status != 200:
                    self.reply_json(reply.status, {"error": {"type": "fake_error", "message": reply.error}},
                                    reply.headers)
                    return
                self.send_response(200)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    for frame in server.frames(reply, body):
                        if frame is None:
                            server._stop.wait(reply.delay)
                            continue
                        if frame == "HANG":
                            server._stop.wait(60)
                            return
                        data = frame.encode()
                        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    # -- scripting ---------------------------------------------------------------------------
    def reply(self, *chunks: str, **kwargs) -> None:
        self.replies.append(Reply(chunks=list(chunks), **kwargs))

    def echo(self, body: dict) -> Reply:
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        content = users[-1]["content"] if users else ""
        if not isinstance(content, str):  # Anthropic content blocks (tool results)
            content = " ".join(str(block.get("text") or block.get("content") or "") for block in content)
        return Reply(chunks=["You said: ", content])

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}" + ("/v1" if self.kind == "openai" else "")

    # -- wire formats ------------------------------------------------------------------------
    def frames(self, reply: Reply, body: dict):
        if reply.frames is not None:
            yield from reply.frames
        elif self.kind == "openai":
            yield from self._openai_frames(reply, body)
        else:
            yield from self._anthropic_frames(reply, body)

    def _openai_frames(self, reply: Reply, body: dict):
        for chunk in reply.chunks:
            event = {"id": "c1", "object": "chat.completion.chunk", "model": body.get("model"),
                     "choices": [{"index": 0, "delta": {"content": chunk}, "finish_reason": None}]}
            yield f"data: {json.dumps(event)}\n\n"
            if reply.delay:
                yield None
        if reply.hang_after:
            yield "HANG"
        if reply.error_event:
            yield f"data: {json.dumps({'error': {'message': reply.error_event}})}\n\n"
        if reply.cut or reply.error_event:
            return
        for index, call in enumerate(reply.tool_calls):  # the way OpenAI streams them: name first, arguments in pieces
            arguments = call["arguments"]
            pieces = [{"index": index, "id": call["id"], "type": "function",
                       "function": {"name": call["name"], "arguments": ""}},
                      {"index": index, "function": {"arguments": arguments[: len(arguments) // 2]}},
                      {"index": index, "function": {"arguments": arguments[len(arguments) // 2:]}}]
            for piece in pieces:
                event = {"id": "c1", "choices": [{"index": 0, "delta": {"tool_calls": [piece]}, "finish_reason": None}]}
                yield f"data: {json.dumps(event)}\n\n"
        finish = "tool_calls" if reply.tool_calls else reply.finish_reason
        final = {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
                 "usage": {"prompt_tokens": 5, "completion_tokens": len(reply.chunks)}}
        yield f"data: {json.dumps(final)}\n\n"
        yield "data: [DONE]\n\n"

    def _anthropic_frames(self, reply: Reply, body: dict):
        def event(name: str, data: dict) -> str:
            return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"

        yield event("message_start", {"message": {"id": "m1", "role": "assistant", "model": body.get("model"),
                                                  "usage": {"input_tokens": 5, "output_tokens": 0}}})
        yield event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
        yield "event: ping\ndata: {\"type\": \"ping\"}\n\n"
        for chunk in reply.chunks:
            yield event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": chunk}})
            if reply.delay:
                yield None
        if reply.hang_after:
            yield "HANG"
        if reply.error_event:
            yield event("error", {"error": {"type": "overloaded_error", "message": reply.error_event}})
        if reply.cut or reply.error_event:
            return
        stop = {"stop": "end_turn", "length": "max_tokens"}.get(reply.finish_reason, reply.finish_reason)
        yield event("content_block_stop", {"index": 0})
        for index, call in enumerate(reply.tool_calls, 1):
            arguments = call["arguments"]
            yield event("content_block_start", {"index": index, "content_block": {
                "type": "tool_use", "id": call["id"], "name": call["name"], "input": {}}})
            for piece in (arguments[: len(arguments) // 2], arguments[len(arguments) // 2:]):
                yield event("content_block_delta", {"index": index,
                                                    "delta": {"type": "input_json_delta", "partial_json": piece}})
            yield event("content_block_stop", {"index": index})
            stop = "tool_use"
        yield event("message_delta", {"delta": {"stop_reason": stop}, "usage": {"output_tokens": 3}})
        yield event("message_stop", {})


    def wait_for_requests(self, count: int, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.requests) < count and time.monotonic() < deadline:
            time.sleep(0.02)


def tool_call(id: str, name: str, **arguments) -> dict:
    """A scripted tool call ({id, name, arguments as JSON text}) for `reply(tool_calls=…)`."""
    return {"id": id, "name": name, "arguments": json.dumps(arguments)}


class FakeProvider:
    """The language model in process, for engine tests that need no process and no socket: the
    conversation's real pipeline (adoption, journal, write-through) runs; only the model is
    scripted. Unscripted requests get an echo of the last user message, as the servers do."""

    name = "fake"
    supports_tools = True
    defines_called_tools = False  # as OpenAI; True as Anthropic

    def __init__(self) -> None:
        self.replies: deque[tuple[list[str], list[dict], Exception | None]] = deque()
        self.requests: list = []

    def reply(self, *chunks: str, tool_calls: list[dict] | None = None, error: Exception | None = None) -> None:
        """Script the next answer: its text pieces, then any tool calls ({id, name, arguments}),
        or `error` raised after the pieces."""
        self.replies.append((list(chunks), list(tool_calls or ()), error))

    def stream(self, request):
        from chatcli.providers.base import Delta, Done, ToolCall

        self.requests.append(request)
        if self.replies:
            chunks, calls, error = self.replies.popleft()
        else:
            users = [m.content for m in request.messages if m.role == "user"]
            chunks, calls, error = ["You said: ", users[-1] if users else ""], [], None
        for chunk in chunks:
            yield Delta(chunk)
        if error is not None:
            raise error
        for call in calls:
            yield ToolCall(call["id"], call["name"], call["arguments"])
        yield Done("tool_calls" if calls else "stop")

    def sent(self) -> list[list[str]]:
        """The contents of every request's messages, in order."""
        return [[m.content for m in request.messages] for request in self.requests]

    def registry(self):
        """A provider registry in which every provider name is this fake."""
        from chatcli.config.providers import PROVIDERS
        from chatcli.providers.base import ProviderRegistry

        registry = ProviderRegistry()
        for name in PROVIDERS:
            registry.register(name, lambda _settings: self)
        return registry


def api_handler(answer):
    """An HTTP handler for a JSON Web API: POST /…/<method> with a JSON or form body, answered
    with `answer(method, params)` as JSON (a (status, payload) pair for another status than 200)."""
    import urllib.parse

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            raw = self.body().decode()
            if "json" in self.headers.get("Content-Type", ""):
                params = json.loads(raw or "{}")
            else:
                params = {k: v[0] for k, v in urllib.parse.parse_qs(raw).items()}
            result = answer(self.path.rsplit("/", 1)[-1], params)
            self.reply_json(*(result if isinstance(result, tuple) else (200, result)))

        do_GET = do_POST

    return Handler


class BotMessages:
    """A chat service fake's record of the bot's messages (`bot_messages`: id → {"where": a chat,
    a channel, a user; "text": what it says now}), read and waited for."""

    bot_messages: dict
    _lock: threading.Lock

    def texts(self, where) -> list[str]:
        with self._lock:
            return [m["text"] for _, m in sorted(self.bot_messages.items()) if m["where"] == where]

    def wait_for(self, where, predicate, timeout: float = 20.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            texts = self.texts(where)
            if predicate(texts):
                return texts
            time.sleep(0.05)
        raise AssertionError(f"the bot did not say it in {timeout} s; it said {self.texts(where)!r}")


class ChatServiceFake(BotMessages, Served):
    """What the fakes of chat services share: a JSON Web API on 127.0.0.1 (`answer(method,
    params)`, the service's own envelope), the bot's messages as they read now (`texts(where)`:
    a chat, a channel) and waiting for them."""

    failure: tuple[int, dict] = (500, {})  # what a method in `failing` answers (the service's own error)

    def __init__(self, answer) -> None:
        self.bot_messages: dict = {}  # message id → {"where": chat or channel, "text": …}
        self.calls: list[tuple[str, dict]] = []
        self.failing: set[str] = set()  # methods that fail now (a rate limit, say)

        def respond(method: str, params: dict):
            if method in self.failing:
                self.calls.append((method, params))
                return self.failure
            return answer(method, params)

        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), api_handler(respond))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"



class FakeTelegram(ChatServiceFake):
    """The Telegram Bot API on 127.0.0.1, as much of it as a long-polling bot uses: getMe,
    deleteWebhook, getUpdates (with offsets: an update not confirmed is served again, as
    Telegram does after a bot restarts), sendMessage and editMessageText. `say` queues a user's
    message; `texts(chat)` is what the bot's messages in that chat say now (edits applied)."""

    failure = (429, {"ok": False, "error_code": 429, "description": "Too Many Requests: retry after 1",
                     "parameters": {"retry_after": 1}})

    def __init__(self) -> None:
        super().__init__(lambda method, params: {"ok": True, "result": self.answer(method, params)})
        self.updates: list[dict] = []
        self._next_update = 1
        self._next_message = 1000

    def say(self, user: int, text: str, name: str = "Ana", chat: int | None = None, kind: str = "message") -> int:
        """A user's message in its private chat, or in the group `chat`; `kind` "edited_message"
        is an edit of it (Telegram serves those only to a bot that asks for them)."""
        with self._lock:
            update_id = self._next_update
            self._next_update += 1
            where = {"id": user, "type": "private"} if chat is None else {"id": chat, "type": "supergroup",
                                                                          "title": "team"}
            self.updates.append({"update_id": update_id, kind: {
                "message_id": update_id, "date": int(time.time()), "text": text,
                "chat": where, "from": {"id": user, "is_bot": False, "first_name": name}}})
        return update_id

    def _message(self, message_id: int, chat: int, text: str) -> dict:
        return {"message_id": message_id, "date": int(time.time()), "text": text,
                "chat": {"id": chat, "type": "private"}, "from": {"id": 1, "is_bot": True, "first_name": "chatcli"}}

    def answer(self, method: str, params: dict):
        self.calls.append((method, params))
        if method == "getMe":
            return {"id": 1, "is_bot": True, "first_name": "chatcli", "username": "chatcli_bot",
                    "can_join_groups": False, "can_read_all_group_messages": False, "supports_inline_queries": False}
        if method == "getUpdates":
            offset = int(params.get("offset") or 0)
            deadline = time.monotonic() + min(float(params.get("timeout") or 0), 0.5)
            while True:
                wanted = params.get("allowed_updates") or ["message", "edited_message"]
                if isinstance(wanted, str):
                    wanted = json.loads(wanted)
                with self._lock:
                    self.updates = [u for u in self.updates if u["update_id"] >= offset]  # confirmed ones go
                    pending = [u for u in self.updates if any(kind in u for kind in wanted)]
                if pending or time.monotonic() >= deadline or self._stop.is_set():
                    return pending
                time.sleep(0.05)
        if method == "sendMessage":
            with self._lock:
                message_id = self._next_message
                self._next_message += 1
                chat = int(params["chat_id"])
                self.bot_messages[message_id] = {"where": chat, "text": params["text"], "edits": 0}
            return self._message(message_id, chat, params["text"])
        if method == "editMessageText":
            with self._lock:
                message_id, chat = int(params["message_id"]), int(params["chat_id"])
                entry = self.bot_messages[message_id]
                entry["text"], entry["edits"] = params["text"], entry["edits"] + 1
            return self._message(message_id, chat, params["text"])
        return True


class FakeSlack(ChatServiceFake):
    """Slack on 127.0.0.1: the Web API methods a Socket Mode app uses (auth.test,
    apps.connections.open, chat.postMessage, chat.update) and the Socket Mode websocket, which
    sends `hello`, then each queued message event in an envelope the app must acknowledge (one
    a connection never acknowledged is sent again, as a retry, to the next connection). `say`
    queues a user's message; `texts(channel)` is what the bot's messages say now."""

    failure = (200, {"ok": False, "error": "ratelimited"})

    def __init__(self) -> None:
        from websockets.sync.server import serve

        super().__init__(self.answer)
        self.events: deque[dict] = deque()
        self.unacked: dict[str, dict] = {}  # sent to a connection, not acknowledged yet
        self.acked: list[str] = []
        self._next = 1
        fake = self

        def socket(connection) -> None:
            connection.send(json.dumps({"type": "hello", "num_connections": 1}))
            with fake._lock:  # what the last connection never acknowledged comes again, as a retry
                for envelope in reversed(list(fake.unacked.values())):
                    envelope["retry_attempt"] = envelope.get("retry_attempt", 0) + 1
                    envelope["retry_reason"] = "timeout"
                    fake.events.appendleft(envelope)
                fake.unacked.clear()
            while not fake._stop.is_set():
                try:
                    envelope = fake.events.popleft()
                except IndexError:
                    envelope = None
                if envelope is not None:
                    with fake._lock:
                        fake.unacked[envelope["envelope_id"]] = envelope
                    connection.send(json.dumps(envelope))
                try:
                    incoming = connection.recv(timeout=0.05)
                except TimeoutError:
                    continue
                except Exception:  # noqa: BLE001 - the app went away: what it did not acknowledge stays
                    return
                ack = json.loads(incoming).get("envelope_id")
                if ack:
                    with fake._lock:
                        fake.unacked.pop(ack, None)
                    fake.acked.append(ack)

        self.ws = serve(socket, "127.0.0.1", 0)
        self.ws_thread = threading.Thread(target=self.ws.serve_forever, daemon=True)

    def say(self, user: str, text: str, channel: str = "D1", channel_type: str = "im") -> str:
        """Queue a user's message; returns its envelope's id (in `acked` once the app acknowledged it)."""
        with self._lock:
            n = self._next
            self._next += 1
        event = {"type": "message", "user": user, "text": text, "channel": channel, "ts": f"{n}.0001",
                 "client_msg_id": f"msg-{n}", "channel_type": channel_type}
        self.events.append({"envelope_id": f"env-{n}", "type": "events_api", "accepts_response_payload": False,
                            "payload": {"type": "event_callback", "team_id": "T1", "api_app_id": "A1",
                                        "event": event, "event_id": f"Ev{n}", "event_time": n}})
        return f"env-{n}"

    def answer(self, method: str, params: dict) -> dict:
        self.calls.append((method, params))
        if method == "auth.test":
            return {"ok": True, "url": "https://fake.slack/", "team": "T", "user": "chatcli", "team_id": "T1",
                    "user_id": "UBOT", "bot_id": "BBOT"}
        if method == "apps.connections.open":
            host, port = self.ws.socket.getsockname()[:2]
            return {"ok": True, "url": f"ws://{host}:{port}/"}
        if method == "chat.postMessage":
            with self._lock:
                ts = f"{1000 + len(self.bot_messages)}.0001"
                self.bot_messages[ts] = {"where": params["channel"], "text": params.get("text", "")}
            return {"ok": True, "channel": params["channel"], "ts": ts}
        if method == "chat.update":
            with self._lock:
                self.bot_messages[params["ts"]]["text"] = params.get("text", "")
            return {"ok": True, "channel": params["channel"], "ts": params["ts"]}
        return {"ok": True}

    def __enter__(self) -> "FakeSlack":
        super().__enter__()
        self.ws_thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.ws.shutdown()
        super().__exit__(*exc)


class FakeGraph(BotMessages, Served):
    """Meta's Graph API on 127.0.0.1, as much of it as a WhatsApp Cloud API bot uses, and the
    Meta side of its webhook.

    - `GET /<version>/<phone number id>` (the number's record) and `POST …/<id>/messages` (a
      text message: kept in `texts(wa_id)`; a read receipt with a typing indicator: counted in
      `typing`), each with the Bearer token checked: another one gets Meta's 401 (code 190).
    - `failures` are answered, one per request, before anything else (an outage, a 429).
    - `say(wa_id, text)` delivers a user's message to the gateway's webhook as Meta does: the
      `whatsapp_business_account` envelope, signed with the app secret; `deliver` posts any
      payload (a status callback, an image), `verify` makes the GET handshake."""

    def __init__(self, token: str, phone_number_id: str, app_secret: str) -> None:
        self.token, self.phone_number_id, self.app_secret = token, phone_number_id, app_secret
        self.webhook: str | None = None  # the gateway's, once it said it
        self.bot_messages: dict[int, dict] = {}
        self.failures: deque[tuple[int, dict, dict[str, str]]] = deque()
        self.typing: list[str] = []
        self.requests: list[tuple[str, str]] = []  # (method, path)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._next = 1
        fake = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                self._answer("GET", None)

            def do_POST(self) -> None:
                self._answer("POST", json.loads(self.body() or b"{}"))

            def _answer(self, method: str, body: dict | None) -> None:
                with fake._lock:
                    fake.requests.append((method, self.path))
                    failure = fake.failures.popleft() if fake.failures else None
                if failure is not None:
                    self.reply_json(*failure)
                    return
                if self.headers.get("Authorization") != f"Bearer {fake.token}":
                    self.reply_json(401, {"error": {"message": "Error validating access token: Session has expired.",
                                                    "type": "OAuthException", "code": 190, "error_subcode": 463,
                                                    "fbtrace_id": "Afake"}})
                    return
                self.reply_json(*fake.answer(method, self.path.split("?")[0].strip("/").split("/"), body))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v24.0"

    def answer(self, method: str, path: list[str], body: dict | None) -> tuple[int, dict]:
        unknown = (400, {"error": {"message": "Unsupported request: object does not exist", "type": "GraphMethodException",
                                   "code": 100, "error_subcode": 33}})
        if len(path) < 2 or path[1] != self.phone_number_id:
            return unknown
        if method == "GET" and len(path) == 2:
            return 200, {"display_phone_number": "+1 555-000-1111", "verified_name": "chatcli test",
                         "id": self.phone_number_id}
        if method == "POST" and path[2:] == ["messages"] and body is not None:
            if body.get("status") == "read":
                with self._lock:
                    self.typing.append(body["message_id"])
                return 200, {"success": True}
            assert body["messaging_product"] == "whatsapp" and body["type"] == "text", body
            with self._lock:
                n = self._next
                self._next += 1
                self.bot_messages[n] = {"where": body["to"], "text": body["text"]["body"]}
            return 200, {"messaging_product": "whatsapp", "contacts": [{"input": body["to"], "wa_id": body["to"]}],
                         "messages": [{"id": f"wamid.out-{n}"}]}
        return unknown

    def envelope(self, value: dict, phone_number_id: str | None = None) -> dict:
        value = {"messaging_product": "whatsapp",
                 "metadata": {"display_phone_number": "15550001111",
                              "phone_number_id": phone_number_id or self.phone_number_id}, **value}
        return {"object": "whatsapp_business_account",
                "entry": [{"id": "WABA-1", "changes": [{"value": value, "field": "messages"}]}]}

    def message(self, wa_id: str, text: str | None = None, id: str | None = None, name: str = "Ana",
                kind: str = "text", **fields) -> dict:
        """A user's message as Meta's webhook carries it (text, or another `kind` with its `fields`)."""
        with self._lock:
            n = self._next
            self._next += 1
        message = {"from": wa_id, "id": id or f"wamid.in-{n}", "timestamp": str(int(time.time())), "type": kind}
        message.update({"text": {"body": text}} if kind == "text" else fields)
        return self.envelope({"contacts": [{"profile": {"name": name}, "wa_id": wa_id}], "messages": [message]})

    def deliver(self, payload: dict | bytes, secret: str | None = None, signed: bool = True) -> int:
        """POST a delivery to the webhook, signed as Meta signs it (with `secret`, by default the
        app's); its HTTP status."""
        import hashlib
        import hmac
        import urllib.error
        import urllib.request

        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"}
        if signed:
            digest = hmac.new((secret or self.app_secret).encode(), body, hashlib.sha256).hexdigest()
            headers["X-Hub-Signature-256"] = f"sha256={digest}"
        request = urllib.request.Request(self.webhook, data=body, method="POST", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    def say(self, wa_id: str, text: str, id: str | None = None, name: str = "Ana") -> str:
        """A user's text message, delivered; its id."""
        payload = self.message(wa_id, text, id=id, name=name)
        status = self.deliver(payload)
        assert status == 200, status
        return payload["entry"][0]["changes"][0]["value"]["messages"][0]["id"]

    def verify(self, token: str, challenge: str = "1158201444", mode: str = "subscribe") -> tuple[int, str]:
        import urllib.error
        import urllib.parse
        import urllib.request

        query = urllib.parse.urlencode({"hub.mode": mode, "hub.verify_token": token, "hub.challenge": challenge})
        try:
            with urllib.request.urlopen(f"{self.webhook}?{query}", timeout=30) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
