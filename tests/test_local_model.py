"""Real generation with the embedded offline model (llama-cpp-python + the bundled SmolLM2 GGUF),
which runs in a worker process: a native crash there never takes the conversation down.

None of these is skipped: the `local` extra is part of the test install, and a test that cannot
import it fails (it once hid a build that segfaulted on the CI machine's CPU).
"""

from __future__ import annotations

import json
import os
import platform
import re
import signal
import time
from pathlib import Path

import llama_cpp  # noqa: F401 - fails loudly, never skips, when the extra is missing
import pytest
from conftest import CHATCLI as CHATCLI_PATH
from conftest import run_chatcli
from repl_driver import Repl, plain

from chatcli.config.settings import Settings
from chatcli.core.errors import ProviderError
from chatcli.core.messages import Message
from chatcli.engine.conversation import Conversation
from chatcli.providers.base import Delta, Request, streaming
from chatcli.providers.local import LocalProvider, bundled_model_path

BUNDLED_LABEL = "SmolLM2-135M-Instruct.Q4_1"
CRASHED = "local model crashed (signal 11); the conversation is kept"
# A question that makes even the small model write at length, so there is an answer to interrupt.
LONG_ANSWER = "Write a long story about a dragon."
# The echo of that question, up to the newline Enter prints, then 20 letters of answer (escape codes have digits).
ECHOED = r"dragon\.[^\n]*\n"
STREAMING = r"[A-Za-z ,']{20}"


def said_error(text: str) -> bool:
    """chatcli's error lines ("error: …"), not a story that mentions "terror"."""
    return re.search(r"(?m)^error: ", text) is not None


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (the model worker of a chatcli)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def maps_llama(pid: int) -> bool:
    return "libllama" in Path(f"/proc/{pid}/maps").read_text()


def worker_of(pid: int, timeout: float = 30) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in children(pid):
            if "chatcli.providers.local_worker" in Path(f"/proc/{child}/cmdline").read_text():
                return child
        time.sleep(0.05)
    raise AssertionError(f"no model worker under pid {pid}")


@pytest.fixture
def local_env(env):
    env["LLM_PROVIDER"] = ""  # nothing set: the local model is chosen
    env["NO_COLOR"] = "1"
    return env


# -- through the real command ---------------------------------------------------------------
def test_oneshot_generates_offline_with_no_provider_configured(local_env, workdir):
    result = run_chatcli("-p", "Say hello.", env=local_env, cwd=workdir, timeout=180)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.strip()) > 0
    assert result.stderr == ""  # llama.cpp's own logging stays quiet


def test_the_repl_answers_two_multi_token_questions_offline(local_env, workdir, sessions_dir):
    repl = Repl(local_env, BUNDLED_LABEL, cwd=workdir)
    try:
        for question in ("What is the capital of France? Answer in one sentence.",
                         "Name three colours of the rainbow."):
            out = plain(repl.send(question, timeout=180))
            answer = out.split(question, 1)[1].rsplit(BUNDLED_LABEL, 1)[0]
            assert sum(ch.isalpha() for ch in answer) >= 3, out
            assert not said_error(answer), out
        repl.send("/session save offline")
    finally:
        repl.close()
    history = json.loads((sessions_dir / "offline.json").read_text())["chat_history"]
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
    assert all(m["content"].strip() for m in history)


def test_the_model_runs_in_a_worker_never_in_the_process_holding_the_history(local_env, workdir):
    repl = Repl(local_env, BUNDLED_LABEL, cwd=workdir)
    try:
        repl.send("Say hi.", timeout=180)
        worker = worker_of(repl.child.pid)
        assert maps_llama(worker)
        assert not maps_llama(repl.child.pid)
    finally:
        repl.close()


