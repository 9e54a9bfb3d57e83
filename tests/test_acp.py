"""`chatcli acp` driven by the official ACP SDK client over stdio (SPEC §1, §11)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from conftest import CHATCLI

acp = pytest.importorskip("acp")


class Editor(acp.Client):
    """What an editor sees: every session update, in order."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, object]] = []

    async def session_update(self, session_id, update, **kwargs) -> None:
        self.updates.append((session_id, update))

    async def request_permission(self, *args, **kwargs):
        return None

    def texts(self, session_id: str, kind: str = "AgentMessageChunk") -> list[str]:
        return [u.content.text for sid, u in self.updates if sid == session_id and type(u).__name__ == kind]


def run(env, work, initialized=lambda init: None):
    """`work(conn, editor)` against a `chatcli acp` after the handshake; `initialized` checks what
    the agent answered to it."""
    async def main():
        from acp.schema import ClientCapabilities, Implementation

        editor = Editor()
        async with acp.spawn_agent_process(editor, CHATCLI, "acp", env=env, transport_kwargs={"stderr": None}) \
                as (conn, _proc):
            init = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=ClientCapabilities(),
                                         client_info=Implementation(name="tests", version="1"))
            assert init.agent_capabilities.load_session is True
            initialized(init)
            return await work(conn, editor)

    return asyncio.run(main())


def session_file(env, name: str) -> dict:
    return json.loads((Path(env["CHATCLI_HOME"]) / "sessions" / f"{name}.json").read_text())


def test_a_prompt_streams_chunks_and_the_commands_are_announced(openai_env, openai_server, workdir):
    openai_server.reply("Hello ", "from ", "the ", "model.")

    async def work(conn, editor):
        new = await conn.new_session(cwd=str(workdir), mcp_servers=[])
        answer = await conn.prompt(session_id=new.session_id, prompt=[acp.text_block("hi there")])
        second = await conn.prompt(session_id=new.session_id, prompt=[acp.text_block("and again")])
        await asyncio.sleep(0.1)
        return new.session_id, answer, second, editor

    session_id, answer, second, editor = run(openai_env, work)
    assert answer.stop_reason == "end_turn" and second.stop_reason == "end_turn"
    chunks = editor.texts(session_id)
    assert chunks[:4] == ["Hello ", "from ", "the ", "model."]  # streamed as they came
    commands = [u for sid, u in editor.updates if type(u).__name__ == "AvailableCommandsUpdate"]
    assert {c.name for c in commands[0].available_commands} == {"session", "newsession", "compact", "rewind"}
    sent = [m["content"] for m in openai_server.requests[-1].body["messages"]]
    assert sent == ["hi there", "Hello from the model.", "and again"]


def test_session_attach_in_the_prompt_box_binds_and_writes_the_next_prompt(openai_env, openai_server, workdir):
    async def work(conn, editor):
        new = await conn.new_session(cwd=str(workdir), mcp_servers=[])
        sid = new.session_id
        await conn.prompt(session_id=sid, prompt=[acp.text_block("/session attach notes")])
        await conn.prompt(session_id=sid, prompt=[acp.text_block("remember the lighthouse")])
        await conn.prompt(session_id=sid, prompt=[acp.text_block("/session status")])
        await conn.prompt(session_id=sid, prompt=[acp.text_block("/session load ../nope")])
        await conn.prompt(session_id=sid, prompt=[acp.text_block("/help")])
        return sid, editor

    sid, editor = run(openai_env, work)
    texts = editor.texts(sid)
    assert "Attached to session 'notes' (0 messages; created)." in texts
    assert any(t.startswith("Bound to session 'notes' (2 messages") for t in texts)
    assert any(t.startswith("error: invalid session name '../nope'") for t in texts)
    assert any(t.startswith("error: '/help' is not a command of the prompt box") for t in texts)
    assert len(openai_server.requests) == 1  # neither command went to the model
    assert [m["content"] for m in session_file(openai_env, "notes")["chat_history"]] == [
        "remember the lighthouse", "You said: remember the lighthouse"]


