"""What the gateway's HTTP adapters (the signed webhook, WhatsApp's) share in their request
handler: HTTP/1.1 with keep-alive, a connection silent for TIMEOUT seconds closed, no request
ever logged (a request line or body may quote what was sent), a client that goes away said in
one line (`gone`), and a refusal closing the connection (what is left of a refused request is
never read as the next one)."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler

TIMEOUT = 30.0  # seconds a connection may stay silent (reading a request, not the answer)


class GatewayHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "chatcli-gateway"
    timeout = TIMEOUT

    def log_message(self, *args) -> None:
        pass

    def gone(self, exc: ConnectionError) -> None:
        """The client closed its connection before its answer: nobody is left to answer."""

    def handle(self) -> None:
        try:
            super().handle()
        except ConnectionError as exc:
            self.gone(exc)

    def reply(self, status: int, data: bytes, content_type: str) -> None:
        if status >= 400:
            self.close_connection = True
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)


__all__ = ["TIMEOUT", "GatewayHandler"]
