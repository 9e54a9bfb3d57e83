"""The checkpoint store format (core.checkpoints) and the journal look-up behind /rewind compact."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from chatcli.core import checkpoints as cp
from chatcli.core import journal as rules
from chatcli.core.messages import Message

HASHES = st.lists(st.sampled_from([f"{i:032x}" for i in range(6)]), max_size=12)


def chain(histories, limit=cp.MAX_CHECKPOINTS, persistent=None):
    points = []
    for i, hashes in enumerate(histories):
        keep = persistent is None or persistent[i % len(persistent)]
        point = cp.take(f"t{i:04d}", f"label {i}", [], hashes if keep else None, points)
        points = cp.capped([*points, point], limit)
    return points


@settings(max_examples=200, deadline=None)
@given(st.lists(HASHES, max_size=15), st.integers(min_value=1, max_value=6),
       st.lists(st.booleans(), min_size=1, max_size=4))
def test_hash_lists_survive_encoding_capping_and_json(histories, limit, persistent):
    points = chain(histories, limit, persistent)
    expected = [list(p.hashes()) for p in points if p.persistent]
    stored = json.loads(json.dumps(cp.encode(points)))
    read, foreign, broken = cp.decode(stored)
    assert (foreign, broken) == ([], 0)
    assert [list(p.hashes()) for p in read] == expected
    assert [p.size for p in read] == [len(h) for h in expected]
    # Written again after a drop in the middle (a rewind dropping later ones keeps the rest readable).
    if len(read) > 2:
        del read[1]
        again, _, _ = cp.decode(json.loads(json.dumps(cp.encode(read))))
        assert [list(p.hashes()) for p in again] == [expected[0], *expected[2:]]


def test_growing_histories_are_stored_as_deltas():
    histories = [[f"{i:032x}" for i in range(n)] for n in range(0, 200, 2)]
    stored = cp.encode(chain(histories))
    assert sum(len(item["hashes"]) for item in stored) == 198  # each hash once, not 100 times
    assert [item["keep"] for item in stored[2:4]] == [2, 4]


def test_unreadable_items_are_dropped_with_what_builds_on_them_and_foreign_ones_kept():
    good = cp.encode(chain([["a" * 32], ["a" * 32, "b" * 32], ["a" * 32, "b" * 32, "c" * 32]]))
    foreign = {"id": 3, "summary": "another tool's checkpoint"}
    good[1]["hashes"] = "not a list"
    read, kept, broken = cp.decode([foreign, *good])
    assert kept == [foreign]
    assert broken == 2  # the damaged one and the one that builds on it
    assert [list(p.hashes()) for p in read] == [["a" * 32]]


def test_label_is_the_first_words_collapsed():
    assert cp.label_of("  what   about\nthe deploy?  ") == "what about the deploy?"
    long = cp.label_of("word " * 40)
    assert len(long) == cp.LABEL_CHARS and long.endswith("…")


def test_common_prefix():
    assert cp.common_prefix("abcdef", "abcxyz") == 3
    assert cp.common_prefix("abc", "abc") == 3
    assert cp.common_prefix("", "abc") == 0
    assert cp.common_prefix(tuple("abcd"), tuple("abce")) == 3


def test_the_history_before_a_compaction_is_found_in_the_journal():
    messages = [Message("user", f"q{i}") if i % 2 == 0 else Message("assistant", f"a{i}") for i in range(6)]
    summary = Message("assistant", "summary", meta={"is_summary": True, "summary_of": 4})
    before = rules.history_hashes(messages)
    after = rules.history_hashes([summary, *messages[4:]])
    events = [rules.message_line(h, m, "t1") for h, m in zip(before, messages, strict=True)]
    events.append(rules.message_line(after[0], summary, "t2"))  # one sync: the summary, then the rewrite
    events.append(rules.rewrite_line(after, "t2", "compact"))
    events.append(rules.message_line("f" * 32, Message("user", "later"), "t3"))
    state, found_before, found_after = rules.before_introducing(events, after[0])
    assert found_before == before and found_after == after
    originals, missing = state.history(found_before)
    assert missing == [] and [m.content for m in originals] == [m.content for m in messages]
    assert rules.before_introducing(events, "0" * 32)[1:] == (None, None)
