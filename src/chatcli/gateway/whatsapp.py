"""The WhatsApp adapter of the chat gateway, on Meta's WhatsApp Business Cloud API (the Graph
API: the official way a program talks on WhatsApp). Meta calls a webhook this adapter serves;
answers go out with `POST /{phone-number-id}/messages`.

Plain HTTP, not a client library: the webhook is one handler on the standard library's HTTP
server (as the generic webhook adapter's is) and sending is one JSON POST, while pywa, the
maintained Python client, brings httpx and a web framework of its own for its webhook. The
whole adapter imports nothing the gateway does not already load.

    GET  /…?hub.mode=subscribe&hub.verify_token=T&hub.challenge=C   the verification handshake:
         C echoed when T is WHATSAPP_VERIFY_TOKEN, else 403
    POST /…  X-Hub-Signature-256: sha256=<hex HMAC-SHA256(WHATSAPP_APP_SECRET, raw body)>
         deliveries: 200 once each message in it is spooled; 403 unsigned or wrongly signed
         (logged without its content); 400 not JSON; 413 too big; 500 the spool cannot be
         written (Meta delivers it again)

- Each text message of a user is one `ConversationHub.handle` call; the principal is
  `whatsapp:<wa_id>` and the message id WhatsApp's (`wamid.…`). Messages of one sender are
  answered in the order they came; different senders' at once.
- Nothing is lost between Meta and the answer. A delivery is acknowledged only once its
  messages are written to the spool (store/spool.py), and a message leaves the spool only once
  its answer was sent: the answer is written into its spooled message before the hub counts it
  answered, so a kill at any point is taken up at the next start (a turn cut short is answered
  again; an answer not yet sent is sent). WhatsApp's redeliveries of a message are answered
  once (hub.db's delivery state), across restarts too.
- Answers are cut at WhatsApp's 4,096 characters, on paragraph breaks where they can be
  (preview.parts). WhatsApp cannot edit a sent message, so an answer goes out whole, once its
  turn ends; meanwhile the user sees the message read and a typing indicator.
- A Graph API that cannot be reached, a 5xx or a rate limit (429, or Meta's throughput error
  codes) is retried with backoff (Retry-After honoured) for as long as the gateway runs, and
  after a restart: the answer waits in the spool. A token Meta refuses (401, error 190: an
  expired token) is one line in the log, and the answer waits too, tried again every few
  minutes; the daemon keeps serving the other adapters. Any other refusal of an answer (such
  as a user outside WhatsApp's 24-hour window) is one line naming Meta's error, and that
  answer stays in the session only.
- Status callbacks (sent, delivered, read) get no turn (a failed one is one line in the log:
  Meta's reason). A message that is not text (an image, a voice note, a reaction, a sticker)
  gets no turn and one line saying only text is understood. A message to another phone
  number of the same app is left to whoever serves that number.

The token and the phone number id are checked at start (`GET /{phone-number-id}`): a token
Meta refuses, or an id it does not know, stops the start in one line naming the setting;
a Graph API that cannot be reached then is a warning, and messages wait in the spool.
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from http.server import ThreadingHTTPServer

from chatcli.config.settings import Proxies
from chatcli.core.errors import ChatcliError, UsageError
from chatcli.core.messages import well_formed
from chatcli.gateway.http import GatewayHandler
from chatcli.gateway.hub import ConversationHub, Reply
from chatcli.gateway.preview import parts
from chatcli.store.spool import Spool

CHANNEL = "whatsapp"
LIMIT = 4096  # characters in one WhatsApp text message
API_URL = "https://graph.facebook.com/v24.0"
DEFAULT_LISTEN = "127.0.0.1:8788"
MAX_BODY = 1024 * 1024  # Meta's deliveries are a few kilobytes
TIMEOUT = 30.0  # seconds a Graph API request may take
BACKOFF = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0)  # seconds between tries of a send; then every minute
REFUSED_WAIT = 300.0  # seconds between tries while Meta refuses the token
BUSY_WAIT = 2.0  # seconds before a message another process is answering is looked at again
STOP_GRACE = 10.0  # seconds a stop waits for the answers in progress (the others wait in the spool)
CHECK_TIMEOUT = 10.0  # seconds the check at start waits for the Graph API (the other adapters wait for it)
LANE_TRIES = 5  # tries of a message whose answering failed (a full disk, hub.db busy) before the next start
NOT_TEXT = "Only text messages are understood here: this {kind} was not read."
# Graph API error codes that mean "later", whatever the HTTP status: rate limits, throughput, and
# Meta's own temporary failures (Meta's error reference).
RATE_CODES = frozenset({1, 2, 4, 17, 32, 613, 80007, 130429, 131000, 131016, 131048, 131056, 133004})
TOKEN_CODES = frozenset({190})


def signature(secret: str, body: bytes) -> str:
    """The X-Hub-Signature-256 value of a delivery (what Meta computes, and a test too)."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def check_signature(secret: str, signed: str | None, body: bytes) -> str | None:
    """Why a delivery is not Meta's, or None when its signature is right."""
    if not signed:
        return "the delivery is not signed (no X-Hub-Signature-256)"
    if not hmac.compare_digest(signature(secret, body).encode("ascii"), signed.encode("utf-8", "surrogateescape")):
        return "its X-Hub-Signature-256 does not match (is WHATSAPP_APP_SECRET the app's secret?)"
    return None


