"""What the data-safety checks cost (issue 14), at 100, 10,000 and 100,000 messages, each beside
its floor measured in the same run:

  journal read    `Journal.read()` of a whole plaintext journal (stamps checked, copies and
                  damage skipped, big-integer check), beside orjson parsing the same lines
  session load    `SessionStore.load()` (type checks of message fields, big-integer check),
                  beside orjson parsing the same bytes
  first turn      the first turn of a new bound session (the journal is named in the session
                  file under its lock before the first line is written), beside a later turn

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

from common import once_ms, print_floor_table

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
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_floor_table("Data-safety checks (bench/safety.py)", rows)


if __name__ == "__main__":
    sys.exit(main())