def test_a_worker_killed_mid_answer_leaves_the_repl_and_the_session_intact(local_env, workdir, sessions_dir):
    repl = Repl(local_env, BUNDLED_LABEL, cwd=workdir, args=("--session", "notes"))
    try:
        repl.send("What is the capital of France?", timeout=180)
        before = json.loads((sessions_dir / "notes.json").read_text())["chat_history"]
        worker = worker_of(repl.child.pid)
        repl.child.send(LONG_ANSWER + "\r")
        repl.child.expect(ECHOED, timeout=20)
        repl.child.expect(STREAMING, timeout=120)  # the answer is streaming
        os.kill(worker, signal.SIGSEGV)
        repl.child.expect_exact(CRASHED, timeout=10)
        repl.expect_prompt(timeout=10)
        assert repl.child.isalive()
        after = json.loads((sessions_dir / "notes.json").read_text())["chat_history"]
        assert after[: len(before)] == before  # the earlier turn is untouched
        assert after[len(before)]["content"] == LONG_ANSWER  # the question is kept
        assert all(m.get("meta", {}).get("interrupted") for m in after[len(before) + 1:])  # not an answer
        out = plain(repl.send("Say hello.", timeout=180))  # the next turn starts a fresh worker
        assert not said_error(out), out
        assert worker_of(repl.child.pid) != worker
    finally:
        repl.close()
    final = json.loads((sessions_dir / "notes.json").read_text())["chat_history"]
    assert final[-2]["content"] == "Say hello." and final[-1]["role"] == "assistant"


def test_ctrl_c_stops_a_local_answer_and_the_worker_answers_the_next_one(local_env, workdir):
    repl = Repl(local_env, BUNDLED_LABEL, cwd=workdir)
    try:
        repl.send("Say hi.", timeout=180)
        repl.child.send(LONG_ANSWER + "\r")
        repl.child.expect(ECHOED, timeout=20)
        repl.child.expect(STREAMING, timeout=120)
        repl.child.send("\x03")
        repl.child.expect_exact("[interrupted]", timeout=5)
        repl.expect_prompt(timeout=5)
        out = plain(repl.send("Say hello.", timeout=180))
        assert not said_error(out), out
    finally:
        repl.close()


def test_compact_with_the_local_model_shows_the_spinner_until_the_summary_is_written(local_env, workdir,
                                                                                    sessions_dir):
    # Four turns planted, so that only the summary is generated here (kept short by the token limit).
    history = []
    for topic in ("castles of the Loire", "sourdough bread", "the rules of chess", "tide pools"):
        history += [{"role": "user", "content": f"Tell me about {topic}."},
                    {"role": "assistant", "content": f"Here is what I know about {topic}. "
                     + "It is a rich subject with a long history and many stories to tell. " * 4}]
    sessions_dir.mkdir(parents=True)
    (sessions_dir / "planted.json").write_text(json.dumps({"version": 2, "chat_history": history}))
    del local_env["NO_COLOR"]  # a terminal in colour: answers, and commands that wait, show the spinner
    local_env["CHATCLI_MAX_TOKENS"] = "60"
    repl = Repl(local_env, BUNDLED_LABEL, cwd=workdir, args=("--session", "planted"))
    try:
        out = plain(repl.send("/compact", timeout=180))
    finally:
        repl.close()
    done = re.search(r"Compacted 2 messages into one summary", out)
    assert done, out
    assert "working on /compact" in out[:done.start()] and "working on" not in out[done.start():], out


def test_another_gguf_runs_from_chatcli_local_model(local_env, workdir, tmp_path):
    other = tmp_path / "my-model.gguf"
    other.symlink_to(bundled_model_path())
    local_env["CHATCLI_LOCAL_MODEL"] = str(other)
    result = run_chatcli("-p", "Name a colour.", env=local_env, cwd=workdir, timeout=180)
    assert result.returncode == 0, result.stderr
    assert any(ch.isalpha() for ch in result.stdout)
    repl = Repl(local_env, "my-model", cwd=workdir)
    try:
        assert "Model: my-model (provider local)" in plain(repl.send("/model"))
    finally:
        repl.close()


def test_missing_gguf_is_a_clear_error(local_env, workdir, tmp_path):
    local_env["CHATCLI_LOCAL_MODEL"] = str(tmp_path / "absent.gguf")
    result = run_chatcli("-p", "hi", env=local_env, cwd=workdir)
    assert result.returncode == 1
    assert result.stderr == f"chatcli: error: local: model file not found: {tmp_path / 'absent.gguf'}\n"


