"""Microcompact: tool results older than CHATCLI_MICROCOMPACT_TURNS turns become stubs
naming their recall entry; the journal records the rewrite and keeps the original; the bound
session holds the stub; /recall brings the text back; the model is offered the recall tool."""

from __future__ import annotations

import json

from fakes import tool_call

from chatcli.engine import sessions
from chatcli.engine.recall import recall_text
from chatcli.store.recall import MARKER_RE

LISTING = "\n".join(f"file-{n:04}.txt" for n in range(300))  # a long tool result


def test_old_tool_results_become_stubs_that_recall_brings_back(make_conversation, fake_model, sessions_dir, tmp_path,
                                                               monkeypatch):
    project = tmp_path / "project"  # not the directory holding the home: the tools refuse that one
    project.mkdir()
    monkeypatch.chdir(project)
    for n in range(300):
        (project / f"file-{n:04}.txt").write_text("x")
    conv = make_conversation(CHATCLI_MICROCOMPACT_TURNS="2")
    sessions.attach(conv, "work")
    conv.agent.switch("agent", conv)
    fake_model.reply(tool_calls=[tool_call("c1", "list_dir", path=".")])
    fake_model.reply("Three hundred files.")
    conv.send("what is here?")
    [result] = [m for m in conv.history if m.role == "tool"]
    assert len(result.content) > 1000 and "file-0299.txt" in result.content
    conv.send("one")
    conv.send("two")  # the turn that made the result is one of the last 2: kept
    assert [m for m in conv.history if m.role == "tool"][0].content == result.content
    conv.send("three")  # now older than the last 2 turns: a stub
    [stub] = [m for m in conv.history if m.role == "tool"]
    assert stub.content.startswith("[list_dir result cleared by microcompact after 2 turns: ")
    assert stub.tool_call_id == "c1" and stub.meta["microcompact"] is True
    key = MARKER_RE.search(stub.content).group(1)
    assert "file-0299.txt" in recall_text(conv.settings, key, conv.history)
    # The session holds the stub; the journal holds the original and the rewrite, named.
    saved = json.loads((sessions_dir / "work.json").read_text())["chat_history"]
    assert [m["content"] for m in saved if m["role"] == "tool"] == [stub.content]
    events = [json.loads(line) for line in
              (sessions_dir.parent / "transcripts" / f"{conv.transcript.id}.jsonl").read_text().splitlines()]
    assert any(e.get("type") == "rewrite" and e.get("reason") == "microcompact" for e in events)
    assert any("file-0299.txt" in json.dumps(e) for e in events if e.get("type") == "message")
    # The model may bring it back itself.
    assert "recall" in [tool.name for tool in fake_model.requests[-1].tools]
    conv.send("four")  # a stub is never stubbed again, and nothing else changed
    assert [m.content for m in conv.history if m.role == "tool"] == [stub.content]


def test_zero_turns_turns_it_off(make_conversation, fake_model):
    from chatcli.core.messages import Message

    conv = make_conversation(CHATCLI_MICROCOMPACT_TURNS="0")
    conv.history += [Message("user", "q"), Message("assistant", "", tool_calls=[
        {"id": "c1", "type": "function", "name": "list_dir", "arguments": "{}"}]),
        Message("tool", "x" * 5000, tool_call_id="c1"), Message("assistant", "a")]
    for n in range(5):
        conv.send(f"turn {n}")
    assert [len(m.content) for m in conv.history if m.role == "tool"] == [5000]


def old_result_history():
    from chatcli.core.messages import Message

    return [Message("user", "list it"), Message("assistant", "", tool_calls=[
        {"id": "c1", "type": "function", "name": "list_dir", "arguments": "{}"}]),
        Message("tool", LISTING, tool_call_id="c1"), Message("assistant", "Listed.")]


def test_with_the_journal_off_the_stub_keeps_the_original(make_conversation, fake_model, home):
    import shutil

    conv = make_conversation(CHATCLI_MICROCOMPACT_TURNS="1", CHATCLI_SESSION_TRANSCRIPT="false")
    conv.history += old_result_history()
    conv.send("next")
    conv.send("and next")
    [stub] = [m for m in conv.history if m.role == "tool"]
    key = MARKER_RE.search(stub.content).group(1)
    shutil.rmtree(home / ".chatcli" / "ccr")  # the recall store pruned: the stub still has it
    assert "file-0299.txt" in recall_text(conv.settings, key, conv.history)


def test_a_session_loaded_without_a_journal_gets_its_originals_journaled_first(make_conversation, fake_model,
                                                                              sessions_dir):
    import json as _json

    sessions_dir.mkdir(parents=True)
    from chatcli.core.messages import Message

    history = [*old_result_history(), Message("user", "thanks"), Message("assistant", "welcome")]
    (sessions_dir / "imported.json").write_text(_json.dumps({"version": 2, "chat_history": [
        m.to_dict() for m in history]}))  # a file from elsewhere: no journal yet
    conv = make_conversation(CHATCLI_MICROCOMPACT_TURNS="1")
    sessions.load(conv, "imported")
    conv.send("next")  # its result is old already: stubbed before this first turn
    assert [m.meta.get("microcompact") for m in conv.history if m.role == "tool"] == [True]
    lines = (sessions_dir.parent / "transcripts" / f"{conv.transcript.id}.jsonl").read_text().splitlines()
    recorded = [_json.loads(line).get("message") or {} for line in lines]
    # The original reached the journal as the message it was, before the stub replaced it.
    assert any(m.get("role") == "tool" and m.get("content") == LISTING for m in recorded)
