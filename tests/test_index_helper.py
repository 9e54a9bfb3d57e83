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
    seen = {"chunks": 0, "sessions": 0, "helpers": []}
    start, receive, ready = search._Helper.start.__func__, search._Helper.receive, search._Helper.ready
    receive_any = search._Helper.receive_any

    def waited_ready(self):
        import select

        select.select([self.process.stdout], [], [], 30)
        return ready(self)

    def counted_start(cls, keys, whole_from=None):
        helper = start(cls, keys, whole_from)
        seen["helpers"].append(helper)
        return helper

    def counted_receive(self):
        made = receive(self)
        seen["chunks"] += 1
        return made

    def counted_receive_any(self):
        made = receive_any(self)
        if isinstance(made, tuple) and made[0] == "session":
            seen["sessions"] += 1
        return made

    monkeypatch.setattr(search._Helper, "start", classmethod(counted_start))
    monkeypatch.setattr(search._Helper, "receive", counted_receive)
    monkeypatch.setattr(search._Helper, "receive_any", counted_receive_any)
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


def sealed_store(env, made: dict[str, list[str]]) -> dict:
    """A sealed store holding `made`'s sessions (written as chatcli writes them)."""
    import base64

    from chatcli.config.settings import Settings
    from chatcli.core.messages import Message
    from chatcli.core.session import SessionData
    from chatcli.store.home import Home

    env = dict(env, CHATCLI_ENCRYPTION_KEY=base64.b64encode(os.urandom(32)).decode())
    settings = Settings.load(env)
    Home.of(settings).check_key()
    store = Home.of(settings).sessions()
    for name, texts in made.items():
        store.write(name, SessionData(history=[Message("system", "be brief")] + [
            Message("user" if i % 2 == 0 else "assistant", text) for i, text in enumerate(texts)]))
    return env


def searched(env) -> list:
    """Every query's session search in this process (building the index first), and the index's rows."""
    from chatcli.config.settings import Settings
    from chatcli.engine import records
    from chatcli.store.home import Home

    settings = Settings.load(env)
    store = Home.of(settings).sessions()
    hits = [[(g.name, g.hits) for g in records.search_sessions(settings, store, query)] for query in QUERIES]
    with sqlite3.connect(settings.home / "index" / "sealed.sqlite") as db:
        sources = db.execute("SELECT source, stamp, offset, count, inode, numbered FROM sources ORDER BY source").fetchall()
        seals = db.execute("SELECT count(*) FROM sealed_texts").fetchone()
    return [hits, sources, seals]


def test_the_helper_reads_a_sealed_stores_sessions_itself_and_makes_the_same_index(env, monkeypatch, spied):
    env = sealed_store(env, sessions(count=50))
    with_helper = searched(env)
    # The helper read some (this process reads others itself while the helper is busy: how
    # many depends on the machine's load), and it has ended.
    assert spied["sessions"] >= 1 and all(helper.process.poll() is not None for helper in spied["helpers"])
    assert any(with_helper[0])
    monkeypatch.setattr(search, "HELPER_SESSIONS", 10**12)
    monkeypatch.setattr(search, "HELPER_FROM", 10**12)
    import shutil

    shutil.rmtree(os.path.join(env["CHATCLI_HOME"], "index"))
    assert searched(env) == with_helper


def test_a_helper_that_dies_while_reading_sessions_costs_only_time(env, monkeypatch, spied):
    env = sealed_store(env, sessions(count=50))
    receive = search._Helper.receive

    def dies_midway(self):
        if spied["chunks"] == 6:  # the seventh session: its header was taken (its old rows gone), not its rows
            self.process.kill()
            self.process.wait()
            raise EOFError
        return receive(self)

    monkeypatch.setattr(search._Helper, "receive", dies_midway)
    broken = searched(env)
    assert spied["sessions"] == 7 and spied["chunks"] == 6 and len(spied["helpers"]) == 1
    monkeypatch.setattr(search, "HELPER_SESSIONS", 10**12)
    monkeypatch.setattr(search, "HELPER_FROM", 10**12)
    import shutil

    shutil.rmtree(os.path.join(env["CHATCLI_HOME"], "index"))
    assert searched(env) == broken



def test_a_session_the_helper_sent_in_part_is_indexed_whole_here(env, monkeypatch, spied):
    env = sealed_store(env, sessions(count=40, messages=2_500))  # three chunks a session
    receive = search._Helper.receive

    def dies_in_the_second_session(self):
        if spied["chunks"] == 4:  # the second session's first chunk is indexed; its second never comes
            self.process.kill()
            self.process.wait()
            raise EOFError
        return receive(self)

    monkeypatch.setattr(search._Helper, "receive", dies_in_the_second_session)
    broken = searched(env)
    assert spied["sessions"] == 2 and spied["chunks"] == 4
    monkeypatch.setattr(search, "HELPER_SESSIONS", 10**12)
    monkeypatch.setattr(search, "HELPER_FROM", 10**12)
    import shutil

    shutil.rmtree(os.path.join(env["CHATCLI_HOME"], "index"))
    assert searched(env) == broken


def test_a_helper_gone_when_it_is_asked_for_a_session_costs_only_time(env, monkeypatch, spied):
    env = sealed_store(env, sessions(count=50))
    send = search._Helper.send
    asked = []

    def dies_before_the_tenth(self, value):
        if value[0] == "session":
            asked.append(value[1])
            if len(asked) == 10:  # killed: this request finds its pipe closed
                self.process.kill()
                self.process.wait()
        return send(self, value)

    monkeypatch.setattr(search._Helper, "send", dies_before_the_tenth)
    broken = searched(env)
    assert len(asked) == 10 and len(spied["helpers"]) == 1
    monkeypatch.setattr(search, "HELPER_SESSIONS", 10**12)
    monkeypatch.setattr(search, "HELPER_FROM", 10**12)
    import shutil

    shutil.rmtree(os.path.join(env["CHATCLI_HOME"], "index"))
    assert searched(env) == broken
    assert len(broken[1]) == 50  # every session indexed
