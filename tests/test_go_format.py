"""The schema of Go ChatCLI's session files (go_session.schema.json) says what its decoder reads,
and the suite-wide check (conftest's go_readable_sessions) holds chatcli's writing to it."""

from __future__ import annotations

import base64
import json
import os
import shutil
from pathlib import Path

import pytest
from go_format import SCHEMA_PATH, check_sessions, keys_of, plain_message, problems, schema
from hypothesis import given, settings
from hypothesis import strategies as st

TESTS = Path(__file__).parent
VERSION = "int (2 or more; a lower version is read as a bare array of messages)"


def go_session(**fields) -> dict:
    """A v2 file in the shapes Go ChatCLI writes (its models.SessionData), every field used."""
    return {
        "version": 2,
        "title": "Release notes",
        "chat_history": [
            {"role": "system", "content": "You are terse.",
             "system_parts": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral",
                                                                                         "ttl": "1h"}},
                              {"type": "text", "text": "Today is Monday."}]},
            {"role": "user", "content": "what is in the picture?", "meta": {"mode": "chat"},
             "images": [{"media_type": "image/png", "data": base64.b64encode(b"\x89PNG\r\n").decode(),
                         "file_name": "shot.png"},
                        {"media_type": "image/jpeg", "url": "https://example.org/a.jpg"}]},
            {"role": "assistant", "content": "", "meta": {"mode": "agent"},
             "tool_calls": [{"id": "c1", "type": "function", "name": "read_file", "arguments": {"path": "a.txt"}},
                            {"id": "c2", "type": "function", "name": "grep", "arguments": {},
                             "raw": '{"pattern": "x'}]},
            {"role": "tool", "content": "A", "tool_call_id": "c1", "meta": {"mode": "agent"}},
            {"role": "tool", "content": "no such file", "tool_call_id": "c2", "is_error": True,
             "error_code": "ENOENT", "meta": {"mode": "agent"}},
            {"role": "assistant", "content": "Earlier: two questions.",
             "meta": {"is_summary": True, "summary_of": 2, "mode": "coder", "preserve_verbatim": False,
                      "agent_feedback": True, "skill_names": "git,docs", "skill_collapsed": True}},
        ],
        "agent_history": [],
        "coder_history": [],
        "shared_memory": [{"role": "user", "content": "the freeze ends Friday"}],
        **fields,
    }


def with_message(message: dict, **fields) -> dict:
    return {"version": 2, "chat_history": [message], **fields}


