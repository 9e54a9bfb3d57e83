"""Binding semantics in-process (SPEC §6.1): two Conversation objects, one real store on disk,
a fake model server over HTTP. The cases where a turn could be lost."""

from __future__ import annotations

import json
import os

import pytest

from chatcli.config.settings import Settings
from chatcli.core.messages import Message
from chatcli.core.session import SessionData
from chatcli.engine import sessions
from chatcli.engine.conversation import Conversation
from chatcli.store.sessions import SessionExists, SessionStore


@pytest.fixture
def make_conv(openai_env):
    def make(**extra) -> Conversation:
        return Conversation(Settings.load({**openai_env, **extra}))

    return make


def file_contents(conv: Conversation, name: str) -> list[str]:
    return [m["content"] for m in json.loads(conv.store.path(name).read_text())["chat_history"]]


def test_a_turn_whose_write_failed_survives_adoption(make_conv, monkeypatch):
    a, b = make_conv(), make_conv()
    sessions.attach(a, "shared")
    real_replace = os.replace

    def disk_full(*_args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    result = a.send("a1")
    assert any("disk full" in note for note in result.notes)
    monkeypatch.setattr(os, "replace", real_replace)
    sessions.attach(b, "shared")
    b.send("b1")
    result = a.send("a2")
    assert file_contents(a, "shared") == ["b1", "You said: b1", "a1", "You said: a1", "a2", "You said: a2"]


def test_saving_the_bound_session_merges_what_another_surface_wrote(make_conv):
    a, b = make_conv(), make_conv()
    sessions.attach(a, "t")
    a.send("a1")
    sessions.attach(b, "t")
    b.send("b1")
    outcome = sessions.save(a, "t")
    assert "was also written by another surface" in " ".join(outcome.notes)
    assert file_contents(a, "t") == ["a1", "You said: a1", "b1", "You said: b1"]


def test_load_over_unwritten_turns_of_a_bound_conversation_keeps_them(make_conv):
    conv = make_conv(CHATCLI_SESSION_WRITETHROUGH="off")
    sessions.save(conv, "mine")
    conv.send("turn one")
    conv.send("turn two")
    sessions.save(make_conv(), "other")
    outcome = sessions.load(conv, "other")
    assert file_contents(conv, "mine") == ["turn one", "You said: turn one", "turn two", "You said: turn two"]
    assert outcome.notes == ()  # written to its own session, no autosave needed


def test_a_rewritten_file_is_taken_as_it_is_and_our_turn_follows(make_conv):
    a = make_conv()
    sessions.attach(a, "r")
    a.send("original")
    store = a.store
    store.write("r", SessionData(history=[Message("user", "compacted elsewhere")]))
    said: list[str] = []
    a.send("next", on_notice=said.append)  # adopted before the turn
    assert any("rewritten there" in note for note in said)
    assert file_contents(a, "r") == ["compacted elsewhere", "next", "You said: next"]


def test_interrupted_and_failed_turns_are_written_too(make_conv, openai_server):
    conv = make_conv()
    sessions.attach(conv, "k")
    openai_server.reply(status=401, error="invalid key")  # the question waits for the key to be fixed
    with pytest.raises(Exception, match="HTTP 401"):
        conv.send("my question")
    assert file_contents(conv, "k") == ["my question"]

    def interrupt(_text: str) -> None:
        raise KeyboardInterrupt

    openai_server.reply("partial ", "answer")
    result = conv.send("again", on_text=interrupt)
    assert result.interrupted
    document = json.loads(conv.store.path("k").read_text())
    assert document["chat_history"][-1] == {"role": "assistant", "content": "partial ", "meta": {"mode": "chat", "interrupted": True}}


@pytest.mark.parametrize("status,error", [(400, "messages[1].tool_calls[0].function: field required"),
                                          (422, "unprocessable"),
                                          (500, "1 validation error: Input should be a valid string")])
def test_a_question_whose_request_was_refused_as_malformed_is_not_appended(make_conv, openai_server, status, error):
    conv = make_conv()
    sessions.attach(conv, "m")
    openai_server.reply("fine")
    conv.send("first")
    for attempt in range(3):  # every retry was appended to the file before: three stray questions
        openai_server.reply(status=status, error=error)
        with pytest.raises(Exception, match=f"HTTP {status}.*the message was not added to the conversation"):
            conv.send(f"refused {attempt}")
    assert file_contents(conv, "m") == ["first", "fine"]
    assert [m.content for m in conv.history] == ["first", "fine"]
    openai_server.reply("answered")
    conv.send("next")
    assert file_contents(conv, "m") == ["first", "fine", "next", "answered"]


def test_an_answer_holding_a_lone_surrogate_is_written_with_a_replacement_character(make_conv, openai_server):
    conv = make_conv()
    sessions.attach(conv, "s")
    openai_server.reply("half \ud83d of an emoji")  # sent as the JSON escape a server may stream
    conv.send("hi")
    assert file_contents(conv, "s") == ["hi", "half \ufffd of an emoji"]


def test_create_refuses_a_name_taken_in_the_meantime(tmp_path):
    store = SessionStore(tmp_path / "sessions")
    store.create("x", SessionData(history=[Message("user", "first")]))
    with pytest.raises(SessionExists):
        store.create("x", SessionData(history=[Message("user", "second")]))
    assert store.load("x")[0].history[0].content == "first"


def test_fork_adopts_first_so_the_copy_is_current(make_conv):
    a, b = make_conv(), make_conv()
    sessions.attach(a, "p")
    sessions.attach(b, "p")
    b.send("written by b")
    sessions.fork(a, "p2")
    assert file_contents(a, "p2") == ["written by b", "You said: written by b"]


def test_turns_another_surface_appended_are_adopted_from_the_files_end(make_conv, monkeypatch, openai_server,
                                                                       appends_at_any_size):
    a, b = make_conv(), make_conv()
    sessions.attach(a, "shared")
    a.send("a1")
    sessions.attach(b, "shared")
    b.send("b1")  # appended in place by the other surface

    def read_whole(*_args, **_kwargs):
        raise AssertionError("the whole file was read to adopt an append")

    monkeypatch.setattr(SessionStore, "load", read_whole)
    said = []
    a.send("a2", on_notice=said.append)
    assert said == ["Session 'shared' was updated elsewhere: took its 2 new message(s)."]
    assert [m.content for m in a.history] == ["a1", "You said: a1", "b1", "You said: b1", "a2", "You said: a2"]
    monkeypatch.undo()
    assert file_contents(a, "shared") == [m.content for m in a.history]
    assert [m["content"] for m in openai_server.requests[-1].body["messages"]][-3:] == ["b1", "You said: b1", "a2"]
