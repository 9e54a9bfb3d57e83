"""The Conversation Hub (gateway/hub.py) in process: a real store and hub.db on disk, the model
faked in process. A sender attaches a session from a channel, the terminal sees the turn, a
restart keeps the binding, strangers are refused once, and load/new rotate the thread."""

from __future__ import annotations

import json

import pytest

from chatcli.engine import sessions
from chatcli.gateway.hub import REFUSAL, ConversationHub


@pytest.fixture
def make_hub(settings, fake_model):
    made = []

    def make(allowed=("telegram:42",), **kwargs):
        hub = ConversationHub(settings, allowed, registry=fake_model.registry(), **kwargs)
        made.append(hub)
        return hub

    yield make
    for hub in made:
        hub.close()


def say(hub, text, sender="42", channel="telegram", **kwargs):
    reply = hub.handle(channel, sender, text, **kwargs)
    return reply.text if reply else None


def test_a_turn_from_a_channel_is_seen_by_the_terminal_and_back(make_hub, make_conversation, fake_model):
    hub = make_hub()
    assert say(hub, "/session attach projeto-x") == "Attached to session 'projeto-x' (0 messages; created)."
    assert say(hub, "the deploy freezes on Friday") == "You said: the deploy freezes on Friday"
    terminal = make_conversation()
    sessions.load(terminal, "projeto-x")  # chatcli --session projeto-x
    terminal.send("and?")
    assert fake_model.sent()[-1][:3] == ["the deploy freezes on Friday", "You said: the deploy freezes on Friday",
                                         "and?"]
    say(hub, "anything else?")  # the channel adopts the terminal's turn first
    assert fake_model.sent()[-1][-3:] == ["and?", "You said: and?", "anything else?"]


def test_a_restart_keeps_the_sender_bound(make_hub, fake_model, settings):
    first = make_hub()
    say(first, "/session attach projeto-x")
    say(first, "remember the heron")
    first.close()
    again = make_hub()
    assert again.hub.get("telegram", "42").session == "projeto-x"
    say(again, "what did I ask you to remember?")
    assert fake_model.sent()[-1][0] == "remember the heron"  # the same conversation, from the session


def test_with_mirrors_off_the_persisted_binding_is_attached_again(make_hub, fake_model, make_conversation):
    settings = make_conversation(CHATCLI_MCP_SESSION_AUTOSAVE="off").settings
    first = ConversationHub(settings, ["telegram:42"], registry=fake_model.registry())
    say(first, "/session attach projeto-y")
    say(first, "note one")
    first.close()
    again = ConversationHub(settings, ["telegram:42"], registry=fake_model.registry())
    try:
        reply = say(again, "note two")
        assert fake_model.sent()[-1][:2] == ["note one", "You said: note one"]
        assert "projeto-y" in reply  # it says the binding was restored
    finally:
        again.close()


def test_an_unlisted_sender_gets_one_refusal_and_nothing_else(make_hub, fake_model):
    warned = []
    hub = make_hub(warn=warned.append)
    assert say(hub, "hello?", sender="666") == REFUSAL
    assert hub.handle("telegram", "666", "hello??") is None
    assert hub.hub.get("telegram", "666").refused == 2 and len(warned) == 2
    assert fake_model.requests == []  # the model never saw them


def test_destructive_and_other_commands_are_refused_from_a_channel(make_hub, sessions_dir):
    hub = make_hub()
    say(hub, "/session save keep-me")
    assert "not available from a chat channel" in say(hub, "/session delete keep-me")
    assert (sessions_dir / "keep-me.json").exists()
    assert "not available from a chat channel" in say(hub, "/session export md")
    assert say(hub, "/agent").startswith("error: only /session commands work here")


def test_load_rotates_the_thread_so_old_backlog_stays_behind(make_hub, make_conversation, sessions_dir, fake_model):
    other = make_conversation()
    other.send("the loaded session's own words")
    sessions.save(other, "loaded")
    hub = make_hub()
    say(hub, "unbound chatter from the channel")
    before = hub.hub.get("telegram", "42")
    assert "Session 'loaded' loaded" in say(hub, "/session load loaded")
    after = hub.hub.get("telegram", "42")
    assert after.generation == before.generation + 1 and after.session == "loaded"
    say(hub, "and now?")
    assert "unbound chatter from the channel" not in fake_model.sent()[-1]
    old_mirror = json.loads((sessions_dir / f"mcp-gw-{before.thread}.json").read_text())
    assert old_mirror["chat_history"][0]["content"] == "unbound chatter from the channel"
    # A failed load changes nothing.
    assert "error:" in say(hub, "/session load no-such-session")
    assert hub.hub.get("telegram", "42").generation == after.generation


def test_a_redelivered_message_is_answered_once(make_hub, fake_model):
    hub = make_hub()
    assert say(hub, "once", message_id="update-1") == "You said: once"
    assert hub.handle("telegram", "42", "once", message_id="update-1") is None
    assert len(fake_model.requests) == 1


def test_a_message_after_a_load_goes_to_the_loaded_sessions_thread(make_hub, make_conversation, fake_model):
    other = make_conversation()
    other.send("words of the loaded session")
    sessions.save(other, "loaded")
    hub = make_hub()
    say(hub, "before")
    say(hub, "/session load loaded")
    say(hub, "after the load")
    assert hub.hub.get("telegram", "42").session == "loaded"
    assert fake_model.sent()[-1] == ["words of the loaded session", "You said: words of the loaded session",
                                     "after the load"]


def test_a_channel_is_not_told_the_daemons_paths(make_hub, settings):
    hub = make_hub()
    say(hub, "/session attach projeto-x")
    status = say(hub, "/session status")
    assert status.endswith(": $CHATCLI_HOME/sessions/projeto-x.json"), status
    assert str(settings.home) not in status
