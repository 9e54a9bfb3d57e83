"""The recall store (SPEC §8.1) on real files, and /recall through the real REPL."""

from __future__ import annotations

import os
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
