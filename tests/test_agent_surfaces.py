"""Agent and coder modes where the user meets them: the REPL (approvals typed at the prompt), the
wire of both providers that call tools, a one-shot killed in the middle of a tool batch, and the
MCP server's agent_task. Only the model is fake, on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from fakes import tool_call as call
from conftest import CHATCLI, run_chatcli
from repl_driver import Repl, plain


@pytest.fixture
def project(workdir):
    (workdir / "app.py").write_text("def greet():\n    return 'helo'\n")
    return workdir


def exchange(seen, kind: str) -> list[tuple[str, str, bool]]:
    """(tool name or '', result text, is_error) of every call and result a request carries, in order."""
    out = []
    for message in seen.body["messages"]:
        if kind == "openai":
            for c in message.get("tool_calls") or ():
                assert c["type"] == "function"
                out.append((c["function"]["name"], c["id"], False))
            if message["role"] == "tool":
                out.append(("", message["content"], False))
        elif isinstance(message["content"], list):
            for block in message["content"]:
                if block["type"] == "tool_use":
                    out.append((block["name"], block["id"], False))
                elif block["type"] == "tool_result":
                    out.append(("", block["content"], bool(block.get("is_error"))))
    return out


def test_a_coder_session_in_the_repl_reads_greps_asks_writes_and_answers(env, tool_server, project, sessions_dir):
    repl = Repl(env, "m", cwd=project, args=("--session", "fix"))
    try:
        out = plain(repl.send("/coder"))
        assert f"Coder mode: as agent mode, and the model may write and edit files under {project}" in out
        assert "coder:m>" in out  # the prompt shows the mode
        tool_server.reply("Looking.", tool_calls=[call("c1", "read_file", path="app.py"),
                                            call("c2", "grep", pattern="helo")])
        tool_server.reply(tool_calls=[call("c3", "run_shell", command="rm -rf build")])
        tool_server.reply(tool_calls=[call("c4", "edit_file", path="app.py", old_text="'helo'", new_text="'hello'")])
        tool_server.reply("Fixed the typo; I did not remove build.")
        repl.child.send("fix the typo\r")
        repl.child.expect(r"run_shell: run: rm -rf build")
        before = plain(repl.child.before)  # the first batch's lines, then the command asked about
        assert "Looking." in before and "read app.py (2 lines)" in before and "grep 'helo': 1 line" in before
        assert "$ rm -rf build" in before
        repl.child.expect(r"Allow\? \(y\)es / \(n\)o / \(a\)lways for this session:")
        repl.child.send("n\r")
        repl.child.expect(r"edit_file: write app\.py \(\+1 −1\)")
        asked = plain(repl.child.before)  # the diff comes before the question
        assert "-    return 'helo'" in asked and "+    return 'hello'" in asked
        repl.child.expect(r"Allow\?")
        repl.child.send("y\r")
        repl.expect_prompt()
        shown = asked + plain(repl.child.before)
        assert "Fixed the typo; I did not remove build." in shown and "edit_file app.py: +1 −1" in shown
        assert "refused: run: rm -rf build" in shown
    finally:
        repl.close()
    assert (project / "app.py").read_text() == "def greet():\n    return 'hello'\n"
    last = tool_server.requests[-1]
    assert exchange(last, tool_server.kind) == [
        ("read_file", "c1", False), ("grep", "c2", False), ("", "def greet():\n    return 'helo'\n", False),
        ("", "app.py:2:     return 'helo'", False), ("run_shell", "c3", False),
        ("", exchange(last, tool_server.kind)[5][1], tool_server.kind == "anthropic"), ("edit_file", "c4", False),
        ("", "wrote app.py (+1 −1 lines)", False)]
    assert exchange(last, tool_server.kind)[5][1].startswith("refused: the user did not allow this (run: rm -rf build)")
    offered = [t.get("name") or t["function"]["name"] for t in last.body["tools"]]
    assert offered == ["session_search", "session_read", "read_file", "list_dir", "grep", "run_shell", "write_file",
                       "edit_file"]
    saved = json.loads((sessions_dir / "fix.json").read_text())["chat_history"]
    assert {m["meta"]["mode"] for m in saved} == {"coder"}
    refused = next(m for m in saved if m.get("tool_call_id") == "c3")
    assert refused["meta"]["refused"] is True and refused["is_error"] is True
    assert [m["role"] for m in saved] == ["user", "assistant", "tool", "tool", "assistant", "tool", "assistant",
                                          "tool", "assistant"]


def test_keys_typed_before_the_question_do_not_answer_it(repl_env, openai_server, project):
    openai_server.reply(tool_calls=[call("c1", "run_shell", command="touch made")])
    openai_server.reply("As you wish.")
    repl = Repl(repl_env, "m", cwd=project, args=("--agent",))
    try:
        repl.child.send("make a file\ry\r")  # a "y" typed ahead, before any question
        repl.child.expect(r"Allow\? \(y\)es")
        time.sleep(0.5)
        assert not (project / "made").exists()  # the question waits for its own answer
        repl.child.send("n\r")
        repl.expect_prompt()
    finally:
        repl.close()
    assert not (project / "made").exists()


def test_agent_mode_is_refused_in_one_line_without_tool_calling(env):
    env.update(LLM_PROVIDER="local")
    result = run_chatcli("--agent", "-p", "list the files", env=env)
    assert result.returncode == 2
    # One line that says what would work: the providers that call tools and what to set for each.
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(
        "chatcli: error: agent mode needs a model that calls tools, and provider 'local' does not; these do: openai "
        "(set OPENAI_API_KEY; OPENAI_BASE_URL for a compatible server")
    assert "anthropic (set ANTHROPIC_API_KEY)" in result.stderr and "--provider NAME" in result.stderr


def test_a_one_shot_agent_without_a_terminal_refuses_commands_unless_yes(env, tool_server, project):
    tool_server.reply(tool_calls=[call("c1", "run_shell", command="touch made")])
    tool_server.reply("Not allowed.")
    refused = run_chatcli("--agent", "-p", "touch a file", env=env, cwd=project)
    assert refused.returncode == 0 and not (project / "made").exists()
    assert "refused (there was no one to approve it (run it in the REPL, or give --yes)): run: touch made" \
        in refused.stderr
    tool_server.reply(tool_calls=[call("c1", "run_shell", command="touch made")])
    tool_server.reply("Made it.")
    allowed = run_chatcli("--agent", "--yes", "-p", "touch a file", env=env, cwd=project)
    assert allowed.returncode == 0 and (project / "made").exists() and "Made it." in allowed.stdout


def journal_messages(home: Path) -> list[dict]:
    [journal] = (home / "transcripts").glob("*.jsonl")
    events = [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]
    return [e["message"] for e in events if e.get("type") == "message"]


def test_a_kill_during_a_tool_batch_loses_at_most_that_batch(env, tool_server, project):
    tool_server.reply(tool_calls=[call("c1", "read_file", path="app.py")])
    tool_server.reply(tool_calls=[call("c2", "run_shell", command="touch started; sleep 60"),
                            call("c3", "list_dir")])
    child = subprocess.Popen([CHATCLI, "--agent", "--yes", "--session", "killed", "-p", "look, then build"],
                             env=env, cwd=project, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not (project / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert (project / "started").exists()
        os.killpg(child.pid, signal.SIGKILL)  # chatcli and the command it runs
    finally:
        child.wait(10)
    kept = journal_messages(Path(env["CHATCLI_HOME"]))
    # The first step is on disk (synced when the second began); the batch in flight is what is lost.
    assert [(m["role"], m.get("tool_call_id")) for m in kept] == [("user", None), ("assistant", None), ("tool", "c1")]
    assert kept[1]["tool_calls"][0]["name"] == "read_file" and kept[2]["content"].startswith("def greet")
    assert all(m["meta"]["mode"] == "agent" for m in kept)


def test_ctrl_c_stops_a_running_command_and_keeps_the_batch(env, tool_server, project):
    tool_server.reply(tool_calls=[call("c1", "run_shell", command="touch started; sleep 60")])
    repl = Repl(env, "m", cwd=project, args=("--agent", "--yes", "--session", "stopped"))
    try:
        repl.child.send("build it\r")
        deadline = time.monotonic() + 20
        while not (project / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        began = time.monotonic()
        repl.child.sendintr()
        repl.child.expect(r"\[interrupted\]", timeout=10)
        repl.expect_prompt(timeout=10)
        assert time.monotonic() - began < 10
    finally:
        repl.close()
    kept = journal_messages(Path(env["CHATCLI_HOME"]))
    assert [(m["role"], m.get("tool_call_id")) for m in kept] == [("user", None), ("assistant", None), ("tool", "c1")]
    assert kept[2]["content"] == "error: stopped by the user (Ctrl-C) while it ran"
    assert kept[2]["meta"] == {"mode": "agent", "interrupted": True}


def run_mcp(env, cwd, work, *flags):
    async def main():
        from mcp import Client, StdioServerParameters

        params = StdioServerParameters(command=CHATCLI, args=["mcp-server", *flags], env=env, cwd=str(cwd))
        async with Client(params) as client:
            return await work(client)

    return asyncio.run(main())


def text(result) -> str:
    return "\n".join(part.text for part in result.content if getattr(part, "text", None))


def test_mcp_agent_task_only_reads_unless_the_server_allows_writes(openai_env, openai_server, project):
    env, model = openai_env, openai_server

    async def task(client, mode="agent"):
        return await client.call_tool("agent_task", {"task": "fix the typo", "mode": mode})

    model.reply(tool_calls=[call("c1", "read_file", path="app.py"),
                            call("c2", "edit_file", path="app.py", old_text="'helo'", new_text="'hello'")])
    model.reply("I can only read here.")
    read_only = run_mcp(env, project, lambda client: task(client, "coder"))
    assert not read_only.is_error
    assert text(read_only).splitlines() == [
        "[read app.py (2 lines)]",
        "[The model's edit_file call was not run: this server was started read-only: it runs no commands and "
        "writes no files (the user can restart it with chatcli mcp-server --allow-writes)]",
        "I can only read here."]
    assert [t["function"]["name"] for t in model.requests[0].body["tools"]] == [
        "session_search", "session_read", "read_file", "list_dir", "grep"]
    assert "helo" in (project / "app.py").read_text()

    model.reply(tool_calls=[call("c1", "edit_file", path="app.py", old_text="'helo'", new_text="'hello'")])
    model.reply("Fixed.")

    async def then_chat(client):
        done = await task(client, "coder")
        after = await client.call_tool("ask_chatcli", {"prompt": "thanks"})
        return done, after

    done, _after = run_mcp(env, project.parent, then_chat, "--allow-writes", "--workdir", str(project))
    assert text(done).splitlines() == ["[Continued from 'mcp-mcp' (5 messages).]", "[edit_file app.py: +1 −1]",
                                       "Fixed."]  # the restarted server took its conversation back
    assert (project / "app.py").read_text() == "def greet():\n    return 'hello'\n"
    assert [t["function"]["name"] for t in model.requests[-1].body["tools"]] == [
        "session_search", "session_read"]  # back in chat: only chat's tools (OpenAI needs no others described)


def test_yes_goes_with_a_mode(env):
    result = run_chatcli("--yes", "-p", "hi", env=env)
    assert result.returncode == 2
    assert result.stderr == "chatcli: error: --yes approves agent work: give it with --agent or --coder\n"


def test_a_tool_line_comes_after_the_text_before_it_on_a_rendered_terminal():
    import io

    from chatcli.render.stream import MarkdownStream

    out = io.StringIO()
    renderer = MarkdownStream(out)
    renderer.start()
    renderer.feed("Let me look at calc.py first.")
    renderer.note("read calc.py (7 lines)")
    renderer.feed("It adds.")
    renderer.finish()
    text = plain(out.getvalue())
    assert text.index("Let me look at calc.py first.") < text.index("read calc.py (7 lines)") < text.index("It adds.")