def test_session_load_replays_the_saved_conversation(openai_env, openai_server, workdir):
    async def first(conn, editor):
        new = await conn.new_session(cwd=str(workdir), mcp_servers=[])
        await conn.prompt(session_id=new.session_id, prompt=[acp.text_block("/session attach story")])
        await conn.prompt(session_id=new.session_id, prompt=[acp.text_block("once upon a time")])

    run(openai_env, first)

    async def second(conn, editor):
        await conn.load_session(cwd=str(workdir), session_id="story", mcp_servers=[])
        replay = [(type(u).__name__, u.content.text) for sid, u in editor.updates
                  if sid == "story" and hasattr(u, "content")]
        answer = await conn.prompt(session_id="story", prompt=[acp.text_block("and then?")])
        try:
            await conn.load_session(cwd=str(workdir), session_id="missing", mcp_servers=[])
            failed = None
        except Exception as exc:  # noqa: BLE001 - the error the editor gets
            failed = exc
        return replay, answer, failed

    replay, answer, failed = run(openai_env, second)
    assert replay == [("UserMessageChunk", "once upon a time"), ("AgentMessageChunk", "You said: once upon a time")]
    assert answer.stop_reason == "end_turn"
    assert [m["content"] for m in openai_server.requests[-1].body["messages"]] == [
        "once upon a time", "You said: once upon a time", "and then?"]
    assert [m["content"] for m in session_file(openai_env, "story")["chat_history"]][-1] == "You said: and then?"
    assert failed is not None and "session 'missing' does not exist" in str(failed.data if hasattr(failed, "data")
                                                                            else failed)


def test_cancel_mid_stream_keeps_the_partial_answer(openai_env, openai_server, workdir):
    openai_server.reply(*["word "] * 60, delay=0.05)

    async def work(conn, editor):
        new = await conn.new_session(cwd=str(workdir), mcp_servers=[])
        sid = new.session_id
        await conn.prompt(session_id=sid, prompt=[acp.text_block("/session attach cut")])
        turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[acp.text_block("tell me a long story")]))
        while len(editor.texts(sid)) < 4:
            await asyncio.sleep(0.02)
        await conn.cancel(session_id=sid)
        return await turn

    answer = run(openai_env, work)
    assert answer.stop_reason == "cancelled"
    history = session_file(openai_env, "cut")["chat_history"]
    assert history[0]["content"] == "tell me a long story"
    assert history[1]["meta"]["interrupted"] is True and 0 < history[1]["content"].count("word") < 60


def test_an_unbound_editor_conversation_is_kept_when_the_editor_goes_away(openai_env, openai_server, workdir):
    async def work(conn, editor):
        new = await conn.new_session(cwd=str(workdir), mcp_servers=[])
        await conn.prompt(session_id=new.session_id, prompt=[acp.text_block("do not lose this")])

    run(openai_env, work)
    sessions = Path(openai_env["CHATCLI_HOME"]) / "sessions"
    kept = list(sessions.glob("mcp-acp-*.json"))  # its mirror, mcp-<id> as SPEC §6.2 says
    assert len(kept) == 1 and not list(sessions.glob("autosave-*.json"))
    assert json.loads(kept[0].read_text())["chat_history"][0]["content"] == "do not lose this"
    assert (Path(openai_env["CHATCLI_HOME"]) / "logs" / "acp.log").exists()


def test_cancel_answers_at_once_even_while_the_model_is_silent(openai_env, openai_server, workdir):
    import time

    openai_server.reply("late words", stall_before=4)

    async def work(conn, editor):
        new = await conn.new_session(cwd=str(workdir), mcp_servers=[])
        turn = asyncio.create_task(conn.prompt(session_id=new.session_id, prompt=[acp.text_block("are you there?")]))
        await asyncio.sleep(0.3)
        started = time.monotonic()
        await conn.cancel(session_id=new.session_id)
        answer = await turn
        return answer, time.monotonic() - started

    answer, waited = run(openai_env, work)
    assert answer.stop_reason == "cancelled" and waited < 2


