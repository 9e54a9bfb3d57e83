"""`/web`: a page of the user's sessions (list, read, search) served on 127.0.0.1 to
this user's browser, from the same store every surface uses.

Access: the URL `/web` prints carries a one-time token. Its first visit trades it for a cookie
(HttpOnly, SameSite=Strict, named with the port) and the token is spent: the URL copied
elsewhere, or opened again, is refused. (A browser sends its cookies for 127.0.0.1 to every
port there, so a server another local user runs on this machine could see one: the page is
for a machine you do not share with people you do not trust.) Every request must name this server's own host and port (a page elsewhere cannot
reach it through DNS rebinding), and every answer is JSON or the page itself, whose script puts
text on screen as text, never as markup (CSP: its own script only, by nonce).

The conversation that opened it is bound to a session named `web-<id>` (unless it was bound
already), so what it says is in the list like any other session, written after each turn and
never copied to an autosave. One made for an empty conversation that nobody then chatted in is
removed again (`remove_if_unused`): opening the page leaves no session behind.
"""

from __future__ import annotations

import datetime
import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

from chatcli.core.errors import ChatcliError, UsageError
from chatcli.core.names import NAME_RE
from chatcli.engine import records

TYPE_CHECKING = False
if TYPE_CHECKING:
    from chatcli.engine.conversation import Conversation
    from chatcli.store.sessions import SessionStore, Stamp

PAGE_SIZE = 200  # messages a page of a session shows (the newest first page; "older" for more)
COOKIE = "chatcli_web_"  # + the port: two chatcli pages at once keep a cookie each


