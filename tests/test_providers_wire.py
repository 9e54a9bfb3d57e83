"""The hosted providers on the wire: the real provider code over HTTP against a loopback fake
(tests/fakes.py), which sends exactly the frames a test gives it. How stored tool calls are
sent, how streamed tool calls are put together, which errors are retried, and what an empty
answer says."""

from __future__ import annotations

import json
import threading
from http.server import ThreadingHTTPServer

import pytest
from fakes import FakeModelServer, Reply, api_handler

from chatcli.config.settings import Settings
from chatcli.core.errors import ProviderError
from chatcli.core.messages import Message
from chatcli.providers.base import Delta, Done, Request, ToolCall

ARGUMENTS = {"path": "src", "depth": 2}
ARGUMENTS_TEXT = json.dumps(ARGUMENTS)

# One tool call in each shape a session file may hold (core/messages.py).
STORED_SHAPES = {
    "go": {"id": "c1", "type": "function", "name": "list_dir", "arguments": ARGUMENTS},
    "text-arguments": {"id": "c1", "type": "function", "name": "list_dir", "arguments": ARGUMENTS_TEXT},
    "chat-completions": {"id": "c1", "type": "function",
                         "function": {"name": "list_dir", "arguments": ARGUMENTS_TEXT}},
}


def provider_for(kind: str, server: FakeModelServer, env: dict[str, str]):
    from chatcli.providers.base import default_registry

    prefix = kind.upper()
    settings = Settings.load({**env, "LLM_PROVIDER": kind, f"{prefix}_API_KEY": "x",
                              f"{prefix}_BASE_URL": server.base_url, f"{prefix}_MODEL": "m"})
    return default_registry().create(settings)


def history_with(call: dict) -> list[Message]:
    return [Message("user", "what is in src?"),
            Message("assistant", "", tool_calls=[call]),
            Message("tool", "a.py\nb.py", tool_call_id="c1"),
            Message("user", "and now?")]


def events_of(provider, messages: list[Message] | None = None) -> list:
    request = Request(model="m", messages=messages or [Message("user", "list src")], timeout=10)
    return list(provider.stream(request))


# -- stored tool calls on the wire ----------------------------------------------------------------
@pytest.mark.parametrize("shape", STORED_SHAPES)
def test_every_stored_tool_call_shape_goes_to_an_openai_server_with_arguments_as_text(shape, env):
    with FakeModelServer("openai") as server:
        events_of(provider_for("openai", server, env), history_with(STORED_SHAPES[shape]))
    [sent] = server.requests[0].body["messages"][1]["tool_calls"]
    assert sent["id"] == "c1" and sent["type"] == "function"
    assert sent["function"]["name"] == "list_dir"
    assert isinstance(sent["function"]["arguments"], str)  # an object is refused (HTTP 400, or 500)
    assert json.loads(sent["function"]["arguments"]) == ARGUMENTS


def test_arguments_the_model_wrote_that_were_no_json_object_go_back_to_an_openai_server_as_written(env):
    call = {"id": "c1", "type": "function", "name": "list_dir", "arguments": {}, "raw": "{'path': src"}
    with FakeModelServer("openai") as server:
        events_of(provider_for("openai", server, env), history_with(call))
    [sent] = server.requests[0].body["messages"][1]["tool_calls"]
    assert sent["function"] == {"name": "list_dir", "arguments": "{'path': src"}


@pytest.mark.parametrize("shape", STORED_SHAPES)
def test_every_stored_tool_call_shape_goes_to_anthropic_with_input_as_an_object(shape, env):
    with FakeModelServer("anthropic") as server:
        events_of(provider_for("anthropic", server, env), history_with(STORED_SHAPES[shape]))
    turn = server.requests[0].body["messages"][1]
    assert turn["role"] == "assistant"
    assert turn["content"] == [{"type": "tool_use", "id": "c1", "name": "list_dir", "input": ARGUMENTS}]