def test_an_editor_thread_survives_a_restart_and_a_signal(openai_env, openai_server, workdir):
    import signal

    async def first(conn, editor):
        new = await conn.new_session(cwd=str(workdir), mcp_servers=[])
        await conn.prompt(session_id=new.session_id, prompt=[acp.text_block("the code word is heron")])
        return new.session_id

    session_id = run(openai_env, first)
    kept = Path(openai_env["CHATCLI_HOME"]) / "sessions" / f"mcp-acp-{session_id}.json"
    assert [m["content"] for m in json.loads(kept.read_text())["chat_history"]][0] == "the code word is heron"

    async def signalled():
        from acp.schema import ClientCapabilities, Implementation

        editor = Editor()
        async with acp.spawn_agent_process(editor, CHATCLI, "acp", env=openai_env,
                                           transport_kwargs={"stderr": None}) as (conn, proc):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=ClientCapabilities(),
                                  client_info=Implementation(name="tests", version="1"))
            await conn.load_session(cwd=str(workdir), session_id=session_id, mcp_servers=[])
            replayed = editor.texts(session_id, "UserMessageChunk")
            await conn.prompt(session_id=session_id, prompt=[acp.text_block("what was the code word?")])
            proc.send_signal(signal.SIGTERM)
            await proc.wait()
            return replayed, proc.returncode

    replayed, code = asyncio.run(signalled())
    assert replayed == ["the code word is heron"] and code == 0
    history = [m["content"] for m in json.loads(kept.read_text())["chat_history"]]
    assert history == ["the code word is heron", "You said: the code word is heron", "what was the code word?",
                       "You said: what was the code word?"]


def test_editor_mirrors_are_named_and_gated_as_the_spec_says(openai_env, openai_server, workdir):
    """SPEC §6.2: mcp-<id> (an editor's ids as acp-<id>), gated by CHATCLI_MCP_SESSION_AUTOSAVE
    when it is set; with mirrors off, leaving keeps the conversation as a REPL would."""
    sessions = Path(openai_env["CHATCLI_HOME"]) / "sessions"

    async def work(conn, editor):
        new = await conn.new_session(cwd=str(workdir), mcp_servers=[])
        await conn.prompt(session_id=new.session_id, prompt=[acp.text_block("mirror me")])
        return new.session_id, sorted(path.name for path in sessions.glob("*.json"))

    session_id, during = run({**openai_env, "CHATCLI_SESSION_AUTOSAVE": "off",
                              "CHATCLI_MCP_SESSION_AUTOSAVE": "on"}, work)
    assert during == [f"mcp-acp-{session_id}.json"]  # after the turn, not only at the end
    (sessions / f"mcp-acp-{session_id}.json").unlink()
    session_id, during = run({**openai_env, "CHATCLI_SESSION_AUTOSAVE": "on",
                              "CHATCLI_MCP_SESSION_AUTOSAVE": "off"}, work)
    assert during == []
    [kept] = sessions.glob("*.json")  # on leaving: an autosave, as a REPL keeps it
    assert kept.name.startswith("autosave-") and "mirror me" in kept.read_text()


def test_loading_a_saved_session_by_name_never_picks_an_mcp_conversation_of_that_name(
        openai_env, openai_server, workdir):
    sessions = Path(openai_env["CHATCLI_HOME"]) / "sessions"
    sessions.mkdir(parents=True)
    mine = {"version": 2, "chat_history": [{"role": "user", "content": "my notes"}]}
    other = {"version": 2, "chat_history": [{"role": "user", "content": "an MCP client's chat"}]}
    (sessions / "notes.json").write_text(json.dumps(mine))
    (sessions / "mcp-notes.json").write_text(json.dumps(other))

    async def work(conn, editor):
        await conn.load_session(cwd=str(workdir), session_id="notes", mcp_servers=[])
        return editor.texts("notes", "UserMessageChunk")

    assert run(openai_env, work) == ["my notes"]


