"""`chatcli session …`, `--continue` and `--session` for scripts (SPEC §13), through the real executable."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CHATCLI, run_chatcli


def make_session(env, name: str, *pairs: str) -> None:
    sessions = Path(env["CHATCLI_HOME"]) / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(pairs)]
    (sessions / f"{name}.json").write_text(json.dumps({"version": 2, "chat_history": history}))


def test_session_list_plain_and_json(env, workdir):
    make_session(env, "alpha", "first alpha question", "answer")
    make_session(env, "beta", "beta")
    result = run_chatcli("session", "list", env=env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert "alpha" in result.stdout and "first alpha question" in result.stdout and "2 msgs" in result.stdout
    rows = json.loads(run_chatcli("session", "list", "--json", env=env, cwd=workdir).stdout)
    assert {row["name"]: row["messages"] for row in rows} == {"alpha": 2, "beta": 1}
    assert all({"name", "messages", "modified", "size", "title"} <= set(row) for row in rows)


def test_session_list_with_no_sessions(env, workdir):
    result = run_chatcli("session", "list", env=env, cwd=workdir)
    assert result.returncode == 0 and result.stdout == "No saved sessions.\n"
    assert json.loads(run_chatcli("session", "list", "--json", env=env, cwd=workdir).stdout) == []


def test_session_show_plain_and_json(env, workdir):
    make_session(env, "proj", "question?", "answer!")
    result = run_chatcli("session", "show", "proj", env=env, cwd=workdir)
    assert result.returncode == 0
    assert "#1 user\nquestion?" in result.stdout and "#2 assistant\nanswer!" in result.stdout
    document = json.loads(run_chatcli("session", "show", "proj", "--json", env=env, cwd=workdir).stdout)
    assert document["version"] == 2 and len(document["chat_history"]) == 2


def test_session_delete_and_fork(env, workdir):
    make_session(env, "src", "a", "b")
    result = run_chatcli("session", "fork", "src", "dst", env=env, cwd=workdir)
    assert result.returncode == 0 and "forked to 'dst' (2 messages)" in result.stdout
    sessions = Path(env["CHATCLI_HOME"]) / "sessions"
    assert json.loads((sessions / "dst.json").read_text())["chat_history"][1]["content"] == "b"
    assert "transcript_id" not in json.loads((sessions / "src.json").read_text())  # forking changed nothing there
    result = run_chatcli("session", "delete", "src", env=env, cwd=workdir)
    assert result.returncode == 0 and result.stdout == "Session 'src' deleted.\n"  # it had no journal
    assert not (sessions / "src.json").exists()
    fork_journal = json.loads((sessions / "dst.json").read_text())["transcript_id"]
    assert (Path(env["CHATCLI_HOME"]) / "transcripts" / f"{fork_journal}.jsonl").exists()  # the fork's own stays


@pytest.mark.parametrize("args,code,needle", [
    (["session", "show", "ghost"], 1, "session 'ghost' does not exist"),
    (["session", "delete", "../x"], 2, "invalid session name"),
    (["session", "fork", "a", "mcp-b"], 2, "prefix chatcli keeps"),
    (["session", "explode"], 2, "invalid choice"),
])
def test_session_command_errors_are_one_line(env, workdir, args, code, needle):
    make_session(env, "a", "x")
    result = run_chatcli(*args, env=env, cwd=workdir)
    assert result.returncode == code, result.stderr
    assert needle in result.stderr and result.stderr.count("\n") == 1


def test_oneshot_with_session_writes_the_turn(openai_env, openai_server, workdir):
    result = run_chatcli("--session", "notes", "-p", "first", env=openai_env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    result = run_chatcli("--session", "notes", "-p", "second", env=openai_env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert [m["content"] for m in openai_server.requests[1].body["messages"]] == [
        "first", "You said: first", "second"]
    document = json.loads((Path(openai_env["CHATCLI_HOME"]) / "sessions" / "notes.json").read_text())
    assert len(document["chat_history"]) == 4


def test_continue_resumes_the_most_recent_session(openai_env, openai_server, workdir):
    make_session(openai_env, "older", "old topic", "old answer")
    os.utime(Path(openai_env["CHATCLI_HOME"]) / "sessions" / "older.json", (1, 1))
    make_session(openai_env, "newer", "new topic", "new answer")
    result = run_chatcli("-c", "-p", "and then?", env=openai_env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert "Resumed session 'newer' (2 messages)." in result.stderr
    assert [m["content"] for m in openai_server.requests[0].body["messages"]] == [
        "new topic", "new answer", "and then?"]
    # Decision: `-c -p` continues the session, so the follow-up is recorded in it.
    document = json.loads((Path(openai_env["CHATCLI_HOME"]) / "sessions" / "newer.json").read_text())
    assert [m["content"] for m in document["chat_history"]][-2:] == ["and then?", "You said: and then?"]


def test_continue_with_nothing_saved_starts_fresh(openai_env, openai_server, workdir):
    result = run_chatcli("--continue", "-p", "hi", env=openai_env, cwd=workdir)
    assert result.returncode == 0
    assert "No saved session to continue" in result.stderr


def test_session_list_does_not_import_the_repl_or_providers(env, workdir):
    make_session(env, "a", "x")
    probe = ("import sys\nfrom chatcli.main import main\nmain(['session', 'list'])\n"
             "heavy = {m.split('.')[0] for m in sys.modules} & {'prompt_toolkit', 'rich', 'openai', 'anthropic', "
             "'llama_cpp', 'mcp', 'acp'}\nsys.stderr.write('HEAVY=' + ','.join(sorted(heavy)) + '\\n')\n")
    result = subprocess.run([sys.executable, "-c", probe], env=env, cwd=workdir, capture_output=True, text=True,
                            timeout=60)
    assert "HEAVY=\n" in result.stderr, result.stderr


def test_a_read_only_sessions_directory_is_a_clear_error(env, tmp_path):
    """Sessions on a read-only file system (a tmpfs remounted ro in a private mount namespace):
    reading works, writing is one clear line and changes nothing. Root ignores file modes, so a
    chmod would not do."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"]).returncode != 0:
        pytest.skip("no private mount namespace here")
    sessions = tmp_path / "ro" / ".chatcli" / "sessions"
    sessions.mkdir(parents=True)
    env["CHATCLI_HOME"] = str(sessions.parent)
    script = (
        f"mount -t tmpfs -o size=1m tmpfs {sessions} && "
        f"printf '%s' '{{\"version\": 2, \"chat_history\": [{{\"role\": \"user\", \"content\": \"x\"}}]}}' "
        f"> {sessions}/kept.json && mount -o remount,ro {sessions} && "
        f"{CHATCLI} session show kept && {CHATCLI} session fork kept copy; echo rc=$?; ls {sessions}"
    )
    result = subprocess.run(["unshare", "-m", "sh", "-c", script], env=env, capture_output=True, text=True,
                            timeout=60)
    assert "#1 user\nx" in result.stdout  # reading a read-only session works
    assert "rc=1" in result.stdout
    assert result.stdout.strip().endswith("kept.json")  # nothing else was written
    assert result.stderr == (f"chatcli: error: session 'copy': cannot write {sessions}/copy.json: "
                             "read-only file system; nothing was written\n")


