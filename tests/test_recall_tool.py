"""The model fetches compacted originals through the `recall` tool (SPEC §8.1), over the real
HTTP path of both providers that call tools, driven through the REPL."""

from __future__ import annotations

import json
import re
from pathlib import Path

from repl_driver import Repl, plain


def offered_tools(seen) -> list[str]:
    return [t.get("name") or t["function"]["name"] for t in seen.body.get("tools", [])]


def tool_exchange(seen, kind: str) -> tuple[dict, str]:
    """The (call arguments, result text) the follow-up request carries."""
    messages = seen.body["messages"]
    if kind == "openai":
        call = next(m for m in messages if m.get("tool_calls"))["tool_calls"][0]
        assert call["type"] == "function" and call["function"]["name"] == "recall"
        result = next(m for m in messages if m["role"] == "tool")
        assert result["tool_call_id"] == call["id"]
        return json.loads(call["function"]["arguments"]), result["content"]
    blocks = [b for m in messages if isinstance(m["content"], list) for b in m["content"]]
    use = next(b for b in blocks if b["type"] == "tool_use")
    result = next(b for b in blocks if b["type"] == "tool_result")
    assert use["name"] == "recall" and result["tool_use_id"] == use["id"]
    return use["input"], result["content"]


def compacted_session(repl: Repl, server) -> str:
    for i in range(1, 5):
        repl.send(f"turn {i} question")
    server.reply("Briefing: four questions were asked.")
    out = plain(repl.send("/compact"))
    return re.search(r"<<ccr:([0-9a-f]{16})>>", out).group(1)


def test_the_model_fetches_the_originals_of_a_summary(env, workdir, tool_server):
    env["CHATCLI_CHAT_TOOLS"] = "false"  # chat's session_search off: recall alone, offered by the summary
    repl = Repl(env, "m", cwd=workdir, args=("--session", "recalling"))
    try:
        key = compacted_session(repl, tool_server)
        assert all(offered_tools(seen) == [] for seen in tool_server.requests)  # no summary, no tool
        tool_server.reply("Let me look.", tool_calls=[{"id": "call_1", "name": "recall",
                                                       "arguments": json.dumps({"key": key})}])
        tool_server.reply("Your first question was 'turn 1 question'.")
        out = plain(repl.send("what was my first question?"))
        assert f"The model read entry {key} from session 'recalling': 2 messages." in out
        assert "Your first question was 'turn 1 question'." in out
        ask, follow = tool_server.requests[-2:]
        assert offered_tools(ask) == ["recall"]
        assert "Briefing: four questions were asked." in json.dumps(ask.body["messages"])  # the summary is sent
        if tool_server.kind == "anthropic":  # its API wants a user turn first
            assert ask.body["messages"][0]["role"] == "user"
        arguments, result = tool_exchange(follow, tool_server.kind)
        assert arguments == {"key": key}
        assert "#1 user\nturn 1 question" in result and "#2 assistant\nYou said: turn 1 question" in result
        # Without a summary the tool is no longer offered; Anthropic, which refuses calls of
        # undefined tools in the history, still has it described, marked as not available.
        assert "Undid the compaction" in plain(repl.send("/rewind compact"))
        repl.send("and now?")
        last = tool_server.requests[-1].body
        if tool_server.kind == "anthropic":
            assert offered_tools(tool_server.requests[-1]) == ["recall"]
            assert last["tools"][0]["description"].startswith("NOT AVAILABLE NOW (no summary in this conversation")
            assert last["tool_choice"] == {"type": "none"}
        else:
            assert "tools" not in last and "tool_choice" not in last
    finally:
        repl.close()
    document = json.loads((Path(env["CHATCLI_HOME"]) / "sessions" / "recalling.json").read_text())
    tail = document["chat_history"][-6:-2]
    assert [m["role"] for m in tail] == ["user", "assistant", "tool", "assistant"]
    assert tail[1]["tool_calls"] == [{"id": "call_1", "type": "function", "name": "recall",
                                      "arguments": {"key": key}}]  # Go ChatCLI's shape
    assert tail[2]["tool_call_id"] == "call_1" and tail[3]["content"] == "Your first question was 'turn 1 question'."


def test_a_bad_key_comes_back_to_the_model_as_an_error_and_the_turn_completes(env, workdir, tool_server):
    repl = Repl(env, "m", cwd=workdir)
    try:
        compacted_session(repl, tool_server)
        tool_server.reply("", tool_calls=[{"id": "call_9", "name": "recall", "arguments": '{"key": "0000000000000000"}'}])
        tool_server.reply("I could not find it.")
        out = plain(repl.send("recall something"))
        assert "The model's recall call failed: no recall entry 0000000000000000" in out
        assert "I could not find it." in out
        _arguments, result = tool_exchange(tool_server.requests[-1], tool_server.kind)
        assert result.startswith("error: no recall entry 0000000000000000")
    finally:
        repl.close()


def test_the_model_reads_go_chatclis_raw_text_through_the_recall_tool(env, workdir, tool_server):
    from test_recall import GO_ORIGINALS, go_compacted

    env["CHATCLI_CHAT_TOOLS"] = "false"  # recall alone, offered because the Go summary names an entry
    key = go_compacted(Path(env["CHATCLI_HOME"]))
    repl = Repl(env, "m", cwd=workdir, args=("--session", "from-go"))
    try:
        tool_server.reply("", tool_calls=[{"id": "call_go", "name": "recall", "arguments": json.dumps({"key": key})}])
        tool_server.reply("Port 8443.")
        out = plain(repl.send("which port was it again?"))
        assert f"The model read entry {key}: Go ChatCLI's text, as it stored it." in out
        assert "Port 8443." in out
        assert offered_tools(tool_server.requests[-2]) == ["recall"]
        _arguments, result = tool_exchange(tool_server.requests[-1], tool_server.kind)
        assert GO_ORIGINALS in result and "error" not in result
    finally:
        repl.close()
