"""`chatcli gateway --webhook`: the real daemon over HTTP on 127.0.0.1, the model faked on its
own port. A sender attaches a session, the terminal sees the turn, kill -9 and a restart keep
the binding, strangers are refused once, and a bad signature changes nothing."""

from __future__ import annotations

import http.client
import json
import re
import signal
import socket
import sqlite3
import struct
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from conftest import CHATCLI, run_chatcli, wait_until

from chatcli.gateway.webhook import signature
from chatcli.store.home import Home

SECRET = "a shared secret"
WEBHOOK = ("--webhook", "127.0.0.1:0")


class Daemon:
    """A real `chatcli gateway` with the adapter `flags` (none: those gateway.toml names), once
    it says it is ready."""

    def __init__(self, env: dict[str, str], *flags: str, ready: str = r"listening on (http://\S+)") -> None:
        self.process = subprocess.Popen([CHATCLI, "gateway", *flags], env=env,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        text=True)
        line = self.process.stderr.readline()
        found = re.search(ready, line)
        assert found, line + self.process.stderr.read()
        self.url = found.group(1) if found.groups() else None

    def post(self, payload: dict, *, secret: str = SECRET, stamp: float | None = None) -> tuple[int, dict]:
        body = json.dumps(payload).encode()
        timestamp = str(int(stamp if stamp is not None else time.time()))
        request = urllib.request.Request(self.url, data=body, method="POST", headers={
            "Content-Type": "application/json", "X-Chatcli-Timestamp": timestamp,
            "X-Chatcli-Signature": signature(secret, timestamp, body)})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(20)


def terminal_sees(env: dict[str, str], model, turn: list[str]) -> None:
    """`chatcli --session projeto-x -p "and?"` sends the turn the channel made before its own."""
    result = run_chatcli("--session", "projeto-x", "-p", "and?", env=env)
    assert result.returncode == 0, result.stderr
    assert [m["content"] for m in model.requests[-1].body["messages"]] == [*turn, "and?"]


@pytest.fixture
def gateway_env(openai_env):
    openai_env.update(CHATCLI_GATEWAY_ALLOW="webhook:alice", CHATCLI_GATEWAY_WEBHOOK_SECRET=SECRET)
    return openai_env


def say(daemon: Daemon, text: str, sender: str = "alice", id: str | None = None) -> tuple[int, dict]:
    return daemon.post({"sender": sender, "text": text, "id": id or f"m-{time.monotonic_ns()}"})


def say_meanwhile(daemon: Daemon, text: str, id: str) -> tuple[threading.Thread, dict]:
    """`say` in a thread of its own: {"answer": …}, or {"error": …} when the daemon dies under it."""
    said: dict = {}

    def ask() -> None:
        try:
            said["answer"] = say(daemon, text, id=id)
        except OSError as exc:
            said["error"] = exc

    asking = threading.Thread(target=ask)
    asking.start()
    return asking, said


def test_attach_ask_kill_restart_and_the_terminal_sees_the_turn(gateway_env, openai_server):
    daemon = Daemon(gateway_env, *WEBHOOK)
    try:
        assert say(daemon, "/session attach projeto-x") == (
            200, {"reply": "Attached to session 'projeto-x' (0 messages; created)."})
        assert say(daemon, "the deploy freezes on Friday") == (200, {"reply": "You said: the deploy freezes on Friday"})
        daemon.kill()
        daemon = Daemon(gateway_env, *WEBHOOK)
        status, answer = say(daemon, "/session status")  # the restarted daemon binds the sender again
        assert status == 200 and answer["reply"].splitlines()[0] == "[Attached to session 'projeto-x' (2 messages).]"
        assert answer["reply"].splitlines()[1].startswith("Bound to session 'projeto-x' (2 messages")
    finally:
        daemon.stop()
    terminal_sees(gateway_env, openai_server, ["the deploy freezes on Friday", "You said: the deploy freezes on Friday"])


