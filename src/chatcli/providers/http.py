"""A small streaming HTTP client for the hosted providers: POST JSON, read Server-Sent Events.

Why not the official SDKs: measured on this 2-core machine, `import openai` costs ≈0.9 s and
`import anthropic` ≈2.3 s, while the one-shot target is 300 ms for a whole `chatcli -p` (and
prompt drawn ≤400 ms). Both APIs are one POST with an SSE response, so the standard library's
http.client (≈15 ms to import, with ssl) does the job: see bench/README.md for the figures.
What the SDKs would have given us and is done here instead: retries with backoff on 429/5xx
(honouring Retry-After), timeouts, proxies from HTTPS_PROXY/HTTP_PROXY/NO_PROXY, and error
bodies turned into one readable line.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from urllib.parse import urlsplit

from chatcli.config.settings import Proxies, Settings
from chatcli.core.errors import ConfigError, ProviderError
from chatcli.providers.base import Stop

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
# An HTTP 500 that reports a request validation failure says the same however often the request
# is sent: servers built on FastAPI and pydantic (llama.cpp's Python server, for one) answer a
# malformed request with a 500 whose body is `{"detail": [...]}`, "N validation errors: …" or
# "Input should be …". Such a 500 is not retried.
VALIDATION_ERROR = re.compile(r"\bvalidation errors?\b|\bInput should be\b|\bField required\b")
MAX_RETRIES = 3
MAX_RETRY_DELAY = 30.0


class HostedProvider:
    """What the hosted providers share: an endpoint and key from settings, checked up front."""

    name = ""
    key_var = ""
    # The vendor's own endpoint requires a key; self-hosted compatible servers usually do not.
    official_host = ""
    missing_key_hint = ""

    def __init__(self, settings: Settings) -> None:
        endpoint = settings.endpoint(self.name)
        self.base_url = endpoint.base_url
        self.api_key = endpoint.api_key
        self.proxies = settings.proxies
        if not self.api_key and self.official_host and self.official_host in self.base_url:
            raise ProviderError(f"{self.name}: {self.key_var} is not set{self.missing_key_hint}")


def post_stream(
    provider: str,
    url: str,
    headers: Mapping[str, str],
    payload: dict,
    timeout: float,
    *,
    proxies: Proxies | None = None,
    max_retries: int = MAX_RETRIES,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[str], None] | None = None,
    stop: Stop | None = None,
) -> http.client.HTTPResponse:
    """POST `payload` as JSON and return the open 200 response, retrying 429/5xx with backoff.
    `stop` (from another thread) shuts the connection down: waiting for the answer, or reading
    it, ends at once."""
    body = json.dumps(payload).encode("utf-8")
    try:
        parts = urlsplit(url)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError:
        valid = False
    if not valid:
        raise ConfigError(f"{provider}: invalid endpoint URL '{url}' (check {provider.upper()}_BASE_URL: "
                          "an http:// or https:// URL)")
    proxies = proxies or Proxies()
    all_headers = {
        "Content-Type": "application/json",
        "Accept": "text/event-stream",
        "User-Agent": "chatcli",
        **headers,
    }
    attempt = 0
    while True:
        conn, target = _connect(parts, timeout, proxies)
        try:
            conn.request("POST", target, body=body, headers=all_headers)
            if stop is not None:
                stop.hold(lambda sock=conn.sock: _shut(sock))
            response = conn.getresponse()
        except (TimeoutError, socket.timeout):
            conn.close()
            raise ProviderError(f"{provider}: no response from {_origin(parts)} within {timeout:g} s") from None
        except OSError as exc:
            conn.close()
            raise ProviderError(f"{provider}: cannot reach {_origin(parts)} ({_reason(exc)})") from None
        if response.status == 200:
            kind = (response.getheader("Content-Type") or "").split(";")[0].strip().lower()
            if kind and kind != "text/event-stream":
                conn.close()
                raise ProviderError(
                    f"{provider}: the server at {_origin(parts)} answered with {kind}, not a stream "
                    "(check the base URL)"
                )
            return response
        answer = _error_body(response)
        detail = _error_detail(answer)
        conn.close()
        if _retryable(response.status, answer) and attempt < max_retries:
            delay = _retry_delay(response, attempt)
            if on_retry:
                on_retry(f"{provider}: HTTP {response.status}, retrying in {delay:.3g} s ({attempt + 1}/{max_retries})")
            if stop is None:
                sleep(delay)
            elif stop.wait(delay):
                raise ProviderError(f"{provider}: stopped")
            attempt += 1
            continue
        retried = f" after {attempt + 1} attempts" if attempt else ""
        hint = _status_hint(response.status)
        error = ProviderError(
            f"{provider}: HTTP {response.status} {response.reason}{retried}"
            + (f": {detail}" if detail else "")
            + (f" ({hint})" if hint else "")
        )
        error.refused_request = response.status in (400, 413, 422) or (
            response.status == 500 and bool(VALIDATION_ERROR.search(answer)))
        raise error


def iter_sse(provider: str, response: http.client.HTTPResponse, timeout: float) -> Iterator[tuple[str, str]]:
    """(event, data) pairs from a Server-Sent Events body; the response is closed at the end."""
    event, data = "", []
    try:
        while True:
            try:
                raw = response.readline()
            except (TimeoutError, socket.timeout):
                raise ProviderError(f"{provider}: the answer stalled for more than {timeout:g} s") from None
            except (OSError, http.client.HTTPException) as exc:
                raise ProviderError(f"{provider}: connection lost mid-answer ({_reason(exc)})") from None
            if not raw:
                if data:
                    yield event or "message", "\n".join(data)
                return
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if not line:
                if data:
                    yield event or "message", "\n".join(data)
                event, data = "", []
            elif line.startswith(":"):
                continue
            else:
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "data":
                    data.append(value)
                elif name == "event":
                    event = value
    finally:
        response.close()


def incomplete(provider: str, empty: bool = False) -> ProviderError:
    """The stream ended before the answer's end; `empty` when it sent nothing at all (an
    OpenAI-compatible server says more by that: see openai.empty_stream)."""
    if empty:
        return ProviderError(f"{provider}: the stream ended before any data came "
                             "(most likely a cut connection: try again)")
    return ProviderError(f"{provider}: the stream ended before the answer was complete")


def malformed(provider: str, data: str) -> ProviderError:
    return ProviderError(f"{provider}: unexpected event from the server: {data[:80]!r}")


def parse_json(provider: str, data: str) -> dict:
    try:
        value = json.loads(data)
    except ValueError:
        raise ProviderError(f"{provider}: the server sent something that is not JSON: {data[:80]!r}") from None
    if not isinstance(value, dict):
        raise malformed(provider, data)
    return value


def error_text(value: object) -> str:
    """The message inside an API error object ({"error": {"message": …}} and its variants)."""
    if isinstance(value, dict):
        inner = value.get("error", value)
        if isinstance(inner, dict):
            return str(inner.get("message") or inner.get("type") or inner)
        return str(inner)
    return str(value)


def _connect(parts, timeout: float, proxies: Proxies):
    host, port = parts.hostname, parts.port
    secure = parts.scheme == "https"
    port = port or (443 if secure else 80)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    proxy_url = proxies.for_url(parts.scheme, host)
    proxy = urlsplit(proxy_url if "://" in proxy_url else "http://" + proxy_url) if proxy_url else None
    if proxy is not None and not proxy.hostname:
        proxy = None
    if secure:
        import ssl

        context = ssl.create_default_context()
        if proxy:
            conn = http.client.HTTPSConnection(proxy.hostname, proxy.port or 8080, timeout=timeout, context=context)
            conn.set_tunnel(host, port)
        else:
            conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
        return conn, target
    if proxy:
        conn = http.client.HTTPConnection(proxy.hostname, proxy.port or 8080, timeout=timeout)
        return conn, f"http://{host}:{port}{target}"
    return http.client.HTTPConnection(host, port, timeout=timeout), target


def _shut(sock: socket.socket) -> None:
    """Shut a connection down from another thread: a read blocked on it returns at once. The
    plain socket's shutdown, also under TLS: the TLS socket's own would drop its state under
    the reading thread."""
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _retry_delay(response: http.client.HTTPResponse, attempt: int) -> float:
    """The server's Retry-After-Ms / Retry-After (seconds) if given, else exponential backoff."""
    for header, scale in (("Retry-After-Ms", 0.001), ("Retry-After", 1.0)):
        value = response.getheader(header)
        if value:
            try:
                return min(max(float(value) * scale, 0.0), MAX_RETRY_DELAY)
            except ValueError:
                pass
    return min(0.5 * 2**attempt, MAX_RETRY_DELAY)


