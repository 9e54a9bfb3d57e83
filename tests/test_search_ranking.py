"""Session search's ranking contract, on real session files and real index files: the best
session first (by its best message), recent sessions breaking ties, at most three hits a
session and ten sessions, messages with every word before those with some, case and accents
folded, system prompts left out; and the index's own bookkeeping (a source's rows found by
their rowid range, a sealed index's text opened by group, an older index rebuilt)."""

from __future__ import annotations

import base64
import json
import os
import sqlite3

import pytest
from conftest import run_chatcli

from chatcli.config.settings import Settings
from chatcli.core.messages import Message
from chatcli.core.session import SessionData
from chatcli.engine import records
from chatcli.store.home import Home
from chatcli.store.search import SearchIndex

FILLER = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt"


def saved(env: dict, name: str, *texts: str, system: str | None = None, mtime: int | None = None) -> None:
    """A saved session of user/assistant messages (a system prompt first when given), written as
    chatcli writes one; `mtime` (seconds) dates its file."""
    settings = Settings.load(env)
    history = [Message("system", system)] if system else []
    history += [Message("user" if i % 2 == 0 else "assistant", text) for i, text in enumerate(texts)]
    store = Home.of(settings).sessions()
    store.write(name, SessionData(history=history))
    if mtime is not None:
        os.utime(store.path(name), (mtime, mtime))


def search(env: dict, query: str, sessions: int = 10, per_session: int = 3) -> list[records.SessionHits]:
    settings = Settings.load(env)
    return records.search_sessions(settings, Home.of(settings).sessions(), query, sessions, per_session)


def names(groups: list[records.SessionHits]) -> list[str]:
    return [group.name for group in groups]


@pytest.fixture(params=["plain", "sealed"])
def any_env(request, env) -> dict:
    """The test's environment, once as it is and once with a master key (a sealed index)."""
    if request.param == "sealed":
        env["CHATCLI_ENCRYPTION_KEY"] = base64.b64encode(os.urandom(32)).decode()
    return env


def test_the_session_with_the_best_message_comes_first(any_env):
    saved(any_env, "mentioned", f"{FILLER} zebra {FILLER}", "nothing here")
    saved(any_env, "about", "zebra zebra", "stripes")
    saved(any_env, "unrelated", "giraffe")
    groups = search(any_env, "zebra")
    assert names(groups) == ["about", "mentioned"]
    assert groups[0].score < groups[1].score  # BM25 as SQLite gives it: lower is better
    assert groups[0].hits == [(1, "user", "zebra zebra")]