# -- streamed tool calls, as real servers send them -----------------------------------------------
def frame(*pieces: dict, finish: str | None = None) -> str:
    delta = {"tool_calls": list(pieces)} if pieces else {}
    return "data: " + json.dumps({"id": "c", "object": "chat.completion.chunk",
                                  "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + "\n\n"


def piece(index: int | None = None, id: str | None = None, name: str | None = None,
          arguments: str | None = None) -> dict:
    out: dict = {} if index is None else {"index": index}
    if id is not None:
        out.update(id=id, type="function")
    function = {key: value for key, value in (("name", name), ("arguments", arguments)) if value is not None}
    if function:
        out["function"] = function
    return out


def split(text: str, size: int = 4) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def streamed(frames: list[str], env) -> list[ToolCall]:
    with FakeModelServer("openai") as server:
        server.replies.append(Reply(frames=[*frames, frame(finish="tool_calls"), "data: [DONE]\n\n"]))
        events = events_of(provider_for("openai", server, env))
    assert isinstance(events[-1], Done) and events[-1].stop_reason == "tool_calls"
    return [event for event in events if isinstance(event, ToolCall)]


def assert_one_list_dir(calls: list[ToolCall], id: str = "call_1") -> None:
    assert [(c.id, c.name) for c in calls] == [(id, "list_dir")]
    assert json.loads(calls[0].arguments) == ARGUMENTS


def test_a_tool_call_streamed_with_its_name_once_and_arguments_in_pieces_is_assembled(env):
    # OpenAI's way: the id and name in the first piece, then the arguments in pieces.
    frames = [frame(piece(0, "call_1", "list_dir", ""))] + [frame(piece(0, arguments=p)) for p in split(ARGUMENTS_TEXT)]
    assert_one_list_dir(streamed(frames, env))


def test_a_tool_call_whose_name_and_id_are_repeated_in_every_chunk_is_assembled(env):
    # llama.cpp's Python server (chatml-function-calling): id and whole name again in every chunk.
    frames = [frame(piece(0, "call_1", "list_dir", p)) for p in split(ARGUMENTS_TEXT)]
    assert_one_list_dir(streamed(frames, env))


def test_a_tool_call_whose_name_is_streamed_in_pieces_is_assembled(env):
    frames = [frame(piece(0, "call_1", "list")), frame(piece(0, name="_d")), frame(piece(0, name="ir"))]
    frames += [frame(piece(0, arguments=p)) for p in split(ARGUMENTS_TEXT)]
    assert_one_list_dir(streamed(frames, env))


def test_a_tool_call_whose_name_grows_in_every_chunk_is_assembled(env):
    frames = [frame(piece(0, "call_1", "list")), frame(piece(0, name="list_d")), frame(piece(0, name="list_dir"))]
    frames += [frame(piece(0, arguments=ARGUMENTS_TEXT))]
    assert_one_list_dir(streamed(frames, env))


def test_a_tool_call_whose_arguments_come_whole_in_one_chunk_is_assembled(env):
    assert_one_list_dir(streamed([frame(piece(0, "call_1", "list_dir", ARGUMENTS_TEXT))], env))


def test_a_tool_call_whose_chunks_repeat_all_the_arguments_so_far_is_assembled(env):
    # Some servers resend the whole arguments so far in every chunk instead of the new piece.
    texts = [ARGUMENTS_TEXT[:end] for end in range(3, len(ARGUMENTS_TEXT) + 1, 5)] + [ARGUMENTS_TEXT]
    frames = [frame(piece(0, "call_1", "list_dir", texts[0]))] + [frame(piece(0, arguments=t)) for t in texts[1:]]
    assert_one_list_dir(streamed(frames, env))


def test_a_tool_call_whose_arguments_are_repeated_whole_after_their_pieces_is_assembled(env):
    # Pieces, then a closing chunk with the whole arguments again (written out anew: other spacing).
    frames = [frame(piece(0, "call_1", "list_dir", ""))] + [frame(piece(0, arguments=p)) for p in split(ARGUMENTS_TEXT)]
    frames += [frame(piece(0, "call_1", "list_dir", json.dumps(ARGUMENTS, separators=(",", ":"))))]
    assert_one_list_dir(streamed(frames, env))


def test_tool_calls_without_an_index_are_told_apart_by_their_ids(env):
    frames = [frame(piece(None, "call_1", "list_dir", ARGUMENTS_TEXT[:5])),
              frame(piece(None, arguments=ARGUMENTS_TEXT[5:])),
              frame(piece(None, "call_2", "read_file", '{"path": "a.py"}'))]
    calls = streamed(frames, env)
    assert [(c.id, c.name) for c in calls] == [("call_1", "list_dir"), ("call_2", "read_file")]
    assert json.loads(calls[0].arguments) == ARGUMENTS and json.loads(calls[1].arguments) == {"path": "a.py"}


def test_two_calls_with_repeated_names_stay_apart_by_index(env):
    second = '{"path": "a.py"}'
    frames = []
    for a, b in zip(split(ARGUMENTS_TEXT), split(second) + [""] * 10):
        frames.append(frame(piece(0, "call_1", "list_dir", a), piece(1, "call_2", "read_file", b)))
    calls = streamed(frames, env)
    assert [(c.id, c.name) for c in calls] == [("call_1", "list_dir"), ("call_2", "read_file")]
    assert json.loads(calls[0].arguments) == ARGUMENTS and json.loads(calls[1].arguments) == {"path": "a.py"}


# -- errors ---------------------------------------------------------------------------------------
class ErrorServer:
    """A loopback JSON API that answers every POST with one status and body, counting them."""

    def __init__(self, status: int, payload: dict) -> None:
        self.count = 0

        def answer(_method, _params):
            self.count += 1
            return status, payload

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), api_handler(answer))
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "ErrorServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def post(self) -> str:
        from chatcli.providers.http import post_stream

        host, port = self.httpd.server_address[:2]
        with pytest.raises(ProviderError) as caught:
            post_stream("openai", f"http://{host}:{port}/v1/chat/completions", {}, {"model": "m"}, 5,
                        sleep=lambda _seconds: None)
        return str(caught.value)


