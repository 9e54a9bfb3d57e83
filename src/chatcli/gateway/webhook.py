"""The generic HTTP webhook adapter of the chat gateway: JSON in, JSON out, every request signed.

    POST /message
    X-Chatcli-Timestamp: <unix seconds>
    X-Chatcli-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>." + body)>
    {"sender": "alice", "text": "hello", "id": "m-1", "name": "Alice"}

    200 {"reply": "…"}                       the answer (or a command's output)
    200 {"reply": null, "duplicate": true}   that id was answered already (a retry, a replay)
    200 {"reply": "…", "refused": true}      an unlisted sender's one refusal (later: reply null)
    409 {"error": …, "busy": true}            that id is being answered now: retry later
    400 / 401 / 404 / 405 / 413              one line in {"error": …}; nothing changed
    500 {"error": …}                          the daemon failed; the id is not spent: retry it

A request is refused (401) unless its signature is right and its timestamp is within
REPLAY_WINDOW of now; an id is answered once per sender, and ids are remembered past that
window, so a captured request replayed later is refused or ignored. A request whose answer a
killed daemon never finished is answered when it is sent again (the same id). The principal
is `webhook:<sender>`. A connection that sent something wrong is closed, and one that sends
nothing for TIMEOUT seconds too; a client that closes its own before the answer is one line in
the log.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import threading
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer

from chatcli.core.messages import well_formed
from chatcli.gateway.http import TIMEOUT, GatewayHandler
from chatcli.gateway.hub import ConversationHub

CHANNEL = "webhook"
REPLAY_WINDOW = 300.0  # seconds a signed request stays valid
MAX_BODY = 1024 * 1024
MAX_SENDER = 256  # characters of a sender id


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The X-Chatcli-Signature value of a request (what a sender computes too)."""
    digest = hmac.new(secret.encode("utf-8"), timestamp.encode("ascii") + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def check(secret: str, timestamp: str | None, signed: str | None, body: bytes, now: float) -> str | None:
    """Why a request is not authentic, or None when it is."""
    if not timestamp or not signed:
        return "the request is not signed (X-Chatcli-Timestamp and X-Chatcli-Signature)"
    try:
        when = float(timestamp)
        expected = signature(secret, timestamp, body)
    except (ValueError, UnicodeEncodeError):
        return "X-Chatcli-Timestamp is not a number of seconds"
    if not math.isfinite(when) or abs(now - when) > REPLAY_WINDOW:
        return f"the request's timestamp is outside the {REPLAY_WINDOW:g} s window"
    # Compared as bytes: a header with other characters is a mismatch, not an error.
    if not hmac.compare_digest(expected.encode("ascii"), signed.encode("utf-8", "surrogateescape")):
        return "the signature does not match"
    return None


class WebhookServer:
    """The adapter: a threaded HTTP server on `host:port` answering through `hub`."""

    def __init__(self, hub: ConversationHub, secret: str, host: str = "127.0.0.1", port: int = 8787,
                 log: Callable[[str], None] = lambda _line: None) -> None:
        self.hub, self.secret, self.log = hub, secret, log
        adapter = self

        class Handler(GatewayHandler):
            def gone(self, exc: ConnectionError) -> None:
                adapter.log(f"webhook: a client closed its connection before its answer ({type(exc).__name__})")

            def do_POST(self) -> None:
                body = self._body()  # a client gone while sending it is handle()'s to say
                try:
                    status, payload = adapter.answer(self.path, self.headers, body)
                except Exception as exc:  # noqa: BLE001 - one line to the client and the log, not a traceback
                    adapter.log(f"webhook: a request failed: {type(exc).__name__}: {exc}")
                    status, payload = 500, {"error": f"the gateway failed: {type(exc).__name__}: {exc}"}
                self._send(status, payload)

            def do_GET(self) -> None:
                self._send(405, {"error": "POST a signed JSON message to /message"})

            def _body(self) -> bytes | None:
                try:
                    length = int(self.headers.get("Content-Length", "0"))
                except ValueError:
                    return None
                if length < 0 or length > MAX_BODY:
                    return None
                return self.rfile.read(length)

            def _send(self, status: int, payload: dict) -> None:
                self.reply(status, json.dumps(payload, ensure_ascii=False).encode("utf-8"), "application/json")

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="chatcli-webhook", daemon=True)

    @property
    def address(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/message"

    def answer(self, path: str, headers, body: bytes | None) -> tuple[int, dict]:
        if path.split("?")[0] != "/message":
            return 404, {"error": "POST to /message"}
        if body is None:
            return 413, {"error": f"the body must be at most {MAX_BODY:,} bytes"}
        problem = check(self.secret, headers.get("X-Chatcli-Timestamp"), headers.get("X-Chatcli-Signature"), body,
                        time.time())
        if problem:
            self.log(f"webhook: refused a request: {problem}")
            return 401, {"error": problem}
        try:
            message = json.loads(body)
        except ValueError:
            return 400, {"error": "the body is not JSON"}
        except RecursionError:  # the parser recurses once per level: deeper than Python's stack
            return 400, {"error": "the body is not JSON (it is nested too deeply)"}
        if not isinstance(message, dict) or not all(isinstance(message.get(k), str) and message.get(k)
                                                     for k in ("sender", "text", "id")):
            return 400, {"error": "the body needs the strings 'sender', 'text' and 'id'"}
        if any(isinstance(message.get(k), str) and well_formed(message[k]) is not message[k]
               for k in ("sender", "text", "id", "name")):
            return 400, {"error": "the body holds a lone UTF-16 surrogate (an escape such as \\ud800 that is no "
                                  "character); send the text as it is, in UTF-8"}
        if len(message["sender"]) > MAX_SENDER or not message["sender"].isprintable():
            return 400, {"error": f"'sender' must be at most {MAX_SENDER} printable characters"}
        if not message["text"].strip():
            return 400, {"error": "'text' is empty"}
        name = message.get("name") if isinstance(message.get("name"), str) else ""
        reply = self.hub.handle(CHANNEL, message["sender"], message["text"], display=name,
                                message_id=message["id"])
        if reply is None:
            return 200, {"reply": None, "duplicate": self.hub.allows(CHANNEL, message["sender"])}
        if reply.busy:
            return 409, {"error": "that id is being answered now; send it again later", "busy": True}
        return 200, {"reply": reply.text, **({"refused": True} if reply.refused else {})}

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


__all__ = ["CHANNEL", "REPLAY_WINDOW", "WebhookServer", "check", "signature"]