# -- the schema ----------------------------------------------------------------------------------
def test_the_schema_is_a_draft_2020_12_schema():
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(schema())
    assert schema()["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert json.loads(SCHEMA_PATH.read_text()) == schema()


def test_every_field_is_held_to_its_type_in_every_spelling_go_matches():
    """Go matches a key to a field case-insensitively, with Unicode's simple folding (the Kelvin sign
    is a k, the long s an s): each object's patternProperties repeat its properties for those keys."""
    folds = {"k": "Kk\u212a", "s": "Ss\u017f"}

    def spellings(name: str) -> str:
        letters = "".join(f"[{folds.get(c, c.upper() + c)}]" if c.isalpha() else c for c in name)
        return f"^(?!{name}$){letters}$"

    objects = [schema(), *(d for d in schema()["$defs"].values() if "properties" in d)]
    assert len(objects) == 7
    for definition in objects:
        assert definition["patternProperties"] == {spellings(name): field
                                                   for name, field in definition["properties"].items()}


def test_a_session_in_go_shape_reads():
    assert problems(go_session()) == []


def test_fields_go_does_not_declare_are_allowed_anywhere():
    document = go_session(transcript_id="t-1", attachments=[{"context": "docs"}], checkpoints=[["sha256:ab"]])
    document["chat_history"][1]["meta"]["timestamp"] = "2026-01-01T00:00:00Z"
    document["chat_history"][1]["created_at"] = 1767225600
    document["chat_history"][2]["tool_calls"][0]["result"] = {"ok": True}
    document["chat_history"][1]["images"][0]["width"] = 640
    assert problems(document) == []


def test_null_is_read_for_every_field_but_the_version():
    document = {"version": 2, "title": None, "chat_history": [
        None,
        {"role": None, "content": None, "meta": None, "tool_calls": None, "tool_call_id": None, "system_parts": None,
         "images": None, "is_error": None, "error_code": None},
        {"role": "assistant", "content": "", "meta": {key: None for key in ("is_summary", "summary_of", "mode")},
         "tool_calls": [None, {"id": None, "type": None, "name": None, "arguments": None, "raw": None}],
         "system_parts": [{"type": None, "cache_control": None}], "images": [{"media_type": None, "data": None}]},
    ], "agent_history": None, "coder_history": None, "shared_memory": None}
    assert problems(document) == []
    assert problems({"version": None, "chat_history": []}) == [f"version is null; Go ChatCLI reads {VERSION}"]


REFUSED = [
    (with_message({"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "name": "read_file", "arguments": '{"path": "a.txt"}'}]}),
     "chat_history[0].tool_calls[0].arguments is a string; Go ChatCLI reads map[string]any (an object)"),
    (with_message({"role": "assistant", "content": "x", "meta": {"is_summary": True, "summary_of": 1.5}}),
     "chat_history[0].meta.summary_of is a number (1.5); Go ChatCLI reads int (an integer of 64 bits)"),
    (with_message({"role": "assistant", "content": "x", "meta": {"summary_of": 2.0}}),
     "chat_history[0].meta.summary_of is a number (2.0); Go ChatCLI reads int (an integer of 64 bits)"),
    (with_message({"role": "assistant", "content": "x", "meta": {"summary_of": 2 ** 63}}),
     "chat_history[0].meta.summary_of is a number (9223372036854775808); Go ChatCLI reads int (an integer of 64 "
     "bits)"),
    (with_message({"role": "tool", "content": "x", "tool_call_id": "c1", "is_error": "yes"}),
     "chat_history[0].is_error is a string; Go ChatCLI reads bool (true or false)"),
    (with_message({"role": "user", "content": [{"type": "text", "text": "hi"}]}),
     "chat_history[0].content is an array; Go ChatCLI reads string (a string)"),
    ({"version": "2", "chat_history": []}, f"version is a string; Go ChatCLI reads {VERSION}"),
    ({"version": 2.0, "chat_history": []}, f"version is a number (2.0); Go ChatCLI reads {VERSION}"),
    ({"version": 1, "chat_history": []}, f"version is a number (1); Go ChatCLI reads {VERSION}"),
    ({"chat_history": []}, f'the document has no "version"; Go ChatCLI always writes it, as {VERSION}, and reads its '
                           "absence as empty"),
    ({"version": 2, "chat_history": "hi"}, "chat_history is a string; Go ChatCLI reads []Message (an array)"),
    ({"version": 2, "title": 7, "chat_history": []}, "title is a number (7); Go ChatCLI reads string (a string)"),
    ({"version": 2, "chat_history": [], "shared_memory": ["a note"]},
     "shared_memory[0] is a string; Go ChatCLI reads Message (an object)"),
    ([{"role": "user", "content": "a legacy file"}],
     "the document is an array; Go ChatCLI reads SessionData (an object)"),
    (with_message({"role": "tool", "content": "x", "tool_call_id": 5}),
     "chat_history[0].tool_call_id is a number (5); Go ChatCLI reads string (a string)"),
    (with_message({"role": "user", "content": "x", "meta": "chat"}),
     "chat_history[0].meta is a string; Go ChatCLI reads *MessageMeta (an object)"),
    (with_message({"role": "user", "content": "x", "meta": {"mode": "chat", "skill_collapsed": "no"}}),
     "chat_history[0].meta.skill_collapsed is a string; Go ChatCLI reads bool (true or false)"),
    (with_message({"role": "assistant", "content": "", "tool_calls": {"id": "c1"}}),
     "chat_history[0].tool_calls is an object; Go ChatCLI reads []ToolCall (an array)"),
    (with_message({"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{}"}}]}),
     ['chat_history[0].tool_calls[0] has no "name"; Go ChatCLI always writes it, as string (a string), and reads its '
      "absence as empty",
      'chat_history[0].tool_calls[0] has no "arguments"; Go ChatCLI always writes it, as map[string]any (an object), '
      "and reads its absence as empty"]),
    (with_message({"role": "user", "content": "x", "images": [{"media_type": "image/png", "data": "iVBORw0KGgo"}]}),
     "chat_history[0].images[0].data is a string that is not padded base64; Go ChatCLI reads []byte (a base64 "
     "string)"),
    (with_message({"role": "user", "content": "x", "images": [{"media_type": "image/png", "data": [137, 300]}]}),
     "chat_history[0].images[0].data[1] is a number (300); Go ChatCLI reads byte (an integer from 0 to 255)"),
    (with_message({"role": "user", "content": "x", "images": [{"data": "aGk="}]}),
     'chat_history[0].images[0] has no "media_type"; Go ChatCLI always writes it, as string (a string), and reads its '
     "absence as empty"),
    (with_message({"role": "system", "content": "x", "system_parts": [{"type": "text", "cache_control": "1h"}]}),
     "chat_history[0].system_parts[0].cache_control is a string; Go ChatCLI reads *CacheControl (an object)"),
    # Go matches keys to fields case-insensitively, so these are not fields it ignores.
    (with_message({"role": "user", "content": "x", "Content": 5}),
     "chat_history[0].Content is a number (5); Go ChatCLI reads string (a string)"),
    (with_message({"role": "user", "content": "x", "meta": {"\u017fkill_names": ["git"]}}),
     'chat_history[0].meta["\u017fkill_names"] is an array; Go ChatCLI reads string (a string)'),
]


