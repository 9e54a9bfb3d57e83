"""`chatcli import llm`: the logs of llm (its SQLite logs.db) as chatcli sessions. The fixtures are
databases built here, table by table, in the schemas llm's migrations leave (see
store/sources/llm.py): llm 0.31's `responses` and the tables around it, the message store llm
0.32 writes instead, and an older llm's, before fragments and tools."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from conftest import run_chatcli
from importing import continued, imported, made, searched, session_document, snapshot

from chatcli.core.imported import Tally
from chatcli.store.sources import llm

# The tables of an llm from before fragments and tools (0.19 to 0.23).
OLDER = """
CREATE TABLE conversations (id TEXT PRIMARY KEY, name TEXT, model TEXT);
CREATE TABLE responses (id TEXT PRIMARY KEY, model TEXT, prompt TEXT, system TEXT, prompt_json TEXT,
    options_json TEXT, response TEXT, response_json TEXT, conversation_id TEXT REFERENCES conversations(id),
    duration_ms INTEGER, datetime_utc TEXT, input_tokens INTEGER, output_tokens INTEGER, token_details TEXT);
CREATE TABLE attachments (id TEXT PRIMARY KEY, type TEXT, path TEXT, url TEXT, content BLOB);
CREATE TABLE prompt_attachments (response_id TEXT REFERENCES responses(id),
    attachment_id TEXT REFERENCES attachments(id), "order" INTEGER, PRIMARY KEY (response_id, attachment_id));
"""
# What llm 0.24 to 0.31 added: schemas, fragments, tools.
LATER = """
ALTER TABLE responses ADD COLUMN schema_id TEXT REFERENCES schemas(id);
ALTER TABLE responses ADD COLUMN resolved_model TEXT;
CREATE TABLE schemas (id TEXT PRIMARY KEY, content TEXT);
CREATE TABLE fragments (id INTEGER PRIMARY KEY, hash TEXT, content TEXT, datetime_utc TEXT, source TEXT);
CREATE UNIQUE INDEX idx_fragments_hash ON fragments (hash);
CREATE TABLE fragment_aliases (alias TEXT PRIMARY KEY, fragment_id INTEGER REFERENCES fragments(id));
CREATE TABLE prompt_fragments (response_id TEXT REFERENCES responses(id), fragment_id INTEGER REFERENCES fragments(id),
    "order" INTEGER, PRIMARY KEY (response_id, fragment_id, "order"));
CREATE TABLE system_fragments (response_id TEXT REFERENCES responses(id), fragment_id INTEGER REFERENCES fragments(id),
    "order" INTEGER, PRIMARY KEY (response_id, fragment_id, "order"));
CREATE TABLE tools (id INTEGER PRIMARY KEY, hash TEXT, name TEXT, description TEXT, input_schema TEXT, plugin TEXT);
CREATE TABLE tool_responses (tool_id INTEGER REFERENCES tools(id), response_id TEXT REFERENCES responses(id),
    PRIMARY KEY (tool_id, response_id));
CREATE TABLE tool_calls (id INTEGER PRIMARY KEY, response_id TEXT REFERENCES responses(id),
    tool_id INTEGER REFERENCES tools(id), name TEXT, arguments TEXT, tool_call_id TEXT);
CREATE TABLE tool_instances (id INTEGER PRIMARY KEY, plugin TEXT, name TEXT, arguments TEXT);
CREATE TABLE tool_results (id INTEGER PRIMARY KEY, response_id TEXT REFERENCES responses(id),
    tool_id INTEGER REFERENCES tools(id), name TEXT, output TEXT, tool_call_id TEXT,
    instance_id INTEGER REFERENCES tool_instances(id), exception TEXT);
CREATE TABLE tool_results_attachments (tool_result_id INTEGER REFERENCES tool_results(id),
    attachment_id TEXT REFERENCES attachments(id), "order" INTEGER, PRIMARY KEY (tool_result_id, attachment_id));
"""
# The message store of llm 0.32 on (the tables above stay, no longer written).
STORE = """
ALTER TABLE responses ADD COLUMN reasoning TEXT;
CREATE TABLE messages (hash TEXT PRIMARY KEY, parent_hash TEXT REFERENCES messages(hash), role TEXT,
    provider_metadata TEXT);
CREATE INDEX idx_messages_parent_hash ON messages (parent_hash);
CREATE TABLE parts (id INTEGER PRIMARY KEY, message_hash TEXT REFERENCES messages(hash), position INTEGER,
    type TEXT, tool_name TEXT, text TEXT, payload TEXT);