class WebView:
    def __init__(self, conv: Conversation, host: str = "127.0.0.1", port: int = 0) -> None:
        self.conv = conv
        self.tokens: set[str] = set()  # one-time tokens not yet spent
        self.cookies: set[str] = set()
        self.lock = threading.Lock()
        view = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "chatcli-web"
            timeout = 30

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                try:
                    status, kind, body, headers = view.answer(self.path, self.headers)
                except Exception as exc:  # noqa: BLE001 - one line to the page, never a traceback
                    status, kind, body, headers = 500, "application/json", _json({"error": f"{type(exc).__name__}: "
                                                                                           f"{exc}"}), {}
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("X-Content-Type-Options", "nosniff")
                self.send_header("Referrer-Policy", "no-referrer")
                self.send_header("Cache-Control", "no-store")
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:  # the page only reads: anything else is refused in one line
                body = _json({"error": "this page only reads (GET)"})
                self.send_response(405)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Allow", "GET")
                self.end_headers()
                self.wfile.write(body)

            do_PUT = do_DELETE = do_PATCH = do_POST

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="chatcli-web", daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    def link(self) -> str:
        """A new one-time link to the page."""
        token = secrets.token_urlsafe(24)
        with self.lock:
            self.tokens.add(token)
        return f"http://127.0.0.1:{self.port}/?token={token}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- requests ---------------------------------------------------------------------------
    def answer(self, path: str, headers) -> tuple[int, str, bytes, dict[str, str]]:
        if headers.get("Host", "") not in (f"127.0.0.1:{self.port}", f"localhost:{self.port}"):
            return 403, "text/plain; charset=utf-8", b"wrong host", {}
        url = urlsplit(path)
        try:
            query: dict[str, list[str]] | None = parse_qs(url.query, errors="strict")
        except UnicodeDecodeError:  # refused once the cookie is checked: a stranger learns nothing more
            query = None
        token = (query or {}).get("token", [""])[0]
        if url.path == "/" and token:
            with self.lock:
                valid = token in self.tokens
                self.tokens.discard(token)  # one time: spent now whatever happens next
                cookie = secrets.token_urlsafe(24) if valid else ""
                if valid:
                    self.cookies.add(cookie)
            if not valid:
                return 403, "text/plain; charset=utf-8", b"This link was used already or is not chatcli's; type /web " \
                                                         b"in chatcli for a new one.", {}
            return 303, "text/plain; charset=utf-8", b"", {
                "Location": "/", "Set-Cookie": f"{COOKIE}{self.port}={cookie}; HttpOnly; SameSite=Strict; Path=/"}
        if not self._allowed(headers.get("Cookie", "")):
            return 403, "text/plain; charset=utf-8", b"Open the link /web printed in chatcli (it works once).", {}
        if query is None:
            return 400, "application/json", _json({"error": "the query is not valid UTF-8"}), {}
        if url.path == "/":
            nonce = secrets.token_urlsafe(12)
            return 200, "text/html; charset=utf-8", PAGE.replace("NONCE", nonce).encode("utf-8"), {
                "Content-Security-Policy": f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; "
                                           "connect-src 'self'; base-uri 'none'; form-action 'none'; "
                                           "frame-ancestors 'none'"}
        if url.path == "/api/sessions":
            return self._reply(self._sessions())
        if url.path.startswith("/api/sessions/"):
            name = unquote(url.path[len("/api/sessions/"):])
            before = (query.get("before") or [""])[0]
            return self._reply(self._session(name, int(before) if before.isascii() and before.isdigit() else None))
        if url.path == "/api/search":
            words = (query.get("q") or [""])[0].strip()
            try:
                return self._reply(self._search(words))
            except UsageError as exc:  # no word to search for: what the page sent is wrong, not the server
                return 400, "application/json", _json({"error": str(exc)}), {}
        return 404, "application/json", _json({"error": "not found"}), {}

    def _allowed(self, cookie_header: str) -> bool:
        for part in cookie_header.split(";"):
            key, _, value = part.strip().partition("=")
            if key == f"{COOKIE}{self.port}" and value:
                with self.lock:
                    if value in self.cookies:
                        return True
        return False

    @staticmethod
    def _reply(payload: dict) -> tuple[int, str, bytes, dict[str, str]]:
        return 200 if "error" not in payload else 404, "application/json", _json(payload), {}

    # -- what the page shows ------------------------------------------------------------------
    def _sessions(self) -> dict:
        rows = []
        for info in self.conv.store.list():
            rows.append({"name": info.name, "messages": info.messages, "title": info.title or "",
                         "updated": datetime.datetime.fromtimestamp(info.mtime).strftime("%Y-%m-%d %H:%M"),
                         "problem": info.problem or "", "current": info.name == self.conv.session_name})
        return {"sessions": rows}

    def _session(self, name: str, before: int | None) -> dict:
        if not NAME_RE.fullmatch(name) or ".." in name:
            return {"error": f"no session named {name!r}"}
        try:
            data, _stamp = self.conv.store.load(name)
        except ChatcliError as exc:
            return {"error": str(exc)}
        history = data.history
        end = len(history) if before is None else max(0, min(before - 1, len(history)))
        start = max(0, end - PAGE_SIZE)
        messages = []
        number = records.numbering(self.conv.settings, data.transcript_id, len(history))  # as search and transcript show
        for position in range(start, end):
            message = history[position]
            calls = [f"{call.get('name') or (call.get('function') or {}).get('name')}" for call in message.tool_calls or ()
                     if isinstance(call, dict)]
            messages.append({"pos": number(position + 1), "role": message.role, "content": message.content,
                             "calls": calls, "summary": message.is_summary})
        return {"name": name, "title": data.title or "", "count": len(history), "first": start + 1,
                "messages": messages}

    def _search(self, words: str) -> dict:
        if not words:
            return {"query": words, "groups": []}
        groups = records.search_sessions(self.conv.settings, self.conv.store, words)
        return {"query": words, "groups": [{"name": group.name, "hits": [{"pos": pos, "role": role, "snippet": snippet}
                                                                         for pos, role, snippet in group.hits]}
                                           for group in groups]}


def remove_if_unused(store: SessionStore, name: str, created: Stamp) -> bool:
    """Remove session `name`, made empty for a page, if it is still the file written then (same
    inode, mtime and size, checked under its lock): nothing was chatted or saved in it, from
    this conversation or another surface. Anything written since keeps it. Best effort: it may
    run as the process ends, where a failure has no one to be told to (the session stays, and
    --continue passes over an empty one)."""
    try:
        removed = store.remove_if_unchanged(name, created.mtime_ns, created.size, created.inode)
    except (ChatcliError, OSError):
        return False
    if removed:
        store.catalog.forget_journals([name])
    return removed