def test_a_newer_version_reads_as_v2_as_go_chatcli_s_loader_reads_it():
    assert problems({"version": 3, "chat_history": [], "new_field": {"x": 1}}) == []


def lines(expected: str | list[str]) -> list[str]:
    return [expected] if isinstance(expected, str) else expected


@pytest.mark.parametrize(("document", "expected"), REFUSED, ids=[lines(e)[0].split(";")[0] for _, e in REFUSED])
def test_what_go_refuses_is_named_with_its_path_and_go_type(document, expected):
    assert problems(document) == lines(expected)


def test_base64_reads_as_go_decodes_it():
    def reads(data) -> bool:
        return problems(with_message({"role": "user", "content": "x", "images": [{"media_type": "image/png",
                                                                                 "data": data}]})) == []

    assert reads("") and reads("aGk=") and reads("aGVsbG8=") and reads("aGVs\r\nbG8=") and reads([104, 105])
    assert not reads("aGk") and not reads("aGk=x") and not reads("a-k=") and not reads("aGVsbG8") \
        and not reads([104, -1])


def test_every_wrong_field_of_a_file_is_named_in_document_order():
    document = go_session()
    document["chat_history"][3]["tool_call_id"] = 7
    document["chat_history"][2]["tool_calls"][1]["arguments"] = "{}"
    assert problems(document) == [
        "chat_history[2].tool_calls[1].arguments is a string; Go ChatCLI reads map[string]any (an object)",
        "chat_history[3].tool_call_id is a number (7); Go ChatCLI reads string (a string)",
    ]


# -- the fast path: only what the schema reads -------------------------------------------------------
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 64), 2 ** 64), st.floats(allow_nan=False),
                     st.text(max_size=2))
_json = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                                           max_size=3), max_leaves=6)


def _mostly(right):
    """The type Go reads three times in four, anything else the fourth."""
    return st.sampled_from((True, True, True, False)).flatmap(lambda go: right if go else _json)


