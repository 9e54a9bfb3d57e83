"""Search on a PostgreSQL store (store.pg_search): the server's full-text index finds what the
SQLite index finds on the same data, is shared by every machine using the store, keeps no word
of a sealed store, and takes whatever text a conversation holds."""

from __future__ import annotations

import base64
import os
import random

import psycopg
import pytest
from conftest import run_chatcli

from chatcli.config.settings import Settings
from chatcli.core.messages import Message
from chatcli.core.session import SessionData
from chatcli.engine import records
from chatcli.store.home import Home
from test_store_contract import said

WORDS = ("lighthouse keeper harbour tide storm lantern rope anchor gull puffin keel sail mast compass "
         "map chart reef coral island ferry dock pier wave foam salt cliff beacon fog bell").split()
# What a tokenizer can disagree on: accents and case, other scripts, "_" and "-" inside words,
# digits, apostrophes, URLs, code.
ODD = ["Café", "CAFÉ", "naïve", "façade", "Ærøskøbing", "São", "Straße", "Москва", "東京", "δελφίνι",
       "snake_case_name", "e-mail", "x86_64", "2026", "v1.2.3", "O'Brien", "don't", "https://example.org/a_b?c=d",
       "print(x)", "über", "ÜBER", "résumé", "RESUME", "co-operate", "_private", "n°5", "ﬁne"]
QUERIES = ["lighthouse", "Cafe", "café", "CAFÉ", "naive", "Ærøskøbing", "straße", "москва", "東京", "δελφίνι",
           "snake_case_name", "snake", "e-mail", "mail", "x86_64", "2026", "v1", "O'Brien", "brien", "dont",
           "example", "a_b", "uber", "resume", "co-operate", "private", "fine", "keel storm", "puffin ferry reef",
           "tide lantern gull", "nothingmatchesthis", "n°5"]


def corpus(seed: int = 7) -> dict[str, list[Message]]:
    """Sessions of ordinary and odd words; some messages repeat a word (ranking has work to do)."""
    rng = random.Random(seed)
    sessions = {}
    for n in range(12):
        history = []
        for i in range(rng.randint(3, 14)):
            words = rng.choices(WORDS, k=rng.randint(4, 40)) + rng.choices(ODD, k=rng.randint(0, 3))
            rng.shuffle(words)
            history.append(Message("user" if i % 2 == 0 else "assistant", " ".join(words) + rng.choice(".!?")))
        sessions[f"s{n:02d}"] = history
    sessions["s03"].append(Message("user", "keel keel keel: the keel of a boat"))
    return sessions


def stores(env: dict, pg_dsn: str, key: str | None, tmp_path) -> list[dict]:
    """The same data in a file store and on the server (each with its own home)."""
    made = []
    for name, extra in (("files", {}), ("server", {"CHATCLI_STORE": pg_dsn})):
        home = tmp_path / name
        home.mkdir()
        each = dict(env, HOME=str(home), CHATCLI_HOME=str(home / ".chatcli"), **extra)
        if key:
            each["CHATCLI_ENCRYPTION_KEY"] = key
        store = Home.of(Settings.load(each)).sessions()
        for session, history in corpus().items():
            store.create(session, SessionData(history=history))
        made.append(each)
    return made


def found(env: dict, query: str) -> set[tuple[str, int]]:
    settings = Settings.load(env)
    def fallback(line: str) -> None:  # the index must answer: no search in memory in its place
        raise AssertionError(line)

    groups = records.search_sessions(settings, Home.of(settings).sessions(), query, sessions=100, per_session=1000,
                                     notice=fallback)
    return {(group.name, pos) for group in groups for pos, _role, _snippet in group.hits}


@pytest.mark.parametrize("sealed", [False, True])
def test_the_server_finds_the_messages_the_sqlite_index_finds(env, pg_dsn, tmp_path, sealed):
    key = base64.b64encode(os.urandom(32)).decode() if sealed else None
    files, server = stores(env, pg_dsn, key, tmp_path)
    matched = 0
    for query in QUERIES:
        expected = found(files, query)
        assert found(server, query) == expected, query
        matched += bool(expected)
    # The queries do find things, all but those meant not to: "nothingmatchesthis", "dont" (the
    # text says "don't"), "fine" (the text has the ligature "ﬁ", which unicode61 keeps), and in a
    # sealed index "snake", which a word written with "_" holds whole there (one keyed hash).
    assert matched == len(QUERIES) - (4 if sealed else 3)
    assert found(server, "nothingmatchesthis") == set()
    if not sealed:  # the index really is on the server: its rows, no local file
        assert not (tmp_path / "server" / ".chatcli" / "index").exists()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            rows = conn.execute("SELECT count(*) FROM chatcli_search_session_entries").fetchone()[0]
        assert rows == sum(len(history) for history in corpus().values())


def test_the_best_session_and_message_come_first_on_both(env, pg_dsn, tmp_path):
    files, server = stores(env, pg_dsn, None, tmp_path)
    for env_ in (files, server):
        settings = Settings.load(env_)
        groups = records.search_sessions(settings, Home.of(settings).sessions(), "keel", sessions=3, per_session=1)
        assert groups[0].name == "s03" and "keel keel keel" in groups[0].hits[0][2]
        # every word of the query in one message outranks a message with only one of them
        groups = records.search_sessions(settings, Home.of(settings).sessions(), "boat keel", sessions=1,
                                         per_session=1)
        assert groups[0].name == "s03" and "boat" in groups[0].hits[0][2]