def _json(payload: dict) -> bytes:
    return json.dumps(payload, ensure_ascii=False).encode("utf-8")


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>chatcli sessions</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 0; display: flex; height: 100vh; color: #222; }
nav { width: 32%; min-width: 260px; border-right: 1px solid #ddd; overflow: auto; padding: 10px; box-sizing: border-box; }
main { flex: 1; overflow: auto; padding: 10px 18px; }
input { width: 100%; box-sizing: border-box; padding: 6px; margin-bottom: 8px; }
.session { padding: 6px; border-radius: 4px; cursor: pointer; }
.session:hover, .session.open { background: #eef3ff; }
.session .meta, .hit .meta { color: #777; font-size: 12px; }
.message { border-top: 1px solid #eee; padding: 8px 0; white-space: pre-wrap; }
.message .role { font-weight: bold; color: #345; }
.hit { padding: 4px 0 4px 8px; cursor: pointer; }
button { margin: 6px 0; }
</style></head>
<body>
<nav>
  <input id="search" type="search" placeholder="Search every session…" aria-label="search">
  <div id="results"></div>
  <div id="sessions" aria-label="sessions"></div>
</nav>
<main id="reader"><p>Choose a session on the left.</p></main>
<script nonce="NONCE">
"use strict";
const $ = (id) => document.getElementById(id);
function el(tag, cls, text) { const e = document.createElement(tag); if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text; return e; }
async function get(path) { const r = await fetch(path, {credentials: "same-origin"}); return r.json(); }
async function loadSessions() {
  const data = await get("/api/sessions"); const box = $("sessions"); box.replaceChildren();
  for (const s of data.sessions) {
    const row = el("div", "session"); row.dataset.name = s.name;
    row.append(el("div", "name", s.name + (s.current ? "  (this conversation)" : "")),
               el("div", "meta", (s.messages ?? "?") + " messages · " + s.updated + (s.title ? " · " + s.title : "")));
    row.addEventListener("click", () => openSession(s.name)); box.append(row);
  }
}
async function openSession(name, before) {
  const data = await get("/api/sessions/" + encodeURIComponent(name) + (before ? "?before=" + before : ""));
  const reader = $("reader"); reader.replaceChildren();
  for (const row of document.querySelectorAll(".session")) row.classList.toggle("open", row.dataset.name === name);
  if (data.error) { reader.append(el("p", "error", data.error)); return; }
  reader.append(el("h2", "", name + (data.title ? " — " + data.title : "")),
                el("div", "meta", data.count + " messages"));
  if (data.first > 1) { const older = el("button", "", "Older messages");
    older.addEventListener("click", () => openSession(name, data.first)); reader.append(older); }
  for (const m of data.messages) {
    const box = el("div", "message"); box.id = "m" + m.pos;
    box.append(el("div", "role", "#" + m.pos + " " + m.role + (m.summary ? " (summary)" : "")),
               el("div", "content", m.content + (m.calls.length ? "\\n→ " + m.calls.join(", ") : "")));
    reader.append(box);
  }
}
let timer = null;
$("search").addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(search, 250); });
async function search() {
  const q = $("search").value.trim(); const box = $("results"); box.replaceChildren();
  if (!q) return;
  const data = await get("/api/search?q=" + encodeURIComponent(q));
  if (!data.groups.length) { box.append(el("p", "meta", "No saved session matches.")); return; }
  for (const g of data.groups) {
    box.append(el("div", "name", g.name));
    for (const h of g.hits) { const hit = el("div", "hit");
      hit.append(el("span", "meta", "#" + h.pos + " " + h.role + " "), el("span", "", "…" + h.snippet.trim() + "…"));
      hit.addEventListener("click", () => openSession(g.name)); box.append(hit); }
  }
}
loadSessions();
</script></body></html>
"""

__all__ = ["WebView", "remove_if_unused"]
