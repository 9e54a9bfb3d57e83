"""/context: snapshots of files saved by name, attached to a conversation, carried by
its session and attached again when it is loaded in a new process, through the real REPL and
the real HTTP path to the fake model."""

from __future__ import annotations

import json
import re
from pathlib import Path

from repl_driver import Repl, plain


def system_prompt(server) -> str:
    messages = server.requests[-1].body["messages"]
    return messages[0]["content"] if messages and messages[0]["role"] == "system" else ""


def project(workdir: Path) -> None:
    (workdir / "docs").mkdir()
    (workdir / "docs" / "guide.md").write_text("# Guide\n" + "".join(f"line {i}\n" for i in range(100))
                                               + "The heron nests by the north pond.\n")
    (workdir / "docs" / ".secret").write_text("hidden\n")
    (workdir / "src").mkdir()
    (workdir / "src" / "app.py").write_text("def main():\n    return 'ok'\n")


def test_a_session_saved_with_two_contexts_has_both_attached_in_a_new_process(repl_env, workdir, openai_server,
                                                                              sessions_dir):
    project(workdir)
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        said = plain(repl.send("/context save docs docs"))
        assert "Context 'docs' saved: 1 files, 2 chunks" in said and "left out: 1 hidden files" in said, said
        assert "Context 'code' saved: 1 files, 1 chunks" in plain(repl.send("/context save code src/app.py"))
        assert "Attached context docs (priority 9, all chunks, full)" in plain(repl.send("/context attach docs 9"))
        assert "Attached context code (priority 1, chunks 1, relevant)" in plain(
            repl.send("/context attach code 1 1 relevant"))
        repl.send("/session save proj")
    finally:
        repl.close()
    records = json.loads((sessions_dir / "proj.json").read_text())["attachments"]
    assert [(r["name"], r["priority"], r["chunks"], r["mode"]) for r in records] == [
        ("docs", 9, "all", "full"), ("code", 1, "1", "relevant")]
    assert all(re.fullmatch(r"[0-9a-f]{12}", r["context_id"]) for r in records)

    repl = Repl(repl_env, "m", cwd=workdir, args=("--session", "proj"))  # a new process
    try:
        listed = plain(repl.send("/context attached"))
        assert re.findall(r"^  (\w+ \(priority .*\))$", listed, re.M) == [
            "docs (priority 9, all chunks, full)", "code (priority 1, chunks 1, relevant)"], listed
        repl.send("where does the heron nest?")
        prompt = system_prompt(openai_server)
        assert "--- docs: docs/guide.md lines 1-60 ---" in prompt and "The heron nests by the north pond." in prompt
        assert "--- code: src/app.py lines 1-2 ---" in prompt
        assert prompt.index("--- docs:") < prompt.index("--- code:")  # by priority
        assert "hidden" not in prompt
        repl.send("/session fork proj-b")
    finally:
        repl.close()
    assert json.loads((sessions_dir / "proj-b.json").read_text())["attachments"] == records  # a fork keeps them


def test_a_deleted_context_is_skipped_with_a_note_when_the_session_is_loaded(repl_env, workdir, openai_server):
    project(workdir)
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        repl.send("/context save docs docs")
        repl.send("/context save code src")
        repl.send("/context attach docs")
        repl.send("/context attach code")
        repl.send("/session save proj")
        assert "Context 'code' deleted" in plain(repl.send("/context delete code"))
        said = plain(repl.send("/session load proj"))
        assert "Attached contexts: docs (priority 5, all chunks, full)." in said
        assert "context 'code' no longer exists; skipped" in said
        repl.send("and now?")
        assert "--- code:" not in system_prompt(openai_server) and "--- docs:" in system_prompt(openai_server)
        assert "no context named 'nothing'" in plain(repl.send("/context attach nothing"))
        assert "nothing was saved" in plain(repl.send("/context save x no/such/dir"))
        assert "'0-2' is not a chunk selection" in plain(repl.send("/context attach docs 1 0-2"))
        assert "unknown retrieval mode 'fuzzy'" in plain(repl.send("/context attach docs 1 all fuzzy"))
    finally:
        repl.close()


def test_with_a_key_a_snapshot_is_sealed(tmp_path):
    from chatcli.store.contexts import ContextStore

    (tmp_path / "notes.txt").write_text("the launch code is 0000\n")
    store = ContextStore(tmp_path / "contexts", b"k" * 32)
    context, replaced = store.save("notes", ["notes.txt"], tmp_path)
    raw = (tmp_path / "contexts" / "notes.json").read_bytes()
    assert b"launch code" not in raw and oct((tmp_path / "contexts" / "notes.json").stat().st_mode & 0o777) == "0o600"
    assert store.load("notes").chunks[0].text == "the launch code is 0000" and not replaced
    again, replaced = store.save("notes", ["notes.txt"], tmp_path)
    assert replaced and again.id == context.id  # saved again under its name: the same snapshot, refreshed


def test_memory_and_contexts_count_in_the_window_a_request_must_fit(make_conversation, fake_model, tmp_path):
    from chatcli.core.messages import Message
    from chatcli.engine import contexts, memory

    conv = make_conversation(CHATCLI_CONTEXT_WINDOW="4000")
    for n in range(6):
        memory.save(conv.settings, f"note {n}: " + "remember this detail " * 40)
    (tmp_path / "big.md").write_text("".join(f"line {i}: some words of the guide\n" for i in range(3000)))
    contexts.store(conv).save("guide", ["big.md"], tmp_path)
    contexts.attach(conv, ["guide"])
    conv.history += [Message("user" if i % 2 == 0 else "assistant", f"message {i}: " + "filler " * 20)
                     for i in range(70)]  # about 75% of the window on its own
    conv.send("and now?")
    request = fake_model.requests[-1]
    sent = len(request.system) + sum(len(m.content) for m in request.messages)
    assert sent / 4 <= 4000, sent  # about four characters a token: it fits
    assert "--- guide:" in request.system and "note 5" in request.system
