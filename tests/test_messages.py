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
