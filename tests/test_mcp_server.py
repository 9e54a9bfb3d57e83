"""`chatcli mcp-server` driven by the official MCP SDK client over stdio (SPEC §1, §6, §11)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from conftest import CHATCLI, run_chatcli
from repl_driver import Repl, plain

mcp = pytest.importorskip("mcp")


def run(env, work):
    """Start the real `chatcli mcp-server`, connect the SDK client, and run `work(client)`."""

    async def main():
        from mcp import Client, StdioServerParameters

        params = StdioServerParameters(command=CHATCLI, args=["mcp-server"], env=env)
        async with Client(params) as client:
            return await work(client)

    return asyncio.run(main())


def text(result) -> str:
    return "\n".join(part.text for part in result.content if getattr(part, "text", None))


def test_tools_and_two_turns_in_one_live_conversation(openai_env, openai_server):
    async def work(client):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == {"ask_chatcli", "agent_task", "manage_session"}
        assert "fork" in tools["manage_session"].input_schema["properties"]["action"]["enum"]  # told to clients
        first = await client.call_tool("ask_chatcli", {"prompt": "my name is Ada"})
        second = await client.call_tool("ask_chatcli", {"prompt": "what is my name?"})
        other = await client.call_tool("ask_chatcli", {"prompt": "a separate thread", "session": "side"})
        return first, second, other

    first, second, other = run(openai_env, work)
    assert not first.is_error and text(first) == "You said: my name is Ada"
    assert text(second) == "You said: what is my name?"
    turns = [[m["content"] for m in seen.body["messages"]] for seen in openai_server.requests]
    assert turns[1] == ["my name is Ada", "You said: my name is Ada", "what is my name?"]  # the model had turn 1
    assert turns[2] == ["a separate thread"] and not other.is_error
    sessions = Path(openai_env["CHATCLI_HOME"]) / "sessions"
    mirror = json.loads((sessions / "mcp-mcp.json").read_text())
    assert [m["content"] for m in mirror["chat_history"]][-1] == "You said: what is my name?"
    assert (sessions / "mcp-side.json").exists()
    assert oct((sessions / "mcp-mcp.json").stat().st_mode & 0o777) == "0o600"
    log = Path(openai_env["CHATCLI_HOME"]) / "logs" / "mcp-server.log"
    assert log.exists()


def test_a_session_saved_over_mcp_loads_in_the_repl(openai_env, openai_server, workdir):
    async def work(client):
        await client.call_tool("ask_chatcli", {"prompt": "from the editor"})
        return await client.call_tool("manage_session", {"action": "save", "name": "shared"})

    saved = run(openai_env, work)
    assert not saved.is_error and "Session 'shared' saved (2 messages)." in text(saved)
    openai_env["NO_COLOR"] = "1"
    repl = Repl(openai_env, "m", cwd=workdir)
    try:
        assert "Session 'shared' loaded (2 messages)." in plain(repl.send("/session load shared"))
        repl.send("and from the terminal")
        assert [m["content"] for m in openai_server.requests[-1].body["messages"]] == [
            "from the editor", "You said: from the editor", "and from the terminal"]
    finally:
        repl.close()


def test_attach_over_mcp_then_the_repl_attaches_and_sees_the_mcp_turn(openai_env, openai_server, workdir):
    async def work(client):
        attached = await client.call_tool("manage_session", {"action": "attach", "name": "bridge"})
        asked = await client.call_tool("ask_chatcli", {"prompt": "written through from MCP"})
        status = await client.call_tool("manage_session", {"action": "status"})
        return attached, asked, status

    attached, asked, status = run(openai_env, work)
    assert "Attached to session 'bridge'" in text(attached) and not asked.is_error
    assert "Bound to session 'bridge' (2 messages" in text(status)
    openai_env["NO_COLOR"] = "1"
    repl = Repl(openai_env, "m", cwd=workdir)
    try:
        assert "Attached to session 'bridge' (2 messages)." in plain(repl.send("/session attach bridge"))
        repl.send("the REPL's turn")
        assert [m["content"] for m in openai_server.requests[-1].body["messages"]][:2] == [
            "written through from MCP", "You said: written through from MCP"]
    finally:
        repl.close()


def test_errors_come_back_as_tool_errors_and_the_server_goes_on(openai_env, openai_server):
    async def work(client):
        results = [await client.call_tool("manage_session", args) for args in (
            {"action": "load", "name": "../etc/passwd"},
            {"action": "attach", "name": ""},
            {"action": "explode"},
            {"action": "load", "name": "missing"},
            {"action": "search"},
        )]
        results.append(await client.call_tool("ask_chatcli", {"prompt": "hi", "session": "bad/id"}))
        results.append(await client.call_tool("ask_chatcli", {"prompt": "   "}))
        alive = await client.call_tool("ask_chatcli", {"prompt": "still here?"})
        return results, alive

    results, alive = run(openai_env, work)
    assert all(result.is_error for result in results)
    messages = [text(result) for result in results]
    assert "invalid session name '../etc/passwd'" in messages[0]
    assert "the attach action needs 'name' (a session name)" in messages[1]
    assert "unknown action 'explode': one of save, load, attach" in messages[2] and "\n" not in messages[2]
    assert "session 'missing' does not exist" in messages[3]
    assert "the search action needs 'query' (the words to search for)" in messages[4]
    assert "invalid session name 'bad/id'" in messages[5]
    assert "the prompt is empty" in messages[6]
    assert not any("Traceback" in message for message in messages)
    assert text(alive) == "You said: still here?"


def test_clear_keeps_the_conversation_and_a_restart_does_not_bring_it_back(openai_env, openai_server):
    async def work(client):
        await client.call_tool("ask_chatcli", {"prompt": "keep me", "session": "notes"})
        cleared = await client.call_tool("manage_session", {"action": "clear", "session": "notes"})
        listing = await client.read_resource("chatcli://sessions")
        return cleared, listing

    cleared, listing = run(openai_env, work)
    assert "New conversation started" in text(cleared)
    names = [row["name"] for row in json.loads(listing.contents[0].text)]
    assert "mcp-notes" not in names
    [kept] = [name for name in names if name.startswith("autosave-")]

    async def again(client):
        one = await client.read_resource(f"chatcli://sessions/{kept}")
        answer = await client.call_tool("ask_chatcli", {"prompt": "a new start", "session": "notes"})
        return one, answer

    one, answer = run(openai_env, again)
    assert [m["content"] for m in json.loads(one.contents[0].text)["chat_history"]] == ["keep me", "You said: keep me"]
    assert "Continued" not in text(answer)
    assert [m["content"] for m in openai_server.requests[-1].body["messages"]] == ["a new start"]

    off = dict(openai_env, CHATCLI_HOME=str(Path(openai_env["CHATCLI_HOME"]).parent / "other"),
               CHATCLI_SESSION_AUTOSAVE="on", CHATCLI_MCP_SESSION_AUTOSAVE="off")

    async def quiet(client):
        return await client.call_tool("ask_chatcli", {"prompt": "not mirrored"})

    assert not run(off, quiet).is_error
    assert not list((Path(off["CHATCLI_HOME"]) / "sessions").glob("mcp-*.json"))  # not mirrored


def test_the_server_sweeps_expired_machine_sessions_in_the_background(openai_env, openai_server):
    import os
    import time

    sessions = Path(openai_env["CHATCLI_HOME"]) / "sessions"
    sessions.mkdir(parents=True)
    old = time.time() - 100 * 86_400
    for name in ("mcp-forgotten", "autosave-20250101-000000", "mine"):
        path = sessions / f"{name}.json"
        path.write_text(json.dumps({"version": 2, "chat_history": [{"role": "user", "content": "old"}]}))
        os.utime(path, (old, old))

    async def work(client):
        answer = await client.call_tool("ask_chatcli", {"prompt": "hello", "session": "fresh"})
        for _ in range(100):  # the sweep runs beside the first answer, not before it
            if not (sessions / "mcp-forgotten.json").exists():
                break
            await asyncio.sleep(0.05)
        return answer

    assert not run(openai_env, work).is_error
    assert not (sessions / "mcp-forgotten.json").exists()
    assert not (sessions / "autosave-20250101-000000.json").exists()
    assert (sessions / "mine.json").exists() and (sessions / "mcp-fresh.json").exists()


def test_a_restarted_server_continues_and_two_servers_never_overwrite_each_other(openai_env, openai_server):
    async def first(client):
        await client.call_tool("ask_chatcli", {"prompt": "the secret is 42"})

    run(openai_env, first)

    async def second(client):
        return await client.call_tool("ask_chatcli", {"prompt": "what is the secret?"})

    answer = run(openai_env, second)
    assert "Continued from 'mcp-mcp' (2 messages)." in text(answer)
    assert [m["content"] for m in openai_server.requests[-1].body["messages"]] == [
        "the secret is 42", "You said: the secret is 42", "what is the secret?"]

    async def both():
        from mcp import Client, StdioServerParameters

        params = StdioServerParameters(command=CHATCLI, args=["mcp-server"], env=openai_env)
        async with Client(params) as a, Client(params) as b:
            await a.call_tool("ask_chatcli", {"prompt": "from A", "session": "shared"})
            await b.call_tool("ask_chatcli", {"prompt": "from B", "session": "shared"})
            return await a.call_tool("ask_chatcli", {"prompt": "A again", "session": "shared"})

    moved = asyncio.run(both())
    assert "'mcp-shared' was written by another process; this conversation is kept in 'mcp-shared-2'" in text(moved)
    sessions = Path(openai_env["CHATCLI_HOME"]) / "sessions"
    kept = {path.stem: [m["content"] for m in json.loads(path.read_text())["chat_history"]]
            for path in sessions.glob("mcp-shared*.json")}
    assert kept["mcp-shared"] == ["from A", "You said: from A", "from B", "You said: from B"]
    assert kept["mcp-shared-2"] == ["from A", "You said: from A", "A again", "You said: A again"]


def test_clear_keeps_the_conversation_even_with_autosave_off_and_delete_stays_deleted(openai_env, openai_server):
    openai_env.update(CHATCLI_SESSION_AUTOSAVE="off", CHATCLI_MCP_SESSION_AUTOSAVE="on")

    async def work(client):
        await client.call_tool("ask_chatcli", {"prompt": "worth keeping"})
        cleared = await client.call_tool("manage_session", {"action": "clear", "name": "ignored"})
        await client.call_tool("ask_chatcli", {"prompt": "a new start"})
        deleted = await client.call_tool("manage_session", {"action": "delete", "name": "mcp-mcp"})
        return cleared, deleted

    cleared, deleted = run(openai_env, work)
    assert "The cleared conversation was kept as 'autosave-" in text(cleared)
    sessions = Path(openai_env["CHATCLI_HOME"]) / "sessions"
    [kept] = sessions.glob("autosave-*.json")
    assert [m["content"] for m in json.loads(kept.read_text())["chat_history"]] == [
        "worth keeping", "You said: worth keeping"]
    assert not deleted.is_error and not (sessions / "mcp-mcp.json").exists()


def test_a_restart_attaches_again_to_the_session_the_conversation_was_attached_to(openai_env, openai_server):
    async def first(client):
        await client.call_tool("ask_chatcli", {"prompt": "p1", "session": "a"})
        await client.call_tool("manage_session", {"action": "attach", "name": "named", "session": "a"})
        await client.call_tool("ask_chatcli", {"prompt": "p2", "session": "a"})

    run(openai_env, first)

    async def second(client):
        answer = await client.call_tool("ask_chatcli", {"prompt": "p3", "session": "a"})
        status = await client.call_tool("manage_session", {"action": "status", "session": "a"})
        return answer, status

    answer, status = run(openai_env, second)
    assert "Attached to session 'named'" in text(answer)
    assert "Bound to session 'named'" in text(status)
    assert [m["content"] for m in openai_server.requests[-1].body["messages"]][-2:] == ["You said: p2", "p3"]


def test_after_an_mcp_save_continue_resumes_that_session_not_the_mirror(openai_env, openai_server, workdir):
    async def work(client):
        await client.call_tool("ask_chatcli", {"prompt": "the heron nests by the river"})
        await client.call_tool("manage_session", {"action": "save", "name": "notes"})
        await client.call_tool("ask_chatcli", {"prompt": "and the egret"})

    run(openai_env, work)
    result = run_chatcli("--continue", "-p", "and?", env=openai_env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert "Resumed session 'notes' (4 messages)." in result.stderr
    assert [m["content"] for m in openai_server.requests[-1].body["messages"]][:2] == \
        ["the heron nests by the river", "You said: the heron nests by the river"]


def test_reading_the_sessions_resources_opens_no_conversation_and_writes_nothing(openai_env, openai_server):
    home = Path(openai_env["CHATCLI_HOME"])
    run(openai_env, lambda client: client.call_tool("ask_chatcli", {"prompt": "kept in the mirror"}))

    def files() -> dict[str, tuple[int, int]]:
        return {str(path.relative_to(home)): (path.stat().st_mtime_ns, path.stat().st_size)
                for path in home.rglob("*") if path.is_file() and path.parent.name != "logs"}

    before = files()

    async def work(client):
        listing = await client.read_resource("chatcli://sessions")
        one = await client.read_resource("chatcli://sessions/mcp-mcp")
        return listing, one

    listing, one = run(openai_env, work)
    rows = json.loads(listing.contents[0].text)
    assert [row["name"] for row in rows] == ["mcp-mcp"] and rows[0]["messages"] == 2
    assert json.loads(one.contents[0].text)["chat_history"][0]["content"] == "kept in the mirror"
    after = files()
    assert {name: stamp for name, stamp in after.items() if not name.startswith("sessions.")} == \
        {name: stamp for name, stamp in before.items() if not name.startswith("sessions.")}


def test_with_mirrors_off_an_unsaved_conversation_is_kept_when_the_server_stops(openai_env, openai_server):
    openai_env.update(CHATCLI_SESSION_AUTOSAVE="on", CHATCLI_MCP_SESSION_AUTOSAVE="off")
    run(openai_env, lambda client: client.call_tool("ask_chatcli", {"prompt": "do not drop me"}))
    sessions = Path(openai_env["CHATCLI_HOME"]) / "sessions"
    [kept] = sessions.glob("*.json")  # no mirror: an autosave, as the REPL keeps it
    assert kept.name.startswith("autosave-") and "do not drop me" in kept.read_text()


def test_a_cancelled_ask_stops_at_once_keeps_the_partial_answer_and_frees_the_session(openai_env, openai_server):
    """The SDK client cancels a call by sending notifications/cancelled: the turn stops at once
    (the model's stream is closed), its partial answer is kept marked interrupted, as Ctrl-C
    keeps it in the REPL, and the next call on the same conversation answers at once."""
    import time

    openai_server.reply("The first words ", "of a long story", hang_after=True)  # then silent for 60 s

    async def work(client):
        asked = asyncio.create_task(client.call_tool("ask_chatcli", {"prompt": "tell me a long story"}))
        while not openai_server.requests:
            await asyncio.sleep(0.02)
        await asyncio.sleep(2.0)  # the two pieces reach chatcli
        asked.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asked
        started = time.monotonic()
        after = await asyncio.wait_for(client.call_tool("ask_chatcli", {"prompt": "are you free now?"}), 30)
        return after, time.monotonic() - started

    after, waited = run(openai_env, work)
    assert text(after) == "You said: are you free now?" and waited < 5
    sent = [m["content"] for m in openai_server.requests[-1].body["messages"]]
    assert sent == ["tell me a long story", "The first words of a long story", "are you free now?"]
    mirror = json.loads((Path(openai_env["CHATCLI_HOME"]) / "sessions" / "mcp-mcp.json").read_text())
    cut = mirror["chat_history"][1]
    assert cut["content"] == "The first words of a long story" and cut["meta"].get("interrupted") is True
    assert not mirror["chat_history"][3].get("meta", {}).get("interrupted")


def test_fork_with_a_name_copies_that_saved_session_not_the_live_conversation(openai_env, openai_server):
    async def work(client):
        await client.call_tool("ask_chatcli", {"prompt": "the source's words", "session": "writer"})
        await client.call_tool("manage_session", {"action": "save", "name": "a", "session": "writer"})
        await client.call_tool("ask_chatcli", {"prompt": "the live conversation's words"})
        forked = await client.call_tool("manage_session", {"action": "fork", "name": "a", "to": "b"})
        status = await client.call_tool("manage_session", {"action": "status"})
        live = await client.call_tool("manage_session", {"action": "fork", "to": "c"})  # no name: the live one
        return forked, status, live

    forked, status, live = run(openai_env, work)
    assert not forked.is_error and text(forked) == "Session 'a' forked to 'b' (2 messages)."
    assert "Not bound to a session" in text(status)  # forking a saved session leaves the live one alone
    assert not live.is_error
    sessions = Path(openai_env["CHATCLI_HOME"]) / "sessions"
    contents = {name: [m["content"] for m in json.loads((sessions / f"{name}.json").read_text())["chat_history"]]
                for name in ("a", "b", "c")}
    assert contents["b"] == contents["a"] == ["the source's words", "You said: the source's words"]
    assert contents["c"] == ["the live conversation's words", "You said: the live conversation's words"]
    b = json.loads((sessions / "b.json").read_text())
    a = json.loads((sessions / "a.json").read_text())
    assert b.get("transcript_id") != a.get("transcript_id")  # an independent copy: a journal of its own


def test_fork_errors_say_what_is_wrong_in_one_line(openai_env, openai_server):
    async def work(client):
        await client.call_tool("ask_chatcli", {"prompt": "hello"})
        await client.call_tool("manage_session", {"action": "save", "name": "a"})
        await client.call_tool("manage_session", {"action": "save", "name": "b"})
        return [await client.call_tool("manage_session", {"action": "fork", **args}) for args in (
            {"name": "missing", "to": "x"},
            {"name": "a", "to": "b"},
            {"name": "a", "to": "../x"},
            {"name": "a", "to": "mcp-x"},
            {"name": "a"},
        )]

    results = run(openai_env, work)
    assert all(result.is_error for result in results)
    messages = [text(result) for result in results]
    assert all("\n" not in message and "Traceback" not in message for message in messages)
    assert "session 'missing' does not exist" in messages[0]
    assert "session 'b' already exists" in messages[1]
    assert "invalid session name '../x'" in messages[2]
    assert "'mcp-x' uses a prefix chatcli keeps for its own sessions" in messages[3]
    assert "the fork action needs 'to' (a session name)" in messages[4]
    sessions = Path(openai_env["CHATCLI_HOME"]) / "sessions"
    assert not (sessions / "x.json").exists() and not (sessions / "mcp-x.json").exists()


def test_argument_errors_and_an_unknown_prompt_are_one_clear_line(openai_env, openai_server):
    async def work(client):
        from mcp import MCPError

        results = [await client.call_tool(name, args) for name, args in (
            ("ask_chatcli", {}),
            ("ask_chatcli", {"prompt": ["not", "text"]}),
            ("manage_session", {"action": "list", "session": {"a": 1}}),
            ("agent_task", {"task": None}),
        )]
        try:
            await client.get_prompt("x")
            unknown = None
        except MCPError as exc:
            unknown = exc
        alive = await client.call_tool("ask_chatcli", {"prompt": "still here?"})
        return results, unknown, alive

    results, unknown, alive = run(openai_env, work)
    messages = [text(result) for result in results]
    assert all(result.is_error for result in results)
    assert all("\n" not in m and "pydantic" not in m and "Traceback" not in m for m in messages), messages
    assert messages[0].endswith("ask_chatcli: 'prompt' is required")
    assert messages[1].endswith("ask_chatcli: 'prompt' should be a valid string")
    assert messages[2].endswith("manage_session: 'session' should be a valid string")
    assert messages[3].endswith("agent_task: 'task' should be a valid string")
    assert unknown is not None and unknown.error.message == "unknown prompt 'x': this server has no prompts"
    assert text(alive) == "You said: still here?"