CREATE UNIQUE INDEX idx_parts_message_hash_position ON parts (message_hash, position);
CREATE TABLE part_attachments (part_id INTEGER REFERENCES parts(id), attachment_id TEXT REFERENCES attachments(id),
    "order" INTEGER, PRIMARY KEY (part_id, attachment_id, "order"));
CREATE TABLE part_fragments (part_id INTEGER REFERENCES parts(id), fragment_id INTEGER REFERENCES fragments(id),
    "order" INTEGER, PRIMARY KEY (part_id, fragment_id, "order"));
CREATE TABLE threads (id TEXT PRIMARY KEY, name TEXT, tip_message_hash TEXT REFERENCES messages(hash),
    forked_from TEXT REFERENCES threads(id), datetime_utc TEXT);
CREATE TABLE turns (id TEXT PRIMARY KEY, thread_id TEXT REFERENCES threads(id),
    parent_message_hash TEXT REFERENCES messages(hash), tip_message_hash TEXT REFERENCES messages(hash),
    model TEXT, resolved_model TEXT, options_json TEXT, schema_id TEXT REFERENCES schemas(id), input_tokens INTEGER,
    output_tokens INTEGER, token_details TEXT, duration_ms INTEGER, datetime_utc TEXT, response_json TEXT);
CREATE INDEX idx_turns_thread_id ON turns (thread_id);
CREATE TABLE turn_tools (turn_id TEXT REFERENCES turns(id), tool_id INTEGER REFERENCES tools(id),
    instance_id INTEGER REFERENCES tool_instances(id), PRIMARY KEY (turn_id, tool_id));
CREATE TABLE turn_fragments (turn_id TEXT REFERENCES turns(id), fragment_id INTEGER REFERENCES fragments(id),
    "order" INTEGER, kind TEXT, PRIMARY KEY (turn_id, fragment_id, kind, "order"));
CREATE TABLE turn_search (id INTEGER PRIMARY KEY, turn_id TEXT REFERENCES turns(id), prompt TEXT, response TEXT);
CREATE TABLE tool_instantiations (turn_id TEXT REFERENCES turns(id), tool_call_id TEXT,
    instance_id INTEGER REFERENCES tool_instances(id), PRIMARY KEY (turn_id, tool_call_id));
"""
SCHEMAS = {"older": OLDER, "0.31": OLDER + LATER, "0.32": OLDER + LATER + STORE}


class Logs:
    """An llm logs.db being written: each call adds the rows llm adds for it."""

    def __init__(self, path: Path, schema: str = "0.31") -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.db = sqlite3.connect(path)
        self.db.executescript(SCHEMAS[schema])
        self.count = 0
        self.minute = 0

    def ulid(self) -> str:
        self.count += 1
        return f"01jx2m8k3q{self.count:016d}"

    def time(self, separator: str = "T") -> str:
        self.minute += 1
        return f"2025-06-01{separator}09:{self.minute:02d}:00.000000+00:00"

    def conversation(self, name: str, model: str = "gpt-4o-mini") -> str:
        ident = self.ulid()
        self.db.execute("insert into conversations values (?, ?, ?)", [ident, name, model])
        return ident

    def response(self, conversation: str | None, prompt: str, response: str, *, system: str | None = None,
                 fragments: tuple[str, ...] = (), attachments: tuple[dict, ...] = (), calls: tuple = (),
                 results: tuple = (), model: str = "gpt-4o-mini") -> str:
        """One model call: `calls` (name, arguments, id) it made, `results` (name, output, id, exception)
        of the previous call's tools it sent back."""
        ident = self.ulid()
        self.db.execute("insert into responses (id, model, prompt, system, options_json, response, conversation_id, "
                        "duration_ms, datetime_utc) values (?, ?, ?, ?, '{}', ?, ?, 412, ?)",
                        [ident, model, prompt, system, response, conversation, self.time()])
        for order, content in enumerate(fragments):
            self.db.execute("insert into prompt_fragments values (?, ?, ?)", [ident, self.fragment(content), order])
        for order, attachment in enumerate(attachments):
            self.db.execute("insert into prompt_attachments values (?, ?, ?)",
                            [ident, self.attachment(**attachment), order])
        for name, arguments, call_id in calls:
            self.db.execute("insert into tool_calls (response_id, name, arguments, tool_call_id) values (?, ?, ?, ?)",
                            [ident, name, json.dumps(arguments), call_id])
        for name, output, call_id, exception in results:
            self.db.execute("insert into tool_results (response_id, name, output, tool_call_id, exception) "
                            "values (?, ?, ?, ?, ?)", [ident, name, output, call_id, exception])
        return ident

    def fragment(self, content: str) -> int:
        row = self.db.execute("select id from fragments where content = ?", [content]).fetchone()
        if row:
            return row[0]
        return self.db.execute("insert into fragments (hash, content, datetime_utc, source) values (?, ?, ?, ?)",
                               [f"h{len(content)}{content[:8]}", content, "2025-06-01 09:00:00", "notes.md"]).lastrowid

    def attachment(self, type: str, path: str | None = None, url: str | None = None,
                   content: bytes | None = None) -> str:
        ident = f"sha{self.ulid()}"
        self.db.execute("insert into attachments values (?, ?, ?, ?, ?)", [ident, type, path, url, content])
        return ident

    # The message store (llm 0.32 on).

    def message(self, role: str, *parts: dict, parent: str | None) -> str:
        digest = f"b2:{self.ulid()}"
        self.db.execute("insert into messages values (?, ?, ?, null)", [digest, parent, role])
        for position, part in enumerate(parts):
            payload = {key: value for key, value in part.items() if key != "type"}
            text = payload.pop("text") if part["type"] in ("text", "reasoning") and "text" in payload else None
            self.db.execute("insert into parts (message_hash, position, type, tool_name, text, payload) "
                            "values (?, ?, ?, ?, ?, ?)",
                            [digest, position, part["type"], payload.get("name"), text,
                             json.dumps(payload) if payload else None])
        return digest

    def chain(self, *messages: tuple, parent: str | None = None) -> str:
        """Messages (role, part…) one after the other; the last one's hash."""
        for role, *parts in messages:
            parent = self.message(role, *parts, parent=parent)
        return parent

    def thread(self, name: str, ident: str | None = None) -> str:
        ident = ident or self.ulid()
        self.db.execute("insert into threads values (?, ?, null, null, ?)", [ident, name, self.time(" ")])
        return ident

    def turn(self, thread: str, parent: str, tip: str, model: str = "gpt-5.6-luna") -> str:
        ident = self.ulid()
        self.db.execute("insert into turns (id, thread_id, parent_message_hash, tip_message_hash, model, "
                        "datetime_utc) values (?, ?, ?, ?, ?, ?)", [ident, thread, parent, tip, model, self.time()])
        self.db.execute("update threads set tip_message_hash = ? where id = ?", [tip, thread])
        return ident

    def close(self) -> Path:
        self.db.commit()
        self.db.close()
        return self.path


