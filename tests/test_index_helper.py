"""A big sealed index is hashed and sealed by a helper process (store.index_hashing) while SQLite
indexes it: the index it makes is the one this process would have made, a helper that dies or
cannot start costs only speed, and none is left running."""

from __future__ import annotations

import os
import random
import sqlite3
import sys

import pytest

from chatcli.store import search
from chatcli.store.seal import sealer_for
from chatcli.store.search import SearchIndex, Terms

WORDS = ["otter", "beaver", "heron", "walrus", "narwhal", "ibis", "quokka", "café", "Crème", "naïve", "x_y", "42"]
QUERIES = ["otter", "walrus heron", "creme", "CAFE", "42", "quokka ibis narwhal"]


def sessions(count: int = 40, messages: int = 60) -> dict[str, list[str]]:
    rng = random.Random(7)
    return {f"s{i:03d}": [" ".join(rng.choices(WORDS, k=rng.randint(3, 12))) + f" #{i}-{j}"
                          for j in range(messages)] for i in range(count)}


def reader(made: dict[str, list[str]]):
    def read(name, _since):
        rows = [(pos, "user" if pos % 2 else "assistant", text) for pos, text in enumerate(made[name], 1)]
        return rows, 0, 0, len(rows), True, "-"
    return read


def built(path, key: bytes, made: dict[str, list[str]]) -> list:
    """Every query's hits, and the index's rows, from a sealed index of `made` built at `path`."""
    index = SearchIndex(path, Terms(*sealer_for(key).index_keys()))
    current = {name: "1" for name in made}
    hits = [[(h.source, h.pos, h.role, h.snippet, round(h.score, 9))
             for h in index.search_sessions(current, reader(made), query, 10, 3)] for query in QUERIES]
    with sqlite3.connect(path) as db:
        numbers = db.execute("SELECT source, number FROM sources ORDER BY source").fetchall()
        seals = db.execute("SELECT number, first FROM sealed_texts ORDER BY 1, 2").fetchall()
    return [hits, numbers, seals]


@pytest.fixture
def spied(monkeypatch):
    """How many chunks the helper hashed, and the helpers started; each waited for until it is
    ready (or failed), so that these small builds do not end before it could take a chunk."""
    seen = {"chunks": 0, "helpers": []}
    start, receive, ready = search._Helper.start.__func__, search._Helper.receive, search._Helper.ready

    def waited_ready(self):
        import select

        select.select([self.process.stdout], [], [], 30)
        return ready(self)

    def counted_start(cls, keys):
        helper = start(cls, keys)
        seen["helpers"].append(helper)
        return helper

    def counted_receive(self):
        made = receive(self)
        seen["chunks"] += 1
        return made

    monkeypatch.setattr(search._Helper, "start", classmethod(counted_start))
    monkeypatch.setattr(search._Helper, "receive", counted_receive)
    monkeypatch.setattr(search._Helper, "ready", waited_ready)
    monkeypatch.setattr(search, "HELPER_FROM", 200)
    return seen


def test_the_helper_makes_the_index_this_process_would(tmp_path, monkeypatch, spied):
    key, made = os.urandom(32), sessions()
    with_helper = built(tmp_path / "a.sqlite", key, made)
    assert spied["chunks"] > 30 and all(helper.process.poll() is not None for helper in spied["helpers"])
    monkeypatch.setattr(search, "HELPER_FROM", 10**12)
    assert built(tmp_path / "b.sqlite", key, made) == with_helper
    assert any(with_helper[0])  # the queries found something


def test_a_helper_that_dies_midway_costs_only_time(tmp_path, monkeypatch, spied):
    key, made = os.urandom(32), sessions()
    receive = search._Helper.receive

    def dies_at_the_fifth(self):
        if spied["chunks"] == 4:
            self.process.kill()
            self.process.wait()
        return receive(self)

    monkeypatch.setattr(search._Helper, "receive", dies_at_the_fifth)
    broken = built(tmp_path / "a.sqlite", key, made)
    # What it had written before it died is taken; the rest of the 40 sessions are hashed here.
    assert 4 <= spied["chunks"] < 4 + search.HELPER_AHEAD + 2 and len(spied["helpers"]) == 1
    monkeypatch.setattr(search, "HELPER_FROM", 10**12)
    assert built(tmp_path / "b.sqlite", key, made) == broken


def test_a_helper_that_cannot_start_costs_only_time(tmp_path, monkeypatch, spied):
    key, made = os.urandom(32), sessions()
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    alone = built(tmp_path / "a.sqlite", key, made)
    assert spied["helpers"] == [None] and spied["chunks"] == 0
    monkeypatch.setattr(search, "HELPER_FROM", 10**12)
    assert built(tmp_path / "b.sqlite", key, made) == alone


def test_a_helper_that_starts_but_is_not_chatclis_costs_only_time(tmp_path, monkeypatch, spied):
    key, made = os.urandom(32), sessions()
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho not a helper\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(fake))
    alone = built(tmp_path / "a.sqlite", key, made)
    assert len(spied["helpers"]) == 1 and spied["chunks"] == 0
    assert spied["helpers"][0].process.poll() is not None
    monkeypatch.setattr(search, "HELPER_FROM", 10**12)
    assert built(tmp_path / "b.sqlite", key, made) == alone