_text = st.text(max_size=3)
_meta = st.fixed_dictionaries({}, optional={
    "mode": _mostly(_text), "skill_names": _mostly(_text), "summary_of": _mostly(st.integers(-(2 ** 63), 2 ** 63 - 1)),
    "is_summary": _mostly(st.booleans()), "skill_collapsed": _mostly(st.booleans()), "timestamp": _json,
    "Mode": _json, "\u212aey": _json, "\u017fkill_names": _json})
_call = st.fixed_dictionaries(
    {"id": _mostly(_text), "type": _mostly(st.just("function")), "name": _mostly(_text),
     "arguments": _mostly(st.dictionaries(_text, _json, max_size=2))},
    optional={"raw": _mostly(_text), "Arguments": _json, "function": _json, "result": _json})
_message = st.fixed_dictionaries(
    {"role": _mostly(st.sampled_from(["user", "assistant", "tool"])), "content": _mostly(_text)},
    optional={"meta": _mostly(_meta), "tool_calls": _mostly(st.lists(_call, max_size=2)),
              "tool_call_id": _mostly(_text), "is_error": _mostly(st.booleans()), "error_code": _mostly(_text),
              "timestamp": _json})
# Fields the fast path leaves to the schema, spelled as Go reads them too.
_others = st.dictionaries(st.sampled_from(["Role", "CONTENT", "\u017fystem_parts", "images", "system_parts", "iD"]),
                          _json, min_size=1, max_size=2)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_message, st.tuples(_message, _others).map(lambda pair: {**pair[0], **pair[1]})))
def test_a_message_the_fast_path_passes_is_one_the_schema_reads(message):
    if plain_message(message):
        assert problems(with_message(message)) == []


def test_the_messages_chatcli_writes_take_the_fast_path():
    for message in go_session()["chat_history"][2:]:
        assert plain_message(message), message
    assert plain_message({"role": "user", "content": "hi", "meta": {"mode": "chat", "timestamp": 1.5}, "id": 3})


# -- the check of the files a test leaves ------------------------------------------------------------
def write(path: Path, document) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return path


def test_the_check_names_the_file_and_leaves_out_links_and_what_is_not_json(tmp_path):
    sessions = tmp_path / "sessions"
    bad = with_message({"role": "user", "content": "x", "is_error": "yes"})
    write(sessions / "bad.json", bad)
    write(sessions / "good.json", go_session())
    (sessions / "broken.json").write_text('{"version": 2, "chat_history": [')
    write(tmp_path / "elsewhere.json", bad)
    (sessions / "link.json").symlink_to(tmp_path / "elsewhere.json")
    os.mkfifo(sessions / "fifo.json")
    write(sessions / ".bad.json.123.tmp", bad)
    assert check_sessions(sessions, []) == [
        "session bad.json: chat_history[0].is_error is a string; Go ChatCLI reads bool (true or false)"]
    assert check_sessions(sessions, [], lambda name, path, raw: name == "bad") == []
    assert check_sessions(tmp_path / "nowhere", []) == []


def test_a_sealed_file_is_checked_with_a_key_that_opens_it_and_left_out_without_one(tmp_path):
    from chatcli.core.messages import Message
    from chatcli.core.session import SessionData
    from chatcli.store.sessions import SessionStore

    key, other = os.urandom(32), os.urandom(32)
    SessionStore(tmp_path / "sessions", key).write("vault", SessionData(history=[
        Message("tool", "", tool_call_id="c1", extra={"is_error": "yes"})]))  # kept as given, Go refuses it
    env = {"CHATCLI_ENCRYPTION_KEY": base64.b64encode(other).decode(),
           "CHATCLI_NEW_ENCRYPTION_KEY": base64.b64encode(key).decode()}
    assert keys_of([env, {"CHATCLI_ENCRYPTION_KEY": "not base64"}]) == [other, key]
    expected = ["session vault.json: chat_history[0].is_error is a string; Go ChatCLI reads bool (true or false)"]
    assert check_sessions(tmp_path / "sessions", [other, key]) == expected
    assert check_sessions(tmp_path / "sessions", [other]) == []  # a wrong-key test
    assert check_sessions(tmp_path / "sessions", []) == []