def test_a_file_that_is_not_a_model_is_one_line_and_nothing_crashes(local_env, workdir, tmp_path):
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"not a model at all" * 100)
    local_env["CHATCLI_LOCAL_MODEL"] = str(bogus)
    result = run_chatcli("-p", "hi", env=local_env, cwd=workdir, timeout=60)
    assert result.returncode == 1
    assert result.stderr.startswith("chatcli: error: local: cannot load bogus.gguf")
    assert result.stderr.count("\n") == 1


# -- the engine against the real worker, in this process ------------------------------------
@pytest.fixture
def settings(local_env) -> Settings:
    return Settings.load(local_env)


def say_hi(provider: LocalProvider, settings: Settings) -> str:
    """A short answer straight from the provider: the text it streamed."""
    request = Request(model=settings.model, messages=[Message("user", "Say hi.")], max_tokens=8)
    return "".join(e.text for e in provider.stream(request) if isinstance(e, Delta))


def test_a_crash_mid_answer_is_one_error_and_the_history_keeps_the_question(settings):
    conv = Conversation(settings)
    provider = conv.provider
    seen: list[str] = []

    def crash_on_first_text(text: str) -> None:
        if not seen:
            os.kill(provider.worker.pid, signal.SIGSEGV)
        seen.append(text)

    with pytest.raises(ProviderError, match=r"^local model crashed \(signal 11\); the conversation is kept$"):
        conv.send(LONG_ANSWER, on_text=crash_on_first_text)
    assert conv.history[0] == Message("user", LONG_ANSWER, meta={"mode": "chat"})
    assert all(m.meta.get("interrupted") for m in conv.history[1:])  # nothing is recorded as answered
    result = conv.send("Say hello.")  # a fresh worker
    assert result.text.strip() and not result.interrupted


def test_leaving_an_answer_early_cancels_it_and_keeps_the_worker_warm(settings, monkeypatch):
    # The protocol, not the clock: on a loaded machine the acknowledgement may take longer than
    # the grace before a kill, and a kill is not what this test is about.
    monkeypatch.setattr("chatcli.providers.local.CANCEL_GRACE", 10.0)
    provider = LocalProvider(settings)
    provider.warm()
    pid = provider.worker.pid
    events = provider.stream(Request(model=settings.model, messages=[Message("user", LONG_ANSWER)]))
    assert isinstance(next(events), Delta)
    events.close()  # what Ctrl-C does to the stream
    assert provider.worker.pid == pid  # acknowledged between tokens: no restart needed
    assert say_hi(provider, settings).strip()


def test_ctrl_c_while_a_long_prompt_is_read_stops_it_and_keeps_the_worker(settings, monkeypatch):
    monkeypatch.setattr("chatcli.providers.local.CANCEL_GRACE", 10.0)  # the protocol, not the clock
    provider = LocalProvider(settings)
    provider.warm()
    pid = provider.worker.pid

    def logbook(wind: str, lines: int) -> str:  # ~15 tokens a line
        return " ".join(f"Line {i} of the logbook says the wind was {wind}." for i in range(lines))

    lines = 20
    while True:  # a prompt that takes at least a second to read on this machine, now
        started = time.perf_counter()
        request = Request(model=settings.model, messages=[Message("user", logbook(f"strong {lines}", lines))])
        with streaming(provider, request) as events:
            next(e for e in events if isinstance(e, Delta))
        reading = time.perf_counter() - started
        if reading >= 1.0 or lines >= 240:
            break
        lines *= 2
    assert reading >= 0.5, reading

    signalled: list[float] = []

    def interrupt(_signum, _frame):
        signalled.append(time.perf_counter())
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    seen: list = []
    try:
        signal.setitimer(signal.ITIMER_REAL, reading / 4)
        with pytest.raises(KeyboardInterrupt):
            request = Request(model=settings.model, messages=[Message("user", logbook("calm", lines))])
            with streaming(provider, request) as events:
                seen.extend(events)
        stopping = time.perf_counter() - signalled[0]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert seen == []  # stopped before the first token
    assert stopping < reading / 3, (stopping, reading)  # llama.cpp stopped reading when told, not at the end
    assert provider.worker.pid == pid  # no restart needed
    assert say_hi(provider, settings).strip()  # and the worker answers the next one