@dataclass(frozen=True)
class Incoming:
    """One user message of a delivery."""

    id: str
    sender: str  # wa_id
    name: str  # the profile name WhatsApp gave
    kind: str  # text, image, audio, reaction…
    text: str  # the text of a text message ("" otherwise)

    def item(self) -> dict:
        return {"id": self.id, "from": self.sender, "name": self.name, "kind": self.kind, "text": self.text}


def read_delivery(payload: object, phone_number_id: str) -> tuple[list[Incoming], list[str]]:
    """(the user messages of a delivery to our number, lines for the log: failed statuses,
    messages to another number). Anything else in it (statuses, other fields) is skipped."""
    messages: list[Incoming] = []
    notes: list[str] = []
    if not isinstance(payload, dict) or payload.get("object") != "whatsapp_business_account":
        return messages, ["a delivery that is not a WhatsApp Business Account's was ignored"]
    for entry in _dicts(payload.get("entry")):
        for change in _dicts(entry.get("changes")):
            value = change.get("value")
            if change.get("field") != "messages" or not isinstance(value, dict):
                continue
            metadata = value.get("metadata") if isinstance(value.get("metadata"), dict) else {}
            number = str(metadata.get("phone_number_id", ""))
            for status in _dicts(value.get("statuses")):
                if status.get("status") == "failed":
                    reasons = "; ".join(f"{error.get('code')} {error.get('title') or error.get('message') or ''}".strip()
                                        for error in _dicts(status.get("errors")))
                    notes.append(f"a message to {status.get('recipient_id')} was not delivered: "
                                 f"{reasons or 'no reason given'}")
            users = value.get("messages")
            if not users:
                continue
            if number != phone_number_id:
                notes.append(f"messages to another phone number id ({number or 'none'}) were left alone")
                continue
            names = {str(contact.get("wa_id")): (contact.get("profile") or {}).get("name") or ""
                     for contact in _dicts(value.get("contacts")) if isinstance(contact.get("profile") or {}, dict)}
            for message in _dicts(users):
                incoming = _incoming(message, names)
                if incoming is None:
                    notes.append("a message without a sender or an id was ignored")
                else:
                    messages.append(incoming)
    return messages, notes


def _incoming(message: dict, names: dict[str, str]) -> Incoming | None:
    sender, message_id, kind = message.get("from"), message.get("id"), message.get("type")
    if not isinstance(sender, str) or not sender or not isinstance(message_id, str) or not message_id:
        return None
    kind = kind if isinstance(kind, str) and kind else "message"
    body = (message.get("text") or {}).get("body") if isinstance(message.get("text"), dict) else None
    text = well_formed(body) if kind == "text" and isinstance(body, str) else ""
    name = names.get(sender, "")
    return Incoming(message_id, sender, well_formed(name) if isinstance(name, str) else "", kind, text)


