"""A real OpenAI-compatible server for the tests: llama.cpp's, as llama-cpp-python ships it
(`python -m llama_cpp.server`), serving the bundled SmolLM2-135M on loopback; and a recording
proxy that stands between chatcli and it, to read what chatcli sent. Nothing here is fake: the
proxy forwards every byte both ways, as it comes."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

# Small enough that a request the tests make longer than it is easy to write; large enough for a
# summary request of a dozen messages.
CONTEXT = 2048
ALIAS = "smollm2"
START_TIMEOUT = 120.0


def bundled_gguf() -> str:
    from chatcli.providers.local import bundled_model_path

    path = bundled_model_path()
    if not path.is_file():
        pytest.fail(f"the bundled model is not installed at {path} (make test installs it)")
    return str(path)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LlamaServer:
    """One `python -m llama_cpp.server` process, on one core, started and stopped by the test.
    If it cannot start, the test fails with what it wrote on stderr: never skipped."""

    def __init__(self, chat_format: str | None = None, context: int = CONTEXT) -> None:
        self.chat_format = chat_format
        self.context = context
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.log = tempfile.TemporaryFile()
        self.model = ""
        self.started_in = 0.0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LlamaServer:
        command = [sys.executable, "-m", "llama_cpp.server", "--model", bundled_gguf(), "--model_alias", ALIAS,
                   "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self.context),
                   "--n_threads", "1", "--n_threads_batch", "1"]
        if self.chat_format:
            command += ["--chat_format", self.chat_format]
        began = time.monotonic()
        # A session of its own: a test's Ctrl-C to a chatcli terminal never reaches it.
        self.proc = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        deadline = began + START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"llama.cpp's server exited with {self.proc.returncode} at start:\n{self.output()}")
            try:
                models = self.get("/v1/models")
            except OSError:
                models = None
            if models is not None:
                self.model = models["data"][0]["id"]
                self.started_in = time.monotonic() - began
                return self
            if time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"llama.cpp's server did not answer /v1/models in {START_TIMEOUT:g} s:\n{self.output()}")
            time.sleep(0.1)

    def get(self, path: str) -> dict:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            conn.request("GET", path)
            return json.loads(conn.getresponse().read())
        finally:
            conn.close()

    def kill(self) -> None:
        """Gone at once, as a crash or the OOM killer would take it."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        self.kill()
        self.log.close()

    def output(self, last: int = 4000) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode("utf-8", errors="replace")[-last:]

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class RecordingProxy:
    """Forwards requests to `target_port` and streams the answers back unchanged, recording each
    POST body (`requests`), each answer's status (`statuses`) and how many pieces of each answer
    it has passed on so far (`pieces`): what went over the wire, read on the wire."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.requests: list[dict] = []
        self.statuses: list[int] = []
        self.pieces: list[int] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                self.forward(None)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                proxy.requests.append(json.loads(body or b"{}"))
                self.forward(body)

            def forward(self, body: bytes | None) -> None:
                upstream = http.client.HTTPConnection("127.0.0.1", proxy.target_port, timeout=300)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    answer = upstream.getresponse()
                except OSError:
                    if body is not None:
                        proxy.statuses.append(502)
                        proxy.pieces.append(0)
                    self.close_connection = True
                    self.send_error(502)
                    return
                index = None
                if body is not None:
                    index = len(proxy.pieces)
                    proxy.pieces.append(0)
                    proxy.statuses.append(answer.status)
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in ("transfer-encoding", "content-length", "connection", "date", "server"):
                        self.send_header(key, value)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    while True:
                        try:
                            data = answer.read1(65536)
                        except (OSError, http.client.HTTPException):
                            # The server died mid-answer: so does this connection, without the
                            # closing chunk, as the server's own would have.
                            self.close_connection = True
                            return
                        if not data:
                            break
                        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                        self.wfile.flush()
                        if index is not None:
                            proxy.pieces[index] += data.count(b"data:")
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except OSError:  # chatcli went away (Ctrl-C): so does the server's answer
                    self.close_connection = True
                finally:
                    upstream.close()

        self.httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def wait_for_pieces(self, request: int, count: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.pieces) > request and self.pieces[request] >= count:
                return
            time.sleep(0.02)
        raise AssertionError(f"answer {request} did not stream {count} pieces in {timeout:g} s: {self.pieces}")

    def __enter__(self) -> RecordingProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        # chatcli leaving a connection (Ctrl-C, the end of a run) is no error of the proxy's.
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)
