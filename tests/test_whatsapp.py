"""`chatcli gateway --whatsapp`: the real daemon serving Meta's webhook on 127.0.0.1, Meta's
Graph API faked on its own port (tests/fakes.py: FakeGraph), the model faked on another.

A user's message comes in as Meta delivers it (signed with the app secret) and its answer goes
out through the Graph API; the handshake, signatures, redeliveries, kills, restarts, outages,
rate limits and an expired token are each tried on the running daemon."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import CHATCLI, run_chatcli
from test_gateway import SECRET, Daemon, config_file, session_texts, terminal_sees, wait_until, write_config

from chatcli.gateway.preview import parts
from chatcli.gateway.whatsapp import read_delivery

TOKEN, NUMBER, APP_SECRET, VERIFY = "EAAG-test-token-1234567890", "106540352242922", "app-secret-42", "verify-me-7"
ANA, STRANGER = "5511987654321", "5511900000000"
NOT_TEXT = "Only text messages are understood here: this {} was not read."


class Phone:
    """A real `chatcli gateway --whatsapp 127.0.0.1:0` (and any other `flags`), once it says its
    webhook listens (a warning may come first)."""

    def __init__(self, env: dict[str, str], graph, *flags: str, args: tuple[str, ...] = ("--whatsapp", "127.0.0.1:0")):
        graph.webhook = None
        self.process = subprocess.Popen([CHATCLI, "gateway", *args, *flags], env=env,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        text=True)
        self.said: list[str] = []
        self.webhook_url = None
        while graph.webhook is None or ("--webhook" in flags and self.webhook_url is None):
            line = self.process.stderr.readline()
            assert line, "".join(self.said) + self.process.stderr.read()
            self.said.append(line)
            found = re.search(r"whatsapp webhook listening on (http://\S+)", line)
            if found:
                graph.webhook = found.group(1)
            other = re.search(r"^chatcli gateway: webhook listening on (http://\S+)", line)
            if other:
                self.webhook_url = other.group(1)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> str:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(20)
        return "".join(self.said) + self.process.stderr.read()


@pytest.fixture
def graph(openai_env):
    from fakes import FakeGraph

    with FakeGraph(TOKEN, NUMBER, APP_SECRET) as fake:
        openai_env.update(CHATCLI_GATEWAY_ALLOW=f"whatsapp:{ANA}", WHATSAPP_TOKEN=TOKEN, WHATSAPP_PHONE_NUMBER_ID=NUMBER,
                          WHATSAPP_APP_SECRET=APP_SECRET, WHATSAPP_VERIFY_TOKEN=VERIFY, WHATSAPP_API_URL=fake.base_url)
        yield fake


def gateway_log(env: dict[str, str]) -> str:
    path = Path(env["CHATCLI_HOME"]) / "logs" / "gateway.log"
    return path.read_text() if path.exists() else ""


def spooled(env: dict[str, str]) -> list[Path]:
    return sorted((Path(env["CHATCLI_HOME"]) / "spool" / "whatsapp").glob("*.json"))


def test_terminal_then_whatsapp_then_the_terminal_again(openai_env, openai_server, graph):
    """The walk-through: a session begun in the terminal, attached and continued from WhatsApp,
    the daemon killed and restarted, and the terminal's `-c` carries on with every turn."""
    assert run_chatcli("--session", "projeto-x", "-p", "the deploy freezes on Friday", env=openai_env).returncode == 0
    phone = Phone(openai_env, graph)
    try:
        assert graph.verify(VERIFY) == (200, "1158201444")  # Meta's handshake when the webhook URL is set
        graph.say(ANA, "/session attach projeto-x")
        graph.wait_for(ANA, lambda texts: texts == ["Attached to session 'projeto-x' (2 messages)."])
        graph.say(ANA, "and the rollback plan?")
        graph.wait_for(ANA, lambda texts: texts[-1:] == ["You said: and the rollback plan?"])
        assert len(graph.typing) == 2  # each message read, a typing indicator while it is answered
        phone.kill()
        phone = Phone(openai_env, graph)
        graph.say(ANA, "/session status")  # the restarted daemon binds the sender again
        graph.wait_for(ANA, lambda texts: "Bound to session 'projeto-x' (4 messages" in texts[-1])
    finally:
        said = phone.stop()
    result = run_chatcli("-c", "-p", "and?", env=openai_env)
    assert result.returncode == 0, result.stderr
    assert [m["content"] for m in openai_server.requests[-1].body["messages"]] == [
        "the deploy freezes on Friday", "You said: the deploy freezes on Friday",
        "and the rollback plan?", "You said: and the rollback plan?", "and?"]
    for secret in (TOKEN, APP_SECRET, VERIFY):  # never said, never logged
        assert secret not in said and secret not in gateway_log(openai_env)
    assert spooled(openai_env) == []


