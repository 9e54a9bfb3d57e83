"""What the data-safety checks cost, at 100, 10,000 and 100,000 messages, each beside
its floor measured in the same run:

  journal read    `Journal.read()` of a whole plaintext journal (stamps checked, copies and
                  damage skipped, big-integer check), beside orjson parsing the same lines
  session load    `SessionStore.load()` (type checks of message fields, big-integer check),
                  beside orjson parsing the same bytes
  first turn      the first turn of a new bound session (the journal is named in the session
                  file under its lock before the first line is written), beside a later turn
  turn write      one turn written to a plaintext session of 1 KB to 1 MB, whole (temp file,
                  fsync, rename, fsync of the directory) and appended in place (two fsync'd
                  steps), beside a bare fsync'd append of the same bytes: where a whole write
                  stops costing about what the append does (store.sessions.WHOLE_BELOW)

Every message carries `meta.mode` and a fifth are tool calls (in the stored shape, Go ChatCLI's:
object arguments) with their results, as chatcli writes them, so the checks that only run beyond
`{role, content}` are exercised too.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from common import bare_fsynced_write, once_ms, print_floor_table

from chatcli.config.settings import Settings
from chatcli.core import journal as rules
from chatcli.core.messages import Message
from chatcli.core.session import SessionData
from chatcli.engine import sessions
from chatcli.engine.conversation import Conversation
from chatcli.store.bulk import gc_paused
from chatcli.store.journal import Journal, encode_lines
from chatcli.store.sessions import SessionStore

RUNS = int(os.environ.get("BENCH_RUNS", "7"))


def history(n: int) -> list[Message]:
    out = []
    for i in range(n):
        text = f"message {i}: " + "the quick brown fox jumps over the lazy dog " * 8
        if i % 5 == 3:
            out.append(Message("assistant", "", meta={"mode": "agent"}, tool_calls=[
                {"id": f"c{i}", "type": "function", "name": "recall", "arguments": {"key": "0123456789abcdef"}}]))
        elif i % 5 == 4:
            out.append(Message("tool", text, meta={"mode": "agent"}, tool_call_id=f"c{i - 1}"))
        else:
            out.append(Message("user" if i % 2 == 0 else "assistant", text, meta={"mode": "chat"}))
    return out


def earlier_lines(messages: list[Message], time_text: str) -> list[dict]:
    """The journal an earlier chatcli wrote of `messages`: tool calls with their arguments as
    JSON text, hashed as written, and no "k" mark, so a read re-keys every one of them."""
    import json

    lines = []
    for digest, message in zip(rules.history_hashes(messages), messages):
        line = rules.message_line(digest, message, time_text)
        if message.tool_calls:
            line["message"]["tool_calls"] = [{**call, "arguments": json.dumps(call["arguments"])}
                                             for call in message.tool_calls]
            line["hash"] = rules._earlier_digest(line["message"], message)
            del line[rules.CALLS_KEYED]
        lines.append(line)
    return lines


def floor(parse):
    """The parser alone, with the cyclic collector paused as chatcli's readers pause it."""
    with gc_paused():
        return parse()


def median_ms(fn, runs: int = RUNS) -> float:
    fn()
    return statistics.median(once_ms(fn) for _ in range(runs))