def test_a_worker_that_died_between_turns_is_replaced_without_an_error(settings):
    provider = LocalProvider(settings)
    provider.warm()
    old = provider.worker.pid
    os.kill(old, signal.SIGKILL)
    provider.worker.proc.wait()  # dead and reaped before the next turn begins
    assert say_hi(provider, settings).strip()
    assert provider.worker.pid != old


def test_a_long_message_leaves_the_answer_the_room_left_and_one_too_long_is_refused():
    from llama_cpp import Llama

    from chatcli.providers.local_worker import MIN_ANSWER, TEMPLATE_MARGIN, Refusal, fit, window

    vocab = Llama(model_path=str(bundled_model_path()), vocab_only=True, verbose=False)  # the real tokenizer
    lines = [f"Line {i} of the logbook says the wind was calm." for i in range(400)]
    history = [{"role": "user", "content": "an old question"}, {"role": "assistant", "content": "an old answer"}]

    short = [*history, {"role": "user", "content": "Say hi."}]
    assert fit(vocab, short, 512, 4096) == (short, 512)  # everything fits beside a full answer

    _, alone = window(vocab, [{"role": "user", "content": " ".join(lines[:250])}], 10**6)
    long = [*history, {"role": "user", "content": " ".join(lines[:250])}]
    sent, answer = fit(vocab, long, 512, 4096)
    assert sent == long[-1:]  # the older turns make room for it
    assert answer == 4096 - TEMPLATE_MARGIN - alone < 512  # the answer gets what is left
    assert MIN_ANSWER <= answer

    with pytest.raises(Refusal, match=r"^the message is about [\d,]+ tokens; the local model's 4,096-token context "
                                      r"window holds at most about 3,984 beside an answer: shorten it, or use a "
                                      r"hosted provider$"):
        fit(vocab, [{"role": "user", "content": " ".join(lines[:300])}], 512, 4096)


def test_a_message_too_long_for_the_window_is_one_line_and_the_worker_goes_on(settings):
    provider = LocalProvider(settings)
    logbook = " ".join(f"Line {i} of the logbook says the wind was calm." for i in range(400))
    with pytest.raises(ProviderError, match=r"^local: the message is about [\d,]+ tokens; the local model's "):
        list(provider.stream(Request(model=settings.model, messages=[Message("user", logbook)])))
    assert list(provider.stream(Request(model=settings.model, messages=[Message("user", "Say hi.")], max_tokens=4)))


def test_an_answer_cut_by_a_full_window_says_so_not_to_raise_the_token_limit(settings):
    import contextlib
    import io

    from chatcli.providers.base import Done, ProviderRegistry
    from chatcli.render.turn import stream_turn

    class WindowFull:  # what the local provider reports when the message left the answer little room
        name = "local"

        def __init__(self, _settings) -> None:
            pass

        def stream(self, request):
            yield Delta("The logbook says")
            yield Done("context_window")

    registry = ProviderRegistry()
    registry.register("local", WindowFull)
    out = io.StringIO()
    conv = Conversation(settings.with_provider("local"), registry=registry)
    notes = io.StringIO()
    with contextlib.redirect_stderr(notes):
        stream_turn(conv, "Summarise this long logbook.", out)
    assert out.getvalue() == "The logbook says\n"
    assert notes.getvalue() == ("[the answer stopped where the context window was full; a shorter message leaves "
                                "it more room]\n")


def test_a_prompt_at_the_edge_of_the_window_is_answered_with_the_room_left(local_env):
    # A 1,024-token window (CHATCLI_CONTEXT_WINDOW sizes the model's too): the same edge as the
    # default 4,096's, read four times faster on the one core the parallel suite gives the model.
    settings = Settings.load({**local_env, "CHATCLI_CONTEXT_WINDOW": "1024"})
    provider = LocalProvider(settings)
    logbook = " ".join(f"Line {i} of the logbook says the wind was calm." for i in range(60))  # ~870 tokens
    events = list(provider.stream(Request(model=settings.model, messages=[Message("user", "Summarise: " + logbook)],
                                          max_tokens=512, timeout=settings.timeout)))  # more than the window has left
    assert any(isinstance(e, Delta) and e.text.strip() for e in events)  # no "exceeds the context window"
    assert events[-1].stop_reason in ("stop", "context_window")
    assert provider.worker.context == 1024


