"""Chat gateway benchmarks, each beside its floor, at 100, 10,000 and 100,000.

  hub bookkeeping   what hub.db does for one message (store/hub.py): claim it, see the
                    sender, read it back, persist its binding, mark it answered: the calls
                    ConversationHub.handle makes around a turn, on a hub.db already holding
                    that many senders and delivery records
  gateway turn      one message from a bound sender, through ConversationHub.handle, on a
                    session of that many messages: the hub's bookkeeping, the turn, the
                    write-through (only the model is fake, in process)
  surface switch    the terminal's first turn after a gateway turn on the same session: it
                    adopts what the gateway wrote
  hub prune plan    what `storage prune hub` reads to plan, on a hub.db of that many rows
  spool round trip  a WhatsApp message's life in the spool (store/spool.py): written before
                    its delivery is acknowledged, its answer written in before it counts
                    answered, removed once sent; with that many messages waiting beside it
  spool start-up    reading that many waiting messages back when the gateway starts

Floors, measured in the same run:
  fsync'd append    one open/write/fsync/close of a delivery record's bytes: the least a
                    durable record costs
  REPL turn         the same turn on the same session through Conversation.send, as the REPL
                    runs it: what the gateway adds is the difference
  same at 100       the same measurement at 100 (shows how it grows)
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from common import bare_fsynced_write, median_of_runs_ms, noted_registry, once_ms, print_floor_table

from chatcli.config.settings import Settings
from chatcli.core.messages import Message
from chatcli.engine import sessions
from chatcli.engine.conversation import Conversation
from chatcli.gateway.hub import ConversationHub
from chatcli.store.home import Home
from chatcli.store.spool import Spool
from chatcli.store.storage import Storage

RUNS = int(os.environ.get("BENCH_RUNS", "15"))
SIZES = (100, 10_000, 100_000)


def settings_in(home: Path) -> Settings:
    return Settings.load({"CHATCLI_HOME": str(home), "HOME": str(home.parent), "OPENAI_API_KEY": "x",
                          "LLM_PROVIDER": "openai", "CHATCLI_CHAT_TOOLS": "off"})


def filled_hub(settings: Settings, size: int) -> None:
    """hub.db with `size` senders and `size` delivery records, written in one transaction."""
    hub = Home.of(settings).hub()
    now = time.time()
    with hub.db:
        hub.db.execute("BEGIN")
        hub.db.executemany("INSERT INTO principals (channel, sender, display, first_seen, last_seen) "
                           "VALUES ('telegram', ?, '', ?, ?)", ((str(n), now, now) for n in range(size)))
        hub.db.executemany("INSERT INTO delivered (channel, message, at) VALUES ('telegram', ?, ?)",
                           ((f"{n}/{n}", now) for n in range(size)))
    hub.close()


def bookkeeping_ms(settings: Settings) -> float:
    hub = Home.of(settings).hub()
    owner = f"{os.getpid()}:bench"

    def one(run: int) -> None:
        key = f"42/m-{run}"
        hub.claim("telegram", key, owner)
        hub.principal("telegram", "42", "Ana")
        hub.get("telegram", "42")
        hub.bind("telegram", "42", "big")
        hub.answered("telegram", key)

    try:
        return median_of_runs_ms(one, RUNS * 2)
    finally:
        hub.close()


def session_of(settings: Settings, size: int) -> None:
    conv = Conversation(settings, journal=True)
    conv.history = [Message("user" if i % 2 == 0 else "assistant", f"message {i}: " + "lorem ipsum dolor " * 8)
                    for i in range(size)]
    sessions.save(conv, "big")


def turns_ms(settings: Settings) -> tuple[float, float, float]:
    """(a gateway turn, the same turn through the REPL's pipeline, the REPL's first turn after a
    gateway turn): medians. Each surface runs its turns in a row, as a user on one surface does;
    the third figure is a switch of surface, whose first turn adopts what the other one wrote."""
    hub = ConversationHub(settings, ["telegram:42"], registry=noted_registry())
    repl = Conversation(settings, registry=noted_registry(), journal=True)
    try:
        hub.handle("telegram", "42", "/session attach big")
        hub.handle("telegram", "42", "warm up")  # the first turn after an attach reads the journal whole
        gateway = [once_ms(lambda run=run: hub.handle("telegram", "42", f"note {run}", message_id=f"g{run}"))
                   for run in range(RUNS)]
        sessions.load(repl, "big")
        repl.send("warm up")
        plain = [once_ms(lambda run=run: repl.send(f"note {run}")) for run in range(RUNS)]
        switches = []
        for run in range(max(3, RUNS // 3)):
            hub.handle("telegram", "42", f"switch {run}", message_id=f"s{run}")
            switches.append(once_ms(lambda run=run: repl.send(f"back {run}")))
    finally:
        hub.close()
    return median(gateway), median(plain), median(switches)


def filled_spool(root: Path, size: int) -> Spool:
    """A spool holding `size` waiting messages (written plainly: the filler is not what is measured)."""
    spool = Spool(root)
    spool.pending()  # makes the directory
    for n in range(size):
        (root / f"{n:020d}-{n:016x}.json").write_text(
            '{"id": "wamid.%d", "from": "5511987654321", "name": "Ana", "kind": "text", "text": "hello %d"}' % (n, n))
    return spool


def spool_round_trip_ms(spool: Spool) -> float:
    def one(run: int) -> None:
        item = {"id": f"wamid.bench-{run}", "from": "5511987654321", "name": "Ana", "kind": "text",
                "text": "when does the deploy freeze?"}
        name = spool.put(item, item["id"])
        item["answer"], item["sent"] = ["The freeze starts Friday."], 0
        spool.update(name, item)
        spool.remove(name)

    return median_of_runs_ms(one, RUNS * 2)


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="chatcli-bench-gateway-"))
    try:
        target = scratch / "bare.log"
        bare = median_of_runs_ms(lambda _run: bare_fsynced_write(target, b"telegram\t42/m-1\t1764800000.0\n",
                                                                  append=True), RUNS * 4)
        books, gateway, plain, switch, plans, trips, reads = {}, {}, {}, {}, {}, {}, {}
        for size in SIZES:
            spool = filled_spool(scratch / f"spool-{size}", size)
            trips[size] = spool_round_trip_ms(spool)
            reads[size] = median_of_runs_ms(lambda _run, spool=spool: spool.pending(), max(3, RUNS // 3))
            shutil.rmtree(spool.root)
            settings = settings_in(scratch / f"home-{size}" / ".chatcli")
            filled_hub(settings, size)
            books[size] = bookkeeping_ms(settings)
            plans[size] = median_of_runs_ms(lambda _run, s=settings: Storage(s).plan(only="hub"), RUNS)
            session_of(settings, size)
            gateway[size], plain[size], switch[size] = turns_ms(settings)
        rows = []
        for size in SIZES:
            rows.append((f"hub bookkeeping of one message, {size:,} senders and records", books[size],
                         "fsync'd append", bare, "measured (5 statements, 4 commits)"))
        for size in SIZES[1:]:
            rows.append((f"hub bookkeeping, {size:,}", books[size], "same at 100", books[SIZES[0]], "≤ 2× (flat)"))
        for size in SIZES:
            rows.append((f"gateway turn, bound session of {size:,} msgs", gateway[size], "REPL turn", plain[size],
                         "≤ 2× (the gateway adds little)"))
        for size in SIZES:
            rows.append((f"first terminal turn after a gateway turn, {size:,} msgs", switch[size], "REPL turn",
                         plain[size], "measured (adopts the other surface's turn)"))
        for size in SIZES[1:]:
            rows.append((f"hub prune plan, {size:,} rows", plans[size], "same at 100", plans[SIZES[0]],
                         "measured (on demand only)"))
        for size in SIZES:
            rows.append((f"WhatsApp spool round trip of one message, {size:,} waiting", trips[size],
                         "fsync'd append", bare, "measured (3 atomic writes' worth of fsyncs)"))
        for size in SIZES[1:]:
            rows.append((f"spool round trip, {size:,} waiting", trips[size], "same at 100", trips[SIZES[0]],
                         "≤ 2× (flat)"))
        for size in SIZES[1:]:
            rows.append((f"spool read at start, {size:,} waiting", reads[size], "same at 100", reads[SIZES[0]],
                         "measured (linear in what waits)"))
        print_floor_table(f"Chat gateway (median of {RUNS} runs)", rows, digits=2)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
