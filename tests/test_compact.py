"""/compact through the real REPL and a fake model server (SPEC §8)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from repl_driver import Repl, plain


def sent(server, index: int = -1) -> list[str]:
    return [m["content"] for m in server.requests[index].body["messages"]]


def test_compact_replaces_the_older_turns_with_a_summary_and_keeps_them(repl_env, workdir, openai_server):
    repl = Repl(repl_env, "m", cwd=workdir, args=("--session", "long"))
    try:
        for i in range(1, 6):
            repl.send(f"turn {i} question")
        openai_server.reply("Briefing: turns 1 and 2 asked questions.")
        out = plain(repl.send("/compact keep the numbers"))
        match = re.search(r"Compacted (\d+) messages into one summary \(<<ccr:([0-9a-f]{16})>>\)", out)
        assert match, out
        assert match.group(1) == "4"
        prompt = sent(openai_server)[0]
        assert "Also: keep the numbers" in prompt and "turn 1 question" in prompt
        repl.send("turn 6 question")
        request = sent(openai_server)
        assert request[0].startswith("Briefing: turns 1 and 2 asked questions.")
        assert "turn 1 question" not in request and "turn 3 question" in request
        assert request[-1] == "turn 6 question"
        recalled = plain(repl.send(f"/recall {match.group(2)}"))
        assert "#1 user\nturn 1 question" in recalled and "#4 assistant\nYou said: turn 2 question" in recalled
    finally:
        repl.close()
    home = Path(repl_env["CHATCLI_HOME"])
    document = json.loads((home / "sessions" / "long.json").read_text())
    summary = document["chat_history"][0]
    assert summary["meta"] == {"is_summary": True, "summary_of": 4, "mode": "chat"}
    journal = [json.loads(line) for line in (home / "transcripts" / f"{document['transcript_id']}.jsonl")
               .read_text().splitlines()]
    contents = [e["message"]["content"] for e in journal if e["type"] == "message"]
    assert contents[:2] == ["turn 1 question", "You said: turn 1 question"]  # the originals survive
    assert [e["type"] for e in journal].count("rewrite") == 1


def test_compact_on_a_short_history_says_so(repl_env, workdir, openai_server):
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        repl.send("only turn")
        assert "Nothing to compact: the history has 2 messages" in plain(repl.send("/compact"))
        assert len(openai_server.requests) == 1
    finally:
        repl.close()


def test_a_failed_summary_changes_nothing(repl_env, workdir, openai_server):
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        for i in range(5):
            repl.send(f"q{i}")
        openai_server.reply(status=500, error="overloaded")
        openai_server.reply(status=500, error="overloaded")
        openai_server.reply(status=500, error="overloaded")
        openai_server.reply(status=500, error="overloaded")
        out = plain(repl.send("/compact", timeout=60))
        assert out.count("error:") == 1
        repl.send("after")
        assert sent(openai_server)[0] == "q0"  # the history is whole
    finally:
        repl.close()


LONG_ANSWER = "Long answer. " + "y" * 800  # about 200 tokens


def test_automatic_compaction_near_the_window_is_announced_and_takes_effect(repl_env, workdir, openai_server):
    # A long first answer, then short turns: before the fifth turn the request would take about
    # 280 tokens, past 50% of a 540-token window, and the six messages that stay verbatim about
    # 65, so summarising the older two frees most of it.
    repl_env.update(CHATCLI_CONTEXT_WINDOW="540", CHATCLI_AUTO_COMPACT="50%")
    repl = Repl(repl_env, "m", cwd=workdir, args=("--session", "auto"))
    try:
        openai_server.reply(LONG_ANSWER)
        for i in range(1, 5):
            assert "Automatic compaction" not in plain(repl.send(f"turn {i} question"))
        openai_server.reply("Short briefing.")
        out = plain(repl.send("turn 5 question"))
        match = re.search(r"Automatic compaction \(about (\d+)% of the 540-token context window\): "
                          r"compacted 2 messages into one summary", out)
        assert match and int(match.group(1)) >= 50, out
        assert "Summarise the conversation" in sent(openai_server, -2)[0]  # the summary request came first
        request = sent(openai_server)
        assert request[0].startswith("Short briefing.") and request[-1] == "turn 5 question"
        assert LONG_ANSWER not in request and "turn 2 question" in request
        repl.send("turn 6 question")
        assert len(openai_server.requests) == 7  # compacted once, not again at the next turn
    finally:
        repl.close()
    document = json.loads((Path(repl_env["CHATCLI_HOME"]) / "sessions" / "auto.json").read_text())
    assert document["chat_history"][0]["meta"]["is_summary"] is True


def test_no_automatic_compaction_when_the_latest_messages_fill_the_window(repl_env, workdir, openai_server):
    repl_env.update(CHATCLI_CONTEXT_WINDOW="540", CHATCLI_AUTO_COMPACT="50%")
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        said = ""
        for i in range(1, 7):  # short turns, then long answers: the older part stays a sliver
            if i >= 3:
                openai_server.reply(LONG_ANSWER)
            said += plain(repl.send(f"turn {i} question"))
        assert "Automatic compaction" not in said
        assert said.count("compacting the older ones would not free enough, so it was not done") == 1
        assert len(openai_server.requests) == 6  # no summary was asked for
    finally:
        repl.close()


def test_automatic_compaction_can_be_turned_off(repl_env, workdir, openai_server):
    repl_env.update(CHATCLI_CONTEXT_WINDOW="540", CHATCLI_AUTO_COMPACT="off")
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        said = ""
        for i in range(1, 7):
            openai_server.reply(LONG_ANSWER)
            said += plain(repl.send(f"turn {i} question"))
        assert "Automatic compaction" not in said
        assert len(openai_server.requests) == 6  # no summary was asked for
        request = sent(openai_server)
        # Without compaction, the latest messages that fit the window, said once
        assert request[-1] == "turn 6 question" and "turn 1 question" not in request
        assert said.count("older messages were not sent") == 1, said
    finally:
        repl.close()


def test_a_summary_that_only_repeats_one_of_the_messages_is_refused(repl_env, workdir, openai_server):
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        for question in ("Thanks!", "Name a famous painter.", "What is the tallest animal?", "Bye.", "Again.",
                         "Once more."):
            openai_server.reply({"Thanks!": "You're welcome, glad I could help you today."}.get(question, "An answer."))
            repl.send(question)
        openai_server.reply("You're welcome, glad I could help you today!")  # the small model's "summary"
        out = plain(repl.send("/compact"))
        assert "summary only repeats one of the" in out and "You're welcome, glad I could help you today." in out
        assert "nothing was compacted" in out
        repl.send("after")
        assert sent(openai_server)[0] == "Thanks!"  # the originals are kept
    finally:
        repl.close()


def test_a_summary_no_shorter_than_the_originals_is_refused(repl_env, workdir, openai_server):
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        for i in range(1, 5):
            repl.send(f"q{i}")
        openai_server.reply("A summary far longer than the two short messages it is meant to replace.")
        out = plain(repl.send("/compact"))
        assert "is not shorter than the" in out and "nothing was compacted" in out
        repl.send("after")
        assert sent(openai_server)[0] == "q1"
    finally:
        repl.close()


def test_a_summary_that_echoes_the_prompt_s_markup_is_stored_without_it_or_refused_when_that_is_all(
        repl_env, workdir, openai_server):
    repl = Repl(repl_env, "m", cwd=workdir, args=("--session", "tagged"))
    try:
        for i in range(1, 5):
            repl.send(f"question number {i} about the deploy freeze")
        openai_server.reply("[user]\n\n</conversation>\n\n")  # a small model echoing the prompt, nothing else
        out = plain(repl.send("/compact"))
        assert "empty summary (only the prompt's markup); nothing was compacted" in out, out
        openai_server.reply("The user asked about the freeze.\n</conversation>")
        assert "Compacted" in plain(repl.send("/compact"))
    finally:
        repl.close()
    history = json.loads((Path(repl_env["CHATCLI_HOME"]) / "sessions" / "tagged.json").read_text())["chat_history"]
    summary = next(m["content"] for m in history if m.get("meta", {}).get("is_summary"))
    assert summary.startswith("The user asked about the freeze.\n\n(Summary of ") and "conversation>" not in summary


def near_a_small_window(repl_env, workdir, openai_server) -> Repl:
    """A REPL four turns into a 540-token window that compacts at half of it: the next turn compacts."""
    repl_env.update(CHATCLI_CONTEXT_WINDOW="540", CHATCLI_AUTO_COMPACT="50%")
    repl = Repl(repl_env, "m", cwd=workdir)
    openai_server.reply(LONG_ANSWER)
    for i in range(1, 5):
        repl.send(f"turn {i} question")
    return repl


def test_a_failed_automatic_compaction_waits_four_turns_before_trying_again(repl_env, workdir, openai_server):
    repl = near_a_small_window(repl_env, workdir, openai_server)
    try:
        openai_server.reply(status=400, error="bad request")
        out = plain(repl.send("turn 5 question"))
        assert "Automatic compaction (about" in out and "failed:" in out and "the next try in four turns" in out
        for i in range(6, 9):
            assert "Automatic compaction" not in plain(repl.send(f"turn {i} question"))
        openai_server.reply("Short briefing.")
        assert "compacted" in plain(repl.send("turn 9 question"))
        summaries = [seen for seen in openai_server.requests if "Summarise the conversation" in str(seen.body)]
        assert len(summaries) == 2
    finally:
        repl.close()


def test_a_summary_cut_at_its_token_bound_is_kept_and_said_to_be_cut(repl_env, workdir, openai_server):
    # Small local models ramble past any bound: refusing would make /compact fail there every time.
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        for i in range(5):
            repl.send(f"q{i}")
        openai_server.reply("Briefing: q0 and", finish_reason="length")
        out = plain(repl.send("/compact"))
        bound = openai_server.requests[-1].body["max_tokens"]
        assert "Compacted 4 messages into one summary" in out, out
        assert f"The summary was cut at its {bound:,}-token bound: it may end mid-sentence." in out
        assert "/rewind compact undoes the compaction" in out
        repl.send("after")
        summary = sent(openai_server)[0]
        # The model is told too, so it knows to recall what the summary lacks.
        assert summary.startswith("Briefing: q0 and") and f"cut at its {bound:,}-token bound" in summary
    finally:
        repl.close()


def test_an_automatic_compaction_cut_at_its_token_bound_is_kept_and_said_to_be_cut(repl_env, workdir,
                                                                                    openai_server):
    repl = near_a_small_window(repl_env, workdir, openai_server)  # its summary's bound: a quarter, 135 tokens
    try:
        openai_server.reply("Short briefing that stops", finish_reason="length")
        out = plain(repl.send("turn 5 question"))
        assert "Automatic compaction (about" in out and "The summary was cut at its 135-token bound" in out, out
        assert sent(openai_server)[0].startswith("Short briefing that stops")
    finally:
        repl.close()