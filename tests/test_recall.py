"""The recall store (SPEC §8.1) on real files, and /recall through the real REPL."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from pathlib import Path

import pytest
from repl_driver import Repl, plain

from chatcli.core.errors import UsageError
from chatcli.core.messages import Message
from chatcli.store.recall import MARKER_RE, RecallError, RecallStore, marker, parse_key


@pytest.fixture
def ccr(env) -> Path:
    return Path(env["CHATCLI_HOME"]) / "ccr"


ORIGINALS = [Message("user", "what was the budget?"), Message("assistant", "4,200 euros, approved in May")]


def test_entries_are_keyed_by_content_and_stored_once(ccr):
    store = RecallStore(ccr)
    key = store.put(ORIGINALS, {"session": "plans"})
    assert len(key) == 16 and int(key, 16) >= 0
    assert store.put([Message(m.role, m.content) for m in ORIGINALS]) == key  # same messages, same key
    assert sorted(os.listdir(ccr)) == [f"{key}.json"]
    assert oct((ccr / f"{key}.json").stat().st_mode & 0o777) == "0o600"
    messages, origin = store.get(marker(key))
    assert messages == ORIGINALS and origin == {"session": "plans"}
    assert MARKER_RE.search(f"summary … {marker(key)} …").group(1) == key


def test_bad_missing_and_damaged_keys_are_one_line_errors(ccr):
    store = RecallStore(ccr)
    with pytest.raises(UsageError, match="is not a recall key"):
        parse_key("../../etc/passwd")
    with pytest.raises(RecallError, match="no recall entry 0123456789abcdef"):
        store.get("0123456789abcdef")
    ccr.mkdir(parents=True)
    (ccr / "fedcba9876543210.json").write_text("{ damaged")
    with pytest.raises(RecallError, match="damaged; the file was left untouched"):
        store.get("fedcba9876543210")
    assert (ccr / "fedcba9876543210.json").read_text() == "{ damaged"


def test_recall_in_the_repl(openai_env, workdir, ccr):
    openai_env["NO_COLOR"] = "1"
    key = RecallStore(ccr).put(ORIGINALS, {"session": "plans"})
    repl = Repl(openai_env, "m", cwd=workdir)
    try:
        out = plain(repl.send(f"/recall <<ccr:{key}>>"))
        assert f"Recall entry {key} from session 'plans': 2 messages." in out
        assert "#2 assistant\n4,200 euros, approved in May" in out
        assert "no recall entry 0000000000000000" in plain(repl.send("/recall 0000000000000000"))
        assert "usage: /recall KEY" in plain(repl.send("/recall"))
    finally:
        repl.close()


# -- Go ChatCLI's entries: ccr/<key>.ccr, the raw text it compacted ------------------------------
GO_ORIGINALS = ("user: which port does the staging proxy use?\n"
                "assistant: 8443, since the March migration; 8080 is closed.\n")


def go_compacted(chatcli_home: Path, name: str = "from-go", text: str = GO_ORIGINALS) -> str:
    """What Go ChatCLI leaves after a compaction: ccr/<key>.ccr holding the raw text (key = the
    first 16 hex of its SHA-256) and a session whose summary carries <<ccr:KEY>>. Returns the key."""
    raw = text.encode("utf-8")
    key = hashlib.sha256(raw).hexdigest()[:16]
    (chatcli_home / "ccr").mkdir(parents=True, exist_ok=True)
    (chatcli_home / "ccr" / f"{key}.ccr").write_bytes(raw)
    history = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "assistant", "content": f"Summary: the user asked about the staging proxy. <<ccr:{key}>>",
         "meta": {"is_summary": True, "summary_of": 2}},
        {"role": "user", "content": "thanks"},
        {"role": "assistant", "content": "You're welcome."},
    ]
    (chatcli_home / "sessions").mkdir(parents=True, exist_ok=True)
    (chatcli_home / "sessions" / f"{name}.json").write_text(json.dumps(
        {"version": 2, "title": "staging proxy", "chat_history": history, "agent_history": [], "coder_history": [],
         "shared_memory": []}))
    return key


@pytest.mark.parametrize("sealed", [False, True], ids=["plaintext", "encryption-on"])
def test_recall_prints_go_chatclis_raw_text_for_its_summary_marker(openai_env, workdir, ccr, sealed):
    openai_env["NO_COLOR"] = "1"
    if sealed:  # chatcli seals its own entries; Go's stays the plaintext Go wrote, and is read as such
        openai_env["CHATCLI_ENCRYPTION_KEY"] = base64.b64encode(os.urandom(32)).decode()
    key = go_compacted(ccr.parent)
    repl = Repl(openai_env, "m", cwd=workdir, args=("--session", "from-go"))
    try:
        out = plain(repl.send(f"/recall {key}"))
        assert f"Recall entry {key}: Go ChatCLI's text, as it stored it." in out
        assert "8443, since the March migration; 8080 is closed." in out
        assert "may have expired" not in out
        assert "which port does the staging proxy use?" in plain(repl.send(f"/recall <<ccr:{key}>>"))
    finally:
        repl.close()
    assert (ccr / f"{key}.ccr").read_text() == GO_ORIGINALS  # Go's file, read and never rewritten


def test_rewind_compact_of_a_go_summary_says_its_originals_are_text_and_changes_nothing(openai_env, workdir, ccr):
    openai_env["NO_COLOR"] = "1"
    key = go_compacted(ccr.parent)
    session = ccr.parent / "sessions" / "from-go.json"
    before = json.loads(session.read_text())["chat_history"]
    repl = Repl(openai_env, "m", cwd=workdir, args=("--session", "from-go"))
    try:
        out = plain(repl.send("/rewind compact"))
        assert (f"cannot undo the compaction: recall entry {key} is Go ChatCLI's text, not messages: "
                f"/recall {key} shows it") in out
    finally:
        repl.close()
    assert json.loads(session.read_text())["chat_history"] == before  # the summary stays


def test_a_go_entry_changed_since_go_wrote_it_is_shown_and_said_to_be_changed(openai_env, workdir, ccr):
    openai_env["NO_COLOR"] = "1"
    key = go_compacted(ccr.parent)
    (ccr / f"{key}.ccr").write_text("something else entirely\n")
    (ccr / "0123456789abcdef.ccr").symlink_to(ccr / f"{key}.ccr")
    repl = Repl(openai_env, "m", cwd=workdir)
    try:
        out = plain(repl.send(f"/recall {key}"))
        assert "(it no longer matches its key: changed since Go wrote it)" in out
        assert "something else entirely" in out
        linked = plain(repl.send("/recall 0123456789abcdef"))
        assert "a symbolic link, which chatcli does not follow" in linked and "something else" not in linked
        assert "is not a recall key" in plain(repl.send("/recall ../sessions/from-go"))
    finally:
        repl.close()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_go_entry_that_is_not_a_regular_file_is_refused_without_blocking(ccr):
    ccr.mkdir(parents=True, exist_ok=True)
    os.mkfifo(ccr / "0123456789abcdef.ccr")  # opened for reading, a FIFO would wait for a writer forever
    with pytest.raises(RecallError) as caught:
        RecallStore(ccr).get("0123456789abcdef")
    assert str(caught.value).endswith("0123456789abcdef.ccr: not a regular file")


def test_a_go_entry_that_is_a_symbolic_link_is_refused_with_a_recall_message(ccr, tmp_path):
    ccr.mkdir(parents=True, exist_ok=True)
    (tmp_path / "elsewhere").write_text("not yours")
    (ccr / "0123456789abcdef.ccr").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(RecallError) as caught:
        RecallStore(ccr).get("0123456789abcdef")
    error = str(caught.value)
    assert error.endswith("a symbolic link, which chatcli does not follow") and "sessions directory" not in error


# -- chatcli's entry gone (expired, pruned): the conversation's journal still has the originals --
def compact_four_turns(repl: Repl, server) -> str:
    """Four turns, then /compact (the fake model writes the summary); returns the recall key."""
    for i in range(1, 5):
        repl.send(f"turn {i} question")
    server.reply("Briefing: four questions were asked.")
    return re.search(r"<<ccr:([0-9a-f]{16})>>", plain(repl.send("/compact"))).group(1)


def test_recall_reads_the_originals_from_the_journal_once_the_entry_is_gone(repl_env, workdir, openai_server, ccr):
    repl = Repl(repl_env, "m", cwd=workdir, args=("--session", "budget"))
    try:
        key = compact_four_turns(repl, openai_server)
    finally:
        repl.close()
    (ccr / f"{key}.json").unlink()  # what the recall store's TTL does after seven days
    again = Repl(repl_env, "m", cwd=workdir, args=("--session", "budget"))
    try:
        out = plain(again.send(f"/recall {key}"))
        assert f"Recall entry {key} (from this conversation's transcript journal: the recall store no longer has " \
               "it): 2 messages." in out
        assert "#1 user\nturn 1 question" in out and "#2 assistant\nYou said: turn 1 question" in out
        assert "may have expired" not in out
        assert "no recall entry 0000000000000000" in plain(again.send("/recall 0000000000000000"))
    finally:
        again.close()


def test_recall_of_a_summary_compacted_again_finds_its_originals_in_the_journal(repl_env, workdir, openai_server,
                                                                               ccr):
    repl = Repl(repl_env, "m", cwd=workdir, args=("--session", "twice"))
    try:
        first = compact_four_turns(repl, openai_server)
        for i in range(5, 9):
            repl.send(f"turn {i} question")
        openai_server.reply("Briefing: eight questions.")
        second = re.search(r"<<ccr:([0-9a-f]{16})>>", plain(repl.send("/compact"))).group(1)
        for key in (first, second):
            (ccr / f"{key}.json").unlink()
        out = plain(repl.send(f"/recall {first}"))  # its summary is now one of the second's originals
        assert "from this conversation's transcript journal" in out and "#1 user\nturn 1 question" in out
        assert "Briefing: four questions were asked." in plain(repl.send(f"/recall {second}"))
    finally:
        repl.close()


def test_the_models_recall_tool_falls_back_to_the_journal_too(env, workdir, tool_server, ccr):
    env["CHATCLI_CHAT_TOOLS"] = "false"
    repl = Repl(env, "m", cwd=workdir, args=("--session", "recalling"))
    try:
        key = compact_four_turns(repl, tool_server)
        (ccr / f"{key}.json").unlink()
        tool_server.reply("Let me look.", tool_calls=[{"id": "call_1", "name": "recall",
                                                       "arguments": json.dumps({"key": key})}])
        tool_server.reply("It was 'turn 1 question'.")
        out = plain(repl.send("what was my first question?"))
        assert f"The model read entry {key} (from this conversation's transcript journal" in out
        follow = json.dumps(tool_server.requests[-1].body["messages"])
        assert "#1 user\\nturn 1 question" in follow and "may have expired" not in follow
    finally:
        repl.close()
