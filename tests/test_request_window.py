"""A request never exceeds the model's context window, whatever the compaction setting: the rule
(core/request_window.py) as a pure function, then whole turns over HTTP against the fake
OpenAI-compatible server with CHATCLI_AUTO_COMPACT=off."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from conftest import run_chatcli
from fakes import tool_call
from hypothesis import given
from hypothesis import strategies as st

from chatcli.config.settings import Settings
from chatcli.core.errors import ProviderError
from chatcli.core.messages import Message
from chatcli.core.request_window import Appended, answer_room, fit, message_tokens
from chatcli.engine import sessions
from chatcli.engine.agent import Agent
from chatcli.engine.conversation import Conversation
from chatcli.engine.tools import Outcome


from test_compaction_policy import answer, call, result, user  # the same small messages


def sent(history, budget):
    return fit(history, budget).messages(history)


def cost(*messages):
    return sum(message_tokens(m) for m in messages)


# -- the rule ---------------------------------------------------------------------------------
def test_a_history_that_fits_is_sent_whole():
    history = [answer("an opening line"), user("q1"), answer("a1"), user("q2")]
    window = fit(history, 1000)
    assert window.messages(history) == history and window.left_out == 0 and not window.over
    assert window.tokens == cost(*history)


def test_the_latest_messages_that_fit_are_sent_from_a_question_on():
    history = [user("q1"), answer("x" * 400), user("q2"), answer("y" * 400), user("q3"), answer("a3"), user("q4")]
    # Room for q4, a3, q3 and the start of y…: the answer without its question is not sent.
    window = fit(history, cost(*history[4:]) + 50)
    assert window.messages(history) == history[4:] and window.left_out == 4


def test_the_system_messages_and_the_summary_that_open_the_history_are_kept():
    summary = Message("assistant", "Summary of before.", meta={"is_summary": True})
    history = [Message("system", "Always answer in French."), summary,
               *(m for i in range(20) for m in (user(f"q{i} " + "x" * 200), answer("a" * 200))), user("latest")]
    window = fit(history, 400)
    messages = window.messages(history)
    assert messages[:2] == history[:2] and messages[2].role == "user" and messages[-1].content == "latest"
    assert 2 < len(messages) < 10 and window.left_out == len(history) - len(messages)
    assert window.tokens == cost(*messages) <= 400


def test_a_system_message_later_in_the_history_is_sent_only_with_its_part():
    history = [user("q1"), Message("system", "be brief"), answer("x" * 800), user("q2")]
    assert sent(history, cost(history[-1]) + 10) == [history[-1]]


def test_a_tool_call_and_its_results_go_together_or_not_at_all():
    # An agent turn whose steps outgrow the window: its question stays, then its latest steps
    # whole (the assistant message that calls, with every result), never a result alone.
    steps = [call("c1", "c2"), result("c1", "r" * 400), result("c2", "s" * 400),
             call("c3"), result("c3", "t" * 100), call("c4", "c5"), result("c4", "u" * 100), result("c5", "v" * 100)]
    history = [user("older"), answer("old answer"), user("do the task"), *steps]
    budget = cost(history[2], *steps[3:]) + 20  # not enough for the first step's 800 characters
    window = fit(history, budget)
    assert window.messages(history) == [history[2], *steps[3:]]
    assert window.question == 2 and window.left_out == 5
    # Room for only part of the last step: the last step goes whole, and the window says it is over.
    tight = fit(history, cost(history[2], *steps[5:]) - 10)
    assert tight.messages(history) == [history[2], *steps[5:]] and tight.over


def test_what_is_sent_never_starts_with_a_tool_result():
    # A history that starts mid-way through a tool call (an imported one), with no question
    # before the latest: a cut by size alone would fall on the orphan result.
    history = [result("c0", "w" * 40), answer("a" * 40), call("c1"), result("c1", "r" * 40), answer("done")]
    for budget in range(cost(history[-1]), cost(*history) + 1):
        messages = sent(history, budget)
        assert messages[0].role != "tool" or messages == history, budget
        assert messages[-1] is history[-1]


def test_the_newest_question_alone_over_the_budget_is_sent_alone_and_marked_over():
    history = [Message("system", "rules"), user("q1"), answer("a1"), user("z" * 4000)]
    window = fit(history, 100)
    assert window.over and window.messages(history) == [history[-1]] and window.left_out == 3


@given(st.lists(st.one_of(st.tuples(st.just("turn"), st.integers(0, 300)),
                          st.tuples(st.just("tools"), st.integers(1, 3)),
                          st.tuples(st.just("system"), st.integers(0, 0))), min_size=1, max_size=25),
       st.booleans(), st.integers(0, 1500))
def test_any_history_sends_a_whole_window_of_it(units, mid_turn, budget):
    history, counter = [], 0
    for kind, size in units:
        if kind == "system":
            history.append(Message("system", "s" * 20))
        elif kind == "turn":
            history += [user("q" * size), answer("a" * (300 - size))]
        else:
            ids = [f"c{counter + k}" for k in range(size)]
            counter += size
            history += [user(), call(*ids), *(result(i, "r" * 90) for i in ids), answer()]
    if mid_turn:  # a request between two steps of an agent turn
        history += [user("task"), call(f"c{counter}"), result(f"c{counter}", "r" * 150)]
    else:
        history.append(user("the newest question"))
    window = fit(history, budget)
    messages = window.messages(history)
    newest = max(i for i, m in enumerate(history) if m.role == "user")
    assert history[newest] in messages and messages[-1] is history[-1]
    assert window.tokens == cost(*messages) and (window.tokens <= budget or window.over)
    assert window.left_out == len(history) - len(messages)
    calls = {c["id"] for m in messages for c in (m.tool_calls or ())}
    results = {m.tool_call_id for m in messages if m.role == "tool"}
    assert calls == results  # no call without its results, no result without its call
    where = {id(m): i for i, m in enumerate(history)}
    positions = [where[id(m)] for m in messages]
    assert positions == sorted(set(positions))
    body = [m for m in messages if m.role != "system"]
    assert body[0].role == "user" or window.over and body[0].role == "assistant"


class Counted(Sequence):
    """A history that counts how many of its messages were read."""

    def __init__(self, messages):
        self.messages, self.reads = messages, 0

    def __len__(self):
        return len(self.messages)

    def __getitem__(self, index):
        self.reads += 1
        return self.messages[index]


def test_a_100_000_message_history_is_read_no_further_back_than_what_is_sent():
    history = Counted([Message("user" if i % 2 == 0 else "assistant", f"{i} " + "w" * 1000) for i in range(100_000)])
    window = fit(history, 124_000)
    assert 400 < len(history) - window.start < 500 and window.left_out == window.start
    assert history.reads < 3 * (len(history) - window.start)


def test_a_question_not_yet_in_the_history_is_planned_with_it():
    history = [user("q1"), answer("x" * 400), user("q2"), answer("a2")]
    planned = fit(Appended(history, user("q3")), cost(*history[2:], user("q3")))
    assert planned.start == 2 and len(Appended(history, user("q3"))) == 5


def test_the_answer_keeps_its_room():
    assert answer_room(128_000, None) == 4096 and answer_room(4096, None) == 512
    assert answer_room(128_000, 8000) == 8000 and answer_room(1000, 8000) == 500


# -- whole turns over HTTP --------------------------------------------------------------------
WINDOW = 2000  # tokens: about 16 of the session's 500-character messages, with the answer's room
NOTICE = "older messages were not sent (they do not fit the model's 2,000-token context window"


def big_session(env, count: int = 300) -> None:
    conv = Conversation(Settings.load(env), journal=True)
    sessions.start(conv, name="big")
    conv.history += [Message("user" if i % 2 == 0 else "assistant", f"message {i} " + "w" * 500)
                     for i in range(count)]
    conv.sync_transcript()
    conv.binding.write_through()


def request_tokens(body: dict) -> int:
    """About how many tokens a request's body holds, counted as chatcli counts them."""
    return (sum(len(m.get("content") or "") // 4 + 4 for m in body["messages"])
            + len(json.dumps(body.get("tools", []))) // 4)


def test_with_compaction_off_a_turn_sends_the_latest_messages_that_fit_and_says_so_once(openai_env, openai_server):
    openai_env.update(CHATCLI_AUTO_COMPACT="off", CHATCLI_CONTEXT_WINDOW=str(WINDOW))
    big_session(openai_env)
    conv = Conversation(Settings.load(openai_env), journal=True)
    sessions.load(conv, "big")
    said: list[str] = []
    for question in ("first?", "second?", "third?"):
        conv.send(question, on_notice=said.append)
    for seen in openai_server.requests:
        messages = seen.body["messages"]
        assert request_tokens(seen.body) < WINDOW
        assert messages[0]["role"] == "user" and messages[0]["content"].startswith("message ")
    last = openai_server.requests[-1].body["messages"]
    assert [m["content"] for m in last[-3:]] == ["second?", "You said: second?", "third?"]
    history = [m.content for m in conv.history]
    assert [m["content"] for m in last] == history[-len(last) - 1:-1]  # the latest, in order, none skipped
    [note] = [n for n in said if "not sent" in n]
    first = openai_server.requests[0].body["messages"]
    assert note.startswith(f"{301 - len(first):,} {NOTICE}"), note
    # Only what was sent was trimmed: the session file and the journal hold every message.
    home = Path(openai_env["CHATCLI_HOME"])
    document = json.loads((home / "sessions" / "big.json").read_text())
    assert [m["content"] for m in document["chat_history"]] == history and len(history) == 306
    journal = [json.loads(line) for line in
               (home / "transcripts" / f"{document['transcript_id']}.jsonl").read_text().splitlines()]
    assert [e["message"]["content"] for e in journal if e["type"] == "message"] == history


def test_the_notice_is_said_again_after_a_turn_that_sent_everything(openai_env, openai_server):
    # A 1,000-token window holds the session tools' descriptions (about 200 tokens), the
    # answer's room and two of these exchanges, not three.
    openai_env.update(CHATCLI_AUTO_COMPACT="off", CHATCLI_CONTEXT_WINDOW="1000")
    conv = Conversation(Settings.load(openai_env), journal=True)
    said: list[str] = []
    for _ in range(4):  # the third turn leaves the first exchange out, the fourth two of them
        conv.send("w " * 300, on_notice=said.append)
    assert [len(seen.body["messages"]) for seen in openai_server.requests] == [1, 3, 3, 3]
    assert sum("older messages were not sent" in n for n in said) == 1
    conv.history[:] = conv.history[-1:]  # what /rewind or /compact would do: everything fits again
    conv.send("short", on_notice=said.append)
    assert sum("not sent" in n for n in said) == 1
    for _ in range(3):  # the history outgrows the window again: said again, once
        conv.send("w " * 300, on_notice=said.append)
    assert sum("not sent" in n for n in said) == 2, said
    assert all(request_tokens(seen.body) < 1000 for seen in openai_server.requests)


def test_a_one_shot_turn_on_a_long_session_fits_and_says_what_it_left_out(openai_env, openai_server, workdir):
    openai_env.update(CHATCLI_AUTO_COMPACT="off", CHATCLI_CONTEXT_WINDOW=str(WINDOW), NO_COLOR="1")
    big_session(openai_env)
    done = run_chatcli("--session", "big", "-p", "and now?", env=openai_env, cwd=workdir)
    assert done.returncode == 0, done.stderr
    [seen] = openai_server.requests
    assert request_tokens(seen.body) < WINDOW and seen.body["messages"][-1]["content"] == "and now?"
    assert (done.stdout + done.stderr).count(NOTICE) == 1, done.stdout + done.stderr


def test_a_message_too_long_for_the_window_is_one_error_line_and_no_request(openai_env, openai_server, workdir):
    openai_env.update(CHATCLI_AUTO_COMPACT="off", CHATCLI_CONTEXT_WINDOW=str(WINDOW))
    done = run_chatcli("-p", "word " * 3000, env=openai_env, cwd=workdir)
    assert done.returncode == 1 and openai_server.requests == []
    [line] = done.stderr.strip().splitlines()
    assert "more than the 2,000-token context window (CHATCLI_CONTEXT_WINDOW), so it was not sent" in line


def test_each_hosted_provider_gets_the_latest_messages_that_fit(tool_server, env):
    env.update(CHATCLI_AUTO_COMPACT="off", CHATCLI_CONTEXT_WINDOW=str(WINDOW))
    big_session(env, 100)
    conv = Conversation(Settings.load(env), journal=True)
    sessions.load(conv, "big")
    said: list[str] = []
    conv.send("and now?", on_notice=said.append)
    [seen] = tool_server.requests
    messages = seen.body["messages"]
    assert request_tokens(seen.body) < WINDOW
    assert messages[0]["role"] == "user" and messages[-1]["content"] == "and now?" and len(messages) < 20
    assert sum(NOTICE in n for n in said) == 1


def test_the_local_model_s_requests_fit_its_own_window_without_any_setting(make_conversation, fake_model):
    # The local provider's window is 4,096 tokens unless CHATCLI_CONTEXT_WINDOW says otherwise.
    conv = make_conversation(LLM_PROVIDER="local", CHATCLI_AUTO_COMPACT="off")
    conv.history += [Message("user" if i % 2 == 0 else "assistant", "w" * 2000) for i in range(100)]
    said: list[str] = []
    conv.send("and now?", on_notice=said.append)
    [request] = fake_model.requests
    assert sum(len(m.content) // 4 + 4 for m in request.messages) < 4096 - 512
    assert request.messages[-1].content == "and now?" and request.messages[0].role == "user"
    assert any("4,096-token context window" in n for n in said), said


def test_a_step_whose_results_alone_outgrow_the_window_set_ends_the_turn_in_one_line(make_conversation, fake_model,
                                                                                   monkeypatch):
    conv = make_conversation(CHATCLI_AUTO_COMPACT="off", CHATCLI_CONTEXT_WINDOW="540")
    monkeypatch.setattr(Agent, "call", lambda self, conv, call, approve: Outcome("r" * 4000))  # 1,000 tokens
    fake_model.reply(tool_calls=[tool_call("c1", "session_search", query="deploy")])
    with pytest.raises(ProviderError, match=r"^the latest step of this turn is about [\d,]+ tokens with the system "
                                            r"prompt, more than the 540-token context window"):
        conv.send("look it up")
    assert len(fake_model.requests) == 1  # the step that would not fit was not sent
    assert [m.role for m in conv.history] == ["user", "assistant", "tool"]  # kept, the call with its result