def test_the_handshake_and_deliveries_not_signed_by_the_app_are_refused(openai_env, openai_server, graph):
    phone = Phone(openai_env, graph)
    try:
        assert graph.verify("a-guess")[0] == 403
        assert graph.verify(VERIFY, mode="unsubscribe")[0] == 403
        secret_text = "the launch code is 0000"
        assert graph.deliver(graph.message(ANA, secret_text), signed=False) == 403
        assert graph.deliver(graph.message(ANA, secret_text), secret="another app's secret") == 403
        assert graph.deliver(b"not json", signed=True) == 400
        graph.say(ANA, "ping")
        graph.wait_for(ANA, lambda texts: texts == ["You said: ping"])
        assert [r.body["messages"][-1]["content"] for r in openai_server.requests] == ["ping"]
    finally:
        phone.stop()
    log = gateway_log(openai_env)
    assert "whatsapp: refused a delivery: the delivery is not signed (no X-Hub-Signature-256)" in log
    assert "whatsapp: refused a delivery: its X-Hub-Signature-256 does not match" in log
    assert "refused a verification request: its verify token is not WHATSAPP_VERIFY_TOKEN" in log
    assert secret_text not in log and "a-guess" not in log


def test_a_message_delivered_again_is_answered_once_across_a_restart(openai_env, openai_server, graph):
    phone = Phone(openai_env, graph)
    try:
        message = graph.message(ANA, "hello once", id="wamid.same-1")
        assert graph.deliver(message) == 200
        assert graph.deliver(message) == 200  # Meta thought the first try failed
        graph.wait_for(ANA, lambda texts: texts == ["You said: hello once"])
        phone.stop()
        phone = Phone(openai_env, graph)
        assert graph.deliver(message) == 200  # and again, to the restarted daemon
        following = graph.say(ANA, "next")
        graph.wait_for(ANA, lambda texts: len(texts) == 2 and texts[-1].endswith("You said: next"))
    finally:
        phone.stop()
    assert graph.texts(ANA)[0] == "You said: hello once" and len(graph.texts(ANA)) == 2
    assert [r.body["messages"][-1]["content"] for r in openai_server.requests] == ["hello once", "next"]
    assert graph.typing == ["wamid.same-1", following]  # no "typing…" for a message that gets no answer


def test_a_message_a_kill_cut_short_is_answered_after_the_restart_without_meta_sending_it_again(
        openai_env, openai_server, graph):
    phone = Phone(openai_env, graph)
    try:
        graph.say(ANA, "/session attach projeto-x")
        graph.wait_for(ANA, lambda texts: len(texts) == 1)
        openai_server.reply("The freeze ", "starts ", "Friday.", delay=2.0)
        graph.say(ANA, "when does the deploy freeze?")  # acknowledged: Meta will not deliver it again
        assert wait_until(lambda: len(openai_server.requests) == 1)
        time.sleep(0.5)
        phone.kill()  # during the turn
        assert len(spooled(openai_env)) == 1
        phone = Phone(openai_env, graph)  # takes it up from the spool
        graph.wait_for(ANA, lambda texts: texts[-1].endswith("\nYou said: when does the deploy freeze?"))
    finally:
        phone.stop()
    assert len(graph.texts(ANA)) == 2
    assert session_texts(openai_env, "projeto-x") == ["when does the deploy freeze?",
                                                      "You said: when does the deploy freeze?"]
    assert spooled(openai_env) == []


def test_a_long_answer_is_cut_on_paragraph_breaks_at_4096_characters(openai_env, openai_server, graph):
    paragraphs = [f"Paragraph {n}. " + "word " * 150 for n in range(12)]  # ~9,000 characters
    answer = "\n\n".join(paragraphs)
    openai_server.reply(answer)
    phone = Phone(openai_env, graph)
    try:
        graph.say(ANA, "tell me everything")
        texts = graph.wait_for(ANA, lambda texts: len(texts) >= 3)
    finally:
        phone.stop()
    assert all(len(text) <= 4096 for text in texts)
    assert "\n\n".join(texts) == answer  # cut between paragraphs, nothing lost or added
    assert all(text.startswith("Paragraph ") for text in texts)


