"""/memory: notes kept in no session, surviving restarts, offered to the model in
every conversation, through the real REPL and the real HTTP path to the fake model."""

from __future__ import annotations

import base64
import re
from pathlib import Path

from repl_driver import Repl, plain

from chatcli.gateway.hub import ConversationHub


def system_prompt(server) -> str:
    messages = server.requests[-1].body["messages"]
    return messages[0]["content"] if messages and messages[0]["role"] == "system" else ""


def test_a_note_saved_in_one_session_is_offered_in_another_until_forgotten(repl_env, workdir, openai_server):
    first = Repl(repl_env, "m", cwd=workdir, args=("--session", "one"))
    try:
        said = plain(first.send("/memory save my dog is called Rex"))
        assert re.search(r"Remembered as note [0-9a-f]{8}", said), said
    finally:
        first.close()
    second = Repl(repl_env, "m", cwd=workdir, args=("--session", "two"))  # a new process, another session
    try:
        second.send("what is my dog called?")
        assert "- my dog is called Rex" in system_prompt(openai_server)
        listing = plain(second.send("/memory"))
        assert re.search(r"^\s+1\. \[[0-9a-f]{8}\] \d{4}-\d\d-\d\d  my dog is called Rex$", listing, re.M), listing
        assert "saved in session 'one'" in plain(second.send("/memory show 1"))
        assert "Forgot note" in plain(second.send("/memory forget 1"))
        second.send("and now?")
        assert "Rex" not in system_prompt(openai_server)
        assert "No notes in memory" in plain(second.send("/memory list"))
        assert "usage: /memory forget <n|id>" in plain(second.send("/memory forget"))
        assert "no memory note '7'" in plain(second.send("/memory show 7"))
    finally:
        second.close()


def test_memory_is_shown_by_storage_as_never_pruned_and_sealed_with_the_key(repl_env, workdir, openai_server):
    repl_env["CHATCLI_ENCRYPTION_KEY"] = base64.b64encode(b"k" * 32).decode()
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        repl.send("/memory save the vault code is 4312")
        report = plain(repl.send("/storage"))
        assert re.search(r"^  memory +1 +\S+ \S+ +never pruned +your notes", report, re.M), report
        repl.send("hello")
        assert "the vault code is 4312" in system_prompt(openai_server)
    finally:
        repl.close()
    [note] = (Path(repl_env["CHATCLI_HOME"]) / "memory").iterdir()
    assert b"4312" not in note.read_bytes() and oct(note.stat().st_mode & 0o777) == "0o600"


def test_a_gateway_guest_is_not_offered_your_memory(settings, fake_model):
    from chatcli.engine import memory

    memory.save(settings, "my bank is Acme")
    hub = ConversationHub(settings, ["telegram:*", "telegram:42"], registry=fake_model.registry())
    try:
        hub.handle("telegram", "7", "hi")
        assert "Acme" not in fake_model.requests[-1].system
        hub.handle("telegram", "42", "hi")
        assert "- my bank is Acme" in fake_model.requests[-1].system
    finally:
        hub.close()
