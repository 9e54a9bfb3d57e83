"""The prompt-history file: redaction, size cap, private mode, and the message value it never touches."""

from __future__ import annotations

import stat

from chatcli.core.redact import redact_secrets
from chatcli.store.history import PromptHistory


def test_history_round_trips_multi_line_entries(tmp_path):
    history = PromptHistory(tmp_path / "h", max_size=10_000)
    history.append("first")
    history.append("two\nlines")
    assert history.load() == ["first", "two\nlines"]
    assert stat.S_IMODE((tmp_path / "h").stat().st_mode) == 0o600


def test_history_redacts_things_that_look_like_keys(tmp_path):
    history = PromptHistory(tmp_path / "h", max_size=10_000)
    history.append("use sk-proj-abcdefghijklmnopqrstuvwxyz0123 please")
    history.append("export ANTHROPIC_API_KEY=sk-ant-api03-abcdefghijklmnopqrstuv")
    text = (tmp_path / "h").read_text()
    assert "abcdefghijklmnop" not in text
    assert history.load() == ["use [REDACTED] please", "export ANTHROPIC_API_KEY=[REDACTED]"]


def test_history_drops_the_oldest_entries_past_the_size_cap(tmp_path):
    history = PromptHistory(tmp_path / "h", max_size=400)
    for number in range(50):
        history.append(f"prompt number {number}")
    entries = history.load()
    assert (tmp_path / "h").stat().st_size <= 400
    assert entries[-1] == "prompt number 49"
    assert "prompt number 0" not in entries
    assert entries == [f"prompt number {n}" for n in range(50 - len(entries), 50)]


def test_redaction_keeps_ordinary_prose():
    text = "The skeleton key opened the door; token economy; password reset emails"
    assert redact_secrets(text) == text
    assert redact_secrets("Authorization: Bearer abcdefghijklmnopqrstuvwxyz") == "Authorization: Bearer [REDACTED]"
    assert redact_secrets("AKIAABCDEFGHIJKLMNOP") == "[REDACTED]"