def _dicts(value: object) -> list[dict]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


class GraphError(ChatcliError):
    """A Graph API request that failed: its HTTP status (0: no answer), Meta's error code and
    message, and how long it asked to wait."""

    def __init__(self, status: int, code: int | None, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"{status or 'no answer'}{f', code {code}' if code is not None else ''}: {message}")
        self.status, self.code, self.detail, self.retry_after = status, code, message, retry_after

    @property
    def token_refused(self) -> bool:
        return self.status == 401 or self.code in TOKEN_CODES

    @property
    def later(self) -> bool:
        """Worth trying again: no answer, the API failing, or a rate limit."""
        return self.status == 0 or self.status >= 500 or self.status == 429 or self.code in RATE_CODES


class Graph:
    """The few Graph API calls the adapter makes, with the access token as a Bearer header."""

    def __init__(self, token: str, phone_number_id: str, api_url: str | None = None,
                 proxies: Proxies | None = None) -> None:
        self.token, self.phone_number_id = token, phone_number_id
        self.api_url = (api_url or API_URL).rstrip("/")
        parts_ = urllib.parse.urlsplit(self.api_url)
        if parts_.scheme not in ("http", "https") or not parts_.hostname:
            raise UsageError(f"WHATSAPP_API_URL {self.api_url!r} is not an http(s) URL (such as {API_URL})")
        proxy = (proxies or Proxies()).for_url(parts_.scheme, parts_.hostname or "")
        # Only the proxy the settings name (never loopback): not the environment's as urllib reads it.
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler(
            {parts_.scheme: proxy} if proxy else {}))

    def number(self) -> dict:
        """The phone number's own record (checks the token and the id)."""
        return self._call("GET", f"{self.phone_number_id}?fields=display_phone_number,verified_name",
                          timeout=CHECK_TIMEOUT)

    def send_text(self, to: str, text: str) -> str:
        """Send a text message; its id."""
        answer = self._call("POST", f"{self.phone_number_id}/messages", {
            "messaging_product": "whatsapp", "recipient_type": "individual", "to": to, "type": "text",
            "text": {"preview_url": False, "body": text}})
        sent = answer.get("messages") if isinstance(answer, dict) else None
        return str(sent[0].get("id", "")) if isinstance(sent, list) and sent and isinstance(sent[0], dict) else ""

    def typing(self, message_id: str) -> None:
        """Mark a user's message read and show a typing indicator (until the answer, or 25 s)."""
        self._call("POST", f"{self.phone_number_id}/messages", {
            "messaging_product": "whatsapp", "status": "read", "message_id": message_id,
            "typing_indicator": {"type": "text"}}, timeout=5.0)

    def _call(self, method: str, path: str, payload: dict | None = None, timeout: float = TIMEOUT) -> dict:
        data = None if payload is None else json.dumps(payload, ensure_ascii=False).encode("utf-8")
        request = urllib.request.Request(f"{self.api_url}/{path}", data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        try:
            with self.opener.open(request, timeout=timeout) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            raise _graph_error(exc) from None
        except (OSError, ValueError) as exc:  # no answer: refused, unreachable, timed out, cut
            reason = getattr(exc, "reason", None) or exc
            raise GraphError(0, None, f"{type(reason).__name__}: {reason}" if str(reason) else type(reason).__name__) from None
        try:
            answer = json.loads(body or b"{}")
        except ValueError:
            raise GraphError(200, None, "the answer is not JSON") from None
        return answer if isinstance(answer, dict) else {}


def _graph_error(exc: urllib.error.HTTPError) -> GraphError:
    """Meta's error (`{"error": {"message", "code", …}}`) as a GraphError."""
    try:
        error = json.loads(exc.read() or b"{}").get("error") or {}
    except (ValueError, AttributeError, OSError):
        error = {}
    error = error if isinstance(error, dict) else {}
    code = error.get("code") if isinstance(error.get("code"), int) else None
    message = str(error.get("message") or exc.reason or "no reason given")[:300]
    retry_after = None
    try:
        retry_after = float(exc.headers.get("Retry-After")) if exc.headers.get("Retry-After") else None
    except (TypeError, ValueError):
        pass
    return GraphError(exc.code, code, message, retry_after)


class WhatsAppAdapter:
    """The webhook on `host:port` and the lanes answering its messages through `hub`."""

    def __init__(self, hub: ConversationHub, graph: Graph, spool: Spool, app_secret: str, verify_token: str,
                 host: str = "127.0.0.1", port: int = 8788, log: Callable[[str], None] = lambda _line: None,
                 setting: Callable[[str], str] = str, refused: bool = False) -> None:
        """`refused`: Meta refused the token at start (said already)."""
        self.hub, self.graph, self.spool, self.log, self.setting = hub, graph, spool, log, setting
        self.app_secret, self.verify_token = app_secret, verify_token
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._lanes: dict[str, collections.deque[tuple[str, dict]]] = {}  # sender → its spooled messages, in order
        self._threads: list[threading.Thread] = []
        self._spooled: set[str] = set()  # ids of the messages in the spool
        self._refused = refused  # Meta refuses the token now (said once)
        self._held = spool.hold()  # one adapter per spool: two would send each other's answers
        try:
            self.httpd = ThreadingHTTPServer((host, port), _handler(self))
        except BaseException:
            self._held.close()
            raise
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="chatcli-whatsapp", daemon=True)

    @property
    def address(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/"

    # -- the webhook -------------------------------------------------------------------------
    def verify(self, query: str) -> tuple[int, str]:
        """The GET handshake Meta makes when the webhook URL is set."""
        params = urllib.parse.parse_qs(query)
        mode, token, challenge = (params.get(key, [""])[0] for key in ("hub.mode", "hub.verify_token", "hub.challenge"))
        if mode == "subscribe" and token and hmac.compare_digest(token.encode("utf-8", "surrogateescape"),
                                                                 self.verify_token.encode("utf-8")):
            return 200, challenge
        if not mode:
            return 403, "forbidden"  # not a handshake (a health check, a browser): nothing to log
        self.log("whatsapp: refused a verification request: "
                 + (f"its verify token is not {self.setting('WHATSAPP_VERIFY_TOKEN')}" if mode == "subscribe"
                    else "it is not hub.mode=subscribe"))
        return 403, "forbidden"

    def deliver(self, headers, body: bytes | None) -> tuple[int, str]:
        """A POST from Meta: checked, its messages spooled, then acknowledged."""
        if body is None:
            return 413, "too big"
        problem = check_signature(self.app_secret, headers.get("X-Hub-Signature-256"), body)
        if problem:
            self.log(f"whatsapp: refused a delivery: {problem}")
            return 403, "forbidden"
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):
            self.log("whatsapp: a signed delivery was not JSON; it was refused")
            return 400, "not JSON"
        messages, notes = read_delivery(payload, self.graph.phone_number_id)
        for note in notes:
            self.log(f"whatsapp: {note}")
        try:
            for message in messages:
                self._receive(message)
        except OSError as exc:  # Meta delivers it again later: nothing is acknowledged unwritten
            self.log(f"whatsapp: a delivery could not be spooled ({exc}); WhatsApp will send it again")
            return 500, "not spooled"
        return 200, "ok"

    def _receive(self, message: Incoming) -> None:
        with self._lock:
            if message.id in self._spooled:
                return  # delivered again while it waits: one answer
            item = message.item()
            name = self.spool.put(item, message.id)
            self._spooled.add(message.id)
            self._queue(name, item)

    # -- the lanes: one per sender with messages waiting --------------------------------------
    def _queue(self, name: str, item: dict) -> None:
        """(Under the lock.) Add a spooled message to its sender's lane, starting the lane's thread."""
        lane = self._lanes.get(item["from"])
        if lane is not None:
            lane.append((name, item))
            return
        self._lanes[item["from"]] = collections.deque([(name, item)])
        thread = threading.Thread(target=self._run_lane, args=(item["from"],), name="chatcli-whatsapp-lane",
                                  daemon=True)
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def _run_lane(self, sender: str) -> None:
        while not self.stopping.is_set():
            with self._lock:
                lane = self._lanes[sender]
                if not lane:
                    del self._lanes[sender]
                    return
                name, item = lane[0]
            done, tries = False, 0
            while not self.stopping.is_set():
                try:
                    done = self._serve(name, item)
                    break
                except Exception as exc:  # noqa: BLE001 - tried again; one message never stops the others
                    tries += 1
                    if tries >= LANE_TRIES:
                        self.log(f"whatsapp: a message could not be answered ({type(exc).__name__}: {exc}); it "
                                 "waits in the spool for the next start")
                        done = True  # out of the lane, its file kept: a redelivery is taken again
                        break
                    self.log(f"whatsapp: answering a message failed ({type(exc).__name__}: {exc}); trying again")
                    self.stopping.wait(BACKOFF[min(tries, len(BACKOFF) - 1)])
            with self._lock:
                if self.stopping.is_set() and not done:
                    return  # its file waits for the next start
                lane.popleft()
                self._spooled.discard(item["id"])

    def _serve(self, name: str, item: dict) -> bool:
        """Answer a spooled message and send its answer; True once it has left the spool."""
        while "answer" not in item:
            reply = self._answer(name, item)
            if reply is None:  # none is due (already answered, a stranger's later message)
                self.spool.remove(name)
                return True
            if not reply.busy:
                break
            if self.stopping.wait(BUSY_WAIT):  # another process is answering it: it sends the answer
                return False
        if not self._send(name, item):
            return False
        self.spool.remove(name)
        return True

    def _answer(self, name: str, item: dict) -> Reply | None:
        text, instead = item["text"], None
        if item["kind"] != "text":
            text, instead = f"[{item['kind']}]", NOT_TEXT.format(kind=item["kind"])

        def typing() -> None:  # only for a message about to be answered: it shows until the answer
            try:
                self.graph.typing(item["id"])
            except GraphError:
                pass  # a courtesy: the answer matters, not the ticks

        def keep(reply: Reply) -> None:  # written before the hub counts the message answered
            item["answer"], item["sent"] = parts(reply.text, LIMIT) or ["(no answer)"], 0
            self.spool.update(name, item)

        return self.hub.handle(CHANNEL, item["from"], text, display=item["name"], message_id=item["id"],
                               instead=instead, on_reply=keep, on_turn=typing)

    def _send(self, name: str, item: dict) -> bool:
        """Send what is left of an answer, trying again while the API fails or limits; True when
        it went out (or Meta refused it for good: said in the log), False when the gateway stops."""
        tries = 0
        while item["sent"] < len(item["answer"]):
            try:
                self.graph.send_text(item["from"], item["answer"][item["sent"]])
            except GraphError as exc:
                if exc.token_refused:
                    with self._lock:
                        said, self._refused = self._refused, True
                    if not said:
                        self.log(f"whatsapp: Meta refused {self.setting('WHATSAPP_TOKEN')} ({exc.detail}): "
                                 "answers wait in the spool and are tried again every "
                                 f"{REFUSED_WAIT:g} s; renew the token and restart the gateway")
                    wait = REFUSED_WAIT
                elif exc.later:
                    wait = exc.retry_after if exc.retry_after is not None else BACKOFF[min(tries, len(BACKOFF) - 1)]
                    if tries == 0:
                        self.log(f"whatsapp: sending an answer to {item['from']} failed ({exc}); trying again")
                else:
                    self.log(f"whatsapp: Meta refused part {item['sent'] + 1} of {len(item['answer'])} of an answer "
                             f"to {item['from']} ({exc}); it is kept in the session only")
                    item["sent"] += 1
                    tries = 0
                    continue
                tries += 1
                if self.stopping.wait(wait):
                    return False
                continue
            with self._lock:
                said, self._refused = self._refused, False
            if said:
                self.log(f"whatsapp: Meta accepts {self.setting('WHATSAPP_TOKEN')} again")
            item["sent"] += 1
            tries = 0
            if item["sent"] < len(item["answer"]):
                self.spool.update(name, item)  # a restart sends the rest, not the start again
        return True

    # -- start and stop --------------------------------------------------------------------
    def start(self) -> None:
        """Take up what the spool holds (in the order it came), then serve the webhook."""
        items, problems = self.spool.pending()
        for problem in problems:
            self.log(f"whatsapp: {problem}")
        with self._lock:
            for name, item in items:
                if not _well_made(item):
                    self.log(f"whatsapp: the spooled message {name} is not one chatcli wrote; it is left as it is")
                    continue
                self._spooled.add(item["id"])
                self._queue(name, item)
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        deadline = time.monotonic() + STOP_GRACE
        for thread in list(self._threads):
            thread.join(max(0.0, deadline - time.monotonic()))
        self._held.close()