def test_the_worker_says_when_the_window_not_the_token_limit_cut_an_answer():
    import io

    from chatcli.providers import local_worker

    class Model:  # a tokenizer of one token per word, and an answer that runs to its limit
        def tokenize(self, text: bytes, add_bos: bool, special: bool) -> list[int]:
            return [0] * len(text.split())

        def create_chat_completion(self, messages, max_tokens, **_sampling):
            def chunks():
                yield {"choices": [{"delta": {"content": "word " * max_tokens}, "finish_reason": "length"}]}
            return chunks()

    def answer(words: int) -> dict:
        out = io.BytesIO()
        worker = local_worker.Worker("model.gguf", 4096, 1, out)
        worker.llm = Model()
        worker._abort_prompt_if_cancelled = lambda _rid: None  # needs the real library
        worker.chat(1, {"messages": [{"role": "user", "content": "w " * words}], "max_tokens": 512})
        return json.loads(out.getvalue().splitlines()[-1])

    assert answer(100)["stop_reason"] == "length"  # the answer had its full 512 tokens
    assert answer(3700)["stop_reason"] == "context_window"  # the message left it only ~340


def test_an_answer_waits_for_the_worker_no_longer_than_its_timeout(settings):
    provider = LocalProvider(settings)
    provider.warm()
    first = provider.stream(Request(model=settings.model, messages=[Message("user", LONG_ANSWER)]))
    next(first)  # this answer holds the worker
    try:
        with pytest.raises(ProviderError, match=r"^local: the model was busy with another answer for 1 s; try again$"):
            list(provider.stream(Request(model=settings.model, messages=[Message("user", "hi")], timeout=1)))
    finally:
        first.close()
    assert list(provider.stream(Request(model=settings.model, messages=[Message("user", "hi")], max_tokens=4)))


def test_conversations_of_one_process_share_one_worker(settings):
    first, second = LocalProvider(settings), LocalProvider(settings)
    assert first.worker is second.worker


def test_the_oneshot_process_never_imports_llama_cpp(local_env, workdir):
    import subprocess
    import sys

    probe = ("import sys\nfrom chatcli.main import main\ncode = main(sys.argv[1:])\n"
             "sys.stderr.write('HEAVY=' + ','.join(sorted({m.split('.')[0] for m in sys.modules} & "
             "{'llama_cpp', 'numpy'})) + '\\n')\n")
    result = subprocess.run([sys.executable, "-c", probe, "-p", "Say hi."], env=local_env, cwd=workdir,
                            capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=180)
    assert "HEAVY=\n" in result.stderr, result.stderr
    assert result.stdout.strip()


def test_a_crash_during_an_mcp_answer_is_a_tool_error_and_the_server_goes_on(local_env, workdir):
    import asyncio

    from mcp import Client, StdioServerParameters

    home = local_env["CHATCLI_HOME"]
    local_env["CHATCLI_MAX_TOKENS"] = "2000"  # a long answer: there is time to kill the worker in it

    def worker_pids() -> list[int]:
        found = []
        for entry in Path("/proc").iterdir():
            try:
                if (entry.name.isdigit() and b"local_worker" in (entry / "cmdline").read_bytes()
                        and f"CHATCLI_HOME={home}".encode() in (entry / "environ").read_bytes()):
                    found.append(int(entry.name))
            except OSError:
                continue
        return found

    async def work(client):
        call = asyncio.create_task(client.call_tool("ask_chatcli", {"prompt": LONG_ANSWER}))
        for _ in range(600):
            if worker_pids():
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(2.0)  # loaded, and well into the answer
        (worker,) = worker_pids()
        os.kill(worker, signal.SIGSEGV)
        crashed = await call
        again = await client.call_tool("ask_chatcli", {"prompt": "Say hello."})
        return crashed, again

    async def main():
        params = StdioServerParameters(command=CHATCLI_PATH, args=["mcp-server"], env=local_env, cwd=str(workdir))
        async with Client(params) as client:
            return await work(client)

    crashed, again = asyncio.run(main())
    assert crashed.is_error and CRASHED in crashed.content[0].text
    assert not again.is_error and again.content[0].text.strip()
    mirror = json.loads((Path(home) / "sessions" / "mcp-mcp.json").read_text())["chat_history"]
    assert mirror[0]["content"] == LONG_ANSWER and mirror[-2]["content"] == "Say hello."