def text(value: str) -> dict:
    return {"type": "text", "text": value}


def logs_at(home: Path, schema: str = "0.31") -> Logs:
    """The logs.db where llm keeps it on Linux."""
    return Logs(home / ".config" / "io.datasette.llm" / "logs.db", schema)


def at_home(env: dict) -> dict:
    env.pop("XDG_CONFIG_HOME", None)
    return env


def three_conversations(logs: Logs) -> None:
    """A system prompt over two turns (the first given a file as a fragment), a question answered
    with tools (one of which failed), a photo."""
    deploy = logs.conversation("#!/bin/sh rsync -a build/ prod:…")
    logs.response(deploy, "What does the deploy script do?", "It copies build/ to the prod host.",
                  system="Answer tersely.", fragments=("#!/bin/sh\nrsync -a build/ prod:/srv",))
    logs.response(deploy, "And how do I roll back?", "There is no rollback: redeploy the previous tag.",
                  system="Answer tersely.")
    tools = logs.conversation("What is 2+2 and the weather in L…")
    logs.response(tools, "What is 2+2 and the weather in Lisbon?", "",
                  calls=(("add", {"a": 2, "b": 2}, "call_1"), ("weather", {"city": "Lisbon"}, "call_2")))
    logs.response(tools, "", "2+2 is 4; the weather service timed out.",
                  results=(("add", "4", "call_1", None),
                           ("weather", "Error: timed out", "call_2", "TimeoutError: timed out")))
    photo = logs.conversation("What is in this photo?")
    logs.response(photo, "What is in this photo?", "A cat asleep on a keyboard.", model="gpt-4o",
                  attachments=({"type": "image/jpeg", "path": "/home/ana/cat.jpg"},))