SUITE_TESTS = '''
import json

import pytest
from conftest import run_chatcli

from chatcli.core.messages import Message
from chatcli.core.session import SessionData
from chatcli.store.sessions import SessionStore

# A field chatcli keeps as it was given (it never drops what it does not model), which Go refuses.
NOT_BOOL = {"is_error": "yes"}
PARTS = {"version": 2, "chat_history": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}


def write_what_go_refuses(sessions_dir):
    SessionStore(sessions_dir).write("mine", SessionData(history=[Message("tool", "", tool_call_id="c1",
                                                                          extra=NOT_BOOL)]))


def test_chatcli_writes_what_go_refuses(env, sessions_dir):
    write_what_go_refuses(sessions_dir)


def test_a_planted_file_is_not_chatcli_writing(env, sessions_dir):
    sessions_dir.mkdir(parents=True)
    (sessions_dir / "planted.json").write_text(json.dumps(PARTS))
    (sessions_dir / "future.json").write_text(json.dumps({"version": 3, "chat_history": "later"}))
    assert run_chatcli("session", "show", "planted", env=env).returncode == 0


def test_a_planted_file_chatcli_writes_again_is_checked(env, sessions_dir, appends_at_any_size):
    sessions_dir.mkdir(parents=True)
    (sessions_dir / "planted.json").write_text(json.dumps(PARTS))
    assert run_chatcli("session", "fork", "planted", "copy", env=env).returncode == 0
    store = SessionStore(sessions_dir)
    data, stamp = store.load("planted")
    with store.lock("planted"):
        assert store.append("planted", [Message("user", "more")], 1, stamp)


@pytest.mark.foreign_sessions("copy")
def test_the_mark_leaves_out_the_sessions_it_names(env, sessions_dir):
    sessions_dir.mkdir(parents=True)
    (sessions_dir / "planted.json").write_text(json.dumps(PARTS))
    assert run_chatcli("session", "fork", "planted", "copy", env=env).returncode == 0


@pytest.mark.foreign_sessions
def test_the_mark_without_names_leaves_out_every_session(env, sessions_dir):
    write_what_go_refuses(sessions_dir)


def test_a_test_without_a_home_is_not_checked(tmp_path):
    SessionStore(tmp_path / "sessions").write("mine", SessionData(history=[Message("user", "x", meta={"mode": 1})]))
'''


def test_the_suite_fails_a_test_whose_session_files_go_cannot_read(pytester):
    for name in ("conftest.py", "fakes.py", "go_format.py", SCHEMA_PATH.name):
        shutil.copy(TESTS / name, pytester.path / name)
    pytester.makepyfile(test_sessions=SUITE_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "0")
    result.assert_outcomes(passed=6, errors=2)
    errors = {report.split(" - ")[0] for report in result.outlines if report.startswith("ERROR ")}
    assert errors == {"ERROR test_sessions.py::test_chatcli_writes_what_go_refuses",
                      "ERROR test_sessions.py::test_a_planted_file_chatcli_writes_again_is_checked"}
    result.stdout.fnmatch_lines([
        "*ERROR at teardown of test_chatcli_writes_what_go_refuses*",
        "session files not in Go ChatCLI v1.188's format (tests/go_session.schema.json):",
        "  session mine.json: chat_history[0].is_error is a string; Go ChatCLI reads bool (true or false)",
        "*ERROR at teardown of test_a_planted_file_chatcli_writes_again_is_checked*",
        "session files not in Go ChatCLI v1.188's format (tests/go_session.schema.json):",
        "  session copy.json: chat_history[0].content is an array; Go ChatCLI reads string (a string)",
        "  session planted.json: chat_history[0].content is an array; Go ChatCLI reads string (a string)",
    ])
