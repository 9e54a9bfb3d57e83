"""A session keeps its transcript journal when another program rewrites its file without
`transcript_id` (SPEC §7): Go ChatCLI reads a session into its own struct, which has no such
field, and writes it back with the turns it added. The journal holds what a compaction
replaced; started anew, the old one would be an orphan, pruned, and the originals gone."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from conftest import run_chatcli

from chatcli.engine import compaction, rewind, sessions

DAY = 86_400
# What Go ChatCLI's SessionData keeps of a message, and of its meta (tests/go_reader/main.go).
GO_MESSAGE = ("role", "content", "meta", "tool_calls", "tool_call_id", "system_parts", "images", "is_error",
              "error_code")
GO_META = ("is_summary", "summary_of", "mode", "preserve_verbatim", "agent_feedback", "skill_names",
           "skill_collapsed")


@pytest.fixture
def chatcli_home(env) -> Path:
    return Path(env["CHATCLI_HOME"])


def session_path(chatcli_home: Path, name: str) -> Path:
    return chatcli_home / "sessions" / f"{name}.json"


def go_continues(path: Path, *turns: str, history: list[dict] | None = None) -> None:
    """What Go ChatCLI does when it continues a session: the file read into its SessionData
    (version, title, chat_history; chatcli's other fields and meta keys are dropped), its turns
    added, the file written back. `history` instead writes a session of its own under that name."""
    document = json.loads(path.read_text()) if history is None else {"version": 2, "chat_history": history}
    messages = []
    for message in document["chat_history"]:
        kept = {key: value for key, value in message.items() if key in GO_MESSAGE}
        meta = {key: value for key, value in (message.get("meta") or {}).items() if key in GO_META}
        kept.pop("meta", None)
        messages.append({**kept, **({"meta": meta} if meta else {})})
    for i, text in enumerate(turns):
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": text, "meta": {"mode": "chat"}})
    path.write_text(json.dumps({"version": 2, "title": document.get("title") or "", "chat_history": messages},
                               indent=2))


def journal_contents(chatcli_home: Path, transcript_id: str) -> list[str]:
    path = chatcli_home / "transcripts" / f"{transcript_id}.jsonl"
    return [event["message"]["content"] for event in map(json.loads, path.read_text().splitlines())
            if event["type"] == "message"]


def age(path: Path, days: float) -> None:
    when = time.time() - days * DAY
    os.utime(path, (when, when))


def compacted(make_conversation, fake_model, name: str) -> tuple[str, str]:
    """A session of four turns, compacted: (its journal's id, the summary's recall key)."""
    conv = make_conversation()
    sessions.attach(conv, name)
    for i in range(1, 5):
        conv.send(f"turn {i} question")
    fake_model.reply("Briefing: four questions.")
    key = re.search(r"<<ccr:([0-9a-f]{16})>>", compaction.compact(conv).text).group(1)
    return conv.transcript.id, key


def listed(stdout: str) -> set[str]:
    return set(re.findall(r"^    (\S+)  \(", stdout, re.M))


def test_a_session_go_continued_goes_on_in_its_own_journal(make_conversation, fake_model, openai_env, workdir,
                                                           chatcli_home):
    journal_id, key = compacted(make_conversation, fake_model, "notes")
    path = session_path(chatcli_home, "notes")
    go_continues(path, "a question asked in Go", "an answer given in Go")
    age(chatcli_home / "transcripts" / f"{journal_id}.jsonl", 2)  # past the orphan's day of grace

    result = run_chatcli("--session", "notes", "-p", "more", env=openai_env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert json.loads(path.read_text())["transcript_id"] == journal_id  # named in the file again
    assert os.listdir(chatcli_home / "transcripts") == [f"{journal_id}.jsonl"]
    contents = journal_contents(chatcli_home, journal_id)
    assert contents[:2] == ["turn 1 question", "You said: turn 1 question"]  # the compacted originals
    assert contents[-3:] == ["an answer given in Go", "more", "You said: more"]

    prune = run_chatcli("storage", "prune", "--apply", env=openai_env, cwd=workdir)
    assert prune.returncode == 0, prune.stdout + prune.stderr
    assert not any(item.startswith("transcripts/") for item in listed(prune.stdout))
    (chatcli_home / "ccr" / f"{key}.json").unlink()  # the recall entry expires: the journal has them
    later = make_conversation()
    sessions.attach(later, "notes")
    assert "(originals from the journal)" in rewind.uncompact(later).text
    assert json.loads(path.read_text())["chat_history"][0]["content"] == "turn 1 question"


def test_prune_keeps_the_journal_of_a_session_go_rewrote_before_chatcli_reads_it_again(
        make_conversation, fake_model, env, workdir, chatcli_home):
    journal_id, _key = compacted(make_conversation, fake_model, "notes")
    go_continues(session_path(chatcli_home, "notes"), "a question asked in Go", "an answer given in Go")
    journal = chatcli_home / "transcripts" / f"{journal_id}.jsonl"
    age(journal, 2)
    prune = run_chatcli("storage", "prune", "--apply", env=env, cwd=workdir)
    assert prune.returncode == 0, prune.stdout + prune.stderr
    assert f"transcripts/{journal_id}.jsonl" not in listed(prune.stdout)
    assert journal.exists()


def test_a_bound_conversation_adopts_gos_rewrite_and_keeps_its_journal(make_conversation, fake_model, chatcli_home):
    conv = make_conversation()
    sessions.attach(conv, "notes")
    conv.send("turn 1 question")
    journal_id = conv.transcript.id
    path = session_path(chatcli_home, "notes")
    go_continues(path, "a question asked in Go", "an answer given in Go")
    conv.send("turn 2 question")  # adopts Go's turns first
    assert conv.transcript.id == journal_id
    assert json.loads(path.read_text())["transcript_id"] == journal_id
    assert journal_contents(chatcli_home, journal_id) == [
        "turn 1 question", "You said: turn 1 question", "a question asked in Go", "an answer given in Go",
        "turn 2 question", "You said: turn 2 question"]
    assert os.listdir(chatcli_home / "transcripts") == [f"{journal_id}.jsonl"]


def test_a_remembered_journal_is_taken_back_only_by_the_conversation_it_records(make_conversation, fake_model,
                                                                               openai_env, workdir, chatcli_home):
    conv = make_conversation()
    for name in ("continued", "recreated"):
        sessions.attach(conv, name)
        conv.send(f"what is {name}?")
        conv.send("tell me more")
    journals = {name: json.loads(session_path(chatcli_home, name).read_text())["transcript_id"]
                for name in ("continued", "recreated")}
    go_continues(session_path(chatcli_home, "continued"), "and in Go?", "Go says hello")
    # Deleted and made again by Go under the same name: another conversation, which began alike.
    session_path(chatcli_home, "recreated").unlink()
    go_continues(session_path(chatcli_home, "recreated"), history=[
        {"role": "user", "content": "what is recreated?"}, {"role": "assistant", "content": "Something else."}])
    before = (chatcli_home / "transcripts" / f"{journals['recreated']}.jsonl").read_bytes()

    for name in ("continued", "recreated"):
        result = run_chatcli("--session", name, "-p", "again", env=openai_env, cwd=workdir)
        assert result.returncode == 0, result.stderr
    named = {name: json.loads(session_path(chatcli_home, name).read_text())["transcript_id"]
             for name in ("continued", "recreated")}
    assert named["continued"] == journals["continued"]
    assert named["recreated"] not in ("", journals["recreated"])  # a journal of its own
    assert (chatcli_home / "transcripts" / f"{journals['recreated']}.jsonl").read_bytes() == before


def test_a_session_go_compacted_takes_its_journal_back(make_conversation, fake_model, openai_env, workdir,
                                                        chatcli_home):
    conv = make_conversation()
    sessions.attach(conv, "long")
    for i in range(1, 5):
        conv.send(f"turn {i} question")
    journal = conv.transcript.id
    path = session_path(chatcli_home, "long")
    history = json.loads(path.read_text())["chat_history"]
    # Go's /compact replaces the oldest messages with its summary and keeps the latest verbatim.
    go_continues(path, history=[{"role": "assistant", "content": "Go's summary of turns 1 and 2.",
                                 "meta": {"is_summary": True, "summary_of": 4}}, *history[4:]])
    result = run_chatcli("--session", "long", "-p", "and now?", env=openai_env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert json.loads(path.read_text())["transcript_id"] == journal
    assert journal_contents(chatcli_home, journal)[:2] == ["turn 1 question", "You said: turn 1 question"]


def test_a_journal_another_session_s_file_names_is_never_taken_back(make_conversation, fake_model, openai_env,
                                                                    workdir, chatcli_home):
    conv = make_conversation()
    sessions.attach(conv, "a")
    conv.send("first question")
    conv.send("second question")
    journal = conv.transcript.id
    history = json.loads(session_path(chatcli_home, "a").read_text())["chat_history"]
    session_path(chatcli_home, "a").rename(session_path(chatcli_home, "b"))  # renamed by hand: b names it now
    go_continues(session_path(chatcli_home, "a"), history=history)  # and Go saved the same conversation as a
    result = run_chatcli("--session", "a", "-p", "again", env=openai_env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert json.loads(session_path(chatcli_home, "a").read_text())["transcript_id"] not in ("", journal)
    assert json.loads(session_path(chatcli_home, "b").read_text())["transcript_id"] == journal


def test_deleting_a_session_go_rewrote_removes_its_journal_too(make_conversation, fake_model, chatcli_home):
    journal_id, _key = compacted(make_conversation, fake_model, "notes")
    go_continues(session_path(chatcli_home, "notes"), "a question asked in Go", "an answer given in Go")
    deleted = sessions.delete(make_conversation(), "notes")
    assert deleted.journal == journal_id
    assert os.listdir(chatcli_home / "transcripts") == []


def test_the_journals_files_name_are_remembered_from_a_listing_too(make_conversation, fake_model, openai_env,
                                                                   workdir, chatcli_home):
    journal_id, _key = compacted(make_conversation, fake_model, "notes")
    # As an earlier version left it, or the cache deleted: nothing remembered beside the sessions.
    (chatcli_home / "sessions.journals.json").unlink(missing_ok=True)
    listing = run_chatcli("session", "list", env=openai_env, cwd=workdir)
    assert listing.returncode == 0, listing.stderr
    go_continues(session_path(chatcli_home, "notes"), "a question asked in Go", "an answer given in Go")
    result = run_chatcli("--session", "notes", "-p", "more", env=openai_env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert json.loads(session_path(chatcli_home, "notes").read_text())["transcript_id"] == journal_id
    assert oct((chatcli_home / "sessions.journals.json").stat().st_mode & 0o777) == "0o600"
