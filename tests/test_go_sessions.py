"""Session files are Go ChatCLI's files (SPEC §3–4): tool calls in its shape, every message with
its mode, v1 files merged as it merges them, and what chatcli wrote before read on. The schema
check of every file the suite writes (conftest) covers the rest; these pin the behaviours."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from fakes import tool_call as call

from chatcli.core.journal import content_digest
from chatcli.core.messages import Message, call_arguments, call_arguments_text, new_call
from chatcli.engine import rewind, sessions
from chatcli.store.home import Home
from chatcli.core.session import SessionData
from chatcli.store.sessions import SessionStore


def saved(sessions_dir, name: str) -> list[dict]:
    return json.loads((sessions_dir / f"{name}.json").read_text())["chat_history"]


def test_an_agent_turn_stores_its_tool_calls_with_object_arguments(make_conversation, fake_model, workdir,
                                                                    sessions_dir):
    (workdir / "notes.txt").write_text("the freeze ends Friday\n")
    conv = make_conversation()
    conv.agent.root = workdir
    conv.agent.switch("agent", conv)
    sessions.save(conv, "go-shape")
    fake_model.reply(tool_calls=[call("c1", "read_file", path="notes.txt")])
    fake_model.reply("It ends Friday.")
    conv.send("when does the freeze end?")
    [asking] = [m for m in saved(sessions_dir, "go-shape") if m.get("tool_calls")]
    # Go's decoder refuses the whole file when `arguments` is a string.
    assert asking["tool_calls"] == [{"id": "c1", "type": "function", "name": "read_file",
                                     "arguments": {"path": "notes.txt"}}]


def test_argument_text_that_is_no_json_object_is_kept_in_raw(make_conversation, fake_model, workdir, sessions_dir):
    conv = make_conversation()
    conv.agent.root = workdir
    conv.agent.switch("agent", conv)
    sessions.save(conv, "raw")
    fake_model.reply(tool_calls=[{"id": "c1", "name": "list_dir", "arguments": '{"path": ".'}])  # cut short
    fake_model.reply("Sorry.")
    conv.send("list it")
    [asking] = [m for m in saved(sessions_dir, "raw") if m.get("tool_calls")]
    assert asking["tool_calls"][0]["arguments"] == {} and asking["tool_calls"][0]["raw"] == '{"path": ".'
    # The model is shown its own call as it wrote it.
    assert call_arguments_text(asking["tool_calls"][0]) == '{"path": ".'


@pytest.mark.parametrize("text", ['{"n": NaN}', '{"n": Infinity}', '{"n": 1e400}'])
def test_argument_text_json_cannot_hold_is_kept_as_written(text):
    # Parsed, it would be written back as {"n": null}: not what the model wrote.
    call = new_call("c1", "f", text)
    assert call["arguments"] == {} and call["raw"] == text and call_arguments_text(call) == text


def test_turns_another_version_appended_in_an_earlier_shape_are_not_adopted_in_place(tmp_path):
    store = SessionStore(tmp_path / "sessions")
    store.write("s", SessionData(history=[Message("user", "hi")]))
    path = store.path("s")
    before = os.stat(path)
    earlier = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "name": "f", "arguments": '{"a": 1}'}]}
    path.write_bytes(path.read_bytes()[:-2] + b", " + json.dumps(earlier).encode() + b"]}")  # appended in place
    # Read whole instead (and so written whole, in Go's shape, at the next write).
    assert store.appended_since("s", before.st_ino, before.st_size) is None
    assert store.load("s")[0].reshaped


def test_every_new_message_carries_the_mode_it_was_made_in(make_conversation, fake_model, sessions_dir):
    conv = make_conversation()
    sessions.save(conv, "modes")
    conv.send("hello")
    assert [m["meta"] for m in saved(sessions_dir, "modes")] == [{"mode": "chat"}, {"mode": "chat"}]


def plant_earlier_shapes(sessions_dir) -> None:
    """A session as chatcli wrote it before (string arguments) with a Chat Completions call too."""
    sessions_dir.mkdir(parents=True, exist_ok=True)
    (sessions_dir / "earlier.json").write_text(json.dumps({"version": 2, "title": "t", "chat_history": [
        {"role": "user", "content": "look", "meta": {"mode": "agent"}},
        {"role": "assistant", "content": "", "meta": {"mode": "agent"}, "tool_calls": [
            {"id": "c1", "type": "function", "name": "read_file", "arguments": '{"path": "a.txt"}'},
            {"id": "c2", "type": "function", "function": {"name": "grep", "arguments": '{"pattern":"x"}'}}]},
        {"role": "tool", "content": "A", "tool_call_id": "c1", "meta": {"mode": "agent"}},
        {"role": "tool", "content": "no match", "tool_call_id": "c2", "meta": {"mode": "agent"}},
        {"role": "assistant", "content": "done", "meta": {"mode": "agent"}},
    ]}))


def test_earlier_call_shapes_load_and_the_next_write_rewrites_them_in_go_shape(make_conversation, sessions_dir):
    plant_earlier_shapes(sessions_dir)
    conv = make_conversation()
    sessions.load(conv, "earlier")
    [asking] = [m for m in conv.history if m.tool_calls]
    assert [call_arguments(c) for c in asking.tool_calls] == [{"path": "a.txt"}, {"pattern": "x"}]
    conv.send("and then?")  # a turn of a bound session: appended in place, unless the file must change shape
    history = saved(sessions_dir, "earlier")
    assert [m["content"] for m in history][-2:] == ["and then?", "You said: and then?"]
    assert history[1]["tool_calls"] == [
        {"id": "c1", "type": "function", "name": "read_file", "arguments": {"path": "a.txt"}},
        {"id": "c2", "type": "function", "name": "grep", "arguments": {"pattern": "x"}}]


def earlier_digest(message: dict) -> str:
    """The hash chatcli gave a message before calls were hashed by their meaning: the argument
    text as written (the algorithm of core.journal.content_digest then)."""
    calls = [[c["id"], (c.get("function") or c)["name"], (c.get("function") or c)["arguments"]]
             for c in message.get("tool_calls") or ()]
    key = [message["role"], message["content"], calls, message.get("tool_call_id"), None]
    data = json.dumps(key, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(data.encode()).hexdigest()[:32]


def test_a_journal_written_before_keeps_matching_its_history_after_the_reshape(make_conversation, sessions_dir,
                                                                                 settings):
    plant_earlier_shapes(sessions_dir)
    history = json.loads((sessions_dir / "earlier.json").read_text())["chat_history"]
    journal = Home.of(settings).journal("earlier-journal")
    journal.path.parent.mkdir(parents=True, exist_ok=True)
    lines = [{"v": 1, "type": "message", "hash": earlier_digest(m), "message": m, "time": "2026-01-01T00:00:00+00:00"}
             for m in history]
    journal.path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    document = json.loads((sessions_dir / "earlier.json").read_text())
    (sessions_dir / "earlier.json").write_text(json.dumps({**document, "transcript_id": "earlier-journal"}))
    assert earlier_digest(history[1]) != content_digest(Message.from_dict(history[1]))  # the hash did change

    conv = make_conversation()
    sessions.load(conv, "earlier")
    conv.send("and then?")
    events = journal.read().events
    # Only the new turn was recorded: no message twice, no rewrite of the history.
    assert [e["type"] for e in events if e["type"] in ("message", "rewrite")] == ["message"] * 7
    assert [e["message"]["content"] for e in events if e["type"] == "message"][-2:] == ["and then?",
                                                                                         "You said: and then?"]


def plant_earlier_journal(sessions_dir, settings, name: str, history: list[dict], **document) -> list[str]:
    """Session `name` holding `history` with a journal as an earlier chatcli wrote it (its hashes);
    those hashes, in order."""
    sessions_dir.mkdir(parents=True, exist_ok=True)
    hashes = [earlier_digest(m) for m in history]
    journal = Home.of(settings).journal(f"{name}-journal")
    journal.path.parent.mkdir(parents=True, exist_ok=True)
    journal.path.write_text("".join(json.dumps({"v": 1, "type": "message", "hash": h, "message": m,
                                                "time": "2026-01-01T00:00:00+00:00"}) + "\n"
                                    for h, m in zip(hashes, history)))
    (sessions_dir / f"{name}.json").write_text(json.dumps({"version": 2, "chat_history": history,
                                                           "transcript_id": f"{name}-journal", **document}))
    return hashes


def test_a_go_raw_call_recorded_before_keeps_matching_its_journal(make_conversation, sessions_dir, settings):
    # An earlier chatcli read Go's files too, and hashed this call's arguments ({}) as written.
    plant_earlier_journal(sessions_dir, settings, "go-raw", [
        {"role": "user", "content": "look", "meta": {"mode": "agent"}},
        {"role": "assistant", "content": "", "meta": {"mode": "agent"}, "tool_calls": [
            {"id": "c1", "type": "function", "name": "list_dir", "arguments": {}, "raw": '{"path": '}]},
        {"role": "tool", "content": "bad arguments", "tool_call_id": "c1", "meta": {"mode": "agent"}},
        {"role": "assistant", "content": "done", "meta": {"mode": "agent"}}])
    conv = make_conversation()
    sessions.load(conv, "go-raw")
    conv.send("and then?")
    events = Home.of(settings).journal("go-raw-journal").read().events
    assert [e["type"] for e in events if e["type"] in ("message", "rewrite")] == ["message"] * 6


def test_checkpoints_an_earlier_version_kept_in_the_session_file_survive_the_rekeying(make_conversation, sessions_dir,
                                                                                       settings):
    plant_earlier_shapes(sessions_dir)
    history = json.loads((sessions_dir / "earlier.json").read_text())["chat_history"]
    hashes = plant_earlier_journal(sessions_dir, settings, "earlier", history, checkpoints=[
        {"time": "2026-01-01T00:00:00+00:00", "label": "before done", "keep": 0, "hashes": []}])
    document = json.loads((sessions_dir / "earlier.json").read_text())
    document["checkpoints"][0]["hashes"] = hashes[:4]  # the history before the last answer, tool calls included
    (sessions_dir / "earlier.json").write_text(json.dumps(document))
    conv = make_conversation()
    sessions.load(conv, "earlier")
    listed = rewind.listing(conv)
    assert "before done" in listed.text and "Dropped" not in listed.text, listed.text


def test_v1_agent_and_coder_system_prompts_are_left_out_of_the_merge(tmp_path):
    store = SessionStore(tmp_path / "sessions")
    store.root.mkdir(parents=True)
    store.path("v1").write_text(json.dumps({
        "version": 1,
        "chat_history": [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "c1"}],
        "agent_history": [{"role": "system", "content": "You are in AGENT mode: run commands."},
                          {"role": "user", "content": "a1"}],
        "coder_history": [{"role": "system", "content": "You are in CODER mode: edit files."},
                          {"role": "user", "content": "k1"}],
    }))
    data, _ = store.load("v1")
    assert [m.content for m in data.history] == ["You are helpful.", "c1", "a1", "k1"]


def test_a_go_session_s_first_turn_reads_its_file_once_and_writes_it_whole_once(make_conversation, fake_model,
                                                                                 sessions_dir, monkeypatch):
    """A session another program wrote (no journal named in it): the first turn names a journal
    in it, in chatcli's shape, and appends the turn after that; the file is parsed once, at load."""
    sessions_dir.mkdir(parents=True, exist_ok=True)  # past the size written whole at every turn
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"old {i} " + "x" * 800} for i in range(400)]
    (sessions_dir / "theirs.json").write_text(json.dumps({"name": "theirs", "chat_history": history,
                                                          "created_at": "2026-01-01T00:00:00Z"}))
    decoded, wrote = [], []
    monkeypatch.setattr(SessionStore, "decode", lambda self, name, raw, _d=SessionStore.decode:
                        decoded.append(name) or _d(self, name, raw))
    monkeypatch.setattr(SessionStore, "write", lambda self, name, data, _w=SessionStore.write, **kw:
                        wrote.append(name) or _w(self, name, data, **kw))
    conv = make_conversation()
    sessions.attach(conv, "theirs")
    fake_model.reply("new answer")
    conv.send("new question")
    assert decoded == ["theirs"] and wrote == ["theirs"]  # the journal's name; the turn was appended
    on_disk = json.loads((sessions_dir / "theirs.json").read_text())
    assert on_disk["transcript_id"] and [m["content"] for m in on_disk["chat_history"][-2:]] == \
        ["new question", "new answer"] and len(on_disk["chat_history"]) == 402
    assert on_disk["title"] and on_disk.get("cost_ref")


def test_a_v1_file_with_one_mode_keeps_its_order_whatever_its_times():
    from chatcli.core.session import decode_session

    data = decode_session({"chat_history": [
        {"role": "user", "content": "first", "timestamp": "2026-01-02T00:00:00Z"},
        {"role": "assistant", "content": "second", "timestamp": "2026-01-01T00:00:00Z"}]})
    assert [m.content for m in data.history] == ["first", "second"]
    assert all(m.meta["mode"] == "chat" for m in data.history)
