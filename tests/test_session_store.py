"""The session store on real files: v2 format, migration, refusals, modes, listing (SPEC §4)."""

from __future__ import annotations

import json
import os
import stat

import pytest

from chatcli.core.messages import Message
from chatcli.core.session import SessionData, make_title
from chatcli.store.sessions import SessionError, SessionNotFound, SessionStore


@pytest.fixture
def store(tmp_path):
    return SessionStore(tmp_path / "home" / ".chatcli" / "sessions")


def conversation(*pairs: str) -> list[Message]:
    return [Message("user" if i % 2 == 0 else "assistant", text) for i, text in enumerate(pairs)]


def test_save_and_load_round_trip_in_the_v2_format(store):
    store.save("proj", SessionData(history=conversation("hi", "hello")))
    document = json.loads(store.path("proj").read_text())
    assert document["version"] == 2
    assert document["chat_history"] == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert document["agent_history"] == [] and document["coder_history"] == []
    assert {"shared_memory", "transcript_id", "attachments", "checkpoints", "title"} <= set(document)
    data, _ = store.load("proj")
    assert [m.content for m in data.history] == ["hi", "hello"]


def test_files_are_0600_and_directories_0700(store):
    store.save("proj", SessionData(history=conversation("hi")))
    assert stat.S_IMODE(store.path("proj").stat().st_mode) == 0o600
    assert stat.S_IMODE(store.root.stat().st_mode) == 0o700
    assert stat.S_IMODE(store.root.parent.stat().st_mode) == 0o700  # CHATCLI_HOME itself


def test_unknown_fields_survive_a_re_save(store):
    store.root.mkdir(parents=True)
    store.path("foreign").write_text(json.dumps({
        "version": 2, "title": "t", "chat_history": [{"role": "user", "content": "x", "images": ["i.png"],
                                                      "meta": {"mode": "agent", "cost": 3}}],
        "agent_history": [], "coder_history": [], "shared_memory": [], "hub_thread": {"id": 7},
        "attachments": [{"context_id": "c1", "priority": 2}], "checkpoints": [["sha256:aa"]],
    }))
    data, _ = store.load("foreign")
    data.history.append(Message("assistant", "y"))
    store.save("foreign", data)
    document = json.loads(store.path("foreign").read_text())
    assert document["hub_thread"] == {"id": 7}
    assert document["chat_history"][0]["images"] == ["i.png"]
    assert document["chat_history"][0]["meta"] == {"mode": "agent", "cost": 3}
    assert document["attachments"] == [{"context_id": "c1", "priority": 2}]
    assert document["checkpoints"] == [["sha256:aa"]]


def test_legacy_bare_array_loads(store):
    store.root.mkdir(parents=True)
    store.path("old").write_text(json.dumps([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]))
    data, _ = store.load("old")
    assert [m.content for m in data.history] == ["a", "b"] and data.source == "legacy"


def test_v1_per_mode_histories_merge_chronologically(store):
    store.root.mkdir(parents=True)
    system = {"role": "system", "content": "You are helpful."}
    store.path("v1").write_text(json.dumps({
        "version": 1,
        "chat_history": [system, {"role": "user", "content": "c1", "timestamp": "2025-01-01T10:00:00Z"},
                         {"role": "assistant", "content": "c2", "timestamp": "2025-01-01T10:00:05Z"}],
        "agent_history": [system, {"role": "user", "content": "a1", "timestamp": "2025-01-01T09:00:00Z"},
                          {"role": "assistant", "content": "a2", "timestamp": "2025-01-01T09:00:09Z"}],
        "coder_history": [{"role": "user", "content": "k1", "timestamp": "2025-01-01T11:00:00Z"}],
    }))
    data, _ = store.load("v1")
    assert [m.content for m in data.history] == ["You are helpful.", "a1", "a2", "c1", "c2", "k1"]
    assert [m.meta.get("mode") for m in data.history[1:]] == ["agent", "agent", "chat", "chat", "coder"]
    store.save("v1", data)
    assert json.loads(store.path("v1").read_text())["version"] == 2


