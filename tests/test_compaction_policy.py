"""The compaction policy (SPEC §8) as a pure function: no model, no files."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from chatcli.core.compaction import compacted, plan_cut, summary_message
from chatcli.core.messages import Message


def user(text="q"):
    return Message("user", text)


def answer(text="a"):
    return Message("assistant", text)


def call(*ids):
    return Message("assistant", "", tool_calls=[{"id": i, "type": "function",
                                                 "function": {"name": "f", "arguments": "{}"}} for i in ids])


def result(call_id, text=""):
    return Message("tool", text or f"result {call_id}", tool_call_id=call_id)


def test_system_messages_and_the_recent_turns_stay_verbatim():
    history = [Message("system", "rules"), user("q1"), answer("a1"), user("q2"), answer("a2"), user("q3"),
               answer("a3")]
    cut = plan_cut(history, keep_recent=2)
    assert cut.summarised == (1, 2, 3, 4)
    summary = summary_message("q1..a2 in short", cut)
    after = compacted(history, cut, summary)
    assert [m.content for m in after] == ["rules", "q1..a2 in short", "q3", "a3"]
    assert summary.meta == {"is_summary": True, "summary_of": 4, "mode": "chat"}


def test_too_short_to_compact():
    assert plan_cut([user(), answer()], keep_recent=2) is None
    assert plan_cut([Message("system", "s"), user(), answer(), user()], keep_recent=2) is None


def test_the_cut_moves_before_a_call_whose_result_would_be_left_behind():
    history = [user("q1"), answer("a1"), user("q2"), call("c1", "c2"), result("c1"), result("c2"), answer("done")]
    cut = plan_cut(history, keep_recent=2)  # a plain count would cut between c1's and c2's results
    assert cut.index == 3 and cut.summarised == (0, 1, 2)


# -- property: never split a call from its results --------------------------------------------
def _units():
    plain_turn = st.tuples(st.just("turn"), st.integers(0, 0))
    tool_turn = st.tuples(st.just("tools"), st.integers(1, 3))
    system = st.tuples(st.just("system"), st.integers(0, 0))
    return st.lists(st.one_of(plain_turn, tool_turn, system), min_size=0, max_size=25)


def _build(units):
    history, counter = [], 0
    for kind, count in units:
        if kind == "system":
            history.append(Message("system", "s"))
        elif kind == "turn":
            history += [user(), answer()]
        else:
            ids = [f"c{counter + k}" for k in range(count)]
            counter += count
            history += [user(), call(*ids), *(result(i) for i in ids), answer()]
    return history


@given(_units(), st.integers(0, 12))
def test_compaction_never_separates_a_tool_call_from_its_result(units, keep_recent):
    history = _build(units)
    cut = plan_cut(history, keep_recent)
    if cut is None:
        return
    older_calls = {c["id"] for i in cut.summarised for c in (history[i].tool_calls or ())}
    older_results = {history[i].tool_call_id for i in cut.summarised if history[i].role == "tool"}
    recent = history[cut.index:]
    recent_calls = {c["id"] for m in recent for c in (m.tool_calls or ())}
    recent_results = {m.tool_call_id for m in recent if m.role == "tool"}
    assert older_calls == older_results and recent_calls == recent_results
    after = compacted(history, cut, summary_message("summary", cut))
    assert [m for m in after if m.role == "system"] == [m for m in history if m.role == "system"]
    recent_count = sum(1 for m in recent if m.role != "system")
    assert recent_count >= min(keep_recent, sum(1 for m in history if m.role != "system"))


def test_a_summary_loses_the_prompt_s_markup_and_keeps_the_rest():
    from chatcli.core.compaction import clean_summary

    assert clean_summary("Asked about X.\n</conversation>") == "Asked about X."
    assert clean_summary("<conversation>\n[user]\nhi\n\n[result of tool call c1]\nok\n</ Conversation >") == "hi\n\nok"
    assert clean_summary("[user]\n\n</conversation>") == ""
    assert clean_summary('"Hello! How can I help?') == "Hello! How can I help?"  # an unmatched opening quote
    assert clean_summary('"Quoted," she said.') == '"Quoted," she said.'
    # Brackets that are the summary's own words stay.
    assert clean_summary("The [user] asked; see [notes] and [assistant] replies.") == \
        "The [user] asked; see [notes] and [assistant] replies."