def test_a_logs_db_becomes_searchable_sessions_that_continue(openai_env, openai_server, home):
    env = at_home(openai_env)
    logs = logs_at(home)
    three_conversations(logs)
    logs.close()
    before = snapshot(home / ".config")

    report = imported(env, "llm")

    assert made(report) == ["llm-2025-06-01-what-does-the-deploy-script-do",
                            "llm-2025-06-01-what-is-2-2-and-the-weather-in-lisbon",
                            "llm-2025-06-01-what-is-in-this-photo"]
    assert report.startswith("Imported from llm (~/.config/io.datasette.llm/logs.db): 3 new sessions")
    assert "new 'llm-2025-06-01-what-is-in-this-photo': 2 messages; left out: 1 attachment" in report
    assert "skipped" not in report
    assert snapshot(home / ".config") == before  # only read

    deploy = session_document(env, made(report)[0])
    assert deploy["title"] == "What does the deploy script do?"
    assert deploy["imported"]["source"] == "llm" and deploy["imported"]["details"]["models"] == ["gpt-4o-mini"]
    assert [(m["role"], m["content"]) for m in deploy["chat_history"]] == [
        ("system", "Answer tersely."),
        ("user", "#!/bin/sh\nrsync -a build/ prod:/srv\nWhat does the deploy script do?"),
        ("assistant", "It copies build/ to the prod host."),
        ("user", "And how do I roll back?"),
        ("assistant", "There is no rollback: redeploy the previous tag.")]
    assert deploy["chat_history"][1]["timestamp"] == "2025-06-01T09:01:00.000000+00:00"

    name = made(report)[1]
    history = session_document(env, name)["chat_history"]
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "tool", "assistant"]
    assert [(c["id"], c["name"], c["arguments"]) for c in history[1]["tool_calls"]] == [
        ("call_1", "add", {"a": 2, "b": 2}), ("call_2", "weather", {"city": "Lisbon"})]
    assert (history[2]["tool_call_id"], history[2]["content"], history[2].get("is_error")) == ("call_1", "4", None)
    assert (history[3]["tool_call_id"], history[3]["is_error"]) == ("call_2", True)

    photo = session_document(env, made(report)[2])["chat_history"]
    assert photo[0]["content"] == "What is in this photo?\n[attachment (image/jpeg, cat.jpg): not imported]"
    assert photo[0]["meta"]["left_out"] == ["attachment (image/jpeg, cat.jpg)"]

    assert name in searched(env, "weather", "service", "timed")
    sent = continued(env, openai_server, name)
    assert [m["role"] for m in sent[-6:]] == ["user", "assistant", "tool", "tool", "assistant", "user"]
    calls = sent[-5]["tool_calls"]
    assert [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("call_1", "add", {"a": 2, "b": 2}), ("call_2", "weather", {"city": "Lisbon"})]
    assert [m["tool_call_id"] for m in sent[-4:-2]] == ["call_1", "call_2"]
    assert sent[-1]["content"] == "and then?"


def test_the_message_store_of_a_later_llm_is_read_and_a_continued_conversation_imported_once(env, home):
    env = at_home(env)
    logs = logs_at(home, "0.32")
    # Begun with llm 0.31, continued with 0.32: the thread has its id, and all of it.
    old = logs.conversation("hello there")
    logs.response(old, "hello there", "Hi!")
    logs.response(old, "second", "Second answer")
    continued_thread = logs.thread("third", ident=old)
    asked = logs.chain(("user", text("hello there")), ("assistant", text("Hi!")), ("user", text("second")),
                       ("assistant", text("Second answer")), ("user", text("third")))
    logs.turn(continued_thread, asked, logs.chain(("assistant", text("Third answer")), parent=asked))
    # Begun with 0.32: a fragment, an attachment, reasoning, a tool call and its result.
    fragment = logs.fragment("# Notes\n- ship on Friday")
    photo = logs.attachment("image/png", content=b"\x89PNG" + b"\x00" * 4092)
    thread = logs.thread("# Notes - ship on Friday summari…")
    prompt = logs.chain(("system", text("You are terse.")),
                        ("user", {"type": "text", "text_ref": [{"fragment": fragment}, {"literal": "\nsummarize"}]},
                         {"type": "attachment", "attachment": {"id": photo}}))
    called = logs.chain(("assistant", {"type": "reasoning", "text": "They want the date."},
                         {"type": "reasoning", "text": "", "redacted": True},
                         {"type": "tool_call", "name": "calendar", "arguments": {"day": "friday"},
                          "tool_call_id": "tc_01"}), parent=prompt)
    logs.turn(thread, prompt, called)
    result = logs.chain(("tool", {"type": "tool_result", "name": "calendar", "output": "June 6",
                                  "tool_call_id": "tc_01"}), parent=called)
    logs.turn(thread, result, logs.chain(("assistant", text("Ship on Friday, June 6.")), parent=result))
    logs.thread("never spoken in")
    logs.close()
    before = snapshot(home / ".config")

    report = imported(env, "llm")

    assert made(report) == ["llm-2025-06-01-hello-there", "llm-2025-06-01-summarize"]
    assert "left out: 1 attachment, 1 reasoning block" in report
    assert snapshot(home / ".config") == before
    first = session_document(env, "llm-2025-06-01-hello-there")
    assert first["title"] == "hello there" and first["imported"]["id"] == old
    history = first["chat_history"]
    assert [m["content"] for m in history] == ["hello there", "Hi!", "second", "Second answer", "third",
                                               "Third answer"]
    assert history[0]["timestamp"] == "2025-06-01T09:01:00.000000+00:00"  # the time of its response in 0.31
    assert history[4]["timestamp"] == history[5]["timestamp"] != history[0]["timestamp"]
    assert first["imported"]["details"]["models"] == ["gpt-4o-mini", "gpt-5.6-luna"]

    store = session_document(env, "llm-2025-06-01-summarize")
    assert store["title"] == "summarize"
    history = store["chat_history"]
    assert [m["role"] for m in history] == ["system", "user", "assistant", "tool", "assistant"]
    assert history[1]["content"] == "# Notes\n- ship on Friday\nsummarize\n[attachment (image/png, 4 KB): not imported]"
    assert history[2]["meta"]["thinking"] == "They want the date."
    assert [(c["id"], c["name"], c["arguments"]) for c in history[2]["tool_calls"]] == [
        ("tc_01", "calendar", {"day": "friday"})]
    assert (history[3]["tool_call_id"], history[3]["content"]) == ("tc_01", "June 6")
    assert history[4]["content"] == "Ship on Friday, June 6."


