"""The message value's JSON form keeps every field other tools wrote (SPEC §3)."""

from __future__ import annotations

import pytest

from chatcli.core.messages import Message


def test_round_trip_keeps_unknown_fields_and_meta():
    data = {"role": "assistant", "content": "hi", "meta": {"mode": "agent", "x": 1},
            "images": ["a.png"], "is_error": False, "tool_calls": [{"id": "1", "type": "function",
                                                                     "name": "f", "arguments": {}}]}
    message = Message.from_dict(data)
    assert message.extra == {"images": ["a.png"], "is_error": False}
    assert message.to_dict() == data


@pytest.mark.parametrize("data", [
    {"role": "assistant", "meta": {"mode": "agent"}, "tool_calls": [{"id": "1", "type": "function", "name": "f",
                                                                     "arguments": {}}]},
    {"role": "tool", "tool_call_id": "1"},
    {"role": "user", "meta": {"mode": "chat"}, "images": [{"media_type": "image/png", "url": "u"}]},
])
def test_a_message_without_content_keeps_every_other_field(data):
    assert Message.from_dict(data).to_dict() == {"content": "", **data}


def test_missing_or_null_content_becomes_empty_text():
    assert Message.from_dict({"role": "tool", "content": None, "tool_call_id": "1"}).content == ""
    assert Message.from_dict({"role": "user"}).to_dict() == {"role": "user", "content": ""}


@pytest.mark.parametrize("bad", [[], {"content": "x"}, {"role": 3}])
def test_a_message_without_a_role_is_refused(bad):
    with pytest.raises(ValueError):
        Message.from_dict(bad)


@pytest.mark.parametrize("call", [
    {"id": "1", "type": "function", "name": "f", "arguments": {"a": 1}},  # Go ChatCLI's (the stored shape)
    {"id": "1", "type": "function", "name": "f", "arguments": {}, "raw": "[1]"},
    {"id": "1", "type": "function", "name": "f", "arguments": '{"a": 1}'},  # chatcli's earlier shape
    {"id": "1", "name": "f", "arguments": None},
    {"name": "f"},  # no id: sent as ""
    {"id": "1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}},  # Chat Completions
    {"id": "1", "function": {"name": "f", "arguments": {"a": 1}}},
])
def test_every_readable_shape_of_a_tool_call_loads(call):
    message = Message.from_dict({"role": "assistant", "content": "", "tool_calls": [call]})
    assert message.tool_calls[0]["name"] == "f"


@pytest.mark.parametrize("call,says", [
    ({"id": 1, "function": "x"}, "tool_calls[0]: 'id' must be a string, not a number (1)"),
    ({"id": None, "name": "f"}, "tool_calls[0]: 'id' must be a string, not null"),
    ({"id": "1"}, "tool_calls[0] must name its function: a string 'name', or a 'function' object with a string "
                  "'name'"),
    ({"id": "1", "name": 5}, "tool_calls[0] must name its function: a string 'name', or a 'function' object with a "
                             "string 'name'"),
    ({"id": "1", "name": "f", "arguments": [1]},
     "tool_calls[0]: 'arguments' must be an object, a string or null, not a list holding a number"),
    ({"id": "1", "name": "f", "raw": None}, "tool_calls[0]: 'raw' must be a string, not null"),
    ({"id": "1", "function": {"arguments": "{}"}}, "tool_calls[0]: 'function' must have a string 'name', not null"),
    ({"id": "1", "function": {"name": "f", "arguments": None}},
     "tool_calls[0]: the function's 'arguments' must be a string or an object, not null"),
])
def test_a_tool_call_of_another_shape_is_refused_naming_what_is_wrong(call, says):
    with pytest.raises(ValueError) as caught:
        Message.from_dict({"role": "assistant", "content": "", "tool_calls": [call]})
    assert str(caught.value) == says
