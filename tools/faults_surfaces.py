"""Faults on chatcli's surfaces, for the campaign behind docs/reliability.md (tools/faults.py calls
these; run alone: .venv/bin/python tools/faults_surfaces.py, FAULT_SCALE=4 for four times as many).

Each function injects its fault through the code paths chatcli itself uses (a coder-mode
conversation, the real `chatcli gateway` daemon over HTTP, the real /web server), counts what
went wrong, and prints one Markdown table row through the `row(fault, times, lost, seen)` it is
given:

- approval_race: a directory (or the file) of an approved coder-mode write swapped for a link
  to a directory outside the workspace while the approval question waits;
- webhook_hostile: malformed, too deeply nested and otherwise hostile bodies, and clients that go
  away before their answer, sent to the webhook daemon;
- web_search_queries: queries that are not UTF-8, empty, only punctuation, very long or random,
  sent to /web's search;
- log_growth: many unauthenticated webhook requests, then every file of $CHATCLI_HOME/logs
  measured.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fakes import FakeModelServer, FakeProvider, tool_call  # noqa: E402
from test_approval_race import tree  # noqa: E402

from chatcli.config.settings import Settings  # noqa: E402
from chatcli.core import agent as rules  # noqa: E402
from chatcli.core.messages import Message  # noqa: E402
from chatcli.engine import sessions  # noqa: E402
from chatcli.engine.conversation import Conversation  # noqa: E402

SCALE = float(os.environ.get("FAULT_SCALE", "1"))
CHATCLI = str(ROOT / ".venv" / "bin" / "chatcli")
Row = Callable[[str, int, str, str], None]


def n(count: int) -> int:
    return max(1, round(count * SCALE))


def scratch_env() -> dict[str, str]:
    """A scratch HOME and CHATCLI_HOME, and none of the outer environment's chatcli or provider
    variables."""
    home = Path(tempfile.mkdtemp(prefix="chatcli-faults-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "CHATCLI_", "LLM_"))}
    env.update(HOME=str(home), CHATCLI_HOME=str(home / ".chatcli"))
    return env


def _plural(count: int, one: str, many: str | None = None) -> str:
    return f"{count:,} {one if count == 1 else (many or one + 's')}"


def _size(count: int) -> str:
    if count >= 1024 * 1024:
        return f"{count / (1024 * 1024):.2f} MiB"
    if count >= 1024:
        return f"{count / 1024:.1f} KiB"
    return f"{count} B"


# -- a coder-mode write whose path is swapped for a link while the approval question waits ---------
def approval_race(times: int, row: Row) -> None:
    """Coder mode asks before it writes. While the question waits, a directory on the write's
    path (at a random depth), the file itself, or a directory the write was to create is replaced
    by a symbolic link to a copy outside the workspace, so that a write that followed it would
    succeed there; then the user approves. A quarter of the cases swap nothing (controls)."""
    env = scratch_env()
    model = FakeProvider()
    settings = Settings.load({**env, "LLM_PROVIDER": "openai", "OPENAI_API_KEY": "x", "OPENAI_MODEL": "m"})
    rng = random.Random(53)
    escaped = went_ahead = touched = unsaid = misnamed = lost = not_asked = failed = 0
    swaps: Counter[str] = Counter()
    controls = 0
    examples: dict[str, str] = {}
    refusal = re.compile(r"refused: (.+) became a symbolic link after the write was approved; nothing was written")
    for _ in range(times):
        base = Path(tempfile.mkdtemp(prefix="chatcli-race-"))
        project, outside = base / "work", base / "outside"
        outside.mkdir()
        depth = rng.randint(1, 3)
        dirs = [f"d{k}" for k in range(1, depth + 1)]
        (project / Path(*dirs)).mkdir(parents=True)
        (project / Path(*dirs) / "t.txt").write_text("old\n")
        (project / "app.py").write_text("print('hi')\n")
        tool = rng.choice(["write_file", "edit_file"])
        kinds = ["control", "directory", "file"] + (["new directory"] if tool == "write_file" else [])
        kind = rng.choices(kinds, weights=[1, 2, 1, 1][: len(kinds)])[0]
        new_name = rng.random() < 0.5 and tool == "write_file" and kind != "new directory"
        target = Path(*dirs) / ("new.txt" if new_name else "t.txt")
        if kind == "new directory":  # a write that makes its directories: one of them planted as a link
            target = Path(*dirs[: rng.randint(0, depth)], "n1", "n2", "new.txt")
        named = str(project / target) if rng.random() < 0.5 else str(target)  # absolute or relative
        if tool == "write_file":
            call = tool_call("c1", "write_file", path=named, content="approved\n")
        else:
            call = tool_call("c1", "edit_file", path=named, old_text="old", new_text="approved")
        level = rng.randint(1, depth)
        swapped = {"directory": Path(*dirs[:level]), "file": target,
                   "new directory": target.parent.parent}.get(kind)
        seen_outside: dict[str, str] = {}
        seen_inside: dict[str, str] = {}
        asked: list[str] = []

        def swap_then_approve(question, kind=kind, swapped=swapped):
            asked.append(question.title)
            if kind == "directory":  # moved outside by something else, a link left in its place
                copy = outside / "moved"
                shutil.copytree(project / swapped, copy)
                shutil.rmtree(project / swapped)
                (project / swapped).symlink_to(copy, target_is_directory=True)
            elif kind == "file":  # the file (or where it would be) a link to a file outside
                (outside / "t.txt").write_text("old\n")
                (project / swapped).unlink(missing_ok=True)
                (project / swapped).symlink_to(outside / "t.txt")
            elif kind == "new directory":  # the directory the write was to make, made first as a link
                (outside / "n2").mkdir()
                (project / swapped).symlink_to(outside, target_is_directory=True)
            seen_outside.update(tree(outside))
            seen_inside.update(tree(project))
            return rules.YES

        model.reply(tool_calls=[call])
        model.reply("Done.")
        conv = Conversation(settings, registry=model.registry(), journal=True)
        conv.agent.root = project
        conv.agent.switch("coder", conv)
        try:
            conv.send(f"{tool} {target}", approve=swap_then_approve)
        except Exception:  # noqa: BLE001 - what the campaign counts
            failed += 1
        results = [m.content for m in conv.history if m.role == "tool"]
        result = results[0] if results else ""
        not_asked += len(asked) != 1
        if kind == "control":
            controls += 1
            lost += (project / target).read_text() != "approved\n"
            shutil.rmtree(base)
            continue
        swaps[kind] += 1
        if tree(outside) != seen_outside or sorted(os.listdir(base)) != ["outside", "work"]:
            escaped += 1
        touched += tree(project) != seen_inside
        said = refusal.fullmatch(result)
        if not said:
            unsaid += 1
            went_ahead += result.startswith("wrote ")
        elif said.group(1).rstrip("/") != str(swapped):
            misnamed += 1
        else:
            examples.setdefault(kind, result)
        shutil.rmtree(base)
    swapped_count = sum(swaps.values())
    example = examples.get("directory") or next(iter(examples.values()), "")
    row(f"coder mode: while the approval question waits, a directory on the write's path (depth 1 to 3), the file "
        f"itself, or a directory the write was to create is swapped for a symbolic link to a copy outside the "
        f"workspace, then approved (write_file and edit_file, relative and absolute paths; {controls:,} controls "
        f"swap nothing)", times,
        f"{_plural(escaped, 'file')} written outside the workspace; {went_ahead} swapped writes went ahead; "
        f"{touched} refused writes that changed the workspace; {_plural(lost, 'approved write')} of the controls "
        f"lost; {not_asked} not asked exactly once; {failed} internal errors",
        f"{swapped_count - unsaid:,} of {swapped_count:,} swaps refused as the tool's result, naming the part that "
        f"moved ({misnamed} misnamed), such as \"{example}\"")


# -- the webhook daemon ---------------------------------------------------------------------------------
SECRET = "a shared secret"


class Daemon:
    """A real `chatcli gateway --webhook 127.0.0.1:0`, its stderr in a file (a pipe nobody reads
    could fill and stop it), once it says where it listens."""

    def __init__(self, env: dict[str, str]) -> None:
        self.stderr_path = Path(env["HOME"]) / f"gateway-stderr-{time.monotonic_ns()}.txt"
        with open(self.stderr_path, "w") as stderr:
            self.process = subprocess.Popen([CHATCLI, "gateway", "--webhook", "127.0.0.1:0"], env=env,
                                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
        deadline = time.monotonic() + 30
        while not (found := re.search(r"listening on http://127\.0\.0\.1:(\d+)/", self.stderr())):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the gateway did not start: " + self.stderr())
            time.sleep(0.02)
        self.port = int(found.group(1))

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def stop(self) -> str:
        """Stopped as a service manager stops it (SIGTERM); what it wrote on stderr."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.stderr()

    def post(self, body: bytes, headers: dict[str, str] | None = None,
             signed: bool = True) -> tuple[int, dict | None]:
        """A POST to /message as a client may send it; the status and its JSON (None if it is not)."""
        heads = {"Content-Length": str(len(body)), "Content-Type": "application/json"}
        if signed:
            heads.update(_signed(body))
        heads.update(headers or {})
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            connection.putrequest("POST", "/message")
            for name, value in heads.items():
                connection.putheader(name, value)
            connection.endheaders(body)
            response = connection.getresponse()
            data = response.read()
        finally:
            connection.close()
        try:
            return response.status, json.loads(data)
        except ValueError:
            return response.status, None

    def say(self, sender: str, text: str, id: str) -> tuple[int, dict | None]:
        return self.post(json.dumps({"sender": sender, "text": text, "id": id}).encode())

    def raw(self, data: bytes) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        sock.sendall(data)
        return sock