def test_statuses_get_no_turn_and_what_is_not_text_gets_one_line(openai_env, openai_server, graph):
    phone = Phone(openai_env, graph)
    try:
        statuses = graph.envelope({"statuses": [
            {"id": "wamid.out-1", "status": "delivered", "timestamp": "1", "recipient_id": ANA},
            {"id": "wamid.out-2", "status": "read", "timestamp": "2", "recipient_id": ANA},
            {"id": "wamid.out-3", "status": "failed", "timestamp": "3", "recipient_id": ANA,
             "errors": [{"code": 131047, "title": "Re-engagement message"}]}]})
        assert graph.deliver(statuses) == 200
        assert graph.deliver(graph.message(ANA, kind="image", image={"id": "media-1", "mime_type": "image/jpeg"})) == 200
        assert graph.deliver(graph.message(ANA, kind="audio", audio={"id": "media-2", "voice": True})) == 200
        assert graph.deliver(graph.message(ANA, kind="reaction",
                                           reaction={"message_id": "wamid.out-1", "emoji": "👍"})) == 200
        graph.wait_for(ANA, lambda texts: len(texts) == 3)
        graph.say(ANA, "ping")
        texts = graph.wait_for(ANA, lambda texts: len(texts) == 4)
    finally:
        phone.stop()
    assert texts == [NOT_TEXT.format("image"), NOT_TEXT.format("audio"), NOT_TEXT.format("reaction"), "You said: ping"]
    assert [r.body["messages"][-1]["content"] for r in openai_server.requests] == ["ping"]
    assert f"a message to {ANA} was not delivered: 131047 Re-engagement message" in gateway_log(openai_env)


def test_strangers_are_refused_once_and_messages_to_another_number_are_left_alone(openai_env, openai_server, graph):
    phone = Phone(openai_env, graph)
    try:
        theirs = [graph.say(STRANGER, "hello?"), graph.say(STRANGER, "hello??")]
        other = graph.message(ANA, "to the other number")
        other["entry"][0]["changes"][0]["value"]["metadata"]["phone_number_id"] = "999"
        assert graph.deliver(other) == 200
        graph.say(ANA, "ping")
        graph.wait_for(ANA, lambda texts: texts == ["You said: ping"])
        graph.wait_for(STRANGER, lambda texts: len(texts) == 1)
        time.sleep(0.5)
    finally:
        phone.stop()
    assert graph.texts(STRANGER) == [f"This chatcli does not answer you: your id (whatsapp:{STRANGER}) is not on its "
                                     "allow-list."]
    assert [r.body["messages"][-1]["content"] for r in openai_server.requests] == ["ping"]
    assert not set(theirs) & set(graph.typing)  # a stranger's message is not even marked read


def test_an_outage_and_rate_limits_are_retried_and_the_answer_arrives_once(openai_env, openai_server, graph):
    outage = (503, {"error": {"message": "Service temporarily unavailable", "code": 2}}, {})
    limited = (429, {"error": {"message": "(#130429) Rate limit hit", "code": 130429}}, {"Retry-After": "1"})
    phone = Phone(openai_env, graph)
    try:
        graph.failures.extend([outage, outage, limited])  # the typing call takes the first
        graph.say(ANA, "are you there?")
        graph.wait_for(ANA, lambda texts: texts == ["You said: are you there?"], timeout=30)
        time.sleep(1)
    finally:
        phone.stop()
    assert graph.texts(ANA) == ["You said: are you there?"]
    assert "whatsapp: sending an answer to 5511987654321 failed (503, code 2: Service temporarily unavailable); " \
           "trying again" in gateway_log(openai_env)


def test_an_answer_waits_in_the_spool_through_an_outage_and_a_restart(openai_env, openai_server, graph):
    openai_env["CHATCLI_ENCRYPTION_KEY"] = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
    phone = Phone(openai_env, graph)
    try:
        graph.failures.extend([(502, {"error": {"message": "Bad gateway", "code": 1}}, {})] * 200)
        graph.say(ANA, "a secret plan")
        assert wait_until(lambda: len(openai_server.requests) == 1)
        # The typing indicator, then a send of the answer (written into the spool before it): both refused.
        assert wait_until(lambda: sum(1 for method, path in graph.requests if path.endswith("/messages")) >= 2)
        files = spooled(openai_env)
        assert len(files) == 1 and b"secret plan" not in files[0].read_bytes()  # sealed, as sessions are
        phone.kill()
        graph.failures.clear()  # Meta is back
        phone = Phone(openai_env, graph)
        graph.wait_for(ANA, lambda texts: texts == ["You said: a secret plan"])
    finally:
        phone.stop()
    assert len(openai_server.requests) == 1  # answered once, sent after the restart
    assert spooled(openai_env) == []