def _well_made(item: dict) -> bool:
    if not all(isinstance(item.get(key), str) for key in ("id", "from", "name", "kind", "text")):
        return False
    answer = item.get("answer")
    return answer is None or (isinstance(answer, list) and all(isinstance(piece, str) for piece in answer)
                              and isinstance(item.get("sent"), int))


def _handler(adapter: WhatsAppAdapter):
    class Handler(GatewayHandler):
        def gone(self, exc: ConnectionError) -> None:
            adapter.log(f"whatsapp: a client closed its connection early ({type(exc).__name__})")

        def do_GET(self) -> None:
            self._send(*adapter.verify(urllib.parse.urlsplit(self.path).query))

        def do_POST(self) -> None:
            if self.headers.get("Content-Length") is None:  # chunked: not what Meta sends
                adapter.log("whatsapp: refused a delivery without Content-Length (is a proxy re-encoding it?)")
                self._send(411, "length required")
                return
            try:
                length = int(self.headers["Content-Length"])
            except ValueError:
                length = -1
            body = self.rfile.read(length) if 0 <= length <= MAX_BODY else None
            try:
                status, text = adapter.deliver(self.headers, body)
            except Exception as exc:  # noqa: BLE001 - one line to the log; Meta delivers it again
                adapter.log(f"whatsapp: a delivery failed: {type(exc).__name__}: {exc}")
                status, text = 500, "failed"
            self._send(status, text)

        def _send(self, status: int, text: str) -> None:
            self.reply(status, text.encode("utf-8"), "text/plain; charset=utf-8")

    return Handler


