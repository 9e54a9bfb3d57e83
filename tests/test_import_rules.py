"""The rules of bringing another tool's conversations in (core/imported.py), free of I/O: what a
provider accepts, what may still change, what an import does with a conversation seen before."""

from __future__ import annotations

from chatcli.core.imported import (CHANGED, GROWN, NEW, NO_RESULT, SAME, Found, Record, decide, digest, session_name,
                                   settled, well_paired)
from chatcli.core.messages import Message


def ask(*ids: str | None) -> Message:
    return Message("assistant", "", tool_calls=[{"id": i, "type": "function", "name": "read", "arguments": {}}
                                                for i in ids])


def result(ident: str | None, text: str) -> Message:
    return Message("tool", text, tool_call_id=ident)


def paired(*messages: Message) -> tuple[list[tuple], dict]:
    found = Found("src", "id", list(messages))
    well_paired(found)
    shape = [(m.role, m.tool_call_id or [c["id"] for c in m.tool_calls or []], m.content) for m in found.messages]
    again = Found("src", "id", list(found.messages))
    well_paired(again)  # a second pass changes nothing: every import of a source makes the same messages
    assert [(m.role, m.tool_call_id, m.content) for m in again.messages] == \
        [(m.role, m.tool_call_id, m.content) for m in found.messages] and not again.left_out
    return shape, found.left_out


def test_each_result_goes_right_after_its_call_even_when_written_elsewhere():
    shape, left = paired(Message("user", "go"), result("a", "early"), ask("a", "b"), Message("user", "meanwhile"),
                         result("b", "late"))
    assert shape == [("user", [], "go"), ("assistant", ["a", "b"], ""), ("tool", "a", "early"), ("tool", "b", "late"),
                     ("user", [], "meanwhile")]
    assert left == {}


def test_ids_numbered_afresh_at_every_answer_pair_in_order():
    shape, left = paired(ask("call_0"), result("call_0", "first"), ask("call_0"), result("call_0", "second"))
    assert shape == [("assistant", ["call_0"], ""), ("tool", "call_0", "first"), ("assistant", ["call_0"], ""),
                     ("tool", "call_0", "second")]
    assert left == {}


def test_what_is_missing_is_made_and_counted_and_a_copy_kept_once():
    shape, left = paired(ask("a", "b"), result("a", "A"), result("a", "A"), result("z", "a result of no call"),
                         ask(None), result(None, "a result without an id"))
    assert shape == [("assistant", ["a", "b"], ""), ("tool", "a", "A"), ("tool", "b", NO_RESULT),
                     ("assistant", ["z"], ""), ("tool", "z", "a result of no call"),
                     ("assistant", ["import-4-0"], ""), ("tool", "import-4-0", NO_RESULT),
                     ("assistant", ["import-5"], ""), ("tool", "import-5", "a result without an id")]
    assert left == {"duplicate tool result": 1, "missing tool result": 2, "missing tool call": 2}


def test_the_last_answer_and_a_call_still_waiting_for_its_result_are_unsettled():
    found = Found("src", "id", [Message("user", "q"), ask("a"), Message("user", "and?"), Message("assistant", "x")])
    well_paired(found)  # a's result is not recorded yet: the answer that asked is not settled
    assert settled(found.messages) == 1
    assert settled([Message("user", "q"), Message("assistant", "a"), Message("user", "q2"),
                    Message("assistant", "b")]) == 3
    assert settled([Message("user", "only a question")]) == 0


def record_of(messages: list[Message]) -> Record:
    firm = settled(messages)
    return Record("src", "id", "s", len(messages), digest(messages), "now", settled=firm,
                  settled_digest=digest(messages[:firm]))


def test_what_an_import_does_with_a_conversation_seen_before():
    before = [Message("user", "q"), Message("assistant", "a")]
    record = record_of(before)
    assert decide(Found("src", "id", before), None) == (NEW, 0)
    assert decide(Found("src", "id", list(before)), record) == (SAME, 2)
    assert decide(Found("src", "id", [*before, Message("user", "q2")]), record) == (GROWN, 2)
    # The last answer changed (its next block written): replaced from where it was unsettled.
    assert decide(Found("src", "id", [Message("user", "q"), Message("assistant", "a, more")]), record) == (GROWN, 1)
    # An earlier message edited, or messages taken back at the source: left as it was.
    assert decide(Found("src", "id", [Message("user", "Q"), Message("assistant", "a")]), record)[0] == CHANGED
    shrunk = record_of([*before, Message("user", "q2"), Message("assistant", "b")])
    assert decide(Found("src", "id", [*before, Message("user", "q2")]), shrunk)[0] == CHANGED


def test_names_come_from_titles_in_any_script_and_never_take_a_name_in_use():
    taken = {"claude-code-2025-08-20-plan"}
    assert session_name("claude-code", "2025-08-20T09:00:00Z", "Plan", taken.__contains__) == \
        "claude-code-2025-08-20-plan-2"
    assert session_name("codex", None, "Überprüfung der Straße", lambda _n: False) == \
        "codex-undated-uberprufung-der-strasse"
    assert session_name("gemini", "2025-01-02", "部署冻结", lambda _n: False, tag="0a1b2c3d4e") == \
        "gemini-2025-01-02-0a1b2c3d4e"
    assert session_name("chatcli", "2025-01-02", None, lambda _n: False, kept="autosave-20250102-101010",
                        tag="ff") == "chatcli-2025-01-02-ff"  # a name chatcli keeps for itself is not kept
    long = session_name("llm", "2025-01-02", "word " * 200, lambda _n: False)
    assert len(long) <= 128 and long.startswith("llm-2025-01-02-word-word")


def test_a_time_without_its_zone_is_shown_as_the_utc_it_is(monkeypatch):
    import time

    from chatcli.core.export import local_time
    from chatcli.engine.records import said_at

    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        naive = Message("user", "q", extra={"timestamp": "2025-06-01T12:00:00"})
        zoned = Message("user", "q", extra={"timestamp": "2025-06-01T12:00:00Z"})
        assert local_time(said_at(naive)) == local_time(said_at(zoned)) == "2025-06-01 08:00:00"
        assert said_at(Message("user", "q", extra={"timestamp": "not a time"})) is None
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
