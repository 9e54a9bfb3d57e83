"""chatcli against a real OpenAI-compatible server: llama.cpp's (llama-cpp-python's
`python -m llama_cpp.server`) serving the bundled SmolLM2-135M on loopback, one core. The real
`chatcli` executable talks to it, through a proxy that records what went over the wire
(tests/llama_server.py). Never skipped: a server that cannot start fails the test with its output.

The servers run in one xdist group, one answer at a time, so that a 2-core machine is not asked
for several models at once. Answers are kept short (CHATCLI_MAX_TOKENS) where the test allows."""

from __future__ import annotations

import http.client
import json
import re
import time

import pytest
from conftest import run_chatcli
from fakes import FakeModelServer, Reply
from llama_server import ALIAS, LlamaServer, RecordingProxy
from repl_driver import Repl, plain

pytestmark = pytest.mark.xdist_group("llama-server")

LONG_ASK = "Write a long story about a dragon who learns to fly, with many chapters."


@pytest.fixture(scope="module")
def default_format():
    """The server with its default chat format (it ignores `tools`)."""
    with LlamaServer() as server:
        yield server


@pytest.fixture(scope="module")
def function_calling():
    """The server with `--chat_format chatml-function-calling`."""
    with LlamaServer("chatml-function-calling") as server:
        yield server


@pytest.fixture
def connect(env):
    """Point `env` at `server` through a recording proxy (returned); keyword arguments are more variables."""
    proxies: list[RecordingProxy] = []

    def connect(server: LlamaServer, **variables: str) -> RecordingProxy:
        proxy = RecordingProxy(server.port).__enter__()
        proxies.append(proxy)
        env.update(LLM_PROVIDER="openai", OPENAI_BASE_URL=proxy.base_url, OPENAI_API_KEY="x",
                   OPENAI_MODEL=server.model, NO_COLOR="1", CHATCLI_CONTEXT_WINDOW=str(server.context), **variables)
        return proxy

    yield connect
    for proxy in proxies:
        proxy.__exit__()


def write_session(sessions_dir, name: str, messages: list[dict]) -> None:
    sessions_dir.mkdir(parents=True, exist_ok=True)
    (sessions_dir / f"{name}.json").write_text(json.dumps({"version": 2, "chat_history": messages}))


def saved(sessions_dir, name: str) -> list[dict]:
    return json.loads((sessions_dir / f"{name}.json").read_text())["chat_history"]


def test_the_server_the_tests_use_is_llama_cpp_serving_the_bundled_model(default_format):
    assert default_format.model == ALIAS and default_format.proc.poll() is None


