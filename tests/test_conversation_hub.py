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
    assert say(hub, "hello?", sender="666") == REFUSAL.format(principal="telegram:666")
    assert hub.handle("telegram", "666", "hello??") is None
    assert hub.hub.get("telegram", "666").refused == 2 and len(warned) == 2
    assert fake_model.requests == []  # the model never saw them


def test_destructive_and_other_commands_are_refused_from_a_channel(make_hub, sessions_dir):
    hub = make_hub()
    say(hub, "/session save keep-me")
    assert "not available from this chat; use the terminal" in say(hub, "/session delete keep-me")
    # A line starting with a path is for the model, as in the REPL.
    assert say(hub, "/usr/bin/python3 crashes, why?") == "You said: /usr/bin/python3 crashes, why?"
    assert say(hub, "   ") is None
    assert (sessions_dir / "keep-me.json").exists()
    assert "not available from this chat" in say(hub, "/session export md")
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


def test_a_bound_session_deleted_while_the_daemon_was_down_is_not_made_again(make_hub, make_conversation,
                                                                             sessions_dir):
    first = make_hub()
    say(first, "/session attach projeto-x")
    say(first, "remember the heron")
    first.close()
    sessions.delete(make_conversation(), "projeto-x")  # from the terminal, the daemon stopped
    again = make_hub()
    reply = say(again, "hello")
    assert "[the session 'projeto-x' this chat was bound to no longer exists; this chat is not bound now]" in reply
    assert not (sessions_dir / "projeto-x.json").exists()
    assert again.hub.get("telegram", "42").session is None


def test_a_sender_never_sees_another_senders_threads(make_hub, fake_model):
    hub = make_hub(allowed=("slack:UBOSS", "slack:UEVE"))
    say(hub, "the merger closes Friday", sender="UBOSS", channel="slack")
    boss = hub.hub.get("slack", "UBOSS")
    theirs = "mcp-gw-" + boss.thread
    assert say(hub, f"/session load {theirs}", sender="UEVE", channel="slack") == \
        f"error: session '{theirs}' does not exist"
    assert theirs not in say(hub, "/session list", sender="UEVE", channel="slack")
    assert say(hub, "/session search merger", sender="UEVE", channel="slack") == "No saved session matches."
    assert theirs in say(hub, "/session list", sender="UBOSS", channel="slack")  # its own, it sees
    assert "merger" in say(hub, "/session search merger", sender="UBOSS", channel="slack")


def test_a_wildcard_sender_is_a_guest_with_no_access_to_the_sessions(make_hub, make_conversation, fake_model):
    mine = make_conversation()
    mine.send("my private notes")
    sessions.save(mine, "thesis")
    hub = make_hub(allowed=("telegram:*", "telegram:42"))
    assert say(hub, "hi", sender="7") == "You said: hi"  # a guest gets its own conversation
    assert [tool.name for tool in fake_model.requests[-1].tools] == []  # and no tool that reads sessions
    say(hub, "hi", sender="42")
    assert {"session_search", "session_read"} <= {tool.name for tool in fake_model.requests[-1].tools}
    for command in ("/session list", "/session load thesis", "/session attach thesis", "/session search notes",
                    "/session save mine"):
        assert "is not available from this chat" in say(hub, command, sender="7"), command
    assert say(hub, "/session new", sender="7").startswith("New conversation started")


def test_save_from_a_chat_never_replaces_another_session(make_hub, make_conversation, sessions_dir):
    mine = make_conversation()
    mine.send("chapter one")
    sessions.save(mine, "thesis")
    before = (sessions_dir / "thesis.json").read_bytes()
    hub = make_hub()
    assert say(hub, "/session save thesis").startswith("error: session 'thesis' exists; from a chat, /session save "
                                                       "does not replace another session")
    assert (sessions_dir / "thesis.json").read_bytes() == before
    assert say(hub, "/session attach thesis") == "Attached to session 'thesis' (2 messages)."
    assert say(hub, "/session save thesis").startswith("Session 'thesis' saved")  # its own: written


def test_two_senders_may_use_the_same_message_id(make_hub):
    hub = make_hub(allowed=("webhook:alice", "webhook:bob"))
    assert say(hub, "hi", sender="alice", channel="webhook", message_id="1") == "You said: hi"
    assert say(hub, "hello", sender="bob", channel="webhook", message_id="1") == "You said: hello"
    assert hub.handle("webhook", "bob", "hello", message_id="1") is None  # bob's own retry