def test_v1_without_timestamps_keeps_chat_agent_coder_order(store):
    store.root.mkdir(parents=True)
    store.path("v1").write_text(json.dumps({
        "chat_history": [{"role": "user", "content": "c"}],
        "agent_history": [{"role": "user", "content": "a"}],
        "coder_history": [{"role": "user", "content": "k"}],
    }))
    assert [m.content for m in store.load("v1")[0].history] == ["c", "a", "k"]


@pytest.mark.parametrize("content,needle", [
    (json.dumps({"version": 3, "chat_history": []}), "format version 3 is newer"),
    ('{"version": 2, "chat_history": [{"role": "user", "cont', "is not valid JSON"),
    ("", "is empty"),
    (json.dumps({"version": 2, "chat_history": "nope"}), "chat_history is not a list"),
])
def test_unreadable_files_are_refused_and_never_rewritten(store, content, needle):
    store.root.mkdir(parents=True)
    path = store.path("bad")
    path.write_text(content)
    before = path.read_bytes()
    with pytest.raises(SessionError, match=needle) as info:
        store.load("bad")
    assert "session 'bad'" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(SessionError, match="not overwriting"):
        store.save("bad", SessionData(history=conversation("new")))
    assert path.read_bytes() == before


def test_missing_session_is_a_clear_error(store):
    with pytest.raises(SessionNotFound, match="session 'ghost' does not exist"):
        store.load("ghost")


