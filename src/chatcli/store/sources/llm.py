"""The logs of llm, the command-line tool for language models: one SQLite database, `logs.db`,
in its user directory (`$LLM_USER_PATH`, else `io.datasette.llm` in the platform's
configuration directory; `llm logs path` prints it). It is opened read-only and never written
(one in WAL mode, which llm does not set itself, is read from a private copy).

It holds two generations of tables, and an llm that has been upgraded holds both:
- up to llm 0.31, `responses`: one row a model call, grouped by `conversation_id` (a row
  without one is a conversation of its own). Each row gives what was sent in that call and what
  came back: the results of the previous call's tools (`tool_results`, logged on the prompt
  side of the call that sent them back, so they come before its prompt), the system prompt, the
  prompt (the `prompt_fragments` it was given written before it, as llm sends them), the answer
  and its tool calls (`tool_calls`). The system prompt is repeated by every call that sets it: it
  is one system message, and another only where it changes. Older databases lack the later
  tables and columns (fragments, tools, attachments): what is there is read.
- from llm 0.32, a message store: a conversation is a `threads` row pointing at the last of a
  chain of `messages` (each names its parent), made of ordered `parts` (text, reasoning, tool
  call, tool result, attachment); fragment text and attachment bytes are stored by reference.
  A thread keeps its conversation's id, and llm writes a conversation begun in `responses`
  and continued later into its thread whole (but for its attachments): the thread is read, its
  first messages, where they are those of the old rows, as the old rows have them (with their
  attachments, times and name), so that the conversation reads the same before and after; the
  rows are not read as a conversation of their own.

A tool call the model gave no id is given one made from its place among the conversation's
calls, the same in both generations of tables. A tool call without its logged result gets one
saying so (providers refuse a call left unanswered), a result whose call is not logged gets its
call back, with no arguments, on the assistant message before it. Left out, and counted:
attachments (one line in the message says what was there), reasoning (its text kept in the
message's `meta.thinking`), the tools a provider ran itself (server-side tools). The title is
the conversation's name, unless llm made it by cutting the first prompt short: then the first
prompt."""

from __future__ import annotations

import contextlib
import heapq
import json
import os
import shutil
import sqlite3
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from chatcli.core.imported import Found, Tally
from chatcli.core.messages import Message, new_call
from chatcli.store.sources import SourceError, earliest, iso, shown

NAME = "llm"
LABEL = "llm"
APP_DIR = "io.datasette.llm"  # llm's user directory, in the platform's configuration directory
DATABASE = "logs.db"
SQLITE_HEADER = b"SQLite format 3\x00"
NOT_LOGGED = "error: no result was logged for this call"
# The tables that make a database llm's: the one of each generation.
LLM_TABLES = ("responses", "threads")
# The tables read (the others hold what has no chatcli equivalent: tools offered, usage, search indexes).
READ = ("conversations", "responses", "prompt_fragments", "system_fragments", "fragments", "prompt_attachments",
        "attachments", "tool_calls", "tool_results", "tool_results_attachments", "threads", "turns", "messages",
        "parts")
BATCH = 100  # rows of the responses table read at once
# What a value of an unexpected shape raises while a conversation is read: it is not read, the others are.
ODD = (ValueError, TypeError, LookupError, AttributeError, ArithmeticError, RecursionError)


def default(env: Mapping[str, str], user_home: Path) -> Path:
    """`$LLM_USER_PATH/logs.db`, else the first of the places llm uses on Linux, macOS and
    Windows that holds one, else where llm would make it on this platform."""
    configured = (env.get("LLM_USER_PATH") or "").strip()
    if configured:
        return Path(configured).expanduser() / DATABASE
    xdg = (env.get("XDG_CONFIG_HOME") or "").strip()
    appdata = (env.get("APPDATA") or "").strip()
    linux = (Path(xdg) if xdg else user_home / ".config") / APP_DIR
    macos = user_home / "Library" / "Application Support" / APP_DIR
    windows = Path(appdata) / APP_DIR if appdata else None
    places = [linux, user_home / ".config" / APP_DIR, macos, *([windows] if windows else [])]
    for place in places:
        if (place / DATABASE).is_file():
            return place / DATABASE
    if sys.platform == "darwin":
        return macos / DATABASE
    if sys.platform == "win32" and windows is not None:
        return windows / DATABASE
    return linux / DATABASE