def test_a_message_whose_answer_failed_is_answered_when_it_comes_again(make_hub, fake_model):
    hub = make_hub()
    calls = []

    def broken(piece):
        calls.append(piece)
        raise RuntimeError("the channel went away")

    with pytest.raises(RuntimeError):
        hub.handle("telegram", "42", "first try", message_id="9", on_text=broken)
    assert say(hub, "first try", message_id="9") == "You said: first try"


def read_call(id: str, name: str, position: int = 1) -> dict:
    return {"id": id, "name": "session_read", "arguments": json.dumps({"name": name, "position": position})}


def tool_results(request) -> list[str]:
    return [m.content for m in request.messages if m.role == "tool"]


def test_session_read_answers_another_senders_thread_as_a_name_that_does_not_exist(make_hub, fake_model):
    hub = make_hub(allowed=("slack:UBOSS", "slack:UEVE"))
    say(hub, "the merger closes Friday", sender="UBOSS", channel="slack")
    theirs = "mcp-gw-" + hub.hub.get("slack", "UBOSS").thread
    fake_model.reply(tool_calls=[read_call("r1", theirs), read_call("r2", "mcp-gw-nothing-here"),
                                 {"id": "s1", "name": "session_search", "arguments": json.dumps({"query": "merger"})}])
    fake_model.reply("I cannot see it.")
    say(hub, "what closes Friday?", sender="UEVE", channel="slack")
    hidden, unknown, searched = tool_results(fake_model.requests[-1])
    assert hidden == f"error: no session named '{theirs}' (session_search shows the names)"
    assert unknown == "error: no session named 'mcp-gw-nothing-here' (session_search shows the names)"
    assert searched == "No saved session matches."  # as session_search hides it
    fake_model.reply(tool_calls=[read_call("r3", theirs)])
    fake_model.reply("Friday.")
    say(hub, "what did I say?", sender="UBOSS", channel="slack")  # its own thread, it reads
    [own] = tool_results(fake_model.requests[-1])[-1:]
    assert own.startswith(f"Session '{theirs}': messages #1–") and "#1 user\nthe merger closes Friday" in own


def test_a_guest_is_refused_session_read_as_it_is_session_search(make_hub, make_conversation, fake_model):
    from chatcli.providers.base import ToolCall

    mine = make_conversation()
    mine.send("my private notes")
    sessions.save(mine, "thesis")
    hub = make_hub(allowed=("telegram:*", "telegram:42"))
    fake_model.reply(tool_calls=[read_call("r1", "thesis")])  # called though not offered: not run
    say(hub, "read my thesis", sender="7")
    assert [tool.name for tool in fake_model.requests[-1].tools] == []
    assert tool_results(fake_model.requests[-1]) == [] and len(fake_model.requests) == 2
    [guest] = hub.hosts[True].live.values()  # and were it called, it would be refused as session_search is
    read, searched = (guest.conv.agent.call(guest.conv, ToolCall("c1", name, json.dumps(arguments)), None)
                      for name, arguments in (("session_read", {"name": "thesis", "position": 1}),
                                              ("session_search", {"query": "notes"})))
    assert read.text == "error: session_read is not available: the user turned chat's tools off (CHATCLI_CHAT_TOOLS)"
    assert searched.text == read.text.replace("session_read", "session_search") and read.error


def test_a_message_that_is_not_text_gets_its_line_without_a_turn_and_strangers_their_refusal(make_hub, fake_model):
    hub = make_hub(("whatsapp:42",))
    line = "Only text messages are understood here: this image was not read."
    assert say(hub, "[image]", channel="whatsapp", message_id="m-1", instead=line) == line
    assert say(hub, "[image]", channel="whatsapp", message_id="m-1", instead=line) is None  # delivered again
    assert say(hub, "[image]", sender="7", channel="whatsapp", message_id="m-2", instead=line) == REFUSAL.format(
        principal="whatsapp:7")
    assert fake_model.sent() == []


def test_a_reply_the_channel_could_not_keep_is_not_counted_answered(make_hub, fake_model):
    hub = make_hub()
    kept = []

    def full_disk(reply):
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        hub.handle("telegram", "42", "hello", message_id="m-1", on_reply=full_disk)
    reply = hub.handle("telegram", "42", "hello", message_id="m-1", on_reply=kept.append)  # the retry answers it
    assert reply is not None and reply.text == "You said: hello" and kept == [reply]
    assert hub.handle("telegram", "42", "hello", message_id="m-1", on_reply=kept.append) is None and len(kept) == 1
