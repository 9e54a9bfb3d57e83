"""Server benchmarks: the MCP server's start to its first answer, the ACP agent's initialize to
its first streamed chunk, and how soon a conversation answers again after a client cancelled a
turn whose model had gone silent, against a fake model server on 127.0.0.1.

Floors, measured in the same run:
  bare start       `.venv/bin/python -c pass`
  SDK import       a bare start plus the SDK's import timed inside the interpreter: what the
                   server cannot avoid loading before it can answer
  a later ask      an ask_chatcli on the same conversation when nothing was cancelled
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import print_floor_table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from fakes import FakeModelServer  # noqa: E402 - the fake model the tests use

PYTHON = str(ROOT / ".venv" / "bin" / "python")
CHATCLI = str(ROOT / ".venv" / "bin" / "chatcli")
RUNS = int(os.environ.get("BENCH_RUNS", "15"))


def process_ms(*args: str) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run([PYTHON, *args], check=True)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def import_ms(module: str) -> float:
    """The SDK's import alone, timed inside a fresh interpreter (a process's exit, which
    unloading a large library makes slow, is not part of a server's first answer)."""
    code = f"import time; t = time.perf_counter(); import {module}; print((time.perf_counter() - t) * 1000)"
    return statistics.median(float(subprocess.run([PYTHON, "-c", code], check=True, capture_output=True,
                                                  text=True).stdout) for _ in range(RUNS))


def environment(server: FakeModelServer, home: Path) -> dict[str, str]:
    return dict(os.environ, HOME=str(home), CHATCLI_HOME=str(home / ".chatcli"), LLM_PROVIDER="openai",
                OPENAI_API_KEY="x", OPENAI_BASE_URL=server.base_url, OPENAI_MODEL="m")


async def mcp_first_answer(env: dict[str, str]) -> float:
    from mcp import Client, StdioServerParameters

    start = time.perf_counter()
    async with Client(StdioServerParameters(command=CHATCLI, args=["mcp-server"], env=env)) as client:
        result = await client.call_tool("ask_chatcli", {"prompt": "hello"})
        elapsed = (time.perf_counter() - start) * 1000
        assert not result.is_error
    return elapsed


async def mcp_after_cancel(env: dict[str, str], server: FakeModelServer) -> tuple[float, float]:
    """(a later ask, the ask after a cancel) on one conversation, in ms: the cancelled turn's model
    sent two pieces and then said nothing, so only the cancel can end that turn."""
    from mcp import Client, StdioServerParameters

    async with Client(StdioServerParameters(command=CHATCLI, args=["mcp-server"], env=env)) as client:
        await client.call_tool("ask_chatcli", {"prompt": "hello"})
        start = time.perf_counter()
        await client.call_tool("ask_chatcli", {"prompt": "again"})
        later = (time.perf_counter() - start) * 1000
        seen = len(server.requests)
        server.reply("The first words ", "of a long story", hang_after=True)
        asked = asyncio.create_task(client.call_tool("ask_chatcli", {"prompt": "tell me a long story"}))
        while len(server.requests) == seen:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)  # the pieces reach chatcli
        start = time.perf_counter()
        asked.cancel()
        try:
            await asked
        except asyncio.CancelledError:
            pass
        result = await asyncio.wait_for(client.call_tool("ask_chatcli", {"prompt": "are you free?"}), 60)
        after = (time.perf_counter() - start) * 1000
        assert not result.is_error
    return later, after


async def acp_first_chunk(env: dict[str, str]) -> tuple[float, float]:
    import acp
    from acp.schema import ClientCapabilities, Implementation

    first = asyncio.Event()

    class Editor(acp.Client):
        async def session_update(self, session_id, update, **kwargs) -> None:
            if type(update).__name__ == "AgentMessageChunk":
                first.set()

        async def request_permission(self, *args, **kwargs):
            return None

    spawned = time.perf_counter()
    async with acp.spawn_agent_process(Editor(), CHATCLI, "acp", env=env, transport_kwargs={"stderr": None}) \
            as (conn, _proc):
        start = time.perf_counter()
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=ClientCapabilities(),
                              client_info=Implementation(name="bench", version="1"))
        session = await conn.new_session(cwd=str(ROOT), mcp_servers=[])
        turn = asyncio.create_task(conn.prompt(session_id=session.session_id, prompt=[acp.text_block("hello")]))
        await first.wait()
        done = time.perf_counter()
        await turn
    return (done - start) * 1000, (done - spawned) * 1000


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="chatcli-bench-servers-"))
    try:
        bare = process_ms("-c", "pass")
        mcp_import = bare + import_ms("mcp.server")
        acp_import = bare + import_ms("acp")
        mcp_times, acp_times, acp_spawn_times, later_times, cancel_times = [], [], [], [], []
        with FakeModelServer("openai") as server:
            for run in range(RUNS):
                home = scratch / f"run{run}"
                home.mkdir()
                env = environment(server, home)
                mcp_times.append(asyncio.run(mcp_first_answer(env)))
                from_initialize, from_spawn = asyncio.run(acp_first_chunk(env))
                acp_times.append(from_initialize)
                acp_spawn_times.append(from_spawn)
            for run in range(min(RUNS, 5)):  # each leaves a stream hanging until the server stops
                home = scratch / f"cancel{run}"
                home.mkdir()
                later, after = asyncio.run(mcp_after_cancel(environment(server, home), server))
                later_times.append(later)
                cancel_times.append(after)
        mcp_ms, acp_ms, acp_spawn_ms = map(statistics.median, (mcp_times, acp_times, acp_spawn_times))
        rows = [
            ("MCP server: spawn to first ask_chatcli answer", mcp_ms, "bare start", bare, "measured"),
            ("MCP server: spawn to first ask_chatcli answer", mcp_ms, "start + SDK import (mcp.server)", mcp_import,
             "measured"),
            ("ACP agent: initialize to first chunk", acp_ms, "bare start", bare, "measured"),
            ("ACP agent: spawn to first chunk", acp_spawn_ms, "start + SDK import (acp)", acp_import, "measured"),
            ("MCP server: cancel of a turn whose model went silent, to the next answer", statistics.median(cancel_times),
             "a later ask, nothing cancelled", statistics.median(later_times), "≤ 3× (was: until the model ended)"),
        ]
        print_floor_table(f"servers — median of {RUNS} runs, {os.cpu_count()} cores, Python {sys.version.split()[0]}",
                          rows)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
