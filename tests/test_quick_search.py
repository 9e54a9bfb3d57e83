"""`chatcli session search WORDS` answered from an up-to-date index without loading the rest of
chatcli (cli/quick_search.py), and only when its answer is the whole search's: the same hits,
numbered the same way, and the whole search whenever a session, a journal or the index changed
since the index was brought up to date."""

from __future__ import annotations

import base64
import json
import os
import re
import sqlite3
import subprocess
import sys

from conftest import CHATCLI, bound, turn

from chatcli.config.settings import Settings
from chatcli.store.search import _word_pattern, _words


def search(env, *words: str) -> tuple[str, bool]:
    """(what `chatcli session search WORDS` printed, whether it answered without the whole
    search: engine.records never imported)."""
    done = subprocess.run([sys.executable, "-X", "importtime", CHATCLI, "session", "search", *words], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, "chatcli.engine.records" not in done.stderr


def whole(env, *words: str) -> str:
    """The whole search's answer (the fast path steps aside when journals are set either way)."""
    done = subprocess.run([CHATCLI, "session", "search", *words], env=dict(env, CHATCLI_SESSION_TRANSCRIPT="on"),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_an_index_up_to_date_answers_alone_with_the_whole_searchs_answer(env):
    for name, topic in (("alpha", "otters"), ("beta", "otters and beavers"), ("gamma", "beavers")):
        conv = bound(env, name)
        turn(conv, f"tell me about {topic}", f"{topic} are mammals")
        turn(conv, "and rivers?", f"rivers suit {topic}")
    first, quick = search(env, "otters")
    assert not quick  # no session indexed yet: the whole search indexes them
    for words in (["otters"], ["beavers", "rivers"], ["OTTERS"], ["nothing-like-this"]):
        out, quick = search(env, *words)
        assert quick, words
        assert out == whole(env, *words), words
    assert first == search(env, "otters")[0]
    assert "alpha" in first and "beta" in first and "gamma" not in first
    assert search(env, "nowhere")[0] == "No saved session matches.\n"


def test_hits_a_journal_numbers_otherwise_are_left_to_the_whole_search(env):
    conv = bound(env, "rewound")
    turn(conv, "first question")
    turn(conv, "second question")
    conv.history[:] = conv.history[:2]  # a rewind: the journal keeps the dropped turn
    conv.sync_transcript()
    turn(conv, "the walrus question")
    assert conv.binding.write_through() == []
    search(env, "walrus")  # indexes it
    out, quick = search(env, "walrus")
    assert not quick
    assert "#5 user …the walrus question…" in out  # the journal's position, not the file's third
    assert out == whole(env, "walrus")


def test_a_session_changed_since_it_was_indexed_is_searched_whole_and_then_alone_again(env):
    # Another program's session (Go ChatCLI's: no journal), rewritten by it in place.
    path = Settings.load(env).home / "sessions" / "notes.json"
    path.parent.mkdir(parents=True)
    history = [{"role": "user", "content": "the first platypus question"}, {"role": "assistant", "content": "ok"}]
    path.write_text(json.dumps({"chat_history": history}))
    search(env, "platypus")
    assert search(env, "platypus")[1]
    history.append({"role": "user", "content": "a wombat appears"})
    path.write_text(json.dumps({"chat_history": history}))
    out, quick = search(env, "wombat")
    assert not quick and "#3 user …a wombat appears…" in out
    assert search(env, "wombat") == (out, True)


def test_a_session_whose_journal_lags_its_file_is_numbered_by_the_whole_search(env):
    conv = bound(env, "notes")
    turn(conv, "the first platypus question")
    search(env, "platypus")
    assert search(env, "platypus")[1]
    path = conv.store.path("notes")  # another program adds a message, and no journal line
    document = json.loads(path.read_text())
    document["chat_history"].append({"role": "user", "content": "a wombat appears"})
    path.write_text(json.dumps(document))
    for _ in range(2):
        out, quick = search(env, "wombat")
        assert not quick and "#3 user …a wombat appears…" in out


def test_a_journal_changed_since_is_read_by_the_whole_search_which_records_it_again(env):
    conv = bound(env, "kept")
    turn(conv, "the heron question")
    search(env, "heron")
    assert search(env, "heron")[1]
    journal = conv.transcript.journal.path
    st = journal.stat()
    os.utime(journal, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    out, quick = search(env, "heron")
    assert not quick and "#1 user …the heron question…" in out
    assert search(env, "heron") == (out, True)


def test_a_sealed_store_and_an_index_of_an_older_layout_take_the_whole_search(env):
    conv = bound(env, "plain")
    turn(conv, "the ibis question")
    search(env, "ibis")
    index = Settings.load(env).home / "index" / "search.sqlite"
    with sqlite3.connect(index) as db:
        db.execute("PRAGMA user_version=3")
    out, quick = search(env, "ibis")
    assert not quick and "plain" in out
    assert search(env, "ibis") == (out, True)  # rebuilt in this layout
    sealed = dict(env, CHATCLI_HOME=env["CHATCLI_HOME"] + "-sealed",
                  CHATCLI_ENCRYPTION_KEY=base64.b64encode(os.urandom(32)).decode())
    turn(bound(sealed, "secret"), "the ibis question")
    for _ in range(2):
        out, quick = search(sealed, "ibis")
        assert not quick and "secret" in out


def test_queries_with_nothing_to_search_for_are_the_whole_searchs_error(env):
    turn(bound(env, "notes"), "a question")
    search(env, "question")
    done = subprocess.run([CHATCLI, "session", "search", "???"], env=env, capture_output=True, text=True)
    assert done.returncode != 0 and "nothing to search for" in done.stderr and "Traceback" not in done.stderr


def test_a_querys_words_are_found_as_the_indexes_word_pattern_finds_them():
    every = "".join(map(chr, range(sys.maxunicode + 1))).replace("\ud800", " ")  # one text, every character
    text = re.sub(r"[\ud800-\udfff]", " ", every)
    assert _words(text) == _word_pattern().findall(text)
    assert _words("crème-brûlée, naïve_ok 42!") == ["crème", "brûlée", "naïve_ok", "42"]


def test_a_sealed_index_hashes_each_piece_of_text_as_the_word_pattern_splits_it():
    from chatcli.store.search import _AROUND, _Pieces

    # The pieces' shortcut: a piece that is one word once _AROUND is stripped is hashed as that
    # word, which holds while isalnum is the word pattern's character class but "_".
    letter = re.compile(r"[^\W_]")
    assert all(c.isalnum() == bool(letter.match(c)) for c in map(chr, range(sys.maxunicode + 1)))
    assert not _word_pattern().findall(_AROUND)
    pieces = _Pieces(lambda word: f"<{word}>")
    for piece in ("#42,", "(naïve)", "a_b.", "“quoted”", "--", "x-y", "'s", "Ⅻ.", "٣!", "e\u0301", "*bold*"):
        assert pieces[piece] == " ".join(f"<{word}>" for word in _word_pattern().findall(piece)), piece