def test_a_crash_mid_write_leaves_the_old_file(store, monkeypatch):
    store.save("proj", SessionData(history=conversation("old")))
    before = store.path("proj").read_bytes()

    def fail(*_args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(SessionError, match="session 'proj': cannot write .*disk full; nothing was written"):
        store.save("proj", SessionData(history=conversation("new", "answer")))
    assert store.path("proj").read_bytes() == before
    assert [p.name for p in store.root.iterdir() if p.name.endswith(".tmp")] == []


def test_title_comes_from_the_first_user_message():
    long = "  Explain   the\nrepository pattern " + "x" * 80
    title = make_title([Message("system", "s"), Message("user", long)])
    assert title.startswith("Explain the repository pattern x") and title.endswith("…")
    assert len(title) == 61
    assert make_title([Message("user", "short")]) == "short"


def settle(store) -> None:
    """Age the sessions directory past the catalog's settling time, as if written a minute ago."""
    st = store.root.stat()
    os.utime(store.root, ns=(st.st_atime_ns, st.st_mtime_ns - 60_000_000_000))


def plant(store, name: str, count: int) -> None:
    """Put a message count in the catalog that only the catalog can produce."""
    document = json.loads(store.catalog.path.read_text())
    document["entries"][name][2] = count
    store.catalog.path.write_text(json.dumps(document))


def test_listing_uses_the_catalog_instead_of_parsing_files(store):
    store.save("a", SessionData(history=conversation("one", "two")))
    store.save("b", SessionData(history=conversation("x")))
    assert {info.name: info.messages for info in store.list()} == {"a": 2, "b": 1}
    assert store.catalog.path.parent == store.root.parent  # beside the directory, not in it
    # A recent directory is not trusted: files are stat'ed, unchanged ones are not opened.
    plant(store, "a", 99)
    assert {info.name: info.messages for info in store.list()}["a"] == 99
    # A file whose mtime changed is read again.
    st = store.path("a").stat()
    os.utime(store.path("a"), ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert {info.name: info.messages for info in store.list()}["a"] == 2
    # A settled, unchanged directory: the catalog alone answers (no file is stat'ed).
    settle(store)
    store.list()
    plant(store, "b", 77)
    assert {info.name: info.messages for info in store.list()}["b"] == 77
    assert {info.name: info.messages for info in store.list(fresh=True)}["b"] == 77  # stat'ed, unchanged
    # Any write (a rename into the directory) ends that at once.
    store.save("c", SessionData(history=conversation("new")))
    assert {info.name: info.messages for info in store.list()} == {"a": 2, "b": 77, "c": 1}
    store.catalog.path.unlink()  # rebuildable
    assert {info.name: info.messages for info in store.list()} == {"a": 2, "b": 1, "c": 1}


def test_an_in_place_edit_shows_with_a_fresh_listing(store):
    store.save("a", SessionData(history=conversation("one", "two")))
    settle(store)
    store.list()
    store.path("a").write_text(json.dumps({"version": 2, "chat_history": [{"role": "user", "content": "x"}]}))
    assert {info.name: info.messages for info in store.list(fresh=True)} == {"a": 1}


def test_deleting_a_session_shows_in_the_next_listing(store):
    store.save("a", SessionData(history=conversation("x")))
    store.save("b", SessionData(history=conversation("y")))
    settle(store)
    assert len(store.list()) == 2
    store.delete("a")
    assert [info.name for info in store.list()] == ["b"]


def test_the_latest_pointer_names_the_last_write_unless_told_otherwise(store):
    store.save("mine", SessionData(history=conversation("x", "y")))
    assert (store.latest().name, store.latest().messages) == ("mine", 2)
    with store.lock("mirror"):
        store.write("mirror", SessionData(history=conversation("z")), latest=False)
    assert store.latest().name == "mine"  # a machine mirror is not the session to offer


def test_listing_reports_unreadable_files_without_failing(store):
    store.save("good", SessionData(history=conversation("x")))
    store.path("broken").write_text("{")
    infos = {info.name: info for info in store.list()}
    assert infos["good"].messages == 1
    assert infos["broken"].messages is None and "not valid JSON" in infos["broken"].problem


def test_multi_part_content_and_foreign_meta_survive_a_re_save(store):
    store.root.mkdir(parents=True)
    parts = [{"type": "text", "text": "look at"}, {"type": "image_url", "image_url": {"url": "data:x"}}]
    store.path("parts").write_text(json.dumps({"version": 2, "chat_history": [
        {"role": "user", "content": parts, "meta": "legacy-string-meta"}]}))
    data, _ = store.load("parts")
    assert data.history[0].content == "look at"  # its text, for display and requests
    store.save("parts", data)
    message = json.loads(store.path("parts").read_text())["chat_history"][0]
    assert message["content"] == parts and message["meta"] == "legacy-string-meta"


def test_a_legacy_array_is_written_back_as_v2(store):
    store.root.mkdir(parents=True)
    store.path("old").write_text(json.dumps([{"role": "user", "content": "a"}]))
    data, _ = store.load("old")
    store.save("old", data)
    document = json.loads(store.path("old").read_text())
    assert document["version"] == 2 and document["chat_history"] == [{"role": "user", "content": "a"}]


def test_v1_with_some_timestamps_orders_by_time_where_known(store):
    store.root.mkdir(parents=True)
    store.path("v1").write_text(json.dumps({
        "chat_history": [{"role": "user", "content": "c-late", "timestamp": "2025-01-01T12:00:00Z"},
                         {"role": "assistant", "content": "c-undated"}],
        "agent_history": [{"role": "user", "content": "a-early", "timestamp": "2025-01-01T08:00:00Z"}],
    }))
    assert [m.content for m in store.load("v1")[0].history] == ["a-early", "c-late", "c-undated"]


def test_a_session_with_an_integer_past_a_double_takes_appends_and_is_mended_after_one_cut_short(
        store, appends_at_any_size):
    huge = int("7" * 401)
    store.save("huge", SessionData(history=conversation("hi"), extra={"huge": huge}))
    data, stamp = store.load("huge")
    assert data.extra["huge"] == huge and data.appendable
    with store.lock("huge"):
        assert store.append("huge", conversation("more"), 1, stamp) is not None
    whole = store.path("huge").read_bytes()
    assert [m.content for m in store.load("huge")[0].history] == ["hi", "more"]
    store.path("huge").write_bytes(whole + b', {"role": "user", "cont')  # an append cut short in its first step
    data, stamp = store.load("huge")
    assert data.extra["huge"] == huge and not data.torn and [m.content for m in data.history] == ["hi", "more"]
    assert store.path("huge").read_bytes() == whole  # mended: what the append left is cut off
    store.save("huge", data)
    assert json.loads(store.path("huge").read_text())["huge"] == huge
