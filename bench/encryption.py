"""Encryption at rest benchmarks: each sealed figure beside the same operation in plaintext.

  save / load     SessionStore.write / SessionStore.load of a 10,000-message session
  journal append  Conversation.sync_transcript() after a turn added two messages, 10,000 lines
                  already in the journal (one write and one fsync either way)

The floor of each sealed row is the plaintext row measured in the same run: the target is
sealed within 1.5x of plain.
"""

from __future__ import annotations

import base64
import os
import shutil
import sys
import tempfile
from pathlib import Path

from common import median_of_runs_ms, once_ms, print_floor_table

from chatcli.config.settings import Settings
from chatcli.core.messages import Message
from chatcli.core.session import SessionData
from chatcli.engine import sessions
from chatcli.engine.conversation import Conversation
from chatcli.store.home import Home
from chatcli.store.sessions import SessionStore

RUNS = int(os.environ.get("BENCH_RUNS", "15"))
SIZE = 10_000


def messages(count: int, start: int = 0) -> list[Message]:
    return [Message("user" if i % 2 == 0 else "assistant", f"message {i}: " + "lorem ipsum dolor sit amet " * 36)
            for i in range(start, start + count)]


def settings_for(home: Path, key: str | None) -> Settings:
    env = {"CHATCLI_HOME": str(home), "HOME": str(home.parent)}
    if key:
        env["CHATCLI_ENCRYPTION_KEY"] = key
    return Settings.load(env)


def session_rows(scratch: Path, key: str | None) -> tuple[float, float, int]:
    settings = settings_for(scratch / ("sealed" if key else "plain") / ".chatcli", key)
    store = SessionStore(Home.of(settings).sessions_dir, settings.encryption_key)
    data = SessionData(history=messages(SIZE))

    def save(_run: int) -> None:
        with store.lock("big"):
            store.write("big", data)

    save_ms = median_of_runs_ms(save, RUNS)
    load_ms = median_of_runs_ms(lambda _run: store.load("big"), RUNS)
    return save_ms, load_ms, store.path("big").stat().st_size


def journal_row(scratch: Path, key: str | None) -> float:
    settings = settings_for(scratch / ("journal-sealed" if key else "journal-plain") / ".chatcli", key)
    conv = Conversation(settings, journal=True)
    conv.history = messages(SIZE)
    sessions.save(conv, "journaled")

    def turn(run: int) -> None:
        conv.sync_transcript()

    times = []
    for run in range(RUNS):
        conv.history.extend(messages(2, SIZE + 2 * run))
        times.append(once_ms(lambda run=run: turn(run)))
    times.sort()
    return times[len(times) // 2]


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="chatcli-bench-seal-"))
    key = base64.b64encode(os.urandom(32)).decode()
    try:
        plain_save, plain_load, plain_size = session_rows(scratch, None)
        sealed_save, sealed_load, sealed_size = session_rows(scratch, key)
        plain_append = journal_row(scratch, None)
        sealed_append = journal_row(scratch, key)
        mb = plain_size / 1e6
        rows = [
            (f"save 10,000 msgs ({mb:.1f} MB), sealed", sealed_save, "same, plaintext", plain_save, "≤ 1.5×"),
            (f"load 10,000 msgs ({mb:.1f} MB), sealed", sealed_load, "same, plaintext", plain_load, "≤ 1.5×"),
            ("journal append of one turn, 10,000 lines, sealed", sealed_append, "same, plaintext", plain_append,
             "≤ 1.5×"),
        ]
        print_floor_table(f"encryption at rest — median of {RUNS} runs, {os.cpu_count()} cores, Python "
                          f"{sys.version.split()[0]} (sealed file {sealed_size - plain_size} bytes larger)",
                          rows, digits=2)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