def test_importing_again_adds_what_grew_and_nothing_twice(env, home):
    env = at_home(env)
    logs = logs_at(home)
    freeze = logs.conversation("Is the freeze over?")
    logs.response(freeze, "Is the freeze over?", "Not until Friday.")
    rename = logs.conversation("Rename the module")
    logs.response(rename, "Rename the module", "Done.")
    logs.response(None, "A one-off question", "A one-off answer.")  # no conversation: one of its own
    logs.close()
    first = imported(env, "llm")
    assert made(first) == ["llm-2025-06-01-is-the-freeze-over", "llm-2025-06-01-rename-the-module",
                           "llm-2025-06-01-a-one-off-question"]

    again = imported(env, "llm")
    assert made(again) == [] and "0 new sessions, 0 grown, 0 messages written; 3 already imported" in again

    logs.db = sqlite3.connect(logs.path)
    logs.response(freeze, "And after Friday?", "Deploys resume Monday.")
    logs.close()
    grown = imported(env, "llm")
    assert "added 2 messages to 'llm-2025-06-01-is-the-freeze-over' (now 4 messages)" in grown
    assert "2 already imported and unchanged" in grown
    history = session_document(env, "llm-2025-06-01-is-the-freeze-over")["chat_history"]
    assert [m["content"] for m in history] == ["Is the freeze over?", "Not until Friday.", "And after Friday?",
                                               "Deploys resume Monday."]
    listing = run_chatcli("session", "list", env=env).stdout
    assert listing.count("llm-") == 3


def test_a_conversation_imported_then_continued_by_a_later_llm_grows(env, home):
    env = at_home(env)
    logs = logs_at(home, "0.32")
    old = logs.conversation("What is 2+2?")
    logs.response(old, "What is 2+2?", "", system="Use the tools.", calls=(("add", {"a": 2, "b": 2}, "call_1"),))
    logs.response(old, "", "4.", results=(("add", "4", "call_1", None),))
    logs.close()
    name = made(imported(env, "llm"))[0]
    assert len(session_document(env, name)["chat_history"]) == 5

    logs.db = sqlite3.connect(logs.path)  # llm upgraded, then `llm -c`: the conversation goes on in a thread
    thread = logs.thread("And 3+3?", ident=old)
    asked = logs.chain(("system", text("Use the tools.")), ("user", text("What is 2+2?")),
                       ("assistant", {"type": "tool_call", "name": "add", "arguments": {"a": 2, "b": 2},
                                      "tool_call_id": "call_1"}),
                       ("tool", {"type": "tool_result", "name": "add", "output": "4", "tool_call_id": "call_1"}),
                       ("assistant", text("4.")), ("user", text("And 3+3?")))
    logs.turn(thread, asked, logs.chain(("assistant", text("6.")), parent=asked))
    logs.close()
    report = imported(env, "llm")
    assert f"added 2 messages to '{name}' (now 7 messages)" in report
    assert [m["content"] for m in session_document(env, name)["chat_history"]][-2:] == ["And 3+3?", "6."]