def test_session_list_answers_the_live_editor_sessions_in_the_sdk_shape(openai_env, openai_server, workdir, tmp_path):
    other = tmp_path / "elsewhere"
    other.mkdir()
    (Path(openai_env["CHATCLI_HOME"]) / "sessions").mkdir(parents=True)
    saved = {"version": 2, "chat_history": [{"role": "user", "content": "a saved session"}]}
    (Path(openai_env["CHATCLI_HOME"]) / "sessions" / "notes.json").write_text(json.dumps(saved))

    async def work(conn, editor):
        first = await conn.new_session(cwd=str(workdir), mcp_servers=[])
        await conn.prompt(session_id=first.session_id, prompt=[acp.text_block("name the rivers of Portugal")])
        second = await conn.new_session(cwd=str(other), mcp_servers=[])
        every = await conn.list_sessions()
        here = await conn.list_sessions(cwd=str(workdir))
        return first.session_id, second.session_id, every, here

    def told_to_the_editor(init) -> None:
        assert init.agent_capabilities.session_capabilities.list is not None

    first, second, every, here = run(openai_env, work, told_to_the_editor)
    assert isinstance(every, acp.schema.ListSessionsResponse)
    listed = {info.session_id: info for info in every.sessions}
    assert set(listed) == {first, second}  # the live editor sessions; saved ones are not listed
    assert listed[first].cwd == str(workdir) and listed[second].cwd == str(other)
    assert listed[first].title == "name the rivers of Portugal"
    assert listed[first].updated_at and every.next_cursor is None
    assert [info.session_id for info in here.sessions] == [first]


async def silent_turn(conn, server, workdir):
    """A new editor session and its prompt "are you there?", running once the model (scripted to
    stay silent) has been asked: (session id, the prompt's task)."""
    new = await conn.new_session(cwd=str(workdir), mcp_servers=[])
    turn = asyncio.create_task(conn.prompt(session_id=new.session_id, prompt=[acp.text_block("are you there?")]))
    while not server.requests:
        await asyncio.sleep(0.02)
    return new.session_id, turn


def test_after_a_cancel_the_next_prompt_starts_at_once(openai_env, openai_server, workdir):
    """A cancelled answer whose model stays silent for a minute: the cancel closes its stream,
    so the next prompt on the same session does not wait for it."""
    import time

    openai_server.reply("too late", stall_before=60)

    async def work(conn, editor):
        sid, turn = await silent_turn(conn, openai_server, workdir)
        await conn.cancel(session_id=sid)
        cancelled = await turn
        started = time.monotonic()
        answer = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[acp.text_block("and now?")]), 90)
        return cancelled, answer, time.monotonic() - started, editor.texts(sid)

    cancelled, answer, waited, texts = run(openai_env, work)
    assert cancelled.stop_reason == "cancelled" and answer.stop_reason == "end_turn"
    assert waited < 5, f"the next prompt waited {waited:.1f} s for the cancelled one"
    assert "You said: and now?" in "".join(texts)
    sent = [m["content"] for m in openai_server.requests[-1].body["messages"]]
    assert sent[0] == "are you there?" and sent[-1] == "and now?"


def test_a_cancel_stops_the_prompt_waiting_behind_the_turn_in_flight_too(openai_env, openai_server, workdir):
    """Prompt 2 arrives while prompt 1's model is silent; one cancel ends both at once, prompt 2
    never reaching the model, and prompt 3 is answered as usual."""
    import time

    openai_server.reply("too late", stall_before=60)

    async def work(conn, editor):
        sid, first = await silent_turn(conn, openai_server, workdir)
        second = asyncio.create_task(conn.prompt(session_id=sid, prompt=[acp.text_block("hello again")]))
        await asyncio.sleep(0.3)  # the second prompt waits behind the first
        started = time.monotonic()
        await conn.cancel(session_id=sid)
        answers = await asyncio.wait_for(asyncio.gather(first, second), 10)
        waited = time.monotonic() - started
        third = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[acp.text_block("and now?")]), 30)
        return answers, waited, third, editor.texts(sid)

    (first, second), waited, third, texts = run(openai_env, work)
    assert (first.stop_reason, second.stop_reason) == ("cancelled", "cancelled")
    assert waited < 5, f"the cancelled prompts took {waited:.1f} s to answer"
    assert third.stop_reason == "end_turn" and "You said: and now?" in "".join(texts)
    sent = [m["content"] for m in openai_server.requests[-1].body["messages"]]
    assert "hello again" not in sent and sent[0] == "are you there?" and sent[-1] == "and now?"
    assert len(openai_server.requests) == 2  # the cancelled second prompt never reached the model