def test_strangers_bad_signatures_and_replays_change_nothing(gateway_env, openai_server):
    home = Path(gateway_env["CHATCLI_HOME"])
    daemon = Daemon(gateway_env, *WEBHOOK)
    try:
        assert say(daemon, "hello", sender="mallory") == (
            200, {"reply": "This chatcli does not answer you: your id (webhook:mallory) is not on its allow-list.",
                  "refused": True})
        assert say(daemon, "hello again", sender="mallory") == (200, {"reply": None, "duplicate": False})
        before = sorted(p.name for p in (home / "sessions").iterdir()) if (home / "sessions").exists() else []
        status, answer = daemon.post({"sender": "alice", "text": "/session attach stolen", "id": "x-1"},
                                     secret="wrong")
        assert status == 401 and answer == {"error": "the signature does not match"}
        status, answer = daemon.post({"sender": "alice", "text": "hi", "id": "x-2"}, stamp=time.time() - 3600)
        assert status == 401 and "outside the 300 s window" in answer["error"]
        after = sorted(p.name for p in (home / "sessions").iterdir()) if (home / "sessions").exists() else []
        assert after == before and openai_server.requests == []  # nothing written, the model never asked
        assert say(daemon, "once", id="m-1") == (200, {"reply": "You said: once"})
        assert say(daemon, "once", id="m-1") == (200, {"reply": None, "duplicate": True})
        assert len(openai_server.requests) == 1
    finally:
        daemon.stop()


def session_texts(env: dict[str, str], name: str) -> list[str]:
    data = json.loads((Path(env["CHATCLI_HOME"]) / "sessions" / f"{name}.json").read_text())
    return [m["content"] for m in data["chat_history"] if m["role"] != "system"]


def test_a_message_a_kill_cut_short_is_answered_when_sent_again_and_only_once(gateway_env, openai_server):
    daemon = Daemon(gateway_env, *WEBHOOK)
    try:
        say(daemon, "/session attach projeto-x")
        openai_server.reply("The freeze ", "starts ", "Friday.", delay=1.5)
        asking, first = say_meanwhile(daemon, "when does the deploy freeze?", "m-7")
        openai_server.wait_for_requests(1)
        status, answer = say(daemon, "when does the deploy freeze?", id="m-7")  # the client retries too soon
        assert status == 409 and answer["busy"] is True
        daemon.kill()
        asking.join(10)
        assert "error" in first
        daemon = Daemon(gateway_env, *WEBHOOK)
        assert say(daemon, "when does the deploy freeze?", id="m-7") == (
            200, {"reply": "[Attached to session 'projeto-x' (0 messages).]\nYou said: when does the deploy freeze?"})
        assert say(daemon, "when does the deploy freeze?", id="m-7") == (200, {"reply": None, "duplicate": True})
    finally:
        daemon.stop()
    assert session_texts(gateway_env, "projeto-x") == ["when does the deploy freeze?",
                                                       "You said: when does the deploy freeze?"]