def _error_body(response: http.client.HTTPResponse) -> str:
    try:
        raw = response.read(64 * 1024)
    except (OSError, http.client.HTTPException):
        return ""
    return raw.decode("utf-8", errors="replace").strip()


def _retryable(status: int, body: str) -> bool:
    """Whether an error status may go away if the request is sent again: rate limits, timeouts,
    conflicts and server trouble, but no 500 that is a validation error (see VALIDATION_ERROR)."""
    if status not in RETRY_STATUSES:
        return False
    return not (status == 500 and VALIDATION_ERROR.search(body))


def _error_detail(body: str) -> str:
    """An error body as one readable line of at most about 300 characters."""
    text = body
    try:
        value = json.loads(body)
    except ValueError:
        pass
    else:
        text = _validation_text(value) or error_text(value)
    text = " ".join(text.split())
    return text[:300] + ("…" if len(text) > 300 else "")


def _validation_text(value: object) -> str:
    """FastAPI's error bodies: {"detail": text}, or validation errors ({"detail": [{"loc": [...],
    "msg": …}]}) as "where: what"."""
    details = value.get("detail") if isinstance(value, dict) and "error" not in value else None
    if isinstance(details, str):
        return details
    if not isinstance(details, list) or not details:
        return ""
    parts = []
    for item in details:
        if isinstance(item, dict):
            where = ".".join(str(part) for part in item.get("loc") or ())
            parts.append(f"{where}: {item.get('msg')}" if where else str(item.get("msg")))
    return "; ".join(parts)


def _status_hint(status: int) -> str:
    return {
        401: "check the API key",
        403: "the key is not allowed to do this",
        404: "check the base URL and the model name",
    }.get(status, "")


def _origin(parts) -> str:
    return f"{parts.scheme}://{parts.netloc}"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return "host not found"
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return " ".join(str(text).split())