def test_a_session_above_history_max_size_warns_and_keeps_everything(openai_env, openai_server, workdir):
    openai_env["HISTORY_MAX_SIZE"] = "200"
    openai_server.reply("x" * 500)
    result = run_chatcli("--session", "big", "-p", "hi", env=openai_env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert "above HISTORY_MAX_SIZE" in result.stderr and "Nothing was truncated" in result.stderr
    document = json.loads((Path(openai_env["CHATCLI_HOME"]) / "sessions" / "big.json").read_text())
    assert document["chat_history"][1]["content"] == "x" * 500


def test_repl_session_flag_and_continue(openai_env, openai_server, workdir):
    from repl_driver import Repl, plain

    openai_env["NO_COLOR"] = "1"
    repl = Repl(openai_env, "m", cwd=workdir, args=("--session", "work"))
    try:
        repl.send("remember this")
        assert "[work] m>" in plain(repl.send("/session status"))
    finally:
        repl.close()
    repl = Repl(openai_env, "m", cwd=workdir, args=("-c",))
    try:
        repl.send("what did I say?")
        assert [m["content"] for m in openai_server.requests[-1].body["messages"]] == [
            "remember this", "You said: remember this", "what did I say?"]
    finally:
        repl.close()


def test_continue_and_session_together_is_a_usage_error(env, workdir):
    result = run_chatcli("-c", "--session", "x", "-p", "hi", env=env, cwd=workdir)
    assert result.returncode == 2 and "cannot be used together" in result.stderr


def test_an_empty_session_name_is_a_usage_error_not_a_silent_no(env, workdir):
    result = run_chatcli("--session", "", "-p", "hi", env=env, cwd=workdir)
    assert result.returncode == 2 and "invalid session name ''" in result.stderr


def test_reserved_prefixes_are_refused_in_any_case(env, workdir):
    result = run_chatcli("--session", "AUTOSAVE-x", "-p", "hi", env=env, cwd=workdir)
    assert result.returncode == 2 and "prefix chatcli keeps" in result.stderr


def test_an_invalid_setting_is_shown_as_such_in_config_session(tmp_path):
    from chatcli.config.settings import Settings
    from chatcli.store.home import Home

    settings = Settings.load({"HOME": str(tmp_path), "CHATCLI_SESSION_WRITETHROUGH": "maybe"})
    row = [r for r in settings.session_report(Home.of(settings).sessions_dir) if r[0] == "CHATCLI_SESSION_WRITETHROUGH"][0]
    assert row[1:] == ("on", "default; the environment's value is invalid")


def test_a_repeated_listing_is_printed_from_its_rendering_until_the_directory_changes(env, workdir):
    make_session(env, "first", "one")
    sessions = Path(env["CHATCLI_HOME"]) / "sessions"

    def settle() -> None:  # as if the last write was a minute ago
        st = sessions.stat()
        os.utime(sessions, ns=(st.st_atime_ns, st.st_mtime_ns - 60_000_000_000))

    settle()
    listing = run_chatcli("session", "list", env=env, cwd=workdir).stdout
    rendered = Path(env["CHATCLI_HOME"]) / "sessions.listing.txt"
    header, body = rendered.read_text().split("\n", 1)
    assert body == listing
    rendered.write_text(header + "\n" + body.replace("first", "FROM-THE-RENDERING"))
    assert "FROM-THE-RENDERING" in run_chatcli("session", "list", env=env, cwd=workdir).stdout
    # Any session written (a rename into the directory) makes the rendering stale at once.
    make_session(env, "second", "two")
    fresh = run_chatcli("session", "list", env=env, cwd=workdir).stdout
    assert "FROM-THE-RENDERING" not in fresh and "first" in fresh and "second" in fresh
    settle()
    assert "second" in run_chatcli("session", "list", env=env, cwd=workdir).stdout
    assert json.loads(run_chatcli("session", "list", "--json", env=env, cwd=workdir).stdout)[0]["name"] in (
        "first", "second")


def test_session_search_on_an_index_that_cannot_be_written_searches_without_it(env, workdir):
    """The index is a cache: when it cannot be opened (here `index` is a file, so nothing can be
    made under it, root included), the sessions are read directly, said once in one line."""
    make_session(env, "herons", "where do herons nest?", "by the north pond")
    make_session(env, "deploy", "when does the freeze end?", "Friday")
    index = Path(env["CHATCLI_HOME"]) / "index"
    index.write_text("not a directory")
    result = run_chatcli("session", "search", "herons", "nest", env=env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("herons  (") and "#1 user …where do herons nest?…" in result.stdout
    assert "deploy" not in result.stdout
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("chatcli: warning: the search index cannot be written (")
    assert result.stderr.endswith("): searching without it\n")
    assert index.read_text() == "not a directory"


def test_session_search_on_a_read_only_home_searches_without_the_index(env, tmp_path):
    """CHATCLI_HOME on a tmpfs remounted read-only in a private mount namespace (root ignores
    file modes, so a chmod would not do)."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"]).returncode != 0:
        pytest.skip("no private mount namespace here")
    home = tmp_path / "ro" / ".chatcli"
    home.mkdir(parents=True)
    env["CHATCLI_HOME"] = str(home)
    session = '{"version": 2, "chat_history": [{"role": "user", "content": "where do herons nest?"}]}'
    script = (f"mount -t tmpfs -o size=1m tmpfs {home} && mkdir {home}/sessions && "
              f"printf '%s' '{session}' > {home}/sessions/herons.json && mount -o remount,ro {home} && "
              f"{CHATCLI} session search herons --json; echo rc=$?")
    result = subprocess.run(["unshare", "-m", "sh", "-c", script], env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.stdout.endswith("rc=0\n"), result.stderr
    rows = json.loads(result.stdout.removesuffix("rc=0\n"))
    assert [(row["session"], [hit["pos"] for hit in row["hits"]]) for row in rows] == [("herons", [1])]
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert "the search index cannot be written (" in result.stderr
    assert result.stderr.endswith("): searching without it\n")