def files(root: Path) -> list[Path]:
    """The database: `root` itself, or the `logs.db` of the directory `root`. SourceError when
    there is none, or it is not llm's."""
    path = root / DATABASE if root.is_dir() else root
    if not path.is_file():
        if root.is_dir():
            raise SourceError(f"no llm logs at {shown(root)}: no {DATABASE} there "
                              "(give the path of the database: `llm logs path` prints it)")
        raise SourceError(f"no llm logs at {shown(root)}: it does not exist "
                          "(give the path of the database: `llm logs path` prints it)")
    try:
        with open(path, "rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
        if header != SQLITE_HEADER:
            raise SourceError(f"{shown(path)} is not llm's logs database: it is not an SQLite database")
        with _opened(path) as db:
            tables = _tables(db)
    except OSError as exc:
        raise SourceError(f"{shown(path)} could not be read ({exc.strerror or exc})") from None
    except sqlite3.Error as exc:
        raise SourceError(f"{shown(path)} could not be read as a database ({exc})") from None
    if not any(table in tables for table in LLM_TABLES):
        raise SourceError(f"{shown(path)} is not llm's logs database: it has none of its tables "
                          f"({', '.join(LLM_TABLES)})")
    return [path]


def read(path: Path, tally: Tally) -> Iterator[Found]:
    with contextlib.ExitStack() as stack:
        try:
            db = stack.enter_context(_opened(path))
        except sqlite3.Error as exc:
            tally.skip(f"unreadable database ({exc})")
            return
        try:
            yield from _Reading(db, path, tally).conversations()
        except sqlite3.Error as exc:  # a damaged page, met half-way: what was read before it stays
            tally.skip(f"unreadable part of the database ({exc})")


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection that reads the database and leaves it, and the directory it is in, as they
    were. A database in llm's own journal mode (a rollback journal) is read in place, read-only:
    its locks are taken for each query and let go before the next, so llm can write between
    them. A database in WAL mode is read from a private copy, in a temporary directory removed
    after: reading it in place would make its shared-memory file beside it when there is none,
    and without one no lock keeps a checkpoint from changing it half-way through. The copy is
    taken through SQLite (the backup API, under its locks) when the shared-memory file is
    there (the database may be open); else no one has it open, and its files are copied as
    they are (its log read into the copy when it is opened)."""
    log, shared = Path(f"{path}-wal"), Path(f"{path}-shm")
    if not log.exists() and not _wal_mode(path):
        with contextlib.closing(_connect(f"{path.absolute().as_uri()}?mode=ro")) as db:
            yield db
        return
    with tempfile.TemporaryDirectory(prefix="chatcli-llm-") as scratch:
        copy = Path(scratch) / DATABASE
        if log.exists() and shared.exists():
            with contextlib.closing(sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)) as source, \
                    contextlib.closing(sqlite3.connect(copy)) as target:
                source.backup(target)
        else:
            shutil.copyfile(path, copy)
            if log.exists():
                shutil.copyfile(log, f"{copy}-wal")
        with contextlib.closing(_connect(copy.as_uri())) as db:
            yield db


def _connect(uri: str) -> sqlite3.Connection:
    db = sqlite3.connect(uri, uri=True)
    db.text_factory = _text
    return db


def _wal_mode(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            header = handle.read(20)
    except OSError:
        return False
    return len(header) == 20 and 2 in (header[18], header[19])


def _text(raw: bytes) -> str:
    """A TEXT value: bytes that are not UTF-8 are replaced rather than refused."""
    return raw.decode("utf-8", "replace")


def _tables(db: sqlite3.Connection) -> set[str]:
    return {row[0] for row in db.execute("select name from sqlite_master where type = 'table'")}


@dataclass
class _Head:
    """A conversation before it is read: enough to put it in order."""

    id: str
    started: str | None
    thread: tuple | None = None  # (name, tip message hash), for a thread
    rows: range | None = None  # where its `responses` rows are listed, for an older conversation


def _order(head: _Head) -> tuple[str, str]:
    """Oldest first: by start time (llm writes some with a space, some with a `T`), then id."""
    return (head.started or "").replace(" ", "T"), head.id


class _Reading:
    """One database being read, conversation by conversation."""

    def __init__(self, db: sqlite3.Connection, path: Path, tally: Tally) -> None:
        self.db = db
        self.path = path
        self.tally = tally
        self.where = shown(path)
        self.columns = {table: {row[1] for row in db.execute(f'pragma table_info("{table}")')}
                        for table in _tables(db) if table in READ}
        # Tables with no row at all (no fragments, no attachments ever used) are not asked about each response.
        self.empty = {table for table in self.columns
                      if db.execute(f'select 1 from "{table}" limit 1').fetchone() is None}
        self.tip_times: dict[str, str] | None = None
        self.calls: dict[str, list[int]] | None = None
        self.results: dict[str, list[int]] | None = None
        self.listed: list = []  # the ids of the responses table's rows, conversation by conversation
        self.rows: dict = {}  # rows of it read ahead, by id

    def has(self, table: str, *columns: str) -> bool:
        return table in self.columns and all(column in self.columns[table] for column in columns)

    def holds(self, table: str, *columns: str) -> bool:
        """Whether `table` is there, with `columns`, and has rows."""
        return self.has(table, *columns) and table not in self.empty

    def conversations(self) -> Iterator[Found]:
        if not any(self.has(table) for table in LLM_TABLES):
            self.tally.skip("database without llm's tables")
            return
        threads = sorted(self._thread_heads(), key=_order)
        taken = {head.id for head in threads}
        # A conversation begun in `responses` and continued by a later llm is its thread, which
        # holds it whole; its old rows (read first: it started with them) give its first messages.
        earlier: dict[str, _Built] = {}
        for head in heapq.merge(self._legacy_heads(), threads, key=_order):
            old = earlier.pop(head.id, None) if head.thread is not None else None
            try:
                if head.thread is None:
                    built = self._conversation(head)
                    if head.id in taken:
                        if built is not None:
                            earlier[head.id] = built
                        continue
                    found = built.found if built is not None else None
                else:
                    found = self._thread(head, old)
            except ODD:  # one odd value costs its conversation only (its old rows stand for a thread)
                self.tally.skip("conversation that could not be read")
                found = old.found if old is not None else None
            if found is not None:
                yield found

    # -- the message store (llm 0.32 on) ---------------------------------------------------

    def _thread_heads(self) -> Iterator[_Head]:
        if not (self.has("threads", "id", "tip_message_hash") and self.has("messages", "hash", "parent_hash", "role")
                and self.has("parts", "message_hash", "position", "type")):
            return
        begun: dict[str, str] = {}  # when the conversations a thread continues began, in `responses`
        if self.has("responses", "conversation_id", "datetime_utc"):
            begun = {ident: time for ident, time in self.db.execute(
                "select conversation_id, min(datetime_utc) from responses "
                "where conversation_id in (select id from threads) group by conversation_id")
                if isinstance(ident, str) and isinstance(time, str)}
        name = "name" if self.has("threads", "name") else "null"
        created = "datetime_utc" if self.has("threads", "datetime_utc") else "null"
        first = ("(select min(datetime_utc) from turns where turns.thread_id = threads.id)"
                 if self.has("turns", "thread_id", "datetime_utc") else "null")
        for ident, title, tip, made, started in self.db.execute(
                f"select id, {name}, tip_message_hash, {created}, {first} from threads"):
            if not isinstance(ident, str) or not ident:
                self.tally.skip("thread without an id")
                continue
            if tip is None:
                continue  # made, never spoken in
            if not isinstance(tip, str):
                self.tally.skip("thread with an unreadable last message")
                continue
            started = started if isinstance(started, str) else made if isinstance(made, str) else None
            started = min((time for time in (begun.get(ident), started) if time), key=lambda t: t.replace(" ", "T"),
                          default=None)
            yield _Head(ident, started, thread=(title if isinstance(title, str) else None, tip))

    def _thread(self, head: _Head, earlier: _Built | None) -> Found | None:
        """A thread: its chain of messages; `earlier`, the same conversation as llm 0.31 or before
        logged its beginning in `responses`. The thread holds that beginning again, as a later llm
        rebuilt it (its attachments left out): where its messages are those (the same role, text
        and calls), the old rows' are kept, so that the conversation reads the same before and
        after llm went on with it. A thread that cannot be followed (its messages loop, or there
        are none) is its old rows alone."""
        title, tip = head.thread
        chain = self._chain(tip)
        if not chain:
            return earlier.found if earlier is not None else None
        found = Found(NAME, head.id, [], where=self.where)
        built = _Built(found, self.tally)
        times = self._tip_times()
        # A message's time is its turn's: the first turn, in the chain, whose last message is it or after it.
        stamps: list[str | None] = [None] * len(chain)
        time = None
        for index in range(len(chain) - 1, -1, -1):
            time = times.get(chain[index][0], time)
            stamps[index] = iso(time)
        for (digest, role), stamp in zip(chain, stamps, strict=True):
            self._message(built, digest, role, stamp)
        models = list(earlier.found.details.get("models", [])) if earlier is not None else []
        if self.has("turns", "thread_id", "model"):
            models += [row[0] for row in self.db.execute("select model from turns where thread_id = ? order by id",
                                                         [head.id]).fetchall() if isinstance(row[0], str)]
        if models:
            found.details["models"] = list(dict.fromkeys(models))
        if earlier is None:
            return built.done(title, head.started, self.path)
        # Its name is the prompt that continued it: the one it had is kept.
        done = built.done(None, head.started, self.path)
        if done is None:
            return earlier.found
        done.title = earlier.found.title or done.title
        old = earlier.found.messages
        kept = next((index for index, (message, before) in enumerate(zip(done.messages, old, strict=False))
                     if _said(message) != _said(before)), min(len(done.messages), len(old)))
        # What is left out is counted again: the old rows' count for the messages kept, the thread's for the others.
        left = dict(done.left_out)
        for message, before in zip(done.messages[:kept], old[:kept], strict=True):
            for kind, count in built.counted.get(id(message), {}).items():
                left[kind] = left.get(kind, 0) - count
            for kind, count in earlier.counted.get(id(before), {}).items():
                left[kind] = left.get(kind, 0) + count
        done.left_out = {kind: count for kind, count in left.items() if count > 0}
        done.messages[:kept] = old[:kept]
        return done

    def _chain(self, tip: str) -> list[tuple[str, str]]:
        """The thread's messages, oldest first, as (hash, role). A chain that breaks (a message
        not in the table) starts after the break; one that loops is not read."""
        chain: list[tuple[str, str]] = []
        seen: set[str] = set()
        digest: object = tip
        while isinstance(digest, str):
            if digest in seen:
                self.tally.skip("thread whose messages loop")
                return []
            seen.add(digest)
            row = self.db.execute("select parent_hash, role from messages where hash = ?", [digest]).fetchone()
            if row is None:
                self.tally.skip("message missing from its thread")
                break
            chain.append((digest, row[1]))
            digest = row[0]
        chain.reverse()
        return chain

    def _tip_times(self) -> dict[str, str]:
        """When each message that ended a turn was written (its turn's time), every turn's at once:
        a thread forked from another shares that one's first messages and their turns."""
        if self.tip_times is None:
            self.tip_times = {}
            if self.has("turns", "tip_message_hash", "datetime_utc"):
                for digest, time in self.db.execute(
                        "select tip_message_hash, min(datetime_utc) from turns group by tip_message_hash"):
                    if isinstance(digest, str) and isinstance(time, str):
                        self.tip_times[digest] = time
        return self.tip_times

    def _message(self, built: _Built, digest: str, role: object, time: str | None) -> None:
        if role not in ("system", "user", "assistant", "tool"):
            self.tally.skip(f"message of unknown role {str(role)[:40]!r}")
            return
        columns = ", ".join(column if self.has("parts", column) else "null"
                            for column in ("type", "tool_name", "text", "payload"))
        texts: list[str] = []
        typed: list[str] = []  # the text the user typed: fragments left out
        lines: list[str] = []
        calls: list[dict] = []
        thinking: list[str] = []
        results: list[tuple[Message, str | None]] = []
        for kind, tool_name, text, payload in self.db.execute(
                f"select {columns} from parts where message_hash = ? order by position", [digest]).fetchall():
            data = self._payload(payload)
            if kind in ("text", "reasoning"):
                said, literal = self._part_text(text, data)
                if kind == "text":
                    texts.append(said)
                    typed.append(literal)
                elif said.strip():
                    thinking.append(said)
                    built.found.leave_out("reasoning block")
            elif kind == "tool_call":
                name = data.get("name") if isinstance(data.get("name"), str) else tool_name
                if not isinstance(name, str) or not name:
                    self.tally.skip("tool call without its name")
                    continue
                if data.get("server_executed") is True:
                    built.found.leave_out("server-side tool call")
                    lines.append(f"server-side tool {name}")
                    continue
                arguments = data.get("arguments", {})
                written = arguments if isinstance(arguments, str) else json.dumps(arguments)
                calls.append(built.call(data.get("tool_call_id"), name, written))
            elif kind == "tool_result":
                if data.get("server_executed") is True:
                    continue  # its call is left out, and counted
                name = data.get("name") if isinstance(data.get("name"), str) else tool_name
                given = data.get("attachments") if isinstance(data.get("attachments"), list) else []
                left = [self._attachment(ref.get("id") if isinstance(ref, dict) else None, built) for ref in given]
                results.append(_result(data.get("tool_call_id"), name, data.get("output"), data.get("exception"),
                                       left, time))
            elif kind == "attachment":
                reference = data.get("attachment")
                lines.append(self._attachment(reference.get("id") if isinstance(reference, dict) else None, built,
                                              inline=reference if isinstance(reference, dict) else None))
            else:
                self.tally.skip(f"message part of unknown type {str(kind)[:40]!r}")
        for result in results:
            built.add(*result)
        text = "\n".join(texts)
        if role == "system":
            built.system(text, time)
        elif role == "assistant":
            built.assistant(text, calls, thinking, lines, time)
        elif text.strip() or lines:  # a message of tool results alone is those
            built.user(text, "\n".join(typed), lines, time)

    def _payload(self, payload: object) -> dict:
        if payload is None:
            return {}
        try:
            data = json.loads(payload) if isinstance(payload, str) else None
        except (ValueError, RecursionError):  # not JSON, or nested deeper than it can be read
            data = None
        if not isinstance(data, dict):
            self.tally.skip("message part with an unreadable payload")
            return {}
        return data

    def _part_text(self, text: object, data: dict) -> tuple[str, str]:
        """A text part's text as the model read it, and its own words alone (fragments left out)."""
        if isinstance(text, str):
            return text, text
        pieces = data.get("text_ref")
        if isinstance(pieces, list):
            said: list[str] = []
            literal: list[str] = []
            for piece in pieces:
                if isinstance(piece, dict) and isinstance(piece.get("literal"), str):
                    said.append(piece["literal"])
                    literal.append(piece["literal"])
                elif isinstance(piece, dict) and _row_number(piece.get("fragment")):
                    said.append(self._fragment(piece["fragment"]))
                elif isinstance(piece, dict) and "fragment" in piece:
                    self.tally.skip("fragment missing from the database")
            return "".join(said), "".join(literal)
        value = data.get("text")
        return (value, value) if isinstance(value, str) else ("", "")

    def _fragment(self, ident: int) -> str:
        """A fragment's text (a file, a page given with `-f`): read each time, not kept, for one can be big."""
        row = self.db.execute("select content from fragments where id = ?", [ident]).fetchone() \
            if self.has("fragments", "id", "content") else None
        if row is None or not isinstance(row[0], str):
            self.tally.skip("fragment missing from the database")
            return ""
        return row[0]

    def _attachment(self, ident: object, built: _Built, inline: dict | None = None) -> str:
        """One line naming an attachment, counted."""
        built.found.leave_out("attachment")
        kind = path = url = None
        size = None
        if isinstance(ident, str) and self.has("attachments", "id", "type", "path", "url", "content"):
            row = self.db.execute("select type, path, url, length(content) from attachments where id = ?",
                                  [ident]).fetchone()
            if row is not None:
                kind, path, url, size = row
        elif inline:
            kind, path, url = inline.get("type"), inline.get("path"), inline.get("url")
            content = inline.get("content")
            size = len(content) * 3 // 4 if isinstance(content, str) else None
        return _attachment_line(kind, path, url, size)

    # -- the responses table (up to llm 0.31) ----------------------------------------------

    def _legacy_heads(self) -> Iterator[_Head]:
        """The conversations of the responses table, oldest first, each with the ids of its rows
        in order: all read before the first is given, so no query is left open while it is used."""
        if not self.has("responses", "id"):
            return
        conversation = "r.conversation_id" if self.has("responses", "conversation_id") else "null"
        time = "r.datetime_utc" if self.has("responses", "datetime_utc") else "null"
        missing = self.db.execute("select count(*) from responses where id is null").fetchone()[0]
        if missing:
            self.tally.skip("response without an id", missing)
        heads: list[_Head] = []
        last: object = None
        first = 0
        self.listed = []
        for ident, cid, started in self.db.execute(
                f"select r.id, coalesce({conversation}, r.id) as cid, "
                f"min({time}) over (partition by coalesce({conversation}, r.id)) as started from responses r "
                f"where r.id is not null order by started, cid, {time}, r.id").fetchall():
            if not heads or cid != last:
                last, first = cid, len(self.listed)
                heads.append(_Head(str(cid), started if isinstance(started, str) else None))
            self.listed.append(ident)
            heads[-1].rows = range(first, len(self.listed))
        yield from heads

    def _conversation(self, head: _Head) -> _Built | None:
        """A conversation of the responses table, read a row at a time (by its id)."""
        found = Found(NAME, head.id, [], where=self.where)
        built = _Built(found, self.tally)
        models: dict[str, None] = {}
        wanted = ("id", "datetime_utc", "prompt", "system", "response", "model", "reasoning")
        columns = ", ".join(column if self.has("responses", column) else "null" for column in wanted)
        for index in head.rows:
            row = self._row(index, columns)
            if row is None:
                continue  # taken away since the conversations were listed
            ident, time, prompt, system, response, model, reasoning = row
            if not all(value is None or isinstance(value, str) for value in (prompt, system, response)):
                self.tally.skip("response with values of an unexpected type")
                continue
            if isinstance(model, str):
                models[model] = None
            self._response(built, str(ident), iso(time), prompt, system, response, reasoning)
        title = None
        if self.has("conversations", "id", "name"):
            named = self.db.execute("select name from conversations where id = ?", [head.id]).fetchone()
            title = named[0] if named is not None and isinstance(named[0], str) else None
        if models:
            found.details["models"] = list(models)
        return built if built.done(title, head.started, self.path) is not None else None

    def _row(self, index: int, columns: str) -> tuple | None:
        """The row of the responses table listed at `index`, by its id: read with the next ones
        listed, BATCH at a time (most conversations are a row or two)."""
        key = self.listed[index]
        if key not in self.rows:
            batch = self.listed[index:index + BATCH]
            self.rows = {row[0]: row for row in self.db.execute(
                f"select {columns} from responses where id in ({', '.join('?' * len(batch))})", batch).fetchall()}
        return self.rows.pop(key, None)

    def _response(self, built: _Built, ident: str, time: str | None, prompt: str | None, system: str | None,
                  response: str | None, reasoning: object) -> None:
        results = self._results_of(ident, built, time)
        given = {attachment for _, _, ids in results for attachment in ids}
        for message, name, _ in results:
            built.add(message, name)  # they answer the calls of the response before
        built.system(_joined_system(self._fragments_of("system_fragments", ident), system), time)
        fragments = self._fragments_of("prompt_fragments", ident)
        text = "\n".join([*fragments, *([prompt] if prompt else [])])
        # The attachments a tool gave are sent again with the prompt that returns its result: named once, there.
        lines = self._attachments_of(ident, built, given)
        if text or lines:
            built.user(text, prompt or "", lines, time)
        calls = self._calls_of(ident, built)
        thinking = [reasoning] if isinstance(reasoning, str) and reasoning.strip() else []
        if thinking:
            built.found.leave_out("reasoning block")
        if response or calls or thinking:
            built.assistant(response or "", calls, thinking, [], time)
        elif not text and not lines and not results:
            self.tally.skip("empty response")

    def _fragments_of(self, table: str, ident: str) -> list[str]:
        if not (self.holds(table, "response_id", "fragment_id", "order") and self.has("fragments", "id", "content")):
            return []
        rows = self.db.execute(f'select fragment_id from {table} where response_id = ? order by "order"', [ident])
        return [self._fragment(row[0]) for row in rows.fetchall() if isinstance(row[0], int)]

    def _attachments_of(self, ident: str, built: _Built, given: set) -> list[str]:
        """A line for each attachment of a prompt but those in `given`."""
        if not self.holds("prompt_attachments", "response_id", "attachment_id", "order"):
            return []
        rows = self.db.execute('select attachment_id from prompt_attachments where response_id = ? order by "order"',
                               [ident]).fetchall()
        return [self._attachment(row[0], built) for row in rows if row[0] not in given]

    def _calls_of(self, ident: str, built: _Built) -> list[dict]:
        if not self.has("tool_calls", "id", "response_id", "name", "arguments", "tool_call_id"):
            return []
        if self.calls is None:
            self.calls = _row_ids(self.db, "tool_calls")
        calls = []
        for row_id in self.calls.get(ident, ()):
            name, arguments, call_id = self.db.execute(
                "select name, arguments, tool_call_id from tool_calls where id = ?", [row_id]).fetchone()
            if not isinstance(name, str) or not (arguments is None or isinstance(arguments, str)):
                self.tally.skip("tool call with values of an unexpected type")
                continue
            calls.append(built.call(call_id, name, arguments or "{}"))
        return calls

    def _results_of(self, ident: str, built: _Built, time: str | None) -> list[tuple[Message, str | None, list]]:
        """The results of the previous response's tool calls this one sent back: (tool message,
        the tool's name, the attachments the tool gave)."""
        if not self.has("tool_results", "id", "response_id", "name", "output", "tool_call_id"):
            return []
        if self.results is None:
            self.results = _row_ids(self.db, "tool_results")
        exception = "exception" if self.has("tool_results", "exception") else "null"
        attached = self.holds("tool_results_attachments", "tool_result_id", "attachment_id", "order")
        results = []
        for row_id in self.results.get(ident, ()):
            name, output, call_id, error = self.db.execute(
                f"select name, output, tool_call_id, {exception} from tool_results where id = ?", [row_id]).fetchone()
            if not (output is None or isinstance(output, str)):
                self.tally.skip("tool result with values of an unexpected type")
                continue
            ids = [row[0] for row in self.db.execute(
                'select attachment_id from tool_results_attachments where tool_result_id = ? order by "order"',
                [row_id]).fetchall()] if attached else []
            message, tool = _result(call_id, name, output, error,
                                    [self._attachment(attachment, built) for attachment in ids], time)
            results.append((message, tool, ids))
        return results


def _row_ids(db: sqlite3.Connection, table: str) -> dict[str, list[int]]:
    """The rows of `table` (tool calls, tool results) by the response they belong to: llm keeps no
    index on it, so it is read once, in order, rather than searched for each response."""
    out: dict[str, list[int]] = {}
    for response, row_id in db.execute(f"select response_id, id from {table} order by id"):
        if isinstance(response, str) and isinstance(row_id, int):
            out.setdefault(response, []).append(row_id)
    return out


def _row_number(value: object) -> bool:
    """Whether `value` can be a row's number: an integer SQLite holds (a larger one it refuses)."""
    return type(value) is int and -2 ** 63 <= value < 2 ** 63


def _said(message: Message) -> tuple:
    """What a message says, its attachment lines aside: how a thread's message is known for one
    of the old rows."""
    content = message.content
    for what in reversed((message._meta.get("left_out") or []) if message._meta else []):
        line = f"[{what}: not imported]"
        if content.endswith("\n" + line):
            content = content[:-len(line) - 1]
        elif content == line:
            content = ""
    calls = [(call.get("id"), call.get("name"), call.get("arguments"), call.get("raw"))
             for call in message.tool_calls or []]
    return message.role, content, calls, message.tool_call_id


def _result(call_id: object, name: object, output: object, exception: object, left: list[str],
            time: str | None) -> tuple[Message, str | None]:
    """A tool's result as a tool message (its call's id filled in later when llm has none), and
    the tool's name, which finds its call then."""
    text = output if isinstance(output, str) else ""
    if not text and isinstance(exception, str):
        text = exception
    text = "\n".join([text, *(f"[{what}: not imported]" for what in left)]) if left else text
    error = isinstance(exception, str) and bool(exception)
    message = Message("tool", text, {"left_out": left} if left else None,
                      tool_call_id=call_id if isinstance(call_id, str) else None,
                      extra={"is_error": True} if error else None)
    if time:
        message.extra["timestamp"] = time
    return message, name if isinstance(name, str) else None


def _joined_system(fragments: list[str], system: str | None) -> str:
    """The system prompt as llm sends it: its fragments, then its own text, blank-line apart."""
    return "\n\n".join(bit.strip() for bit in [*fragments, system or ""] if bit.strip())


def _attachment_line(kind: object, path: object, url: object, size: object) -> str:
    bits = [kind if isinstance(kind, str) and kind else "unknown type"]
    if isinstance(path, str) and path:
        bits.append(os.path.basename(path) or path)
    elif isinstance(url, str) and url:
        bits.append(url if len(url) <= 200 else url[:199] + "…")
    if isinstance(size, int) and size > 0:
        bits.append(f"{size // 1024} KB" if size >= 1024 else f"{size} bytes")
    return f"attachment ({', '.join(bits)})"


class _Built:
    """A conversation's messages as they are read; made well formed (every tool result right
    after the assistant message that calls it, every call answered) when done."""

    def __init__(self, found: Found, tally: Tally) -> None:
        self.found = found
        self.tally = tally
        self.entries: list[tuple[Message, str | None]] = []  # (message, the tool's name for a result)
        self.system_text: str | None = None
        self.said: tuple[str, str] | None = None  # the first prompt: as sent, as typed
        self.times: list[str] = []
        self.calls = 0  # the tool calls read so far
        # What was left out (by kind) while each message was read, by the message's id(): and so
        # what a thread's message taken for an older one's stops counting.
        self.counted: dict[int, dict[str, int]] = {}
        self.before: dict[str, int] = {}

    def add(self, message: Message, name: str | None = None, time: str | None = None) -> None:
        if time:
            message.extra["timestamp"] = time
        stamp = message._extra.get("timestamp") if message._extra else None
        if isinstance(stamp, str):
            self.times.append(stamp)
        now = self.found.left_out
        if now != self.before:
            self.counted[id(message)] = {kind: count - self.before.get(kind, 0) for kind, count in now.items()
                                         if count != self.before.get(kind, 0)}
            self.before = dict(now)
        self.entries.append((message, name))

    def call(self, ident: object, name: str, arguments: str) -> dict:
        """A tool call. Without its id from the model, it is given one made from its place among
        the conversation's calls (`llm-call-<n>`), which llm's two generations of tables share and
        which what follows does not change."""
        self.calls += 1
        ident = ident if isinstance(ident, str) and ident else f"llm-call-{self.calls}"
        try:
            return new_call(ident, name, arguments)
        except RecursionError:  # arguments nested deeper than can be read: kept as written, as any that are not JSON
            return {"id": ident, "type": "function", "name": name, "arguments": {}, "raw": arguments}

    def system(self, text: str, time: str | None) -> None:
        if text.strip() and text != self.system_text:
            self.system_text = text
            self.add(Message("system", text), time=time)

    def user(self, text: str, typed: str, lines: list[str], time: str | None) -> None:
        if self.said is None and text.strip():
            self.said = (text, typed if typed.strip() else text)
        content = "\n".join(filter(None, (text, *(f"[{what}: not imported]" for what in lines))))
        self.add(Message("user", content, {"left_out": list(lines)} if lines else None), time=time)

    def assistant(self, text: str, calls: list[dict], thinking: list[str], lines: list[str],
                  time: str | None) -> None:
        meta: dict = {}
        if thinking:
            meta["thinking"] = "\n\n".join(thinking)
        if lines:
            meta["left_out"] = list(lines)
        self.add(Message("assistant", text, meta or None, tool_calls=calls or None), time=time)

    def done(self, name: str | None, started: str | None, path: Path) -> Found | None:
        messages = self._paired()
        if not messages:
            return None
        found = self.found
        found.messages.extend(messages)
        found.title = _title(name, self.said)
        found.started = iso(started) or earliest(self.times, path)
        return found

    def _paired(self) -> list[Message]:
        out: list[Message] = []
        owner: Message | None = None  # the assistant message whose results may come now
        waiting: list[dict] = []  # its calls not answered yet

        def close() -> None:
            for call in waiting:
                answer = Message("tool", NOT_LOGGED, tool_call_id=call["id"], extra={"is_error": True})
                stamp = owner._extra.get("timestamp") if owner is not None and owner._extra else None
                if stamp:
                    answer.extra["timestamp"] = stamp
                out.append(answer)
            waiting.clear()

        deferred: list[Message] = []  # a system message logged between calls and their results: after them
        for message, name in self.entries:
            if message.role == "system" and waiting:
                deferred.append(message)
                continue
            if message.role != "tool":
                close()
                out.extend(deferred)
                deferred.clear()
                out.append(message)
                owner = message if message.role == "assistant" else None
                waiting[:] = list(message.tool_calls or []) if owner is not None else []
                continue
            if owner is None:  # no assistant message just before: the one that called it was not logged
                owner = Message("assistant", "")
                if message._extra and message._extra.get("timestamp"):
                    owner.extra["timestamp"] = message._extra["timestamp"]
                out.append(owner)
            call = _answered(waiting, message.tool_call_id, name)
            if call is None:
                known = {c.get("id") for c in owner.tool_calls or []}
                if message.tool_call_id in known:
                    self.tally.skip("tool result logged twice")
                    continue
                ident = message.tool_call_id or f"llm-result-{len(out)}-{len(known)}"
                call = {"id": ident, "type": "function", "name": name or "unknown", "arguments": {}}
                owner.tool_calls = [*(owner.tool_calls or []), call]
            message.tool_call_id = call["id"]
            out.append(message)
        close()
        out.extend(deferred)
        return out


def _answered(waiting: list[dict], call_id: str | None, name: str | None) -> dict | None:
    """The call among `waiting` a result answers (taken out of it): the one of its id, else,
    when llm logged no id for the one or the other, the first of the tool's name, else the first."""
    match = next((call for call in waiting if call.get("id") == call_id), None) if call_id is not None else None
    if match is None:
        unknown = [call for call in waiting if call_id is None or str(call.get("id")).startswith("llm-")]
        match = next((call for call in unknown if call.get("name") == name), None)
        if match is None and call_id is None and unknown:
            match = unknown[0]
    if match is not None:
        waiting.remove(match)
    return match


def _title(name: str | None, said: tuple[str, str] | None) -> str | None:
    """The conversation's name, unless it is only the first prompt cut short (llm names a
    conversation so): then that prompt, as the user typed it."""
    name = " ".join(name.split()) if name else ""
    if said is not None:
        sent, typed = (" ".join(text.split()) for text in said)
        if not name or sent.startswith(name.removesuffix("…")) or typed.startswith(name.removesuffix("…")):
            return typed or sent
    return name or None