def turn_writes(root: Path) -> list[tuple]:
    """One turn (two messages of 300 characters) written whole and appended in place, by file size."""
    from chatcli.store import sessions as store_module

    store = SessionStore(root)
    turn = [Message("user", "q" * 300), Message("assistant", "a" * 300)]
    body = b",".join(orjson_dumps(m.to_dict()) for m in turn)
    rows = []
    for kb in (1, 16, 64, 256, 1024):
        messages = [Message("user" if i % 2 == 0 else "assistant", "x" * 500) for i in range(max(2, kb * 2))]
        name = f"t{kb}"
        store.write(name, SessionData(history=list(messages)))
        size = store.path(name).stat().st_size

        def whole(messages=messages, name=name) -> None:
            with store.lock(name):
                store.write(name, SessionData(history=[*messages, *turn]))

        def appended(messages=messages, name=name) -> None:
            store.write(name, SessionData(history=list(messages)))  # back to its size (not timed below)
            stamp = store.stamp(name)
            start = once_ms(lambda: None)
            with store.lock(name):
                ms = once_ms(lambda: store.append(name, turn, len(messages), stamp))
            return ms - start

        floor_path = root / f"floor{kb}"
        floor_ms = median_ms(lambda floor_path=floor_path: bare_fsynced_write(floor_path, body, append=True))
        saved, store_module.WHOLE_BELOW = store_module.WHOLE_BELOW, 0
        try:
            append_ms = statistics.median(appended() for _ in range(RUNS * 3))
        finally:
            store_module.WHOLE_BELOW = saved
        label = f"{size / 1024:,.0f} KB"
        rows.append((f"a turn written whole, session of {label}", median_ms(whole), "bare fsync'd append",
                     floor_ms, "measured"))
        rows.append((f"a turn appended in place (two steps), session of {label}", append_ms,
                     "bare fsync'd append", floor_ms, "measured"))
    return rows


def orjson_dumps(value) -> bytes:
    import orjson

    return orjson.dumps(value)


def main() -> None:
    import orjson

    root = Path(tempfile.mkdtemp(prefix="chatcli-bench-safety-"))
    rows = []
    try:
        for n in (100, 10_000, 100_000):
            messages = history(n)
            hashes = rules.history_hashes(messages)
            journal = Journal(root / "transcripts", f"j{n}")
            journal.root.mkdir(exist_ok=True)
            time_text = "2026-12-03T12:00:00.000+00:00"
            journal.path.write_bytes(encode_lines([rules.message_line(h, m, time_text)
                                                   for h, m in zip(hashes, messages)], journal))
            lines = journal.path.read_bytes().splitlines()
            read_now = median_ms(journal.read)
            rows.append((f"journal read, {n:,} messages", read_now, "orjson over the lines",
                         median_ms(lambda lines=lines: floor(lambda: [orjson.loads(line) for line in lines])),
                         "measured"))
            earlier = Journal(root / "transcripts", f"e{n}")
            earlier.path.write_bytes(encode_lines(earlier_lines(messages, time_text), earlier))
            rows.append((f"journal read, {n:,} messages, written by an earlier version (re-keyed)",
                         median_ms(earlier.read), "same, written now", read_now, "measured"))
            store = SessionStore(root / "sessions")
            with store.lock(f"s{n}"):
                store.write(f"s{n}", SessionData(history=messages))
            raw = store.path(f"s{n}").read_bytes()
            rows.append((f"session load, {n:,} messages ({len(raw) / 1e6:.1f} MB)",
                         median_ms(lambda n=n: store.load(f"s{n}")), "orjson parse",
                         median_ms(lambda raw=raw: floor(lambda: orjson.loads(raw))), "measured"))

        env = {"CHATCLI_HOME": str(root / "home"), "HOME": str(root)}
        firsts, laters = [], []
        for run in range(RUNS * 3):
            conv = Conversation(Settings.load(env), journal=True)
            sessions.start(conv, name=f"new{run}")
            conv.history += [Message("user", "first"), Message("assistant", "answer")]
            firsts.append(once_ms(lambda conv=conv: (conv.sync_transcript(), conv.binding.write_through())))
            conv.history += [Message("user", "second"), Message("assistant", "answer")]
            laters.append(once_ms(lambda conv=conv: (conv.sync_transcript(), conv.binding.write_through())))
        rows.append(("first turn of a new bound session (journal claimed)", statistics.median(firsts),
                     "a later turn", statistics.median(laters), "measured"))
        rows += turn_writes(root / "sizes")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_floor_table("Data-safety checks (bench/safety.py)", rows)


if __name__ == "__main__":
    sys.exit(main())
