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


def test_an_existing_history_file_is_made_private(tmp_path):
    path = tmp_path / "h"
    path.write_text("\n# old\n+old entry\n")
    path.chmod(0o644)
    PromptHistory(path, max_size=10_000).append("new")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert PromptHistory(path, max_size=10_000).load() == ["old entry", "new"]


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


def test_an_entry_larger_than_the_cap_is_kept_rather_than_wiping_the_file(tmp_path):
    history = PromptHistory(tmp_path / "h", max_size=100)
    history.append("small")
    history.append("x" * 500)
    assert history.load() == ["x" * 500]


def test_trimming_leaves_room_so_it_does_not_run_on_every_prompt(tmp_path):
    path = tmp_path / "h"
    history = PromptHistory(path, max_size=1000)
    sizes = []
    for number in range(60):
        history.append(f"prompt number {number}")
        sizes.append(path.stat().st_size)
    trims = [i for i in range(1, len(sizes)) if sizes[i] < sizes[i - 1]]
    assert trims, "the cap was never reached"
    assert sizes[trims[0]] <= 800  # trimmed to 80% of the cap
    assert sizes[trims[0] + 1] > sizes[trims[0]]  # the next prompt is a plain append
    assert max(sizes) <= 1000


def test_redaction_covers_more_providers_and_private_keys():
    for secret in ("sk_live_abcdefghijklmnop1234", "xai-abcdefghijklmnopqrstu123", "gsk_abcdefghijklmnopqrstuv",
                   "glpat-abcdefghijklmnopqrst", "-----BEGIN RSA PRIVATE KEY-----\nMIIabc\n-----END RSA PRIVATE KEY-----"):
        assert redact_secrets(f"here: {secret} done") == "here: [REDACTED] done"
    assert redact_secrets("key=ABCDEF1234567890") == "key=[REDACTED]"
    assert redact_secrets("AWS_SECRET_ACCESS_KEY=abcd1234efgh") == "AWS_SECRET_ACCESS_KEY=[REDACTED]"
    assert redact_secrets('{"api_key": "abcdef123456"}') == '{"api_key": [REDACTED]}'
    assert redact_secrets('ANTHROPIC_API_KEY="abc def ghi"') == "ANTHROPIC_API_KEY=[REDACTED]"
    assert redact_secrets("api_key=abcdefghij, next") == "api_key=[REDACTED], next"


def test_redaction_keeps_ordinary_prose():
    text = "The skeleton key opened the door; token economy; password reset emails; The key: patience"
    assert redact_secrets(text) == text
    assert redact_secrets("Authorization: Bearer abcdefghijklmnopqrstuvwxyz") == "Authorization: Bearer [REDACTED]"
    assert redact_secrets("AKIAABCDEFGHIJKLMNOP") == "[REDACTED]"


def test_a_history_file_kept_as_a_link_elsewhere_is_written_through_the_link(tmp_path):
    # HISTORY_FILE is the user's own, outside CHATCLI_HOME: a link into a dotfiles repository is
    # theirs to keep (links inside CHATCLI_HOME are refused, not this one).
    (tmp_path / "dotfiles").mkdir()
    target = tmp_path / "dotfiles" / "chatcli_history"
    target.write_text("")
    (tmp_path / ".chatcli_history").symlink_to(target)
    PromptHistory(tmp_path / ".chatcli_history", 1 << 20).append("hello")
    assert "hello" in target.read_text() and (tmp_path / ".chatcli_history").is_symlink()