LLAMA_CPP_VALIDATION = {"error": {"message": "2 validation errors:\n  {'type': 'string_type', 'loc': ('body', "
                                             "'messages', 1, 'function', 'arguments'), 'msg': 'Input should be a "
                                             "valid string', 'input': {'path': '.'}}\n",
                                  "type": "internal_server_error", "param": None, "code": None}}
FASTAPI_VALIDATION = {"detail": [{"type": "string_type", "loc": ["body", "messages", 1, "tool_calls", 0, "function",
                                                                 "arguments"],
                                  "msg": "Input should be a valid string", "input": {"path": "."}}]}


@pytest.mark.parametrize("payload", [LLAMA_CPP_VALIDATION, FASTAPI_VALIDATION], ids=["llama.cpp", "fastapi"])
def test_a_validation_error_answered_with_http_500_is_not_retried(payload):
    with ErrorServer(500, payload) as server:
        error = server.post()
    assert server.count == 1
    assert "HTTP 500" in error and "Input should be a valid string" in error and "\n" not in error


def test_a_server_error_that_is_no_validation_error_is_still_retried():
    with ErrorServer(500, {"error": {"message": "out of memory"}}) as server:
        error = server.post()
    assert server.count == 4 and "after 4 attempts" in error


def test_a_retried_request_sends_the_same_body_again(env):
    with FakeModelServer("openai") as server:
        server.reply(status=503, error="busy")
        events = events_of(provider_for("openai", server, env), history_with(STORED_SHAPES["go"]))
    assert [e.text for e in events if isinstance(e, Delta)] == ["You said: ", "and now?"]
    first, second = server.requests
    assert second.body == first.body


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
def test_a_client_error_is_not_retried(status):
    with ErrorServer(status, {"error": {"message": "no"}}) as server:
        server.post()
    assert server.count == 1


@pytest.mark.parametrize("status", [408, 409, 429])
def test_a_timeout_conflict_or_rate_limit_is_retried(status):
    with ErrorServer(status, {"error": {"message": "later"}}) as server:
        server.post()
    assert server.count == 4


def empty_stream_error(kind: str, env) -> str:
    """The one-line error for an answer of HTTP 200 with no data at all."""
    with FakeModelServer(kind) as server:
        server.replies.append(Reply(frames=[]))
        with pytest.raises(ProviderError) as caught:
            events_of(provider_for(kind, server, env))
    assert "\n" not in str(caught.value)
    return str(caught.value)