def test_the_database_of_an_older_llm_imports(env, home, tmp_path):
    logs = Logs(tmp_path / "old-llm" / "logs.db", "older")
    chat = logs.conversation("Plan the release")
    logs.response(chat, "Plan the release", "Freeze, tag, ship.", system="You are a release manager.")
    logs.response(chat, "Which day?", "Friday.", attachments=({"type": "image/png", "url": "https://x.test/a.png"},))
    logs.close()
    report = imported(env, "llm", str(tmp_path / "old-llm"))  # the directory that holds logs.db
    assert made(report) == ["llm-2025-06-01-plan-the-release"]
    history = session_document(env, made(report)[0])["chat_history"]
    assert [m["role"] for m in history] == ["system", "user", "assistant", "user", "assistant"]
    assert history[3]["content"] == "Which day?\n[attachment (image/png, https://x.test/a.png): not imported]"


def test_what_is_not_llm_s_database_is_said_in_one_line(env, home, tmp_path):
    notes = tmp_path / "notes.db"
    notes.write_text("not a database\n")
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("create table things (id integer primary key)")
    empty = tmp_path / "empty"
    empty.mkdir()
    for path, said in ((notes, "is not llm's logs database: it is not an SQLite database"),
                       (other, "is not llm's logs database: it has none of its tables (responses, threads)"),
                       (empty, "no llm logs at"), (tmp_path / "nowhere", "it does not exist")):
        result = run_chatcli("import", "llm", str(path), env=env)
        assert result.returncode == 1, result.stdout
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
        assert result.stderr.startswith("chatcli: error: ") and said in result.stderr


def test_damaged_rows_are_skipped_counted_and_the_rest_imported(env, home):
    env = at_home(env)
    logs = logs_at(home)
    good = logs.conversation("A good question")
    logs.response(good, "A good question", "A good answer.")
    bad = logs.conversation("Bad rows")
    ident = logs.response(bad, "placeholder", "An answer")
    logs.db.execute("update responses set prompt = ? where id = ?", [b"\x00\xff", ident])
    logs.db.execute("insert into responses (id, prompt, response, conversation_id) values (null, 'x', 'y', ?)", [bad])
    logs.response(bad, "", "")  # nothing in it
    call = logs.response(bad, "Use a tool", "", calls=(("add", {"a": 1}, "c1"),))
    logs.db.execute("update tool_calls set name = null where response_id = ?", [call])
    logs.close()
    report = imported(env, "llm")
    assert made(report) == ["llm-2025-06-01-a-good-question", "llm-2025-06-01-bad-rows"]
    assert "~/.config/io.datasette.llm/logs.db: skipped 1 empty response, 1 response with values of an unexpected " \
           "type, 1 response without an id, 1 tool call with values of an unexpected type" in report


def test_a_database_in_wal_mode_is_read_without_leaving_a_file_beside_it(env, home):
    env = at_home(env)
    logs = logs_at(home)
    logs.db.execute("pragma journal_mode=wal")
    logs.response(logs.conversation("Hello"), "Hello", "Hi.")
    logs.close()
    before = snapshot(home / ".config")
    assert made(imported(env, "llm")) == ["llm-2025-06-01-hello"]
    assert snapshot(home / ".config") == before


def test_reading_answers_every_call_and_calls_every_result(tmp_path):
    """Providers refuse a call without its result and a result without its call: llm logged
    calls without ids (some models give none), a chain stopped before its tools ran, a result
    whose call is not there."""
    logs = Logs(tmp_path / "logs.db")
    chat = logs.conversation("Add")
    logs.response(chat, "Add 1 and 2, then 3 and 4", "", calls=(("add", {"a": 1, "b": 2}, None),
                                                                ("add", {"a": 3, "b": 4}, None)))
    logs.response(chat, "", "3 and 7.", results=(("add", "3", None, None), ("add", "7", None, None)))
    logs.response(chat, "", "Done.", results=(("lookup", "late", "x9", None),))
    logs.response(chat, "Once more", "", calls=(("add", {"a": 5, "b": 6}, "c3"),))
    tally = Tally("logs.db")
    [found] = llm.read(logs.close(), tally)
    assert not tally
    shape = [(m.role, m.tool_call_id or [c["id"] for c in m.tool_calls or []]) for m in found.messages]
    assert shape == [("user", []), ("assistant", ["llm-call-1", "llm-call-2"]), ("tool", "llm-call-1"),
                     ("tool", "llm-call-2"), ("assistant", ["x9"]), ("tool", "x9"), ("assistant", []),
                     ("user", []), ("assistant", ["c3"]), ("tool", "c3")]
    assert [m.content for m in found.messages if m.role == "tool"] == ["3", "7", "late", llm.NOT_LOGGED]
    assert found.messages[4].tool_calls[0]["name"] == "lookup"