def raw_post(daemon: Daemon, headers: dict[str, str], body: bytes) -> tuple[int, dict, str | None]:
    """A request as a client may send it, headers with any bytes included."""
    url = urllib.parse.urlsplit(daemon.url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    try:
        connection.putrequest("POST", url.path)
        for name, value in {"Content-Length": str(len(body)), **headers}.items():
            connection.putheader(name, value)
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, json.loads(response.read()), response.getheader("Connection")
    finally:
        connection.close()


def test_odd_signatures_and_timestamps_are_refused_in_one_line(gateway_env, openai_server):
    daemon = Daemon(gateway_env, *WEBHOOK)
    try:
        body = json.dumps({"sender": "alice", "text": "hi", "id": "x-1"}).encode()
        stamp = str(int(time.time()))
        status, answer, connection = raw_post(daemon, {"X-Chatcli-Timestamp": stamp,
                                                       "X-Chatcli-Signature": "sha256=\xe9"}, body)
        assert (status, answer, connection) == (401, {"error": "the signature does not match"}, "close")
        for odd in ("nan", "inf", "1e400"):
            status, answer, _ = raw_post(daemon, {"X-Chatcli-Timestamp": odd,
                                                  "X-Chatcli-Signature": signature(SECRET, odd, body)}, body)
            assert status == 401 and "outside the 300 s window" in answer["error"], odd
        for sender, text in (("bob\nINFO forged log line", "hi"), ("x" * 300, "hi"), ("alice", "   ")):
            status, answer = daemon.post({"sender": sender, "text": text, "id": "x-2"})
            assert status == 400 and ("'sender' must be" in answer["error"] or answer["error"] == "'text' is empty")
        assert openai_server.requests == []
    finally:
        daemon.stop()
    assert "Traceback" not in daemon.process.stderr.read()


def signed_headers(body: bytes) -> dict[str, str]:
    stamp = str(int(time.time()))
    return {"X-Chatcli-Timestamp": stamp, "X-Chatcli-Signature": signature(SECRET, stamp, body)}


def test_a_body_nested_too_deeply_is_refused_in_one_line_and_its_id_is_not_spent(gateway_env, openai_server):
    daemon = Daemon(gateway_env, *WEBHOOK)
    try:
        body = b'{"sender": "alice", "text": "hi", "id": "d-1", "more": ' + b"[" * 100_000
        status, answer, connection = raw_post(daemon, signed_headers(body), body)
        assert (status, answer, connection) == (400, {"error": "the body is not JSON (it is nested too deeply)"},
                                                "close")
        assert openai_server.requests == []
        assert say(daemon, "hi", id="d-1") == (200, {"reply": "You said: hi"})  # the id was not spent
    finally:
        daemon.stop()
    assert daemon.process.stderr.read() == ""


def test_a_lone_surrogate_in_a_body_is_refused_in_one_line_and_the_sender_goes_on(gateway_env, openai_server):
    """A text holding "\\ud800" (no character, and nothing UTF-8 can hold) was answered, then
    could not be written: every later message of that sender was a 500 until a restart."""
    daemon = Daemon(gateway_env, *WEBHOOK)
    try:
        assert say(daemon, "first", id="s-1") == (200, {"reply": "You said: first"})
        for field in ("text", "id", "name"):
            fields = {"sender": "alice", "text": "hi", "id": f"s-{field}", "name": "Alice"}
            fields[field] = "\ud800 " + fields[field]
            body = json.dumps(fields).encode()  # ensure_ascii: the escape, as a client would send it
            status, answer, _connection = raw_post(daemon, signed_headers(body), body)
            assert status == 400 and "lone UTF-16 surrogate" in answer["error"], answer
        assert say(daemon, "second", id="s-2") == (200, {"reply": "You said: second"})
    finally:
        daemon.stop()
    assert daemon.process.stderr.read() == ""


def reset(sock) -> None:
    """Close `sock` as a client that goes away does: at once, with a reset."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def test_a_client_that_goes_away_is_one_quiet_line_in_the_log(gateway_env, openai_server):
    log = Path(gateway_env["CHATCLI_HOME"]) / "logs" / "gateway.log"
    daemon = Daemon(gateway_env, *WEBHOOK)
    url = urllib.parse.urlsplit(daemon.url)
    try:
        body = json.dumps({"sender": "alice", "text": "slow", "id": "g-1"}).encode()
        head = "".join(f"{name}: {value}\r\n" for name, value in signed_headers(body).items())
        openai_server.reply("a slow ", "answer", delay=1.0)
        gone = socket.create_connection((url.hostname, url.port), timeout=10)  # before the answer
        gone.sendall(f"POST /message HTTP/1.1\r\nContent-Length: {len(body)}\r\n{head}\r\n".encode() + body)
        openai_server.wait_for_requests(1)
        reset(gone)
        cut = socket.create_connection((url.hostname, url.port), timeout=10)  # in the middle of its body
        cut.sendall(f"POST /message HTTP/1.1\r\nContent-Length: {len(body)}\r\n{head}\r\n".encode() + body[:10])
        time.sleep(0.2)
        reset(cut)
        assert wait_until(lambda: log.read_text().count("closed its connection") == 2), log.read_text()
        assert say(daemon, "still here") == (200, {"reply": "You said: still here"})
    finally:
        daemon.stop()
    assert daemon.process.stderr.read() == ""
    lines = [line for line in log.read_text().splitlines() if "closed its connection" in line]
    assert all(line.endswith("webhook: a client closed its connection before its answer (ConnectionResetError)")
               or line.endswith("webhook: a client closed its connection before its answer (BrokenPipeError)")
               for line in lines), lines


def test_an_allow_list_entry_that_admits_nobody_stops_the_daemon_in_one_line(gateway_env):
    gateway_env["CHATCLI_GATEWAY_ALLOW"] = "webhook:alice, bob"
    result = run_chatcli("gateway", *WEBHOOK, env=gateway_env)
    assert result.returncode == 2
    assert result.stderr.startswith("chatcli: error: allow-list entry 'bob' (CHATCLI_GATEWAY_ALLOW, or allow in ")
    assert len(result.stderr.splitlines()) == 1


def test_a_hub_chatcli_cannot_use_stops_the_daemon_in_one_line(gateway_env):
    path = Path(gateway_env["CHATCLI_HOME"]) / "hub.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version=9")
    db.close()
    before = path.read_bytes()
    result = run_chatcli("gateway", *WEBHOOK, env=gateway_env)
    assert result.returncode != 0
    assert result.stderr == f"chatcli: error: {path} was written by a newer chatcli (schema 9); it is left as it is\n"
    assert path.read_bytes() == before


def test_the_daemon_refuses_to_start_without_its_secret(openai_env):
    result = run_chatcli("gateway", "--webhook", "127.0.0.1:0", env=openai_env)
    assert result.returncode == 2
    assert result.stderr == (f"chatcli: error: CHATCLI_GATEWAY_WEBHOOK_SECRET is not set (nor webhook.secret in "
                             f"{config_file(openai_env)}): the webhook adapter cannot check its requests' signatures, "
                             "so it does not start\n")


def telegram_daemon(env: dict[str, str]) -> Daemon:
    return Daemon(env, "--telegram", ready="telegram polling")


@pytest.fixture
def telegram(openai_env):
    from fakes import FakeTelegram

    with FakeTelegram() as fake:
        openai_env.update(CHATCLI_GATEWAY_ALLOW="telegram:42", TELEGRAM_BOT_TOKEN="123:test-token",
                          TELEGRAM_API_URL=fake.base_url)
        yield fake


def test_telegram_attach_ask_kill_restart(openai_env, openai_server, telegram):
    daemon = telegram_daemon(openai_env)
    try:
        telegram.say(42, "/session attach projeto-x")
        telegram.wait_for(42, lambda texts: "Attached to session 'projeto-x' (0 messages; created)." in texts)
        openai_server.reply("The freeze ", "starts Friday.", delay=0.6)  # streams: the answer is edited in
        telegram.say(42, "when does the deploy freeze?")
        telegram.wait_for(42, lambda texts: texts[-1:] == ["The freeze starts Friday."])
        assert any(call == "editMessageText" for call, _ in telegram.calls)
        daemon.kill()
        daemon = telegram_daemon(openai_env)
        telegram.say(42, "/session status")
        telegram.wait_for(42, lambda texts: any("Bound to session 'projeto-x' (2 messages" in t for t in texts))
        # Unlisted: one refusal, then silence; the model never hears of it.
        asked = len(openai_server.requests)
        telegram.say(666, "hello?")
        telegram.say(666, "hello??")
        telegram.wait_for(666, lambda texts: texts == ["This chatcli does not answer you: your id (telegram:666) is "
                                                       "not on its allow-list."])
        time.sleep(1)
        assert len(telegram.texts(666)) == 1 and len(openai_server.requests) == asked
    finally:
        daemon.stop()
    terminal_sees(openai_env, openai_server, ["when does the deploy freeze?", "The freeze starts Friday."])
    # Every update was answered once, the ones served again after the kill included.
    assert telegram.texts(42).count("Attached to session 'projeto-x' (0 messages; created).") == 1


def test_a_telegram_message_a_kill_cut_short_is_answered_after_the_restart(openai_env, openai_server, telegram):
    daemon = telegram_daemon(openai_env)
    try:
        telegram.say(42, "/session attach projeto-x")
        telegram.wait_for(42, lambda texts: "Attached to session 'projeto-x' (0 messages; created)." in texts)
        openai_server.reply("The freeze ", "starts ", "Friday.", delay=2.0)
        telegram.say(42, "when does the deploy freeze?")
        telegram.wait_for(42, lambda texts: texts[-1:] == ["The freeze "])  # its first words, then the kill
        daemon.kill()
        daemon = telegram_daemon(openai_env)  # Telegram serves the unconfirmed update again
        telegram.wait_for(42, lambda texts: texts[-1].endswith("You said: when does the deploy freeze?"))
    finally:
        daemon.stop()
    assert session_texts(openai_env, "projeto-x") == ["when does the deploy freeze?",
                                                      "You said: when does the deploy freeze?"]


def test_telegram_answers_private_chats_only_and_never_an_edit(openai_env, openai_server, telegram):
    daemon = telegram_daemon(openai_env)
    try:
        telegram.say(42, "/session list", chat=-100)  # in a group: everyone there would read the answer
        telegram.say(42, "an edited line", kind="edited_message")
        telegram.say(42, "ping")
        telegram.wait_for(42, lambda texts: texts == ["You said: ping"])
        assert telegram.texts(-100) == []
        assert [seen.body["messages"][-1]["content"] for seen in openai_server.requests] == ["ping"]
    finally:
        daemon.stop()


@pytest.mark.parametrize("service", ["telegram", "slack"])
def test_when_the_last_edit_fails_the_answer_comes_as_a_new_message(openai_env, openai_server, request, service):
    fake = request.getfixturevalue(service)
    where, sender = (42, 42) if service == "telegram" else ("D1", "U42")
    daemon = telegram_daemon(openai_env) if service == "telegram" else slack_daemon(openai_env)
    try:
        openai_server.reply("The freeze ", "starts Friday.", delay=1.5)
        fake.failing.add("editMessageText" if service == "telegram" else "chat.update")  # rate limited
        fake.say(sender, "when does the deploy freeze?")
        fake.wait_for(where, lambda texts: texts == ["The freeze ", "The freeze starts Friday."])
    finally:
        daemon.stop()


def test_the_telegram_adapter_refuses_to_start_without_its_token(openai_env):
    result = run_chatcli("gateway", "--telegram", env=openai_env)
    assert result.returncode == 2
    assert result.stderr == (f"chatcli: error: TELEGRAM_BOT_TOKEN is not set (nor telegram.token in "
                             f"{config_file(openai_env)}): the Telegram adapter does not start\n")


@pytest.fixture
def slack(openai_env):
    from fakes import FakeSlack

    with FakeSlack() as fake:
        openai_env.update(CHATCLI_GATEWAY_ALLOW="slack:U42", SLACK_BOT_TOKEN="xoxb-test", SLACK_APP_TOKEN="xapp-test",
                          SLACK_API_URL=fake.base_url)
        yield fake


def refused(env: dict[str, str], channel: str, sender: str) -> int:
    """How many messages of this sender hub.db counts as refused."""
    hub = Home(Path(env["CHATCLI_HOME"])).hub()
    try:
        principal = hub.get(channel, sender)
        return principal.refused if principal else 0
    finally:
        hub.close()


def slack_daemon(env: dict[str, str]) -> Daemon:
    return Daemon(env, "--slack", ready="slack connected")


def test_slack_attach_ask_kill_restart_and_the_terminal_sees_it(openai_env, openai_server, slack):
    daemon = slack_daemon(openai_env)
    try:
        slack.say("U42", "/session attach projeto-x")
        slack.wait_for("D1", lambda texts: "Attached to session 'projeto-x' (0 messages; created)." in texts)
        openai_server.reply("The freeze ", "starts Friday.", delay=0.6)
        slack.say("U42", "when does the deploy freeze?")
        slack.wait_for("D1", lambda texts: texts[-1:] == ["The freeze starts Friday."])
        assert any(call == "chat.update" for call, _ in slack.calls)  # streamed by edits
        slack.say("U666", "hello?", channel="D2")
        slack.say("U666", "hello??", channel="D2")
        slack.wait_for("D2", lambda texts: texts == ["This chatcli does not answer you: your id (slack:U666) is not "
                                                     "on its allow-list."])
        daemon.kill()
        daemon = slack_daemon(openai_env)  # a new Socket Mode connection, the same hub.db
        slack.say("U42", "/session status")
        slack.wait_for("D1", lambda texts: texts[-1].startswith("[Attached to session 'projeto-x' (2 messages).]\n"
                                                                "Bound to session 'projeto-x' (2 messages"))
        slack.say("U666", "still me", channel="D2")  # refused once, across the restart too
        assert wait_until(lambda: refused(openai_env, "slack", "U666") == 3)
    finally:
        daemon.stop()
    assert slack.texts("D2") == ["This chatcli does not answer you: your id (slack:U666) is not on its allow-list."]
    terminal_sees(openai_env, openai_server, ["when does the deploy freeze?", "The freeze starts Friday."])


def test_a_slack_message_a_kill_cut_short_is_answered_when_slack_sends_it_again(openai_env, openai_server, slack):
    daemon = slack_daemon(openai_env)
    try:
        slack.say("U42", "/session attach projeto-x")
        slack.wait_for("D1", lambda texts: "Attached to session 'projeto-x' (0 messages; created)." in texts)
        openai_server.reply("The freeze ", "starts ", "Friday.", delay=2.0)
        slack.say("U42", "when does the deploy freeze?")
        slack.wait_for("D1", lambda texts: texts[-1:] == ["The freeze "])
        daemon.kill()  # the event was never acknowledged
        in_channel = slack.say("U42", "/session list", channel="C1", channel_type="channel")  # not answered there
        daemon = slack_daemon(openai_env)
        slack.wait_for("D1", lambda texts: texts[-1].endswith("You said: when does the deploy freeze?"))
        assert wait_until(lambda: in_channel in slack.acked)
    finally:
        daemon.stop()
    assert slack.texts("C1") == []
    assert session_texts(openai_env, "projeto-x") == ["when does the deploy freeze?",
                                                      "You said: when does the deploy freeze?"]


def test_the_slack_adapter_refuses_to_start_without_its_tokens(openai_env):
    result = run_chatcli("gateway", "--slack", env=openai_env)
    assert result.returncode == 2
    assert result.stderr == (f"chatcli: error: SLACK_BOT_TOKEN and SLACK_APP_TOKEN are not set (nor slack.bot_token "
                             f"or slack.app_token in {config_file(openai_env)}): the Slack adapter does not start\n")


# -- $CHATCLI_HOME/gateway.toml -------------------------------------------------------------------
def config_file(env: dict[str, str]) -> Path:
    return Path(env["CHATCLI_HOME"]) / "gateway.toml"


def write_config(env: dict[str, str], text: str, mode: int = 0o600) -> Path:
    path = config_file(env)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def test_gateway_toml_runs_the_adapters_it_names_and_a_set_variable_wins(openai_env, openai_server, telegram):
    for var in ("CHATCLI_GATEWAY_ALLOW", "TELEGRAM_BOT_TOKEN", "TELEGRAM_API_URL"):
        openai_env.pop(var)
    openai_env["CHATCLI_GATEWAY_WEBHOOK_SECRET"] = SECRET  # wins over the file's
    write_config(openai_env, f'''
allow = ["webhook:alice", "telegram:42"]
[webhook]
listen = "127.0.0.1:0"
secret = "an old secret"
[telegram]
token = "123:test-token"
api_url = "{telegram.base_url}"
''')
    daemon = Daemon(openai_env)  # no adapter flag: both of the file's run
    try:
        assert say(daemon, "hello") == (200, {"reply": "You said: hello"})
        status, _answer = daemon.post({"sender": "alice", "text": "hi", "id": "m-old"}, secret="an old secret")
        assert status == 401
        telegram.say(42, "and from telegram")
        telegram.wait_for(42, lambda texts: texts[-1:] == ["You said: and from telegram"])
    finally:
        daemon.stop()


@pytest.mark.parametrize("text, mode, error", [
    ('[telegram]\ntoken = "123:abc"\n', 0o644, "holds tokens but others may read it (mode 0644): chmod 600 "),
    ('allow = ["telegram:666"]\n[telegram]\napi_url = "http://elsewhere"\n', 0o666,
     "may be changed by others (mode 0666): chmod 600 "),
    ('[telegram]\ntokn = "123:abc"\n', 0o600, "unknown key telegram.tokn (known: allow, webhook.listen, "),
    ('[telegram\ntoken = "123:abc"\n', 0o600, "not valid TOML (Expected ']' at the end of a table declaration "
                                              "(at line 1, column 10))"),
    ('allow = 42\n[slack]\n', 0o600, 'allow must be a list of "channel:sender" strings'),
])
def test_a_gateway_toml_chatcli_cannot_use_is_refused_in_one_line_and_left_alone(openai_env, text, mode, error):
    path = write_config(openai_env, text, mode)
    result = run_chatcli("gateway", env=openai_env)
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1 and error in result.stderr, result.stderr
    assert path.read_text() == text and path.stat().st_mode & 0o777 == mode


# -- tokens are never said, and a token refused at start is one line ----------------------------------
def said_nowhere(token: str, env: dict[str, str], *outputs: str) -> None:
    """`token` is in none of `outputs` and not in the daemon's log."""
    log = Path(env["CHATCLI_HOME"]) / "logs" / "gateway.log"
    for text in (*outputs, log.read_text() if log.exists() else ""):
        assert token not in text, text


def test_a_telegram_token_telegram_refuses_is_one_line_that_does_not_say_it(openai_env, telegram):
    openai_env["TELEGRAM_BOT_TOKEN"] = token = "999:wrong-token"
    telegram.failure = (401, {"ok": False, "error_code": 401, "description": "Unauthorized"})
    telegram.failing.add("getMe")
    result = run_chatcli("gateway", "--telegram", env=openai_env)
    assert result.returncode == 2
    assert result.stderr == "chatcli: error: Telegram refused TELEGRAM_BOT_TOKEN (Unauthorized); check it\n"
    assert "polling" not in result.stderr and "internal error" not in result.stderr
    said_nowhere(token, openai_env, result.stdout, result.stderr)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_telegram_api_that_cannot_be_reached_is_one_line_at_start(openai_env):
    port = closed_port()
    openai_env.update(CHATCLI_GATEWAY_ALLOW="telegram:42", TELEGRAM_BOT_TOKEN="999:wrong-token",
                      TELEGRAM_API_URL=f"http://127.0.0.1:{port}")
    result = run_chatcli("gateway", "--telegram", env=openai_env)
    assert result.returncode == 2
    assert result.stderr.startswith(f"chatcli: error: cannot reach the Telegram Bot API at 127.0.0.1:{port} to check "
                                    "TELEGRAM_BOT_TOKEN: ")
    assert result.stderr.rstrip().endswith("; check the network, or TELEGRAM_API_URL") and "httpx" not in result.stderr
    assert len(result.stderr.splitlines()) == 1 and "polling" not in result.stderr
    said_nowhere("999:wrong-token", openai_env, result.stdout, result.stderr)


def test_a_slack_api_that_cannot_be_reached_is_one_line_naming_the_settings(openai_env):
    port = closed_port()
    openai_env.update(CHATCLI_GATEWAY_ALLOW="slack:U42", SLACK_BOT_TOKEN="xoxb-secret", SLACK_APP_TOKEN="xapp-secret",
                      SLACK_API_URL=f"http://127.0.0.1:{port}")
    result = run_chatcli("gateway", "--slack", env=openai_env)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(f"chatcli: error: cannot reach the Slack API at 127.0.0.1:{port} to check SLACK_BOT_TOKEN: ")
    assert line.endswith("; check the network, or SLACK_API_URL")
    said_nowhere("xoxb-secret", openai_env, result.stdout, result.stderr)


def test_a_token_in_a_failure_logged_while_serving_is_redacted_in_the_log(openai_env, telegram):
    log = Path(openai_env["CHATCLI_HOME"]) / "logs" / "gateway.log"
    # A proxy before the Bot API that quotes the path it could not serve: the path holds the token.
    telegram.failure = (502, {"ok": False, "error_code": 502,
                              "description": "Bad Gateway: no upstream for /bot123:test-token/getUpdates"})
    telegram.failing.add("getUpdates")
    daemon = telegram_daemon(openai_env)
    try:
        assert wait_until(lambda: log.exists() and "getUpdates failed" in log.read_text())
        telegram.failing.clear()
        telegram.say(42, "ping")
        telegram.wait_for(42, lambda texts: texts == ["You said: ping"])
    finally:
        daemon.stop()
    assert "no upstream for /bot[REDACTED]/getUpdates" in log.read_text()
    said_nowhere("123:test-token", openai_env, daemon.process.stderr.read())


@pytest.mark.parametrize("method, setting", [("auth.test", "SLACK_BOT_TOKEN"),
                                             ("apps.connections.open", "SLACK_APP_TOKEN")])
def test_a_slack_token_slack_refuses_is_one_line_that_does_not_say_it(openai_env, slack, method, setting):
    openai_env.update(SLACK_BOT_TOKEN="xoxb-wrong", SLACK_APP_TOKEN="xapp-wrong")
    slack.failure = (200, {"ok": False, "error": "invalid_auth"})
    slack.failing.add(method)
    result = run_chatcli("gateway", "--slack", env=openai_env)
    assert result.returncode == 2
    assert result.stderr == f"chatcli: error: Slack refused {setting} (invalid_auth); check it\n"
    said_nowhere("xoxb-wrong", openai_env, result.stdout, result.stderr)
    said_nowhere("xapp-wrong", openai_env, result.stdout, result.stderr)


def test_a_configured_secret_is_redacted_whole_and_as_a_url_writes_it():
    from chatcli.core.redact import redact_secrets

    text = "POST /bot123:abc-def/getMe failed; retried /bot123%3Aabc-def/getMe; 123:abc alone too"
    assert redact_secrets(text, ["123:abc", "123:abc-def", ""]) == (
        "POST /bot[REDACTED]/getMe failed; retried /bot[REDACTED]/getMe; [REDACTED] alone too")
    assert redact_secrets("nothing secret here", ["", "123:abc"]) == "nothing secret here"


def test_a_short_secret_is_redacted_where_it_stands_alone_not_inside_words():
    from chatcli.core.redact import redact_secrets

    assert redact_secrets("Conversation saved; the code v refused; (v)", ["v"]) == (
        "Conversation saved; the code [REDACTED] refused; ([REDACTED])")


def test_two_replicas_on_one_server_answer_each_message_once_and_take_over_a_dead_ones(
        gateway_env, openai_server, pg_dsn, tmp_path):
    """Two `chatcli gateway` replicas behind a load balancer: two hosts (a CHATCLI_HOME each), one
    PostgreSQL store. A message delivered to both is answered by one; the binding one made holds on
    the other; a message a killed replica was answering is answered by the other when it comes
    again."""
    envs = [dict(gateway_env, CHATCLI_STORE=pg_dsn, CHATCLI_HOME=str(tmp_path / host)) for host in ("a", "b")]
    one, two = Daemon(envs[0], *WEBHOOK), Daemon(envs[1], *WEBHOOK)
    try:
        assert say(one, "/session attach projeto-x") == (
            200, {"reply": "Attached to session 'projeto-x' (0 messages; created)."})
        openai_server.reply("The freeze ", "starts ", "Friday.", delay=1.5)
        asking, first = say_meanwhile(one, "when is the freeze?", "m-7")
        openai_server.wait_for_requests(1)
        status, answer = say(two, "when is the freeze?", id="m-7")  # the same delivery, to the other replica
        assert status == 409 and answer["busy"] is True
        asking.join(30)
        assert first["answer"] == (200, {"reply": "The freeze starts Friday."})
        assert say(two, "when is the freeze?", id="m-7") == (200, {"reply": None, "duplicate": True})
        assert say(one, "when is the freeze?", id="m-7") == (200, {"reply": None, "duplicate": True})
        assert len(openai_server.requests) == 1

        status, answer = say(two, "and the release?", id="m-8")  # the other replica: same binding, same turns
        assert status == 200 and answer["reply"].splitlines()[-1] == "You said: and the release?"
        assert [m["content"] for m in openai_server.requests[-1].body["messages"]] == [
            "when is the freeze?", "The freeze starts Friday.", "and the release?"]

        openai_server.reply("cut ", "short", delay=5)
        asking, cut = say_meanwhile(one, "who signs it off?", "m-9")
        openai_server.wait_for_requests(3)
        one.kill()
        asking.join(10)
        assert "error" in cut

        def sent_again() -> bool:  # busy until the server drops the dead replica's connection, and its claim
            cut["again"] = say(two, "who signs it off?", id="m-9")
            return cut["again"][0] != 409

        assert wait_until(sent_again, timeout=10)
        answer = cut["again"]
        assert answer[0] == 200 and answer[1]["reply"].splitlines()[-1] == "You said: who signs it off?"
        assert say(two, "who signs it off?", id="m-9") == (200, {"reply": None, "duplicate": True})
    finally:
        one.stop()
        two.stop()
    result = run_chatcli("session", "show", "projeto-x", env=envs[0])
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("who signs it off?") == 2 and "cut short" not in result.stdout  # asked and echoed once