def test_an_openai_compatible_answer_with_no_data_at_all_names_the_context_window_as_the_likely_cause(env):
    # llama.cpp's server answers a request longer than its context with HTTP 200 and an empty body.
    error = empty_stream_error("openai", env)
    assert "context window" in error and "CHATCLI_CONTEXT_WINDOW" in error


def test_an_anthropic_answer_with_no_data_at_all_says_the_stream_ended_before_any_data(env):
    # Anthropic refuses an over-long request with HTTP 400: an empty stream there is a cut connection.
    error = empty_stream_error("anthropic", env)
    assert "the stream ended before any data" in error
    assert "context window" not in error and "CHATCLI_CONTEXT_WINDOW" not in error


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_an_answer_cut_after_some_text_says_only_that_it_ended_early(kind, env):
    with FakeModelServer(kind) as server:
        server.reply("Half an", cut=True)
        with pytest.raises(ProviderError) as caught:
            list(provider_for(kind, server, env).stream(Request(model="m", messages=[Message("user", "hi")])))
    assert "ended before the answer was complete" in str(caught.value)
    assert "CHATCLI_CONTEXT_WINDOW" not in str(caught.value)


# -- the requests the engine makes ----------------------------------------------------------------
def compacted(make_conversation, fake_model, **variables: str) -> None:
    """Twelve long messages compacted by a conversation with these settings."""
    from chatcli.engine import compaction

    conv = make_conversation(**variables)
    for n in range(12):
        conv.history.append(Message("user" if n % 2 == 0 else "assistant", f"message {n} " + "words " * 60))
    fake_model.reply("A short summary.")
    compaction.compact(conv)


def test_the_compact_summary_request_bounds_its_answer(make_conversation, fake_model):
    compacted(make_conversation, fake_model, CHATCLI_CONTEXT_WINDOW="2048")
    [request] = fake_model.requests
    # No bound lets a server write until its context is full (minutes on a CPU).
    assert request.max_tokens is not None and 0 < request.max_tokens <= 2048 // 4


def test_the_compact_summary_request_keeps_a_lower_chatcli_max_tokens(make_conversation, fake_model):
    compacted(make_conversation, fake_model, CHATCLI_MAX_TOKENS="100")
    assert fake_model.requests[0].max_tokens == 100


def test_an_agent_turn_the_model_answers_without_its_tools_says_so_once(make_conversation, fake_model, workdir):
    conv = make_conversation()
    conv.agent.root = workdir
    conv.agent.switch("agent", conv)
    notices: list[str] = []
    fake_model.reply("There are some files.")
    fake_model.reply("Still just text.")
    conv.send("list the files", on_notice=notices.append)
    conv.send("and again", on_notice=notices.append)
    said = [n for n in notices if "without using its tools" in n]
    assert len(said) == 1 and "\n" not in said[0]


def test_an_agent_turn_is_not_told_about_unused_tools_once_the_model_called_one(make_conversation, fake_model,
                                                                                 workdir):
    from fakes import tool_call

    conv = make_conversation()
    conv.agent.root = workdir
    conv.agent.switch("agent", conv)
    notices: list[str] = []
    fake_model.reply(tool_calls=[tool_call("c1", "list_dir")])
    fake_model.reply("Nothing there.")
    fake_model.reply("Hello.")
    conv.send("list the files", on_notice=notices.append)
    conv.send("hi", on_notice=notices.append)
    assert not [n for n in notices if "without using its tools" in n]


def test_a_chat_turn_is_not_told_about_unused_tools(make_conversation, fake_model):
    conv = make_conversation()
    notices: list[str] = []
    conv.send("hello", on_notice=notices.append)
    assert not [n for n in notices if "without using its tools" in n]


def test_text_and_no_calls_is_a_plain_answer(env):
    with FakeModelServer("openai") as server:
        events = events_of(provider_for("openai", server, env))
    assert [e.text for e in events if isinstance(e, Delta)] == ["You said: ", "list src"]