def test_each_session_shows_its_three_best_messages_and_at_most_ten_sessions_are_shown(env, workdir):
    saved(env, "many", f"zebra {FILLER} {FILLER}", "zebra zebra zebra", f"zebra {FILLER}", "zebra zebra",
          f"{FILLER} zebra {FILLER} {FILLER} {FILLER}")
    for k in range(11):
        saved(env, f"other-{k:02d}", f"{FILLER} zebra {FILLER} {FILLER} {FILLER} {FILLER}")
    result = run_chatcli("session", "search", "zebra", "--json", env=env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert len(rows) == 10 and rows[0]["session"] == "many"
    assert [hit["pos"] for hit in rows[0]["hits"]] == [2, 4, 3]  # its best three, best first
    assert all(len(row["hits"]) == 1 for row in rows[1:])


@pytest.mark.parametrize("newer", ["left", "right"])
def test_equal_scores_put_the_session_changed_last_first(env, newer):
    old, new = 1_700_000_000, 1_700_086_400
    saved(env, "left", "the quarterly walrus report", mtime=new if newer == "left" else old)
    saved(env, "right", "the quarterly walrus report", mtime=new if newer == "right" else old)
    groups = search(env, "walrus")
    assert names(groups)[0] == newer and sorted(names(groups)) == ["left", "right"]
    assert groups[0].score == groups[1].score


def test_a_search_folds_case_and_accents(any_env, workdir):
    saved(any_env, "cafe", "Un Café au lait, s'il vous plaît", "Crème Brûlée for dessert")
    saved(any_env, "tea", "green tea")
    for query, shown in (("CAFE", "Café au lait"), ("creme brulee", "Crème Brûlée"), ("PLAIT", "plaît")):
        groups = search(any_env, query)
        assert names(groups) == ["cafe"], query
        assert shown in groups[0].hits[0][2]
    result = run_chatcli("session", "search", "cafe", env=any_env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].startswith("cafe  (")


def test_system_prompts_are_not_searched(any_env):
    saved(any_env, "rules", "what is the plan?", "the plan is simple", system="Never mention the pelican.")
    saved(any_env, "birds", "a pelican flew by")
    assert names(search(any_env, "pelican")) == ["birds"]
    assert search(any_env, "never mention") == []


def test_messages_with_every_word_choose_the_sessions_before_those_with_some(env):
    saved(env, "both", f"alpha {FILLER} beta {FILLER}", f"alpha {FILLER}")
    saved(env, "alpha-only", "alpha alpha alpha")
    saved(env, "beta-only", "beta")
    assert names(search(env, "alpha beta", sessions=1)) == ["both"]
    [both] = search(env, "alpha beta", sessions=1)
    assert [pos for pos, _role, _text in both.hits] == [1]  # the sessions were filled: no message with some
    groups = search(env, "alpha beta", sessions=3)
    assert sorted(names(groups)) == ["alpha-only", "beta-only", "both"]
    [both] = [group for group in groups if group.name == "both"]
    assert sorted(pos for pos, _role, _text in both.hits) == [1, 2]  # then filled with a message with some


def test_a_session_rewritten_whole_is_searched_as_it_is_now(env):
    saved(env, "notes", "the walrus plan", "ok")
    assert names(search(env, "walrus")) == ["notes"]
    saved(env, "notes", "the narwhal plan")  # written whole again (as after a compaction)
    assert search(env, "walrus") == [] and names(search(env, "narwhal")) == ["notes"]
    with sqlite3.connect(Settings.load(env).home / "index" / "search.sqlite") as db:
        assert db.execute("SELECT count(*) FROM session_entries WHERE session_entries MATCH 'walrus'").fetchone() == (0,)
        assert db.execute("SELECT count(*) FROM session_entries").fetchone() == (1,)


def _ranked(tmp_path, sessions: dict[str, list[str]], query: str, wanted: int = 10) -> list[tuple[str, list[int]]]:
    """[(session, positions of its hits, best first)] of a session search by an index on a real
    file of these sessions' messages (as SearchIndex takes them from the store)."""
    def read(name, _since):
        rows = [(pos, "user", text) for pos, text in enumerate(sessions[name], 1)]
        return rows, 0, 0, len(rows), True, "-"

    hits = SearchIndex(tmp_path / "search.sqlite").search_sessions({name: "1" for name in sessions}, read, query,
                                                                     wanted)
    grouped: dict[str, list[int]] = {}
    for hit in hits:
        grouped.setdefault(hit.source, []).append(hit.pos)
    return list(grouped.items())


def words(count: int) -> str:
    return " ".join(["zebra"] + ["filler"] * (count - 1))


def test_the_best_sessions_get_their_own_three_best_messages_wherever_those_rank(tmp_path):
    # 250 sessions: a short message each (the best two hundred of these fill the first ranked
    # rows), then two long ones, which rank far below every short one.
    sessions = {f"s{i:03d}": [words(3 + i), words(300 + i), words(600 + i)] for i in range(250)}
    assert _ranked(tmp_path, sessions, "zebra") == [(f"s{i:03d}", [1, 2, 3]) for i in range(10)]


def test_when_a_few_sessions_fill_the_first_rows_every_match_is_ranked_by_session(tmp_path):
    sessions = {f"big{k}": [words(2 + k)] * 150 for k in range(3)}  # 450 messages better than any other
    sessions.update({f"small{i:02d}": [words(50 + i)] for i in range(20)})
    ranked = _ranked(tmp_path, sessions, "zebra")
    assert [name for name, _ in ranked] == ["big0", "big1", "big2"] + [f"small{i:02d}" for i in range(7)]
    assert all(len(positions) == 3 for _, positions in ranked[:3])


def _journal(messages: list[tuple[str, str]]):
    return lambda offset: (messages if offset == 0 else [], 1)


def test_a_journal_search_finds_only_that_journal_and_forgetting_one_leaves_the_others(tmp_path):
    index = SearchIndex(tmp_path / "index.sqlite")
    first = [("user", "the otter question"), ("assistant", "otters hold hands")]
    second = [("user", "an otter elsewhere"), ("assistant", "otter otter")]
    hits = index.search_journal("one", "s1", _journal(first), "otter")
    assert [(hit.source, hit.pos) for hit in hits] == [("one", 1)]
    hits = index.search_journal("two", "s2", _journal(second), "otter")
    assert [(hit.source, hit.pos) for hit in hits] == [("two", 2), ("two", 1)]
    index.forget_journals(["one"])
    with sqlite3.connect(tmp_path / "index.sqlite") as db:
        assert db.execute("SELECT DISTINCT source FROM journal_entries").fetchall() == [("two",)]
        assert db.execute("SELECT source FROM sources").fetchall() == [("two",)]
    assert [hit.pos for hit in index.search_journal("two", "s2", _journal(second), "otter")] == [2, 1]


def test_a_sealed_index_opens_the_text_of_hits_far_into_a_session(env):
    env["CHATCLI_ENCRYPTION_KEY"] = base64.b64encode(os.urandom(32)).decode()
    texts = [f"message {i} {FILLER}" for i in range(1, 101)]
    texts[2], texts[74] = "the quokka smiles", "a quokka again, far in"
    saved(env, "long", *texts)
    [group] = search(env, "quokka")
    assert sorted((pos, snippet) for pos, _role, snippet in group.hits) == [
        (3, "the quokka smiles"), (75, "a quokka again, far in")]
    raw = b"".join(p.read_bytes() for p in (Settings.load(env).home / "index").glob("sealed.sqlite*"))
    assert b"quokka" not in raw and b"lorem" not in raw


def sealed_matches(env: dict, word: str) -> int:
    """How many rows of the sealed index match `word` (its keyed hash), read straight from the file."""
    settings = Settings.load(env)
    index = Home.of(settings).search_index()
    with sqlite3.connect(settings.home / "index" / "sealed.sqlite") as db:
        return db.execute("SELECT count(*) FROM session_entries WHERE session_entries MATCH ?",
                          (index.terms.query(word),)).fetchone()[0]


def test_a_sealed_session_rewritten_whole_leaves_no_row_of_what_it_said(env):
    env["CHATCLI_ENCRYPTION_KEY"] = base64.b64encode(os.urandom(32)).decode()
    saved(env, "notes", "the walrus plan", "ok")
    saved(env, "other", "a walrus elsewhere")
    assert sorted(names(search(env, "walrus"))) == ["notes", "other"] and sealed_matches(env, "walrus") == 2
    saved(env, "notes", "the narwhal plan")  # written whole again (as after a compaction)
    assert names(search(env, "walrus")) == ["other"] and names(search(env, "narwhal")) == ["notes"]
    assert sealed_matches(env, "walrus") == 1 and sealed_matches(env, "plan") == 1
    [group] = search(env, "narwhal")
    assert group.hits == [(1, "user", "the narwhal plan")]  # its role and text from the seal


def test_a_sealed_journal_forgotten_leaves_no_row_and_the_others_stay(tmp_path):
    from chatcli.store.seal import sealer_for
    from chatcli.store.search import Terms

    index = SearchIndex(tmp_path / "sealed.sqlite", Terms(*sealer_for(os.urandom(32)).index_keys()))
    first = [("user", "the otter question"), ("assistant", "otters hold hands")]
    second = [("user", "an otter elsewhere"), ("assistant", "otter otter")]
    assert [(hit.source, hit.pos, hit.role) for hit in index.search_journal("one", "s1", _journal(first), "otter")] \
        == [("one", 1, "user")]
    assert [(hit.source, hit.pos) for hit in index.search_journal("two", "s2", _journal(second), "otter")] == [
        ("two", 2), ("two", 1)]
    index.forget_journals(["one"])
    with sqlite3.connect(tmp_path / "sealed.sqlite") as db:
        assert db.execute("SELECT count(*) FROM journal_entries WHERE journal_entries MATCH ?",
                          (index.terms.query("otter"),)).fetchone() == (2,)
        assert db.execute("SELECT count(*) FROM journal_entries WHERE journal_entries MATCH ?",
                          (index.terms.query("hands"),)).fetchone() == (0,)
        assert db.execute("SELECT source FROM sources").fetchall() == [("two",)]
        assert db.execute("SELECT DISTINCT number FROM sealed_texts").fetchall() == [(2,)]
    assert [hit.pos for hit in index.search_journal("two", "s2", _journal(second), "otter")] == [2, 1]


def test_a_sealed_index_with_a_seal_it_cannot_open_is_rebuilt(env):
    env["CHATCLI_ENCRYPTION_KEY"] = base64.b64encode(os.urandom(32)).decode()
    saved(env, "notes", "the walrus plan")
    assert names(search(env, "walrus")) == ["notes"]
    path = Settings.load(env).home / "index" / "sealed.sqlite"
    with sqlite3.connect(path) as db:
        blob = bytearray(db.execute("SELECT blob FROM sealed_texts").fetchone()[0])
        blob[-1] ^= 1
        db.execute("UPDATE sealed_texts SET blob=?", (bytes(blob),))
    saved(env, "notes", "the narwhal plan")  # its rows are removed by opening that seal
    assert search(env, "walrus") == [] and names(search(env, "narwhal")) == ["notes"]
    assert sealed_matches(env, "walrus") == 0


def test_a_sealed_index_made_with_other_terms_is_rebuilt(env):
    """Its rows are removed only by hashing their text again the same way: one made by another
    version (another Unicode database, another folding) is not kept."""
    env["CHATCLI_ENCRYPTION_KEY"] = base64.b64encode(os.urandom(32)).decode()
    saved(env, "notes", "the walrus plan")
    assert names(search(env, "walrus")) == ["notes"]
    path = Settings.load(env).home / "index" / "sealed.sqlite"
    with sqlite3.connect(path) as db:
        made = db.execute("SELECT how FROM made").fetchone()[0]
        db.execute("UPDATE made SET how='another version'")
        db.execute("INSERT INTO sources VALUES ('s', 'stale', '1:1', 0, 1, 0, 99, '-')")
    assert names(search(env, "walrus")) == ["notes"]
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT how FROM made").fetchone()[0] == made
        assert db.execute("SELECT source FROM sources").fetchall() == [("notes",)]


def test_an_index_left_by_the_previous_version_is_rebuilt(env, workdir):
    saved(env, "kept", "the heron waits")
    index = Settings.load(env).home / "index" / "search.sqlite"
    index.parent.mkdir(mode=0o700, parents=True)
    with sqlite3.connect(index) as db:  # the previous layout: no source numbers, text beside each row
        db.executescript(
            "CREATE VIRTUAL TABLE session_entries USING fts5(body, source UNINDEXED, pos UNINDEXED, role UNINDEXED,"
            " sealed UNINDEXED);"
            "CREATE TABLE sources(kind TEXT, source TEXT, stamp TEXT, offset INTEGER, count INTEGER, inode INTEGER,"
            " PRIMARY KEY(kind, source));"
            "INSERT INTO session_entries VALUES ('a stale heron', 'gone', 1, 'user', NULL);"
            "PRAGMA user_version=2;")
    result = run_chatcli("session", "search", "heron", env=env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].startswith("kept  (") and "gone" not in result.stdout


def test_a_search_of_an_index_up_to_date_does_not_wait_for_a_writer(env):
    saved(env, "quiet", "the lighthouse keeper")
    assert names(search(env, "lighthouse")) == ["quiet"]  # indexed
    settings = Settings.load(env)
    writer = sqlite3.connect(settings.home / "index" / "search.sqlite", isolation_level=None)
    notices: list[str] = []
    try:
        writer.execute("BEGIN IMMEDIATE")  # another process indexing, say
        groups = records.search_sessions(settings, Home.of(settings).sessions(), "lighthouse", notice=notices.append)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert names(groups) == ["quiet"] and notices == []  # no wait, no fall-back to a search in memory