def test_an_expired_token_is_one_line_and_the_other_adapters_keep_serving(openai_env, openai_server, graph):
    openai_env.update(CHATCLI_GATEWAY_ALLOW=f"whatsapp:{ANA},webhook:alice", CHATCLI_GATEWAY_WEBHOOK_SECRET=SECRET)
    phone = Phone(openai_env, graph, "--webhook", "127.0.0.1:0")
    try:
        graph.token = "a-renewed-token"  # Meta no longer takes the daemon's
        graph.say(ANA, "hello")
        graph.say(ANA, "hello again")
        assert wait_until(lambda: "Meta refused WHATSAPP_TOKEN" in gateway_log(openai_env))
        webhook = Daemon.__new__(Daemon)
        webhook.url = phone.webhook_url
        assert webhook.post({"sender": "alice", "text": "still there?", "id": "w-1"}) == (
            200, {"reply": "You said: still there?"})
        assert graph.texts(ANA) == []
        assert len(spooled(openai_env)) == 2  # the answers wait
    finally:
        phone.stop()
    log = gateway_log(openai_env)
    assert log.count("Meta refused WHATSAPP_TOKEN (Error validating access token: Session has expired.)") == 1
    assert TOKEN not in log
    openai_env["WHATSAPP_TOKEN"] = "a-renewed-token"  # renewed, and the gateway restarted: they go out
    phone = Phone(openai_env, graph)
    try:
        # The second waited behind the first's answer (a sender's messages keep their order).
        texts = graph.wait_for(ANA, lambda texts: len(texts) == 2)
        assert texts[0] == "You said: hello" and texts[1].endswith("\nYou said: hello again")
    finally:
        phone.stop()


def test_a_token_meta_refuses_at_start_is_one_warning_and_messages_are_still_taken(openai_env, openai_server, graph):
    graph.token = "a-renewed-token"  # the daemon's expired while it was down
    phone = Phone(openai_env, graph)
    try:
        graph.say(ANA, "are you there?")
        assert wait_until(lambda: len(openai_server.requests) == 1)  # answered; the answer waits
        assert wait_until(lambda: sum(1 for method, path in graph.requests if path.endswith("/messages")) >= 2)
        assert graph.texts(ANA) == [] and len(spooled(openai_env)) == 1
    finally:
        said = phone.stop()
    assert ("chatcli gateway: warning: whatsapp: Meta refused WHATSAPP_TOKEN (Error validating access token: Session "
            "has expired.): WhatsApp messages are received and answered, and the answers wait in the spool; renew "
            "the token and restart the gateway\n") in said
    assert gateway_log(openai_env).count("Meta refused WHATSAPP_TOKEN") == 1 and TOKEN not in said


def test_a_phone_number_id_the_graph_api_does_not_know_stops_the_start_in_one_line(openai_env, graph):
    openai_env["WHATSAPP_PHONE_NUMBER_ID"] = "123"
    result = run_chatcli("gateway", "--whatsapp", "127.0.0.1:0", env=openai_env)
    assert result.returncode == 2
    assert result.stderr.startswith("chatcli: error: the Graph API does not take WHATSAPP_PHONE_NUMBER_ID 123 (400, "
                                    "code 100: Unsupported request")
    assert TOKEN not in result.stderr


def test_two_gateways_never_serve_one_spool(openai_env, graph):
    phone = Phone(openai_env, graph)
    try:
        result = run_chatcli("gateway", "--whatsapp", "127.0.0.1:0", env=openai_env)
        assert result.returncode == 1
        assert "another chatcli gateway serves" in result.stderr and len(result.stderr.splitlines()) == 1
    finally:
        phone.stop()


@pytest.mark.parametrize("var", ["WHATSAPP_TOKEN", "WHATSAPP_PHONE_NUMBER_ID", "WHATSAPP_APP_SECRET",
                                 "WHATSAPP_VERIFY_TOKEN"])
