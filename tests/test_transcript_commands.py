"""/session export, /session transcript …, /session search and their CLI twins (SPEC §5, §7),
through the real REPL and the real executable."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import run_chatcli
from repl_driver import Repl, plain

from chatcli.commands.builtin import build_registry
from chatcli.config.settings import Settings
from chatcli.core.messages import Message
from chatcli.engine import sessions
from chatcli.engine.conversation import Conversation


def make(env, name: str, *pairs: tuple[str, str], journal: bool = True) -> Conversation:
    """A saved session `name` with these turns, written as the REPL writes them."""
    conv = Conversation(Settings.load(env), journal=journal)
    sessions.start(conv, name=name)
    for question, answer in pairs:
        conv.history += [Message("user", question), Message("assistant", answer)]
        conv.sync_transcript()
        conv.binding.write_through()
    return conv


def test_export_md_and_jsonl_default_names_and_modes(repl_env, workdir):
    repl = Repl(repl_env, "m", cwd=workdir, args=("--session", "notes"))
    try:
        repl.send("what is ```code```?")
        out = plain(repl.send("/session export md"))
        match = re.search(r"Exported 2 messages to (\S+\.md) \(source: journal\)\.", out)
        assert match, out
        md = Path(match.group(1))
        assert md.parent == workdir and re.fullmatch(r"chatcli-notes-\d{8}-\d{6}\.md", md.name)
        assert oct(md.stat().st_mode & 0o777) == "0o600"
        text = md.read_text()
        assert "## #1 user" in text and "## #2 assistant" in text and "what is ```code```?" in text
        repl.send("and then?")
        out = plain(repl.send("/session export jsonl"))
        jsonl = Path(re.search(r"Exported 2 turns \(4 messages\) to (\S+\.jsonl) \(source: journal\)\.", out).group(1))
        rows = [json.loads(line) for line in jsonl.read_text().splitlines()]  # one line per turn
        assert [(r["turn"], r["mode"], r["positions"], r["user"], r["answer"]) for r in rows] == [
            (1, "chat", [1, 2], "what is ```code```?", "You said: what is ```code```?"),
            (2, "chat", [3, 4], "and then?", "You said: and then?")]
        assert all(r["time"] and r["end"] >= r["time"] for r in rows)
        assert plain(repl.send(f"/session export md {md.name}")).count("already exists") == 1
    finally:
        repl.close()


def test_markdown_collapses_system_prompts_and_fences_tool_calls(env, workdir, tmp_path):
    conv = make(env, "tools")
    conv.history += [
        Message("system", "You are terse."),
        Message("user", "list files"),
        Message("assistant", "", tool_calls=[{"id": "c1", "type": "function",
                                             "function": {"name": "ls", "arguments": "{\"path\": \".\"}"}}]),
        Message("tool", "a.txt\nb.txt", tool_call_id="c1"),
    ]
    conv.sync_transcript()
    conv.binding.write_through()
    result = run_chatcli("session", "export", "tools", "md", str(tmp_path / "t.md"), env=env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "t.md").read_text()
    assert "<details><summary>#1 system prompt" in text and "You are terse." in text
    assert 'Tool call `ls` (id c1):\n\n```json\n{\n  "path": "."\n}\n```' in text  # the OpenAI shape too
    assert "## #4 tool result of ls for call c1" in text and "```\na.txt\nb.txt\n```" in text


def test_the_export_holds_what_compaction_removed(env, workdir, tmp_path):
    conv = make(env, "long", ("first question", "first answer"), ("second question", "second answer"))
    conv.history = [Message("assistant", "summary", meta={"is_summary": True, "summary_of": 2}),
                    *conv.history[2:]]
    conv.sync_transcript()
    conv.binding.write_through()
    run_chatcli("session", "export", "long", "jsonl", str(tmp_path / "l.jsonl"), env=env, cwd=workdir)
    rows = [json.loads(line) for line in (tmp_path / "l.jsonl").read_text().splitlines()]
    assert [(r["user"], r["answer"]) for r in rows] == [("first question", "first answer"),
                                                        ("second question", "second answer")]
    # The compaction that ended the second turn is in it: its summary and the rewrite.
    assert rows[1]["summaries"] == [{"content": "summary", "summary_of": 2}]
    assert [(r["reason"], r["live"]) for r in rows[1]["rewrites"]] == [(None, [5, 3, 4])]


def test_transcript_search_show_and_stats(repl_env, workdir):
    make(repl_env, "ops", ("When does the deploy freeze end?", "The deploy freeze ends Friday."),
         ("What about the café?", "It opens at nine."), ("unrelated", "entirely"))
    repl = Repl(repl_env, "m", cwd=workdir, args=("--session", "ops"))
    try:
        out = plain(repl.send("/session transcript search deploy freeze"))
        lines = [line for line in out.splitlines() if line.startswith("#")]
        assert lines[0] == "#2 assistant …The deploy freeze ends Friday.…"
        assert lines[1] == "#1 user …When does the deploy freeze end?…"
        assert "#3 user …What about the café?…" in plain(repl.send("/session transcript search CAFE"))
        shown = plain(repl.send("/session transcript show 3 2"))
        assert "#3 user" in shown and "#4 assistant" in shown and "#5" not in shown
        stats = plain(repl.send("/session transcript stats"))
        assert "Transcript: 6 messages, 0 rewrite(s); source: journal " in stats
        assert "no message at position 99" in plain(repl.send("/session transcript show 99"))
    finally:
        repl.close()


def test_with_the_journal_off_the_commands_use_the_live_history_and_say_so(repl_env, workdir):
    repl_env["CHATCLI_SESSION_TRANSCRIPT"] = "off"
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        repl.send("a searchable sentence")
        out = plain(repl.send("/session transcript search searchable"))
        assert "(From the live history (the journal is off: CHATCLI_SESSION_TRANSCRIPT).)" in out
        assert "#1 user …a searchable sentence…" in out
        assert "source: the live history" in plain(repl.send("/session transcript stats"))
    finally:
        repl.close()
    assert not (Path(repl_env["CHATCLI_HOME"]) / "transcripts").exists()


def test_session_search_ranks_across_sessions_folds_accents_and_skips_system_prompts(env, workdir):
    make(env, "kitchen", ("Where is the crème brûlée recipe?", "In the dessert folder."))
    make(env, "travel", ("Book the Lyon train", "Done; creme caramel on board."),
         ("And the hotel?", "Booked."))
    conv = make(env, "rules")
    conv.history.append(Message("system", "Never mention creme anything."))
    conv.binding.write_through()
    result = run_chatcli("session", "search", "creme", "brulee", env=env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    blocks = result.stdout.split("\n\n")
    names = [line.split()[0] for line in result.stdout.splitlines() if not line.startswith(" ")]
    assert names[:2] == ["kitchen", "travel"] and "rules" not in names
    assert "  #1 user …Where is the crème brûlée recipe?…" in blocks[0]
    rows = json.loads(run_chatcli("session", "search", "creme", "--json", env=env, cwd=workdir).stdout)
    assert {row["session"] for row in rows} == {"kitchen", "travel"}
    assert all({"pos", "role", "snippet"} <= set(hit) for row in rows for hit in row["hits"])


def test_session_search_sees_changes_and_deletions(env, workdir):
    conv = make(env, "alpha", ("zebra crossing", "ok"))
    assert "alpha" in run_chatcli("session", "search", "zebra", env=env, cwd=workdir).stdout
    conv.history += [Message("user", "giraffe neck"), Message("assistant", "long")]
    conv.binding.write_through()
    assert "giraffe" in run_chatcli("session", "search", "giraffe", env=env, cwd=workdir).stdout
    run_chatcli("session", "delete", "alpha", env=env, cwd=workdir)
    assert run_chatcli("session", "search", "zebra", env=env, cwd=workdir).stdout == "No saved session matches.\n"


def test_session_search_in_the_repl_and_empty_queries(repl_env, workdir):
    make(repl_env, "zoo", ("penguins march", "in winter"))
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        assert "#1 user …penguins march…" in plain(repl.send("/session search penguins"))
        assert "usage: /session search <words>" in plain(repl.send("/session search"))
        assert "nothing to search for" in plain(repl.send("/session search ???"))
    finally:
        repl.close()
    result = run_chatcli("session", "export", "missing", "md", env=repl_env, cwd=workdir)
    assert result.returncode == 1 and result.stderr.strip() == "chatcli: error: session 'missing' does not exist"


def test_export_without_a_journal_says_it_used_the_history(env, workdir, tmp_path):
    sessions_dir = Path(env["CHATCLI_HOME"]) / "sessions"
    sessions_dir.mkdir(parents=True)
    (sessions_dir / "old.json").write_text(json.dumps({"version": 2, "chat_history": [
        {"role": "user", "content": "from before journals"}]}))
    result = run_chatcli("session", "export", "old", "md", str(tmp_path / "o.md"), env=env, cwd=workdir)
    assert result.returncode == 0
    assert "this conversation has no journal yet" in result.stderr
    assert "from before journals" in (tmp_path / "o.md").read_text()


def test_autosave_then_export_after_exit(repl_env, workdir, tmp_path):
    repl = Repl(repl_env, "m", cwd=workdir)
    repl.send("remember this")
    name = repl.exit_keeping()
    result = run_chatcli("session", "export", name, "md", str(tmp_path / "a.md"), env=repl_env, cwd=workdir)
    assert result.returncode == 0 and "remember this" in (tmp_path / "a.md").read_text()


def test_a_jsonl_export_is_one_line_per_turn_with_its_tool_calls_and_results(env, workdir, tmp_path):
    conv = make(env, "agentic")
    coder = {"mode": "coder"}
    conv.history += [
        Message("system", "You are terse."),
        Message("user", "tidy the build", meta=dict(coder)),
        Message("assistant", "Looking first.", meta=dict(coder), tool_calls=[
            {"id": "c1", "type": "function", "name": "list_dir", "arguments": "{\"path\": \".\"}"},
            {"id": "c2", "type": "function", "name": "run_shell", "arguments": "{\"command\": \"rm -rf build\"}"}]),
        Message("tool", "build/\nsrc/", tool_call_id="c1", meta=dict(coder)),
        Message("tool", "refused: the user did not allow this", tool_call_id="c2", meta={**coder, "refused": True}),
        Message("assistant", "Left build/ alone.", meta=dict(coder)),
        Message("user", "thanks"),
        Message("assistant", "You're welcome."),
    ]
    conv.sync_transcript()
    conv.binding.write_through()
    result = run_chatcli("session", "export", "agentic", "jsonl", str(tmp_path / "t.jsonl"), env=env, cwd=workdir)
    assert "Exported 2 turns (8 messages)" in result.stdout, result.stdout + result.stderr
    first, second = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert (first["turn"], first["mode"], first["positions"], first["system"]) == (1, "coder", [1, 6],
                                                                                    ["You are terse."])
    assert first["user"] == "tidy the build" and first["answer"] == "Left build/ alone."
    assert first["steps"] == [
        {"text": "Looking first.", "tool_calls": [
            {"id": "c1", "name": "list_dir", "arguments": {"path": "."}, "result": "build/\nsrc/",
             "is_error": False},
            {"id": "c2", "name": "run_shell", "arguments": {"command": "rm -rf build"},
             "result": "refused: the user did not allow this", "is_error": True}]},
        {"text": "Left build/ alone.", "tool_calls": []}]
    assert (second["turn"], second["mode"], second["user"], second["answer"]) == (2, "chat", "thanks",
                                                                                  "You're welcome.")


def test_a_tool_result_is_named_after_the_call_of_its_own_turn_when_call_ids_repeat(env, workdir, tmp_path):
    # Local models (llama.cpp among them) number their calls afresh each turn: call_1 twice.
    conv = make(env, "reused")
    conv.history += [
        Message("tool", "left over from a cut history", tool_call_id="call_1"),
        Message("user", "find the notes"),
        Message("assistant", "", tool_calls=[{"id": "call_1", "type": "function", "name": "session_search",
                                              "arguments": {"query": "notes"}}]),
        Message("tool", "notes.md", tool_call_id="call_1"),
        Message("assistant", "Found notes.md."),
        Message("user", "open it"),
        Message("assistant", "", tool_calls=[{"id": "call_1", "type": "function", "name": "read_file",
                                              "arguments": {"path": "notes.md"}}]),
        Message("tool", "# Notes", tool_call_id="call_1"),
        Message("assistant", "It is a heading."),
    ]
    conv.sync_transcript()
    conv.binding.write_through()
    result = run_chatcli("session", "export", "reused", "md", str(tmp_path / "r.md"), env=env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "r.md").read_text()
    assert "## #4 tool result of session_search for call call_1 · " in text
    assert "## #8 tool result of read_file for call call_1 · " in text
    assert "## #1 tool result for call call_1 · " in text  # no call before it: not named after a later one
    shown = run_chatcli("session", "show", "reused", env=env, cwd=workdir)
    assert shown.returncode == 0, shown.stderr
    assert [line for line in shown.stdout.splitlines() if "tool result" in line] == [
        "#1 tool result (call_1)", "#4 tool result of session_search (call_1)", "#8 tool result of read_file (call_1)"]
    from chatcli.commands.builtin import build_registry

    shown = build_registry().dispatch("/session transcript show 1 8", conv).text
    assert [line.split(" · ")[0] for line in shown.splitlines() if "tool result" in line] == [
        "#1 tool result (call_1)", "#4 tool result of session_search (call_1)", "#8 tool result of read_file (call_1)"]


def test_every_export_reply_names_its_source(env, workdir, tmp_path):
    from chatcli.commands.builtin import build_registry

    make(env, "kept", ("a question", "an answer"))
    out = tmp_path / "kept.md"
    result = run_chatcli("session", "export", "kept", "md", str(out), env=env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"Exported 2 messages to {out} (source: journal).\n"
    out = tmp_path / "kept.jsonl"
    result = run_chatcli("session", "export", "kept", "jsonl", str(out), env=env, cwd=workdir)
    assert result.stdout == f"Exported 1 turn (2 messages) to {out} (source: journal).\n"

    sessions_dir = Path(env["CHATCLI_HOME"]) / "sessions"
    (sessions_dir / "old.json").write_text(json.dumps({"version": 2, "chat_history": [
        {"role": "user", "content": "from before journals"}]}))
    out = tmp_path / "old.md"
    result = run_chatcli("session", "export", "old", "md", str(out), env=env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"Exported 1 messages to {out} (source: live history).\n"

    registry = build_registry()
    conv = make(env, "live", ("q", "a"))
    reply = registry.dispatch(f"/session export md {tmp_path / 'live.md'}", conv).text
    assert reply.endswith(f"Exported 2 messages to {tmp_path / 'live.md'} (source: journal)."), reply
    reply = registry.dispatch(f"/session transcript export jsonl {tmp_path / 'live.jsonl'}", conv).text
    assert reply.endswith(f"to {tmp_path / 'live.jsonl'} (source: journal)."), reply
    conv = make({**env, "CHATCLI_SESSION_TRANSCRIPT": "off"}, "unjournaled", ("q", "a"))
    reply = registry.dispatch(f"/session export md {tmp_path / 'unjournaled.md'}", conv).text
    assert reply.endswith(f"Exported 2 messages to {tmp_path / 'unjournaled.md'} (source: live history)."), reply


def test_two_default_exports_in_one_second_get_two_names_and_a_missing_directory_is_refused(env, workdir, tmp_path,
                                                                                           monkeypatch):
    monkeypatch.chdir(workdir)  # the default path is the working directory
    conv = make(env, "twice")
    conv.history += [Message("user", "hello"), Message("assistant", "hi")]
    conv.sync_transcript()
    registry = build_registry()
    first = registry.dispatch("/session export md", conv).text
    second = registry.dispatch("/session export md", conv).text  # within the same second, as a script does
    names = [re.search(r"to (\S+\.md) ", text).group(1) for text in (first, second)]
    assert len(set(names)) == 2 and all(Path(name).parent == workdir and Path(name).exists() for name in names)
    missing = tmp_path / "no-such-dir"
    refused = registry.dispatch(f"/session export jsonl {missing}/x.jsonl", conv)
    assert refused.error and f"the directory {missing} does not exist (nothing was written)" in refused.text
    assert not missing.exists()


def test_a_question_is_journaled_with_the_time_it_was_asked_and_its_answer_with_its_own(openai_env, openai_server,
                                                                                       workdir, monkeypatch):
    monkeypatch.chdir(workdir)
    conv = Conversation(Settings.load(openai_env), journal=True)
    sessions.start(conv, name="timed")
    openai_server.reply("a slow ", "answer", delay=1.2)  # past a second boundary, whatever the start
    conv.send("when was I asked?")
    out = build_registry().dispatch("/session export jsonl", conv).text
    [row] = [json.loads(line) for line in Path(re.search(r"to (\S+\.jsonl) ", out).group(1)).read_text().splitlines()]
    assert row["time"] < row["end"], row  # the question's time, then the answer's
    markdown = Path(re.search(r"to (\S+\.md) ", build_registry().dispatch("/session export md", conv).text).group(1))
    stamps = re.findall(r"^## #\d (?:user|assistant) · (\S+ \S+)", markdown.read_text(), re.MULTILINE)
    assert len(stamps) == 2 and stamps[0] != stamps[1], markdown.read_text()


def test_a_compaction_after_a_turn_does_not_stretch_that_turn_s_end():
    from chatcli.core.export import Entry, trajectory

    summary = Message("user", "Summary of the earlier conversation: a greeting.", meta={"is_summary": True})
    entries = [Entry(1, Message("user", "hi"), "2026-12-05T10:00:00+00:00"),
               Entry(2, Message("assistant", "hello"), "2026-12-05T10:00:02+00:00"),
               # /compact typed an hour later: a rewrite and its summary, before the next question
               Entry(None, None, "2026-12-05T11:00:00+00:00", [3, 2], "compact"),
               Entry(3, summary, "2026-12-05T11:00:00+00:00"),
               Entry(4, Message("user", "again"), "2026-12-05T11:05:00+00:00"),
               Entry(5, Message("assistant", "yes"), "2026-12-05T11:05:01+00:00")]
    first, second = trajectory(entries)
    assert (first["time"], first["end"]) == ("2026-12-05T10:00:00+00:00", "2026-12-05T10:00:02+00:00")
    assert first["rewrites"] == [{"time": "2026-12-05T11:00:00+00:00", "reason": "compact", "live": [3, 2]}]
    assert first["summaries"][0]["content"].startswith("Summary of")
    assert (second["time"], second["end"]) == ("2026-12-05T11:05:00+00:00", "2026-12-05T11:05:01+00:00")


def test_search_session_show_and_transcript_show_give_a_message_one_number(env, workdir):
    """After a rewrite (a compaction, a rewind) the session file's positions drift from the
    journal's; every view numbers a message by the journal, so a hit's #N is what `transcript
    show N` shows."""
    conv = make(env, "drift", ("first question", "first answer"), ("second question", "second answer"))
    conv.history[:] = conv.history[2:]  # the first turn dropped from the live history, as a rewind does
    conv.sync_transcript()
    conv.binding.write_through()
    conv.history += [Message("user", "where is the zebra?"), Message("assistant", "at the crossing")]
    conv.sync_transcript()
    conv.binding.write_through()
    found = run_chatcli("session", "search", "zebra", env=env, cwd=workdir)
    assert found.returncode == 0, found.stderr
    assert "  #5 user …where is the zebra?…" in found.stdout, found.stdout  # the file's #3
    shown = run_chatcli("session", "show", "drift", env=env, cwd=workdir).stdout
    assert "\n#5 user\nwhere is the zebra?" in shown and "\n#3 user\nsecond question" in shown, shown
    transcript = build_registry().dispatch("/session transcript show 5 1", conv).text
    assert transcript.startswith("#5 user") and "where is the zebra?" in transcript, transcript
    json_hits = json.loads(run_chatcli("session", "search", "zebra", "--json", env=env, cwd=workdir).stdout)
    assert json_hits[0]["hits"][0]["pos"] == 5


def test_a_hit_cut_by_the_index_is_marked_once(env, workdir):
    long = " ".join(f"word{i}" for i in range(80)) + " and then the okapi appeared"
    make(env, "long", (long, "noted"))
    out = run_chatcli("session", "search", "okapi", env=env, cwd=workdir).stdout
    [line] = [line for line in out.splitlines() if "okapi" in line]
    assert line.startswith("  #1 user …") and "……" not in line and line.endswith("okapi appeared…"), line


def test_a_sync_too_large_to_index_at_once_is_found_by_the_next_search(env, monkeypatch):
    from chatcli.engine import records

    monkeypatch.setattr(records, "INDEX_AT_SYNC_MAX", 3)  # as a 100,000-message first turn is
    conv = make(env, "bulk")
    conv.history += [Message("user", "question 1"), Message("assistant", "answer 1"), Message("user", "question 2"),
                     Message("assistant", "answer 2"), Message("user", "where is the okapi?"),
                     Message("assistant", "in the forest")]
    conv.sync_transcript()  # six messages recorded at once: left to the search
    conv.binding.write_through()
    found = build_registry().dispatch("/session transcript search okapi", conv).text
    assert "#5 user …where is the okapi?…" in found, found


def test_the_transcript_of_a_saved_session_from_the_command_line(env, workdir):
    conv = make(env, "cli", ("where is the okapi?", "in the forest"), ("and the zebra?", "at the crossing"))
    conv.history[:] = conv.history[2:]  # compacted away from the file: the journal keeps it
    conv.sync_transcript()
    conv.binding.write_through()
    found = run_chatcli("session", "transcript", "cli", "search", "okapi", env=env, cwd=workdir)
    assert found.returncode == 0 and found.stdout.startswith("#1 user …where is the okapi?…"), found
    shown = run_chatcli("session", "transcript", "cli", "show", "3", "1", env=env, cwd=workdir).stdout
    assert shown.startswith("#3 user") and "and the zebra?" in shown and "crossing" not in shown, shown
    stats = run_chatcli("session", "transcript", "cli", "stats", env=env, cwd=workdir).stdout
    assert stats.startswith("Transcript: 4 messages, 1 rewrite(s); source: journal "), stats
    zero = run_chatcli("session", "transcript", "cli", "show", "0", env=env, cwd=workdir)
    assert zero.returncode == 2 and zero.stderr == "chatcli: error: positions start at 1 (the transcript has 4 messages)\n"
    assert "transcript" in run_chatcli("--help", env=env, cwd=workdir).stdout