def check_number(graph: Graph, setting: Callable[[str], str] = str,
                 warn: Callable[[str], None] = lambda _line: None) -> tuple[str, bool]:
    """(the number as the ready line shows it, whether Meta refused the token). A token Meta
    refuses (expired, say) or a Graph API that cannot be reached is a warning, and the adapter
    serves: messages are spooled and answered, and their answers wait until it can send them
    (the other adapters go on either way). A phone number id the Graph API does not know stops
    the start in one line (a ChatcliError without the token): nothing could ever be sent."""
    try:
        record = graph.number()
    except GraphError as exc:
        if exc.token_refused:
            warn(f"Meta refused {setting('WHATSAPP_TOKEN')} ({exc.detail}): WhatsApp messages are received and "
                 "answered, and the answers wait in the spool; renew the token and restart the gateway")
            return graph.phone_number_id, True
        if exc.later:
            where = urllib.parse.urlsplit(graph.api_url).netloc
            warn(f"cannot reach the Graph API at {where} to check {setting('WHATSAPP_TOKEN')} ({exc}); "
                 f"answers wait until it can be reached (check the network, or {setting('WHATSAPP_API_URL')})")
            return graph.phone_number_id, False
        raise UsageError(f"the Graph API does not take {setting('WHATSAPP_PHONE_NUMBER_ID')} "
                         f"{graph.phone_number_id} ({exc}); check it") from None
    shown = record.get("display_phone_number") or graph.phone_number_id
    return (f"{shown} ({record['verified_name']})" if record.get("verified_name") else str(shown)), False


__all__ = ["CHANNEL", "LIMIT", "Graph", "GraphError", "WhatsAppAdapter", "check_number", "check_signature",
           "read_delivery", "signature"]