def _signed(body: bytes, stamp: float | None = None) -> dict[str, str]:
    from chatcli.gateway.webhook import signature

    timestamp = str(int(time.time() if stamp is None else stamp))
    return {"X-Chatcli-Timestamp": timestamp, "X-Chatcli-Signature": signature(SECRET, timestamp, body)}


def _reset(sock: socket.socket) -> None:
    """Closed as a client that goes away closes it: at once, with a reset."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


@contextlib.contextmanager
def _quiet_resets(server: FakeModelServer):
    """The fake model's server says nothing of a kept-alive connection the daemon's model client
    drops with a reset (it does, now and then, with plain traffic too): what the user of the
    gateway sees is unchanged, and the fake's traceback on this campaign's stderr would look like
    a failure."""
    httpd = server.httpd
    loud, own = httpd.handle_error, vars(httpd).get("handle_error")

    def handle_error(request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            loud(request, client_address)

    httpd.handle_error = handle_error
    try:
        yield
    finally:
        if own is None:
            del httpd.handle_error
        else:
            httpd.handle_error = own


def _gateway_env(server: FakeModelServer, senders: list[str]) -> dict[str, str]:
    env = scratch_env()
    env.update(LLM_PROVIDER="openai", OPENAI_API_KEY="x", OPENAI_BASE_URL=server.base_url, OPENAI_MODEL="m",
               CHATCLI_GATEWAY_ALLOW=",".join(f"webhook:{s}" for s in senders), CHATCLI_GATEWAY_WEBHOOK_SECRET=SECRET)
    return env


def _hostile_body(rng: random.Random, sender: str, id: str) -> tuple[str, bytes, str]:
    """(kind, body, the field holding a lone UTF-16 surrogate escape the daemon accepts, or "")."""
    good = {"sender": sender, "text": "hi", "id": id}
    text = json.dumps(good)
    kind = rng.choice(["nested, open", "nested, closed", "truncated", "bytes not UTF-8", "not an object",
                       "fields of other types", "NaN, Infinity, 5,000-digit numbers", "lone surrogate",
                       "control characters", "duplicate keys", "byte order mark", "empty"])
    carries = ""
    if kind == "nested, open":
        body = text[:-1].encode() + b', "more": ' + rng.choice([b"[", b'{"a":']) * rng.randrange(1_000, 200_000)
    elif kind == "nested, closed":
        depth = rng.choice([rng.randrange(2, 900), rng.randrange(900, 150_000)])
        body = text[:-1].encode() + b', "more": ' + b"[" * depth + b"]" * depth + b"}"
    elif kind == "truncated":
        body = text.encode()[: rng.randrange(len(text))]
    elif kind == "bytes not UTF-8":
        raw = bytearray(text.encode())
        for _ in range(rng.randint(1, 3)):
            raw.insert(rng.randrange(len(raw) + 1), rng.choice([0xFF, 0xC0, 0x80, 0xED, 0xFE]))
        body = bytes(raw)
    elif kind == "not an object":
        body = rng.choice([b"[]", b'"hi"', b"42", b"null", b"true", json.dumps([good]).encode()])
    elif kind == "fields of other types":
        odd = dict(good)
        odd[rng.choice(["sender", "text", "id"])] = rng.choice([5, None, [], {}, True, 2.5, ""])
        body = json.dumps(odd).encode()
    elif kind == "NaN, Infinity, 5,000-digit numbers":
        body = text[:-1].encode() + b', "n": ' + rng.choice([b"NaN", b"-Infinity", b"9" * 5000, b"1e999999"]) + b"}"
    elif kind == "lone surrogate":
        field = rng.choice(["sender", "text", "id", "name"])
        odd = dict(good)
        odd[field] = rng.choice(["\ud800", "\udfff", "a\udcff b"]) + ("" if field != "text" else " hi")
        body = json.dumps(odd).encode()  # ensure_ascii: the escape "\ud800", as a client's JSON library sends it
        carries = field if field != "sender" else ""  # a sender must be printable: refused before it is kept
    elif kind == "control characters":
        odd = dict(good, **{rng.choice(["sender", "id", "text"]): rng.choice(["a\x00b", "\x1b[31mred", "a\u2028b",
                                                                                "\u202eevil", "bob\nINFO forged"])})
        body = json.dumps(odd).encode()
    elif kind == "duplicate keys":
        body = text[:-1].encode() + b', "text": "", "id": ""}'
    elif kind == "byte order mark":
        body = b"\xef\xbb\xbf" + text.encode()
    else:
        body = b""
    return kind, body, carries


def webhook_hostile(times: int, row: Row, server: FakeModelServer) -> None:
    """`times` signed requests of malformed, too deeply nested or otherwise hostile bodies from
    allowed senders, mixed with plain messages, then clients that go away: mid-headers, mid-body,
    and after the whole request while a slow answer is being made (a fifteenth as many of each); at
    the end every sender sends one plain message."""
    with _quiet_resets(server):
        _webhook_hostile(times, row, server)


def _webhook_hostile(times: int, row: Row, server: FakeModelServer) -> None:
    senders = [f"u{k}" for k in range(12)]
    env = _gateway_env(server, senders + ["late"])
    rng = random.Random(59)
    daemon = Daemon(env)
    statuses: Counter[int] = Counter()
    failures: Counter[str] = Counter()
    kinds_500: Counter[str] = Counter()
    reasonless = 0
    tainted: set[str] = set()  # senders that sent a lone surrogate the daemon took
    poisoners: set[str] = set()  # of them, those that sent it in a message's text
    spent_checks: list[tuple[str, str]] = []
    disconnects = 0
    try:
        for i in range(times):
            sender, id = rng.choice(senders), f"h-{i}"
            if rng.random() < 0.2:
                kind, carries = "plain", ""
                body = json.dumps({"sender": sender, "text": f"plain {i}", "id": id}).encode()
            else:
                kind, body, carries = _hostile_body(rng, sender, id)
            status, answer = daemon.post(body)
            statuses[status] += 1
            if status >= 400 and not (isinstance(answer, dict) and isinstance(answer.get("error"), str)
                                      and answer["error"] and "\n" not in answer["error"]):
                reasonless += 1
            if status == 500:
                failures[re.sub(r"character '.*?' in position \d+", "character … in position …",
                                answer.get("error", "") if answer else "")] += 1
                kinds_500["messages holding a lone surrogate" if carries else
                          "later messages of the same senders" if sender in tainted else kind] += 1
            if status == 400:
                spent_checks.append((sender, id))
            if carries:
                tainted.add(sender)
            if carries == "text":
                poisoners.add(sender)
        for k in range(max(1, times // 15)):  # clients that go away
            body = json.dumps({"sender": "late", "text": f"slow {k}", "id": f"g-{k}"}).encode()
            head = b"POST /message HTTP/1.1\r\n" + f"Content-Length: {len(body)}\r\n".encode() + "".join(
                f"{name}: {value}\r\n" for name, value in _signed(body).items()).encode() + b"\r\n"
            _reset(daemon.raw(head[: rng.randrange(5, len(head) - 2)]))  # mid-headers
            cut = daemon.raw(head + body[: rng.randrange(len(body))])  # mid-body
            time.sleep(0.05)
            _reset(cut)
            server.reply("a slow ", "answer", delay=0.1)
            asked = len(server.requests)
            gone = daemon.raw(head + body)  # the whole request; gone before its answer
            server.wait_for_requests(asked + 1)
            _reset(gone)
            silent = daemon.raw(b"")  # connects, says nothing, closes
            silent.close()
            disconnects += 4
        time.sleep(0.5)  # the slow answers are written to nobody
        unanswered = {s for s in senders if daemon.say(s, "still here?", f"end-{s}") !=
                      (200, {"reply": "You said: still here?"})}
        spent = sum(1 for s, id in spent_checks if s not in tainted and daemon.say(s, "again", id)[1] != {
            "reply": "You said: again"})
    finally:
        stderr = daemon.stop()
    logs = Path(env["CHATCLI_HOME"]) / "logs"
    log = logs / "gateway.log"
    log_text = log.read_text(errors="replace") if log.exists() else ""
    tracebacks = stderr.count("Traceback") + log_text.count("Traceback")
    gone_lines = log_text.count("closed its connection before its answer")
    unkept = log_text.count("could not be kept")
    shown = ", ".join(f"{count:,} × {status}" for status, count in sorted(statuses.items()))
    causes = "; ".join(f"{count:,} on {what}" for what, count in sorted(kinds_500.items(), key=lambda kv: kv[0] !=
                                                                        "messages holding a lone surrogate"))
    said = "; ".join(f"\"{text}\"" for text, _ in failures.most_common(2))
    row(f"signed webhook requests from allowed senders: hostile bodies (nested to 200,000 deep, open or closed; "
        f"truncated; not UTF-8; not an object; fields of other types; NaN and 5,000-digit numbers; lone UTF-16 "
        f"surrogate escapes; control characters; duplicate keys; a byte order mark; empty), a fifth plain; then "
        f"{disconnects:,} clients gone mid-headers, mid-body, before a slow answer, or silent", times + disconnects,
        f"{statuses[500]:,} HTTP 500s{f' ({causes})' if causes else ''}; {len(unanswered)} of {len(senders)} senders "
        f"not answered afterwards ({len(unanswered & poisoners)} of the {len(poisoners)} that had sent a lone "
        f"surrogate in a text, {len(unanswered - poisoners)} others); {unkept} conversations that could not be kept "
        f"at shutdown; {spent} ids of refused bodies spent; {tracebacks} tracebacks on the daemon's stderr "
        f"or in its log; gateway.log {_size(sum(p.stat().st_size for p in logs.glob('gateway.log*')))} afterwards",
        f"{shown}; every refusal one line in {{\"error\": …}} ({reasonless} without); "
        f"{gone_lines:,} \"a client closed its connection before its answer\" lines in gateway.log for "
        f"{disconnects // 4 * 3:,} resets" + (f"; the 500s say {said}" if said else ""))


# -- /web's search ------------------------------------------------------------------------------
def _web_queries(rng: random.Random, count: int) -> list[tuple[str, str]]:
    """(kind, the raw query string after `q=`) pairs."""
    fixed = [("not UTF-8", "%ff%ff"), ("empty", ""), ("only punctuation", "%21%21"), ("not UTF-8", "%ED%A0%80"),
             ("NUL", "%00"), ("only punctuation", "%22"), ("search syntax", "NEAR("), ("search syntax", "AND"),
             ("search syntax", "herons%20OR"), ("search syntax", "%22herons"), ("search syntax", "herons*"),
             ("search syntax", "-herons"), ("search syntax", "a%3Ab"), ("search syntax", "%5Eherons"),
             ("only emoji", "%F0%9F%90%A6"), ("lone %", "%"), ("bad escape", "%zz"), ("two q", "herons&q=nest")]
    alphabet = "herons nest pond 'é中ßİı\u0301\u200b\u202e\t\n\x00\x1b\"*^:-()[]{}<>&|!?.,;%+"
    queries = list(fixed)
    while len(queries) < count:
        kind = rng.choice(["random bytes", "random bytes", "random characters", "search syntax", "very long",
                           "only punctuation"])
        if kind == "random bytes":
            raw = bytes(rng.randrange(256) for _ in range(rng.randint(1, 60)))
        elif kind == "random characters":
            raw = "".join(rng.choice([rng.choice(alphabet), chr(rng.randrange(0x20, 0x2FFFF))])
                          for _ in range(rng.randint(1, 40))).encode("utf-8", "replace")
        elif kind == "search syntax":
            raw = " ".join(rng.choice(["herons", "nest", "AND", "OR", "NOT", "NEAR(", ")", '"', "*", "^", "-", "+",
                                       "col:", "NEAR(herons nest, 2)", "{a b}", "''"])
                           for _ in range(rng.randint(1, 8))).encode()
        elif kind == "very long":
            word = rng.choice(["herons ", "x", "é", "!", "herons* OR "])
            raw = (word * (rng.randint(1_000, 90_000) // len(word))).encode()
        else:
            raw = "".join(rng.choice("!?.,;:-_()[]{}<>'\"`~@#$^&*=+|\\/ \t")
                          for _ in range(rng.randint(1, 30))).encode()
        queries.append((kind, urllib.parse.quote_from_bytes(raw, safe="")))
    return queries


def web_search_queries(times: int, row: Row) -> None:
    """`times` searches of /web (the real server, a cookie got from its one-time link) with
    queries that are not UTF-8, empty, only punctuation, search-syntax fragments, very long
    (past the HTTP server's line limit too), random bytes and random characters."""
    from chatcli.engine.webview import WebView

    env = scratch_env()
    saved = Conversation(Settings.load(env), journal=True)
    saved.history += [Message("user", "Where do herons nest?"), Message("assistant", "By the north pond.")]
    sessions.save(saved, "heron-notes")
    view = WebView(Conversation(Settings.load(env)))
    rng = random.Random(61)
    statuses: Counter[int] = Counter()
    reasons: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    reasonless = found_after = hits = 0
    try:
        connection = http.client.HTTPConnection("127.0.0.1", view.port, timeout=10)
        connection.request("GET", view.link().split(str(view.port), 1)[1])
        response = connection.getresponse()
        response.read()
        connection.close()
        cookie = (response.getheader("Set-Cookie") or "").split(";")[0]

        def get(query: str) -> tuple[int, bytes]:
            connection = http.client.HTTPConnection("127.0.0.1", view.port, timeout=60)
            try:
                connection.request("GET", "/api/search?q=" + query, headers={"Cookie": cookie})
                response = connection.getresponse()
                return response.status, response.read()
            finally:
                connection.close()

        for kind, query in _web_queries(rng, times):
            status, data = get(query)
            statuses[status] += 1
            try:
                answer = json.loads(data)
            except ValueError:
                answer = None
            error = answer.get("error") if isinstance(answer, dict) else None
            if status == 500:
                failures[f"{kind}: {error}"] += 1
            elif status == 400:
                if isinstance(error, str) and error and "\n" not in error:
                    reasons[error] += 1
                else:
                    reasonless += 1
            elif status == 200:
                hits += bool(isinstance(answer, dict) and answer.get("groups"))
        status, data = get("h%C3%A9rons")  # a good query still finds
        found_after = status == 200 and "heron-notes" in data.decode("utf-8", "replace")
    finally:
        view.stop()
    others = ", ".join(f"{count:,} × {status}" + (" from the HTTP layer (a request line past its 65,536 bytes)"
                                                  if status == 414 else "")
                       for status, count in sorted(statuses.items()) if status not in (200, 400, 500))
    said = "; ".join(f"\"{text}\" ({count:,})" for text, count in reasons.most_common())
    row("/web search (the real server, signed-in) with queries not UTF-8, empty, only punctuation or emoji, NUL, "
        "search-syntax fragments (NEAR(, AND, quotes, *, ^, col:), very long (to 90,000 characters), random bytes "
        "and random characters", times,
        f"{statuses[500]:,} HTTP 500s{' (' + '; '.join(failures) + ')' if failures else ''}; "
        f"{'a good query still finds its session' if found_after else 'a good query no longer finds its session'}",
        f"{statuses[400]:,} refused with a reason in one line ({said}; {reasonless} without a reason); "
        f"{statuses[200]:,} answered ({hits:,} with hits, the rest finding nothing)"
        + (f"; {others}" if others else ""))


# -- what many unauthenticated requests leave in $CHATCLI_HOME/logs -----------------------------------
def _log_cap(env: dict[str, str]) -> tuple[int | None, int | None]:
    """The size past which chatcli rotates a server's log, and how many older copies it keeps,
    where this chatcli has them (None: it has not): the daemon's own settings first, then the
    constants of chatcli.engine.upkeep, chatcli.store.home and chatcli.config.settings."""
    import importlib

    modules = []
    for name in ("chatcli.engine.upkeep", "chatcli.store.home", "chatcli.config.settings"):
        try:
            modules.append(importlib.import_module(name))
        except ImportError:
            pass

    def first(names: tuple[str, ...], *where) -> int | None:
        for holder in where:
            for attribute in names:
                value = getattr(holder, attribute, None)
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    return value
        return None

    cap = first(("log_max_size", "log_max_bytes"), Settings.load(env))
    cap = cap or first(("LOG_MAX_BYTES", "LOG_MAX_SIZE", "MAX_LOG_BYTES", "MAX_LOG_SIZE", "DEFAULT_LOG_MAX_SIZE",
                        "DEFAULT_LOG_MAX_BYTES"), *modules)
    backups = first(("LOG_BACKUPS", "LOG_BACKUP_COUNT", "MAX_LOG_BACKUPS"), *modules)
    return cap, backups


def log_growth(times: int, row: Row, server: FakeModelServer) -> None:
    """`times` requests to the webhook from 8 clients at once, none authentic (unsigned, a wrong
    signature, a timestamp an hour old), each one line in gateway.log; then every file of
    $CHATCLI_HOME/logs measured, rotated copies counted, against chatcli's cap if it has one."""
    with _quiet_resets(server):
        _log_growth(times, row, server)


def _log_growth(times: int, row: Row, server: FakeModelServer) -> None:
    env = _gateway_env(server, ["alice"])
    daemon = Daemon(env)
    statuses: Counter[int] = Counter()
    lock = threading.Lock()
    started = time.monotonic()

    def client(start: int) -> None:
        local: Counter[int] = Counter()
        for i in range(start, times, 8):
            body = json.dumps({"sender": "alice", "text": "hi", "id": f"x-{i}"}).encode()
            how = i % 3
            headers = ({} if how == 0 else
                       {"X-Chatcli-Timestamp": str(int(time.time())), "X-Chatcli-Signature": "sha256=" + "0" * 64}
                       if how == 1 else _signed(body, time.time() - 3600))
            head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
            request = f"POST /message HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n{head}\r\n"
            try:  # a bare client, so that the daemon, not this process, is what limits the rate
                with socket.create_connection(("127.0.0.1", daemon.port), timeout=30) as sock:
                    sock.sendall(request.encode() + body)
                    answer = b""
                    while chunk := sock.recv(65536):  # a refusal closes the connection
                        answer += chunk
                status = int(answer.split(b" ", 2)[1])
            except (OSError, IndexError, ValueError):
                status = 0
            local[status] += 1
        with lock:
            statuses.update(local)

    try:
        threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - started
        answered = daemon.say("alice", "still here?", "end-1") == (200, {"reply": "You said: still here?"})
    finally:
        stderr = daemon.stop()
    logs = Path(env["CHATCLI_HOME"]) / "logs"
    files = sorted(p for p in logs.iterdir() if p.is_file()) if logs.exists() else []
    sizes = {p.name: p.stat().st_size for p in files}
    copies = [name for name in sizes if re.fullmatch(r".+\.log\.\d+", name)]
    open_to_others = sum(1 for p in files if p.stat().st_mode & 0o077)
    refusals = sum(p.read_text(errors="replace").count("webhook: refused a request") for p in files)
    biggest = max(sizes, key=sizes.get) if sizes else "none"
    total = sum(sizes.values())
    cap, keep = _log_cap(env)
    per_line = total / refusals if refusals else 0
    kept = (f"every one of the {times:,} refusal lines kept" if refusals == times else
            f"{refusals:,} of {times:,} refusal lines kept" + (", the oldest gone with the oldest copy"
                                                             if keep is not None and len(copies) >= keep else ""))
    if cap is not None:
        over = sum(1 for size in sizes.values() if size > cap)
        bound = f", at most {_size(cap * (keep + 1))} with {keep} copies" if keep is not None else ""
        capped = f"{_plural(over, 'file')} over the {_size(cap)} cap; largest {biggest} {_size(sizes.get(biggest, 0))}"
        grown = f"all {len(files)} files {_size(total)}{bound}"
    else:
        capped = f"no log size cap found in chatcli; largest {biggest} {_size(sizes.get(biggest, 0))}"
        grown = f"all {len(files)} files {_size(total)}, growing one line per request"
    row(f"{times:,} unauthenticated webhook requests (unsigned, a wrong signature, a timestamp an hour old) from 8 "
        f"clients at once, then every file of $CHATCLI_HOME/logs measured", times,
        f"{capped}; {grown} ({_plural(len(copies), 'rotated copy', 'rotated copies')}); {kept}; {open_to_others} "
        f"files readable by others; {statuses[0]:,} requests unanswered; {stderr.count('Traceback')} tracebacks",
        f"{', '.join(f'{c:,} × {s}' for s, c in sorted(statuses.items()) if s)} in {elapsed:.0f} s; one line of "
        f"~{per_line:.0f} bytes per refusal in gateway.log, \"webhook: refused a request: …\"; an allowed sender is "
        f"{'still answered' if answered else 'no longer answered'} afterwards")


def row(fault: str, times: int, lost: str, seen: str) -> None:
    print(f"| {fault} | {times:,} | {lost} | {seen} |", flush=True)


def main() -> None:
    print("| fault | times | lost | what the user sees |\n|---|---:|---|---|", flush=True)
    with FakeModelServer("openai") as server:
        approval_race(n(300), row)
        webhook_hostile(n(300), row, server)
        web_search_queries(n(500), row)
        log_growth(n(36_000), row, server)  # past the cap four times over at 1 MiB: the oldest copy goes


if __name__ == "__main__":
    main()