def test_the_database_is_looked_for_where_llm_keeps_it(tmp_path):
    home = tmp_path / "home"
    linux = home / ".config" / "io.datasette.llm" / "logs.db"
    assert llm.default({"LLM_USER_PATH": str(tmp_path / "mine")}, home) == tmp_path / "mine" / "logs.db"
    macos = home / "Library" / "Application Support" / "io.datasette.llm" / "logs.db"
    macos.parent.mkdir(parents=True)
    macos.write_bytes(b"")
    assert llm.default({}, home) == macos
    linux.parent.mkdir(parents=True)
    linux.write_bytes(b"")
    assert llm.default({}, home) == linux
    assert llm.default({"XDG_CONFIG_HOME": str(tmp_path / "xdg")}, home) == linux


def test_a_conversation_begun_with_llm_0_31_reads_the_same_once_a_later_llm_goes_on_with_it(env, home):
    """The rows as llm 0.31 and then 0.36 write them: the echo model gives no call ids, and 0.36
    rebuilds the old conversation in its thread without its attachment."""
    env = at_home(env)
    logs = logs_at(home)
    chat = logs.conversation("look at this")
    logs.response(chat, "look at this", "A cat.", model="echo",
                  attachments=({"type": "image/png", "path": "/home/ana/cat.png"},))
    logs.response(chat, "add them", "", model="echo", calls=(("add", {"a": 2, "b": 3}, None),))
    logs.response(chat, "", "It is 5.", model="echo", results=(("add", "5", None, None),))
    logs.close()
    name = made(imported(env, "llm"))[0]
    history = session_document(env, name)["chat_history"]
    assert history[0]["content"] == "look at this\n[attachment (image/png, cat.png): not imported]"
    assert [history[3]["tool_calls"][0]["id"], history[4]["tool_call_id"]] == ["llm-call-1", "llm-call-1"]

    logs.db = sqlite3.connect(logs.path)  # llm 0.36: its migrations, then `llm -c`
    logs.db.executescript(STORE)
    thread = logs.thread("third question", ident=chat)
    asked = logs.chain(("user", text("look at this")), ("assistant", text("A cat.")), ("user", text("add them")),
                       ("assistant", {"type": "tool_call", "name": "add", "arguments": {"a": 2, "b": 3}}),
                       ("tool", {"type": "tool_result", "name": "add", "output": "5"}),
                       ("assistant", text("It is 5.")), ("user", text("third question")))
    # A call of 0.32 on has an id llm made when the model gave none.
    called = logs.chain(("assistant", {"type": "tool_call", "name": "add", "arguments": {"a": 7, "b": 3},
                                       "tool_call_id": "tc_01jx2m9a0000000000000000aa"}), parent=asked)
    logs.turn(thread, asked, called, model="echo")
    result = logs.chain(("tool", {"type": "tool_result", "name": "add", "output": "10",
                                  "tool_call_id": "tc_01jx2m9a0000000000000000aa"}), parent=called)
    logs.turn(thread, result, logs.chain(("assistant", text("It is 10.")), parent=result), model="echo")
    logs.close()
    report = imported(env, "llm")
    assert f"added 4 messages to '{name}' (now 10 messages)" in report and "left as it was" not in report
    grown = session_document(env, name)["chat_history"]
    assert grown[:6] == history
    assert [(m["role"], m["content"]) for m in grown[6:]] == [
        ("user", "third question"), ("assistant", ""), ("tool", "10"), ("assistant", "It is 10.")]
    assert grown[0]["meta"]["left_out"] == ["attachment (image/png, cat.png)"]
    again = imported(env, "llm")
    assert "0 grown" in again and "left as it was" not in again


def test_a_thread_that_cannot_be_followed_is_its_old_rows(tmp_path):
    logs = Logs(tmp_path / "logs.db", "0.32")
    chat = logs.conversation("Hello")
    logs.response(chat, "Hello", "Hi.")
    logs.thread("Again", ident=chat)
    looped = logs.chain(("user", text("Hello")), ("assistant", text("Hi.")))
    logs.db.execute("update messages set parent_hash = ? where parent_hash is null", [looped])
    logs.db.execute("update threads set tip_message_hash = ?", [looped])
    tally = Tally("logs.db")
    [found] = llm.read(logs.close(), tally)
    assert [m.content for m in found.messages] == ["Hello", "Hi."] and found.id == chat
    assert tally.kinds == {"thread whose messages loop": 1}