@pytest.mark.parametrize("sealed", [False, True])
def test_transcript_search_finds_the_same_messages_on_both(env, pg_dsn, tmp_path, sealed):
    key = base64.b64encode(os.urandom(32)).decode() if sealed else None
    texts = [message.content for history in corpus().values() for message in history][:60]
    results = []
    for env_ in stores(env, pg_dsn, key, tmp_path):
        home = Home.of(Settings.load(env_))
        journal = home.journal("0123456789abcdef0123456789abcdef")
        with journal.appending(0) as appending:
            appending.write(said(*texts[:40]))
        index = home.search_index()
        reader = records._reader(journal)
        assert index.search_journal(journal.id, journal.lineage(), reader, "lighthouse", 100)
        with journal.appending(journal.size()) as appending:  # caught up from where it was indexed
            appending.write(said(*texts[40:]))
        results.append({query: {hit.pos for hit in index.search_journal(journal.id, journal.lineage(), reader,
                                                                         query, 100)}
                        for query in QUERIES})
    assert results[0] == results[1]
    assert any(pos > 40 for hits in results[1].values() for pos in hits)


def test_every_machine_searches_one_index_on_the_server(env, pg_dsn, tmp_path):
    laptop, workstation = (dict(env, HOME=str(tmp_path / place), CHATCLI_HOME=str(tmp_path / place / ".chatcli"),
                                CHATCLI_STORE=pg_dsn) for place in ("laptop", "ws"))
    store = Home.of(Settings.load(laptop)).sessions()
    stamp = store.create("birds", SessionData(history=[Message("user", "where do puffins nest")]))
    assert found(laptop, "puffins") == {("birds", 1)}
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        before = conn.execute("SELECT number, stamp FROM chatcli_search_sources").fetchall()
        assert found(workstation, "puffins") == {("birds", 1)}  # nothing to index: the laptop did it
        assert conn.execute("SELECT number, stamp FROM chatcli_search_sources").fetchall() == before
        # a turn the laptop adds is found by the workstation, the appended messages alone indexed
        store.append("birds", [Message("assistant", "on cliffs, in burrows")], 1, stamp)
        assert found(workstation, "burrows") == {("birds", 2)}
        assert conn.execute("SELECT number FROM chatcli_search_sources").fetchall() == [(before[0][0],)]
        store.delete("birds")
        assert found(laptop, "puffins") == set()
        assert conn.execute("SELECT count(*) FROM chatcli_search_session_entries").fetchone()[0] == 0


def test_a_sealed_server_index_holds_no_word_and_opens_the_hits_with_the_key(env, pg_dsn, tmp_path):
    key = base64.b64encode(os.urandom(32)).decode()
    server = dict(env, CHATCLI_STORE=pg_dsn, CHATCLI_ENCRYPTION_KEY=key)
    store = Home.of(Settings.load(server)).sessions()
    store.create("vault", SessionData(history=[Message("user", "the heliotrope passphrase is marigold")]))
    settings = Settings.load(server)
    groups = records.search_sessions(settings, store, "heliotrope")
    assert [(g.name, g.hits[0][0], g.hits[0][1]) for g in groups] == [("vault", 1, "user")]
    assert "marigold" in groups[0].hits[0][2]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        held = " ".join(str(value) for table in ("chatcli_search_sources", "chatcli_search_session_entries",
                                                  "chatcli_meta")
                        for row in conn.execute(f"SELECT * FROM {table}").fetchall() for value in row)
    assert "heliotrope" not in held and "marigold" not in held and "passphrase" not in held
    assert "vault" in held  # the session's name, which the server's session rows hold too


def test_any_text_a_conversation_holds_is_indexed(env, pg_dsn):
    server = dict(env, CHATCLI_STORE=pg_dsn)
    longest, too_long, long_word = "y" * 2046, "z" * 2047, "x" * 3000  # PostgreSQL keeps words of 2,046 bytes
    many = " ".join(f"w{n}" for n in range(70_000))  # distinct words past a tsvector's size limit
    repeated = " ".join(["tide"] * 20_000 + ["lastword"])  # positions past 16,383 and 256 of one word
    store = Home.of(Settings.load(server)).sessions()
    store.create("odd", SessionData(history=[
        Message("user", "a nul\x00inside and kelp"), Message("assistant", "a lone \udcff surrogate and krill"),
        Message("user", f"{long_word} and plankton"), Message("assistant", many),
        Message("user", repeated), Message("assistant", f"{longest} {too_long} and seaweed")]))
    for query, pos in (("kelp", 1), ("krill", 2), ("plankton", 3), ("w69999", 4), ("w5", 4), ("lastword", 5),
                       ("seaweed", 6), (longest, 6)):
        assert found(server, query) == {("odd", pos)}, query


def test_two_processes_building_the_index_at_once_index_each_message_once(env, pg_dsn):
    import threading

    server = dict(env, CHATCLI_STORE=pg_dsn)
    store = Home.of(Settings.load(server)).sessions()
    for n in range(30):
        store.create(f"s{n}", SessionData(history=[Message("user", f"gull number {n}")]))
    results = []
    searches = [threading.Thread(target=lambda: results.append(run_chatcli("session", "search", "gull", env=server)))
                for _ in range(4)]  # four `chatcli session search` processes at once, on a store never indexed
    for search in searches:
        search.start()
    for search in searches:
        search.join()
    assert [result.returncode for result in results] == [0] * 4, [result.stderr for result in results]
    assert not any("without it" in result.stderr for result in results)
    assert len({result.stdout for result in results}) == 1 and "gull number" in results[0].stdout  # one answer
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM chatcli_search_session_entries").fetchone()[0] == 30
