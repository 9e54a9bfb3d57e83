"""The retention rules as pure functions (SPEC §10): no files, no clock."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatcli.core import retention
from chatcli.core.retention import BACKSTOP, BURST, DAY, TTL, bursts, machine_sessions, over_cap, parse_days

NOW = 1_800_000_000.0


@pytest.mark.parametrize(("text", "days"), [("90d", 90), ("30d", 30), ("90", 90), ("0", 0), (" 7D ", 7),
                                            ("0.5d", 0.5)])
def test_days_are_read_as_the_spec_writes_them(text, days):
    assert parse_days(text) == days


@pytest.mark.parametrize("text", ["", "abc", "-1", "3w", "nan", "inf", "d", "90 days"])
def test_anything_else_is_refused(text):
    with pytest.raises(ValueError):
        parse_days(text)


def rows(*entries):
    return [(name, NOW - age_days * DAY, messages) for name, age_days, messages in entries]


def test_ttl_removes_old_machine_sessions_and_never_a_named_one():
    decided = machine_sessions(
        rows(("autosave-old", 100, 4), ("mcp-old", 100, 4), ("Autosave-CASE", 100, 4), ("project", 100, 4),
             ("autosave-fresh", 1, 4), ("mcp-fresh", 89, 4)),
        now=NOW, ttl_days=90, keep=600, on_demand=False,
    )
    assert decided == {"autosave-old": TTL, "mcp-old": TTL, "Autosave-CASE": TTL}


def test_a_ttl_of_zero_keeps_everything():
    assert machine_sessions(rows(("autosave-ancient", 10_000, 4), ("mcp-ancient", 10_000, 4)),
                            now=NOW, ttl_days=0, keep=600, on_demand=False) == {}


def test_the_backstop_keeps_the_newest_n_per_prefix():
    entries = [(f"autosave-{i}", i, 4) for i in range(5)] + [(f"mcp-{i}", i, 4) for i in range(2)]
    entries.append(("named", 50, 4))
    decided = machine_sessions(rows(*entries), now=NOW, ttl_days=90, keep=3, on_demand=False)
    assert decided == {"autosave-3": BACKSTOP, "autosave-4": BACKSTOP}


def test_expired_sessions_do_not_count_against_the_backstop():
    decided = machine_sessions(rows(("autosave-a", 1, 4), ("autosave-b", 2, 4), ("autosave-c", 200, 4)),
                               now=NOW, ttl_days=90, keep=2, on_demand=False)
    assert decided == {"autosave-c": TTL}


def test_test_bursts_only_on_demand_and_only_small_machine_sessions():
    burst = [(f"mcp-{i}", 1 + i / DAY, 2) for i in range(4)]  # four within four seconds
    others = [("mcp-big", 1 + 5 / DAY, 9), ("named-small", 1, 1), ("autosave-alone", 3, 2)]
    entries = rows(*burst, *others)
    assert machine_sessions(entries, now=NOW, ttl_days=90, keep=600, on_demand=False) == {}
    decided = machine_sessions(entries, now=NOW, ttl_days=90, keep=600, on_demand=True)
    assert decided == {f"mcp-{i}": BURST for i in range(4)}


def test_a_chat_senders_quick_new_threads_are_never_a_burst_and_count_apart():
    threads = [(f"mcp-gw-webhook-6a3b51c1bfde-{i}", 1 + i / DAY, 2) for i in range(1, 7)]  # six quick threads, 6 oldest
    mirrors = [(f"mcp-{i}", 1 + i / DAY, 4) for i in range(3)]
    decided = machine_sessions(rows(*threads, *mirrors), now=NOW, ttl_days=90, keep=3, on_demand=True)
    # The gateway's threads are their own group for the backstop (its three oldest go), and the
    # other mirrors' three are kept: neither pushes the other out.
    assert decided == {f"mcp-gw-webhook-6a3b51c1bfde-{i}": BACKSTOP for i in (4, 5, 6)}


def test_three_in_a_minute_is_not_a_burst():
    entries = [(f"autosave-{i}", i * 10.0) for i in range(3)] + [("autosave-late", 200.0)]
    assert bursts([(t, name) for name, t in entries]) == []


@given(st.lists(st.floats(min_value=0, max_value=600, allow_nan=False), max_size=30))
def test_bursts_match_the_definition(times):
    entries = [(t, f"s{i}") for i, t in enumerate(times)]
    expected = {name for t, name in entries
                if any(start <= t <= start + retention.BURST_WINDOW
                       and sum(start <= u <= start + retention.BURST_WINDOW for u, _ in entries) >= 4
                       for start, _ in entries)}
    assert set(bursts(entries)) == expected


def test_over_cap_drops_the_oldest_beyond_the_cap():
    entries = [(3.0, 40, "newest"), (2.0, 40, "middle"), (1.0, 40, "oldest")]
    assert over_cap(entries, 100) == ["oldest"]
    assert over_cap(entries, 120) == []
    assert over_cap(entries, 10) == ["newest", "middle", "oldest"]


def test_ages_are_described_in_words():
    assert retention.describe_age(5) == "just now"
    assert retention.describe_age(61) == "1 minute ago"
    assert retention.describe_age(3 * 3600 + 5) == "3 hours ago"
    assert retention.describe_age(104 * DAY) == "104 days ago"