def test_reading_leaves_the_database_free_for_llm_to_write_between_conversations(tmp_path):
    logs = Logs(tmp_path / "logs.db", "0.32")
    for number in range(3):
        logs.response(logs.conversation(f"Question {number}"), f"Question {number}", "An answer.")
        thread = logs.thread(f"Thread {number}")
        asked = logs.chain(("user", text(f"Thread {number}")))
        logs.turn(thread, asked, logs.chain(("assistant", text("An answer.")), parent=asked))
    path = logs.close()
    reading = llm.read(path, Tally("logs.db"))
    next(reading)
    writer = sqlite3.connect(path, timeout=0.2, isolation_level=None)
    writer.execute("begin immediate")
    writer.execute("insert into conversations values ('01jx2m8k3qzzzzzzzzzzzzzzzz', 'written meanwhile', 'echo')")
    writer.execute("commit")  # would be "database is locked" while a reading query stays open
    writer.close()
    assert len(list(reading)) == 5


def test_one_value_that_cannot_be_read_costs_its_conversation_only(tmp_path):
    logs = Logs(tmp_path / "logs.db", "0.32")
    logs.response(logs.conversation("Before"), "Before", "Fine.")
    deep = logs.conversation("Deep arguments")
    logs.response(deep, "Call", "", calls=(("f", {}, "c1"),))
    logs.db.execute("update tool_calls set arguments = ?", ['{"a": ' + "[" * 100000 + "]" * 100000 + "}"])
    for part in ({"type": "tool_call", "name": "f", "arguments": {}},
                 {"type": "text", "text_ref": [{"fragment": 2**70}]}):
        thread = logs.thread("Odd")
        asked = logs.chain(("user", text("Odd")))
        logs.turn(thread, asked, logs.chain(("assistant", part), parent=asked))
    logs.db.execute("update parts set payload = ? where type = 'tool_call'", ["[" * 100000 + "]" * 100000])
    logs.response(logs.conversation("After"), "After", "Fine too.")
    tally = Tally("logs.db")
    found = list(llm.read(logs.close(), tally))
    assert [f.title for f in found] == ["Before", "Deep arguments", "Odd", "Odd", "After"]
    assert found[1].messages[1].tool_calls[0]["raw"].startswith('{"a": [[[')  # kept as written, as text not JSON
    assert [(c["name"], c["arguments"]) for c in found[2].messages[1].tool_calls] == [("f", {})]  # its column's name
    assert [m.content for m in found[3].messages] == ["Odd", ""]
    assert tally.kinds == {"message part with an unreadable payload": 1, "fragment missing from the database": 1}


def test_a_conversation_that_fails_to_read_is_skipped_and_counted(tmp_path, monkeypatch):
    logs = Logs(tmp_path / "logs.db")
    logs.response(logs.conversation("Before"), "Before", "Fine.")
    logs.response(logs.conversation("Photo"), "Photo", "A cat.", attachments=({"type": "image/png", "path": "a.png"},))
    logs.response(logs.conversation("After"), "After", "Fine too.")

    def odd(*args):
        raise ValueError("a value no one foresaw")

    monkeypatch.setattr(llm, "_attachment_line", odd)
    tally = Tally("logs.db")
    assert [f.title for f in llm.read(logs.close(), tally)] == ["Before", "After"]
    assert tally.kinds == {"conversation that could not be read": 1}


def test_a_database_in_wal_mode_with_its_log_and_no_shared_memory_file_is_read_and_left_alone(tmp_path):
    """llm ended half-way (its log of writes not yet folded into the database): what the log holds
    is read, and no file is made beside the database."""
    logs = Logs(tmp_path / "llm" / "logs.db")
    logs.db.execute("pragma journal_mode=wal")
    logs.response(logs.conversation("Hello"), "Hello", "Hi.")
    logs.db.commit()
    copy = tmp_path / "copy"  # the files as a process that had them open and stopped left them
    copy.mkdir()
    for suffix in ("", "-wal"):
        (copy / f"logs.db{suffix}").write_bytes((tmp_path / "llm" / f"logs.db{suffix}").read_bytes())
    live = sorted(path.name for path in (tmp_path / "llm").iterdir())
    assert live == ["logs.db", "logs.db-shm", "logs.db-wal"]
    # Read while llm has it open: through SQLite's locks.
    assert [f.title for f in llm.read(tmp_path / "llm" / "logs.db", Tally("logs.db"))] == ["Hello"]
    assert sorted(path.name for path in (tmp_path / "llm").iterdir()) == live
    logs.close()
    before = snapshot(copy)
    assert llm.files(copy) == [copy / "logs.db"]
    tally = Tally("logs.db")
    assert [f.title for f in llm.read(copy / "logs.db", tally)] == ["Hello"] and not tally
    assert snapshot(copy) == before