def test_an_editor_cancels_a_local_answer_and_the_next_prompt_is_answered(local_env, workdir):
    import asyncio

    import acp
    from acp.schema import ClientCapabilities, Implementation

    class Editor(acp.Client):
        def __init__(self) -> None:
            self.chunks: list[str] = []

        async def session_update(self, session_id, update, **kwargs) -> None:
            if type(update).__name__ == "AgentMessageChunk":
                self.chunks.append(update.content.text)

        async def request_permission(self, *args, **kwargs):
            return None

    async def main():
        editor = Editor()
        async with acp.spawn_agent_process(editor, CHATCLI_PATH, "acp", env=local_env, cwd=str(workdir),
                                           transport_kwargs={"stderr": None}) as (conn, _proc):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=ClientCapabilities(),
                                  client_info=Implementation(name="tests", version="1"))
            sid = (await conn.new_session(cwd=str(workdir), mcp_servers=[])).session_id
            turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[acp.text_block(LONG_ANSWER)]))
            for _ in range(3000):  # streamed token by token (at most a minute)
                if len(editor.chunks) >= 5 or turn.done():
                    break
                await asyncio.sleep(0.02)
            assert len(editor.chunks) >= 5, (editor.chunks, turn.done() and turn.result())
            await conn.cancel(session_id=sid)
            cancelled = await turn
            streamed = len(editor.chunks)
            again = await conn.prompt(session_id=sid, prompt=[acp.text_block("Say hello.")])
            return cancelled, again, streamed, editor.chunks

    cancelled, again, streamed, chunks = asyncio.run(main())
    assert cancelled.stop_reason == "cancelled"
    assert again.stop_reason in ("end_turn", "max_tokens")
    assert "".join(chunks[streamed:]).strip()  # the second answer arrived
    assert not said_error("".join(chunks))


# -- chatcli doctor ---------------------------------------------------------------------------
def test_doctor_with_nothing_configured_loads_the_local_model_and_answers(local_env, workdir):
    result = run_chatcli("doctor", env=local_env, cwd=workdir, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[1] == f"ok    provider: local, model {BUNDLED_LABEL} (no provider is configured)"
    assert any(line.startswith(f"ok    local model: {BUNDLED_LABEL}.gguf (") and "loaded in" in line
               and ("AVX2" in line or platform.machine() != "x86_64") for line in lines), lines
    assert any(line.startswith("ok    answer: local answered one token in ") for line in lines), lines
    assert lines[-1] == "chatcli can answer."


def test_doctor_checks_the_hosted_provider_and_the_offline_model(openai_env, openai_server, workdir):
    openai_server.reply("Hello")
    result = run_chatcli("doctor", env=openai_env, cwd=workdir, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"ok    provider: openai, model m (LLM_PROVIDER); endpoint {openai_server.base_url}" in result.stdout
    assert "ok    answer: openai answered one token in " in result.stdout
    assert "ok    answer (offline): local answered one token in " in result.stdout
    assert openai_server.requests[0].body["max_tokens"] == 1


def test_doctor_says_which_provider_fails_and_exits_1(env, workdir):
    env.update(LLM_PROVIDER="openai", OPENAI_API_KEY="x", OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    result = run_chatcli("doctor", env=env, cwd=workdir, timeout=180)
    assert result.returncode == 1
    assert any(line.startswith("FAIL  answer: ") for line in result.stdout.splitlines()), result.stdout
    assert result.stdout.splitlines()[-1] == ("Something chatcli needs failed (above); the offline model answers: "
                                              "chatcli --provider local")
    assert result.stderr == ""


def test_doctor_reports_a_model_that_does_not_load(local_env, workdir, tmp_path):
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"GGUF" + b"\0" * 64)
    local_env["CHATCLI_LOCAL_MODEL"] = str(bogus)
    result = run_chatcli("doctor", env=local_env, cwd=workdir, timeout=60)
    assert result.returncode == 1
    assert "FAIL  local model: local: cannot load bogus.gguf" in result.stdout