def test_each_missing_setting_is_named_in_one_line(openai_env, graph, var):
    env = {**openai_env, var: ""}
    result = run_chatcli("gateway", "--whatsapp", env=env)
    key = "whatsapp." + var.removeprefix("WHATSAPP_").lower()
    assert result.returncode == 2
    assert result.stderr == (f"chatcli: error: {var} is not set (nor {key} in {config_file(openai_env)}): the "
                             "WhatsApp adapter does not start\n")


def test_gateway_toml_whatsapp_table_runs_the_adapter(openai_env, openai_server, graph):
    for var in ("WHATSAPP_TOKEN", "WHATSAPP_APP_SECRET", "WHATSAPP_VERIFY_TOKEN"):
        del openai_env[var]
    write_config(openai_env, f'[whatsapp]\nlisten = "127.0.0.1:0"\ntoken = "{TOKEN}"\napp_secret = "{APP_SECRET}"\n'
                             f'verify_token = "{VERIFY}"\n')
    phone = Phone(openai_env, graph, args=())  # no flag: the adapters gateway.toml has a table for
    try:
        assert "for +1 555-000-1111 (chatcli test)" in phone.said[-1]
        graph.say(ANA, "from the file")
        graph.wait_for(ANA, lambda texts: texts == ["You said: from the file"])
    finally:
        phone.stop()


def test_a_delivery_is_read_as_meta_declares_it():
    """The envelope's shape (entry → changes → value), names from contacts, several messages in
    one delivery, statuses and other fields skipped, lone surrogates made well formed."""
    payload = {"object": "whatsapp_business_account", "entry": [{"id": "W", "changes": [
        {"field": "message_template_status_update", "value": {"event": "APPROVED"}},
        {"field": "messages", "value": {
            "metadata": {"phone_number_id": NUMBER},
            "contacts": [{"profile": {"name": "Ana"}, "wa_id": ANA}, {"profile": {"name": "Bo"}, "wa_id": "2"}],
            "messages": [{"from": ANA, "id": "wamid.1", "type": "text", "text": {"body": "oi \ud800"}},
                         {"from": "2", "id": "wamid.2", "type": "sticker", "sticker": {"id": "s"}},
                         {"id": "wamid.3", "type": "text", "text": {"body": "no sender"}}]}}]}]}
    messages, notes = read_delivery(json.loads(json.dumps(payload)), NUMBER)
    assert [(m.id, m.sender, m.name, m.kind, m.text) for m in messages] == [
        ("wamid.1", ANA, "Ana", "text", "oi \ufffd"), ("wamid.2", "2", "Bo", "sticker", "")]
    assert notes == ["a message without a sender or an id was ignored"]
    assert read_delivery({"object": "page"}, NUMBER) == ([], ["a delivery that is not a WhatsApp Business Account's "
                                                              "was ignored"])


@pytest.mark.parametrize("text, limit, expected", [
    ("one\n\ntwo\nthree four", 12, ["one\n\ntwo", "three four"]),  # a paragraph break too early: a line end
    ("aaaa bbbb\n\ncccc", 12, ["aaaa bbbb", "cccc"]),
    ("aaaa bbbb cccc", 10, ["aaaa bbbb", "cccc"]),  # between words
    ("x" * 25, 10, ["x" * 10, "x" * 10, "x" * 5]),  # one long word: cut inside it
    ("aaaaaaaa\n    bbbb", 12, ["aaaaaaaa", "    bbbb"]),  # the next line's indent stays (code)
])
def test_a_reply_is_cut_on_paragraphs_then_lines_then_words(text, limit, expected):
    assert parts(text, limit) == expected


def test_a_rekey_reseals_the_spool_and_waits_for_a_gateway_serving_it(tmp_path):
    from chatcli.store.home import Home
    from chatcli.store.rekey import rekey

    old, new = b"o" * 32, b"n" * 32
    spool = Home(tmp_path, old).spool("whatsapp")
    spool.put({"id": "wamid.1", "from": ANA, "name": "Ana", "kind": "text", "text": "a secret plan"}, "wamid.1")
    held = spool.hold()  # a gateway serving it
    done = rekey(Home(tmp_path, old), new)
    assert done.resealed["spool"] == 0 and any("another chatcli gateway serves" in line for line in done.failed)
    held.close()
    done = rekey(Home(tmp_path, old), new)
    assert done.resealed["spool"] == 1 and not done.failed
    items, problems = Home(tmp_path, new).spool("whatsapp").pending()
    assert [item["text"] for _, item in items] == ["a secret plan"] and problems == []