def test_an_answer_streams_from_a_real_server(default_format, connect, env, workdir):
    proxy = connect(default_format, CHATCLI_MAX_TOKENS="24")
    result = run_chatcli("-p", "Say hello in one short sentence.", env=env, cwd=workdir, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
    [request] = proxy.requests
    assert request["stream"] is True and request["max_tokens"] == 24
    assert proxy.statuses == [200] and proxy.pieces[0] > 3  # many events: streamed, not one body


def test_ctrl_c_mid_answer_keeps_the_partial_answer_and_the_repl_goes_on(default_format, connect, env, workdir,
                                                                         sessions_dir):
    proxy = connect(default_format, CHATCLI_MAX_TOKENS="400")
    repl = Repl(env, ALIAS, cwd=workdir)
    try:
        repl.child.send(LONG_ASK + "\r")
        proxy.wait_for_pieces(0, 6)  # the answer is coming
        repl.child.send("\x03")
        repl.child.expect(r"\[interrupted\]", timeout=20)
        repl.expect_prompt()
        repl.send("/session save dragon")
        history = saved(sessions_dir, "dragon")
        assert [m["role"] for m in history] == ["user", "assistant"]
        assert history[0]["content"] == LONG_ASK
        partial = history[1]["content"]
        assert partial.strip() and history[1]["meta"]["interrupted"] is True
        # The REPL goes on, and the next request carries the partial answer.
        repl.child.send("Go on.\r")
        proxy.wait_for_pieces(1, 2)
        assert proxy.requests[1]["messages"][:3] == [{"role": "user", "content": LONG_ASK},
                                                     {"role": "assistant", "content": partial},
                                                     {"role": "user", "content": "Go on."}]
        repl.child.send("\x03")
        repl.expect_prompt()
    finally:
        repl.close()


def test_a_server_killed_mid_answer_is_one_line_and_the_message_is_kept(env, workdir, sessions_dir):
    with LlamaServer() as server:  # its own: this test kills it
        env.update(LLM_PROVIDER="openai", OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="x",
                   OPENAI_MODEL=server.model, NO_COLOR="1", CHATCLI_MAX_TOKENS="400")
        repl = Repl(env, ALIAS, cwd=workdir)
        try:
            repl.child.send(LONG_ASK + "\r")
            repl.child.expect(r"\n")  # the line is sent: what comes next is the answer
            repl.child.expect(r"[A-Za-z]{3,}", timeout=60)
            server.kill()
            out = plain(repl.expect_prompt(timeout=30))
            [error] = [line for line in out.splitlines() if "error" in line]
            # Said as a cut answer: some of it came, so no hint about the context window.
            assert error == "error: openai: the stream ended before the answer was complete", out
            assert "Traceback" not in out
            repl.send("/session save kept")
            history = saved(sessions_dir, "kept")
            assert [(m["role"], m["content"]) for m in history][:1] == [("user", LONG_ASK)]
            assert [m["role"] for m in history] == ["user", "assistant"]
            assert history[1]["content"].strip() and history[1]["meta"]["interrupted"] is True
        finally:
            repl.close()


def test_a_saved_session_resumed_sends_its_earlier_turn(default_format, connect, env, workdir, sessions_dir):
    proxy = connect(default_format, CHATCLI_MAX_TOKENS="16")
    first = run_chatcli("--session", "notes", "-p", "My name is Ada.", env=env, cwd=workdir, timeout=120)
    assert first.returncode == 0, first.stderr
    second = run_chatcli("--session", "notes", "-p", "What is my name?", env=env, cwd=workdir, timeout=120)
    assert second.returncode == 0, second.stderr
    history = saved(sessions_dir, "notes")
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
    assert proxy.requests[1]["messages"] == [{"role": "user", "content": "My name is Ada."},
                                             {"role": "assistant", "content": history[1]["content"]},
                                             {"role": "user", "content": "What is my name?"}]
    assert history[1]["content"].strip() == first.stdout.strip()


def test_compact_against_a_real_server_is_bounded_and_finishes_promptly(default_format, connect, env, workdir,
                                                                       sessions_dir):
    proxy = connect(default_format)
    messages = []
    for n in range(12):
        role = "user" if n % 2 == 0 else "assistant"
        facts = " ".join(f"Service s{n}-{k} deploys on day {k} from port {8000 + 10 * n + k}, owned by team {k}."
                         for k in range(5))
        messages.append({"role": role, "content": f"Note {n}. {facts}"})
    write_session(sessions_dir, "long", messages)
    repl = Repl(env, ALIAS, cwd=workdir, args=("--session", "long"))
    try:
        began = time.monotonic()
        out = plain(repl.send("/compact", timeout=120))
        took = time.monotonic() - began
    finally:
        repl.close()
    assert "Compacted 6 messages into one summary" in out, out
    [request] = proxy.requests
    assert 0 < request["max_tokens"] <= default_format.context // 4
    # Bounded as the server streamed it: no more pieces than tokens asked for (plus the role,
    # finish and [DONE] events). The clock only guards a runaway: on one free core the summary
    # takes about 30 s, twice that with the whole suite running beside it.
    assert proxy.pieces[0] <= request["max_tokens"] + 3, (proxy.pieces, request["max_tokens"])
    assert took < 110, f"/compact took {took:.1f} s"
    history = saved(sessions_dir, "long")
    assert len(history) == 7 and history[0]["meta"]["is_summary"] is True


def test_agent_mode_continues_a_session_holding_go_shape_tool_calls(function_calling, connect, env, workdir,
                                                                   sessions_dir):
    proxy = connect(function_calling, CHATCLI_MAX_TOKENS="24")
    (workdir / "a.txt").write_text("hello\n")
    go_call = {"id": "call_1", "type": "function", "name": "list_dir", "arguments": {"path": "."}}
    write_session(sessions_dir, "tools", [
        {"role": "user", "content": "What files are here?", "meta": {"mode": "agent"}},
        {"role": "assistant", "content": "", "tool_calls": [go_call], "meta": {"mode": "agent"}},
        {"role": "tool", "content": "a.txt", "tool_call_id": "call_1", "meta": {"mode": "agent"}},
        {"role": "assistant", "content": "There is one file, a.txt.", "meta": {"mode": "agent"}},
    ])
    result = run_chatcli("--agent", "--yes", "--session", "tools", "-p", "Thanks. Which file was it?",
                         env=env, cwd=workdir, timeout=120)
    assert result.returncode == 0, result.stderr
    assert proxy.statuses == [200]  # answered at once: no HTTP 500, nothing retried
    [sent] = [m for m in proxy.requests[0]["messages"] if m.get("tool_calls")]
    [call] = sent["tool_calls"]
    assert call["id"] == "call_1" and call["function"]["name"] == "list_dir"
    assert isinstance(call["function"]["arguments"], str) and json.loads(call["function"]["arguments"]) == {"path": "."}
    assert proxy.requests[0]["tools"]
    history = saved(sessions_dir, "tools")
    assert history[1]["tool_calls"][0]["arguments"] == {"path": "."}  # still Go's shape on disk
    assert [m["role"] for m in history][-2:] == ["user", "assistant"]


def test_agent_mode_with_the_default_chat_format_says_the_tools_went_unused(default_format, connect, env, workdir):
    proxy = connect(default_format, CHATCLI_MAX_TOKENS="24")
    result = run_chatcli("--agent", "--yes", "-p", "List the files here.", env=env, cwd=workdir, timeout=120)
    assert result.returncode == 0, result.stderr
    assert proxy.requests[0]["tools"]  # offered, and ignored by this chat format
    said = [line for line in (result.stdout + result.stderr).splitlines() if "without using its tools" in line]
    assert len(said) == 1, result.stdout + result.stderr


def test_a_request_longer_than_the_servers_context_names_the_context_window(default_format, connect, env, workdir):
    proxy = connect(default_format)
    del env["CHATCLI_CONTEXT_WINDOW"]  # chatcli takes the window for 128,000 tokens: it sends it all
    result = run_chatcli("-p", "word " * 3000, env=env, cwd=workdir, timeout=120)
    assert result.returncode == 1
    assert proxy.statuses == [200]  # HTTP 200, and nothing in the body
    [line] = result.stderr.strip().splitlines()
    assert "context window" in line and "CHATCLI_CONTEXT_WINDOW" in line


def test_a_message_longer_than_the_context_window_set_for_the_server_is_not_sent(default_format, connect, env,
                                                                                  workdir):
    proxy = connect(default_format)  # env names the server's context in CHATCLI_CONTEXT_WINDOW
    result = run_chatcli("-p", "word " * 3000, env=env, cwd=workdir, timeout=120)
    assert result.returncode == 1 and proxy.requests == []
    [line] = result.stderr.strip().splitlines()
    assert "more than the" in line and "context window (CHATCLI_CONTEXT_WINDOW), so it was not sent" in line


def test_a_tool_call_streamed_by_llama_cpp_is_assembled(function_calling, env):
    """chatcli never forces a tool (with "auto" this server streams no call: it fails), so the
    frames are asked of the server directly, then replayed byte for byte to the provider code."""
    parameters = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    tools = [{"type": "function",
              "function": {"name": "list_dir", "description": "List a directory", "parameters": parameters}}]
    body = {"model": ALIAS, "stream": True, "max_tokens": 60, "tools": tools,
            "tool_choice": {"type": "function", "function": {"name": "list_dir"}},
            "messages": [{"role": "user", "content": "List the files in the directory src."}]}
    conn = http.client.HTTPConnection("127.0.0.1", function_calling.port, timeout=120)
    try:
        conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
        answer = conn.getresponse()
        assert answer.status == 200
        raw = answer.read().decode()
    finally:
        conn.close()
    frames = [frame + "\n\n" for frame in re.split(r"\r?\n\r?\n", raw) if frame.strip()]
    assert sum('"name": "list_dir"' in frame for frame in frames) > 2  # the name comes in every chunk

    from chatcli.config.settings import Settings
    from chatcli.core.messages import Message
    from chatcli.providers.base import Request, ToolCall, default_registry

    with FakeModelServer("openai") as replay:
        replay.replies.append(Reply(frames=frames))
        settings = Settings.load({**env, "LLM_PROVIDER": "openai", "OPENAI_API_KEY": "x",
                                  "OPENAI_BASE_URL": replay.base_url, "OPENAI_MODEL": ALIAS})
        events = list(default_registry().create(settings).stream(
            Request(model=ALIAS, messages=[Message("user", "List the files in the directory src.")])))
    [call] = [event for event in events if isinstance(event, ToolCall)]
    assert call.name == "list_dir" and call.id.startswith("call_")
    assert isinstance(json.loads(call.arguments), dict)
