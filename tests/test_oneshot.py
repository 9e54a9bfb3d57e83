"""One-shot mode through the real executable and the real HTTP path against fake model servers."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import CHATCLI, run_chatcli


def test_openai_oneshot_streams_the_servers_answer(openai_env, openai_server, workdir):
    openai_server.reply("Hel", "lo ", "from the fake server")
    result = run_chatcli("-p", "hi", env=openai_env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Hello from the fake server\n"
    assert result.stderr == ""
    seen = openai_server.requests[0]
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == "Bearer x"
    assert seen.body["model"] == "m" and seen.body["stream"] is True
    assert seen.body["messages"] == [{"role": "user", "content": "hi"}]


def test_a_long_answer_reaches_a_file_whole_and_the_turn_is_kept(openai_env, openai_server, workdir, tmp_path):
    # A one-shot ends without freeing what it holds (chatcli.main.run): what was printed and
    # written must all be there when the process has ended.
    chunks = [f"line {i:05d} " + "x" * 90 + "\n" for i in range(3000)]
    openai_server.reply(*chunks)
    out = tmp_path / "answer.txt"
    with out.open("w") as handle:
        done = subprocess.run([CHATCLI, "--session", "kept", "-p", "hi"], env=openai_env, cwd=workdir,
                              stdout=handle, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=60)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == "".join(chunks)
    shown = run_chatcli("session", "show", "kept", env=openai_env, cwd=workdir)
    assert shown.returncode == 0 and "line 02999" in shown.stdout


def test_a_oneshot_ends_after_its_threads_and_exit_handlers(openai_env, openai_server, workdir, tmp_path):
    # Ending without the interpreter's teardown must still do what its start of shutdown does:
    # join the threads that are not daemons, then run the exit handlers.
    site, marks = tmp_path / "site", tmp_path / "marks"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import atexit, threading, time\n"
        f"MARKS = {str(marks)!r}\n"
        "def later():\n"
        "    time.sleep(0.5)\n"
        "    open(MARKS, 'a').write('thread\\n')\n"
        "threading.Thread(target=later).start()\n"
        "atexit.register(lambda: open(MARKS, 'a').write('atexit\\n'))\n")
    result = run_chatcli("-p", "hi", env=dict(openai_env, PYTHONPATH=str(site)), cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "You said: hi\n"
    assert marks.read_text().splitlines() == ["thread", "atexit"]


def test_a_reader_that_goes_away_keeps_the_whole_turn_and_says_nothing(openai_env, openai_server, workdir):
    # `chatcli --session s -p … | head -c 10`: the rest is not wanted on screen, but the turn is
    # not cut short: the session gets the whole answer, not a question piling up without one.
    chunks = ["y" * 1000 + "\n"] * 200  # more than a pipe holds, less than the context window
    openai_server.reply(*chunks)
    process = subprocess.Popen([CHATCLI, "--session", "piped", "-p", "hi"], env=openai_env, cwd=workdir,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert process.stdout.read(10) == b"y" * 10
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait(timeout=60) == 141
    assert "Traceback" not in err and "Exception ignored" not in err and "[interrupted]" not in err, err
    openai_server.reply("second answer")
    again = run_chatcli("--session", "piped", "-p", "again", env=openai_env, cwd=workdir)
    assert again.returncode == 0 and again.stdout == "second answer\n"
    sent = openai_server.requests[-1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"] == "".join(chunks)


def test_a_reader_that_goes_away_stops_a_turn_nothing_records(openai_env, openai_server, workdir):
    openai_server.reply(*(["z" * 1000 + "\n"] * 2000))
    process = subprocess.Popen([CHATCLI, "-p", "hi"], env=openai_env, cwd=workdir, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert process.stdout.read(10) == b"z" * 10
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait(timeout=60) == 141
    assert err == "", err


def test_the_repl_and_the_servers_refuse_a_closed_stdout(openai_env, workdir):
    import os
    import pty

    primary, secondary = pty.openpty()  # the REPL starts when stdin is a terminal
    try:
        for args in ([], ["mcp-server"], ["acp"]):
            done = subprocess.run([CHATCLI, *args], env=openai_env, cwd=workdir, stdin=secondary,
                                  stderr=subprocess.PIPE, text=True, timeout=60, preexec_fn=lambda: os.close(1))
            assert done.returncode == 2, (args, done.stderr)
            assert done.stderr.startswith("chatcli: error: standard output is closed:"), (args, done.stderr)
    finally:
        os.close(primary)
        os.close(secondary)


def test_output_that_cannot_be_written_is_one_line_and_the_turn_is_kept(openai_env, openai_server, workdir):
    with open("/dev/full", "w") as full:
        done = subprocess.run([CHATCLI, "--session", "full", "-p", "hi"], env=openai_env, cwd=workdir, stdout=full,
                              stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, timeout=60)
        listed = subprocess.run([CHATCLI, "session", "list"], env=openai_env, cwd=workdir, stdout=full,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == ("chatcli: error: the answer could not be written out: "
                                            "No space left on device (the answer is kept in session 'full')")
    assert listed.returncode == 1
    assert listed.stderr == "chatcli: error: the output could not be written: No space left on device\n"
    shown = run_chatcli("session", "show", "full", env=openai_env, cwd=workdir)
    assert "You said: hi" in shown.stdout


def test_a_closed_stdout_is_no_error_and_the_turn_is_kept(openai_env, openai_server, workdir):
    import os

    done = subprocess.run([CHATCLI, "--session", "closed", "-p", "hi"], env=openai_env, cwd=workdir,
                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, timeout=60,
                          preexec_fn=lambda: os.close(1))  # `>&-`
    assert done.returncode == 0 and "error" not in done.stderr, done.stderr
    shown = run_chatcli("session", "show", "closed", env=openai_env, cwd=workdir)
    assert "You said: hi" in shown.stdout


def test_openai_api_url_is_an_alias_for_the_base_url(env, openai_server, workdir):
    env.update(OPENAI_API_KEY="x", OPENAI_API_URL=openai_server.base_url)
    result = run_chatcli("-p", "ping", env=env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "You said: ping\n"


def test_anthropic_oneshot_streams_the_messages_api_answer(env, anthropic_server, workdir):
    env.update(ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=anthropic_server.base_url, ANTHROPIC_MODEL="claude-x")
    anthropic_server.reply("Bonjour", ", monde")
    result = run_chatcli("-p", "salut", env=env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Bonjour, monde\n"
    seen = anthropic_server.requests[0]
    assert seen.path == "/v1/messages"
    assert seen.headers["x-api-key"] == "k" and seen.headers["anthropic-version"] == "2023-06-01"
    assert seen.body["model"] == "claude-x" and seen.body["max_tokens"] > 0
    assert seen.body["messages"] == [{"role": "user", "content": "salut"}]


def test_piped_text_is_appended_to_the_prompt(openai_env, openai_server, workdir):
    result = run_chatcli("-p", "Summarise this:", env=openai_env, input="line one\nline two\n", cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert openai_server.requests[0].body["messages"][-1]["content"] == "Summarise this:\n\nline one\nline two"


def test_piped_bytes_that_are_not_utf8_are_replaced_not_fatal(openai_env, openai_server, workdir, tmp_path):
    import subprocess

    from conftest import CHATCLI

    result = subprocess.run([CHATCLI, "-p", "fix:"], input=b"caf\xe9 latin1\n", env=openai_env, cwd=workdir,
                            capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert openai_server.requests[0].body["messages"][-1]["content"] == "fix:\n\ncaf\ufffd latin1"


def test_an_invalid_base_url_is_a_usage_error(env, workdir):
    for url in ("http://127.0.0.1:99999/v1", "http://[::1/v1", "notaurl"):
        env.update(LLM_PROVIDER="openai", OPENAI_API_KEY="x", OPENAI_BASE_URL=url)
        result = run_chatcli("-p", "hi", env=env, cwd=workdir)
        assert result.returncode == 2, (url, result.stderr)
        assert result.stderr.count("\n") == 1 and "invalid endpoint URL" in result.stderr \
            and "check OPENAI_BASE_URL" in result.stderr, result.stderr


def test_piped_text_alone_is_the_prompt(openai_env, openai_server, workdir):
    result = run_chatcli(env=openai_env, input="just stdin\n", cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "You said: just stdin\n"


def test_nothing_to_ask_is_a_usage_error(openai_env, workdir):
    result = run_chatcli(env=openai_env, input="", cwd=workdir)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "nothing to ask" in result.stderr


def test_flags_override_provider_and_model(env, openai_server, anthropic_server, workdir):
    env.update(LLM_PROVIDER="anthropic", ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=anthropic_server.base_url,
               OPENAI_BASE_URL=openai_server.base_url, LLM_MODEL="from-env")
    result = run_chatcli("--provider", "openai", "--model", "from-flag", "-p", "q", env=env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert openai_server.requests[0].body["model"] == "from-flag"
    assert anthropic_server.requests == []


def test_chatcli_provider_names_are_accepted_as_aliases(env, anthropic_server, workdir):
    env.update(LLM_PROVIDER="CLAUDEAI", ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=anthropic_server.base_url)
    result = run_chatcli("-p", "q", env=env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert anthropic_server.requests[0].body["model"] == "claude-sonnet-4-5"


def test_unreachable_provider_is_one_line_and_exit_code_1(env, workdir):
    env.update(LLM_PROVIDER="openai", OPENAI_API_KEY="x", OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    result = run_chatcli("-p", "hi", env=env, cwd=workdir)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert "cannot reach http://127.0.0.1:9" in result.stderr and "connection refused" in result.stderr
    assert "Traceback" not in result.stderr


def test_debug_shows_the_traceback(env, workdir):
    env.update(LLM_PROVIDER="openai", OPENAI_API_KEY="x", OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    result = run_chatcli("--debug", "-p", "hi", env=env, cwd=workdir)
    assert result.returncode == 1
    assert "Traceback" in result.stderr and "cannot reach" in result.stderr


def test_bad_key_is_one_clear_line(openai_env, openai_server, workdir):
    openai_server.reply(status=401, error="Incorrect API key provided")
    result = run_chatcli("-p", "hi", env=openai_env, cwd=workdir)
    assert result.returncode == 1
    assert result.stderr == "chatcli: error: openai: HTTP 401 Unauthorized: Incorrect API key provided (check the API key)\n"
    assert len(openai_server.requests) == 1  # 401 is not retried


def test_rate_limit_and_server_errors_are_retried(openai_env, openai_server, workdir):
    openai_server.reply(status=429, error="slow down", headers={"Retry-After": "0"})
    openai_server.reply(status=503, error="overloaded", headers={"Retry-After": "0"})
    openai_server.reply("finally")
    result = run_chatcli("-p", "hi", env=openai_env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "finally\n"
    assert len(openai_server.requests) == 3


def test_persistent_server_error_gives_up_with_one_line(openai_env, openai_server, workdir):
    for _ in range(4):
        openai_server.reply(status=500, error="boom", headers={"Retry-After": "0"})
    result = run_chatcli("-p", "hi", env=openai_env, cwd=workdir)
    assert result.returncode == 1
    *notices, error = result.stderr.splitlines()
    assert error == "chatcli: error: openai: HTTP 500 Internal Server Error after 4 attempts: boom"
    assert notices == [f"openai: HTTP 500, retrying in 0 s ({n}/3)" for n in (1, 2, 3)]  # said while waiting
    assert len(openai_server.requests) == 4


def test_timeout_is_one_line(openai_env, openai_server, workdir):
    openai_server.reply("never", stall_before=5)
    result = run_chatcli("--timeout", "0.5", "-p", "hi", env=openai_env, cwd=workdir)
    assert result.returncode == 1
    assert "no response from http://127.0.0.1" in result.stderr and "within 0.5 s" in result.stderr
    assert result.stderr.count("\n") == 1


def test_overloaded_anthropic_is_retried_then_reported(env, anthropic_server, workdir):
    env.update(LLM_PROVIDER="anthropic", ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=anthropic_server.base_url)
    for _ in range(4):
        anthropic_server.reply(status=529, error="Overloaded", headers={"Retry-After-Ms": "1"})
    result = run_chatcli("-p", "hi", env=env, cwd=workdir)
    assert result.returncode == 1
    assert "HTTP 529" in result.stderr and "Overloaded" in result.stderr
    assert len(anthropic_server.requests) == 4


def test_client_errors_are_not_retried(openai_env, openai_server, workdir):
    openai_server.reply(status=400, error="model 'm' does not exist")
    result = run_chatcli("-p", "hi", env=openai_env, cwd=workdir)
    assert result.returncode == 1
    assert "HTTP 400 Bad Request: model 'm' does not exist" in result.stderr
    assert len(openai_server.requests) == 1


def test_error_event_mid_stream_keeps_the_partial_answer_and_fails(env, openai_server, anthropic_server, workdir):
    env.update(OPENAI_API_KEY="x", OPENAI_BASE_URL=openai_server.base_url, ANTHROPIC_API_KEY="k",
               ANTHROPIC_BASE_URL=anthropic_server.base_url)
    for provider, server in (("openai", openai_server), ("anthropic", anthropic_server)):
        server.reply("half an ", error_event="upstream overloaded")
        result = run_chatcli("--provider", provider, "-p", "hi", env=env, cwd=workdir)
        assert result.returncode == 1, provider
        assert result.stdout == "half an \n"
        assert result.stderr == f"chatcli: error: {provider}: upstream overloaded\n"


def test_a_stream_cut_short_is_an_error_not_a_complete_answer(env, openai_server, anthropic_server, workdir):
    env.update(OPENAI_API_KEY="x", OPENAI_BASE_URL=openai_server.base_url, ANTHROPIC_API_KEY="k",
               ANTHROPIC_BASE_URL=anthropic_server.base_url)
    for provider, server in (("openai", openai_server), ("anthropic", anthropic_server)):
        server.reply("The answer is", cut=True)
        result = run_chatcli("--provider", provider, "-p", "hi", env=env, cwd=workdir)
        assert result.returncode == 1, provider
        assert result.stdout == "The answer is\n"
        assert "stream ended before the answer was complete" in result.stderr


def test_a_stream_that_stalls_mid_answer_times_out(openai_env, openai_server, workdir):
    openai_server.reply("started", hang_after=True)
    result = run_chatcli("--timeout", "0.5", "-p", "hi", env=openai_env, cwd=workdir)
    assert result.returncode == 1
    assert result.stdout == "started\n"
    assert result.stderr == "chatcli: error: openai: the answer stalled for more than 0.5 s\n"


def test_a_200_that_is_not_a_stream_is_an_error(openai_env, openai_server, workdir):
    openai_server.reply(frames=["<html>welcome to nginx</html>"], content_type="text/html")
    result = run_chatcli("-p", "hi", env=openai_env, cwd=workdir)
    assert result.returncode == 1
    assert "answered with text/html, not a stream (check the base URL)" in result.stderr


def test_malformed_events_are_a_clear_error(openai_env, openai_server, workdir):
    openai_server.reply(frames=['data: {"choices": ["oops"]}\n\n'])
    result = run_chatcli("-p", "hi", env=openai_env, cwd=workdir)
    assert result.returncode == 1
    assert result.stderr.startswith("chatcli: error: openai: unexpected event from the server")


def test_an_answer_cut_at_the_token_limit_says_so(openai_env, openai_server, workdir):
    openai_server.reply("a long answ", finish_reason="length")
    result = run_chatcli("-p", "hi", env=openai_env, cwd=workdir)
    assert result.returncode == 0
    assert result.stdout == "a long answ\n"
    assert "stopped at the token limit" in result.stderr


def test_max_tokens_setting_reaches_the_request(env, anthropic_server, workdir):
    env.update(LLM_PROVIDER="anthropic", ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=anthropic_server.base_url)
    run_chatcli("-p", "hi", env=env, cwd=workdir)
    env["CHATCLI_MAX_TOKENS"] = "16000"
    run_chatcli("-p", "hi", env=env, cwd=workdir)
    assert [r.body["max_tokens"] for r in anthropic_server.requests] == [4096, 16000]


def test_usage_errors_exit_2_with_one_line(env, workdir):
    for args in (["--no-such-flag"], ["--timeout", "soon", "-p", "x"], ["--provider", "nope", "-p", "x"],
                 ["--timeout", "nan", "-p", "x"], ["--timeout", "-1", "-p", "x"]):
        result = run_chatcli(*args, env=env, cwd=workdir)
        assert result.returncode == 2, args
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("chatcli: error:"), result.stderr
    result = run_chatcli("-p", "x", env={**env, "LLM_PROVIDER": "mystery"}, cwd=workdir)
    assert result.returncode == 2 and "unknown provider 'mystery'" in result.stderr


def test_missing_key_for_the_official_endpoint_is_a_clear_error(env, workdir):
    result = run_chatcli("--provider", "openai", "-p", "hi", env=env, cwd=workdir)
    assert result.returncode == 1
    assert "OPENAI_API_KEY is not set" in result.stderr and result.stderr.count("\n") == 1


def test_version_and_help(env, workdir):
    result = run_chatcli("--version", env=env, cwd=workdir)
    assert result.returncode == 0 and result.stdout.startswith("chatcli ")
    from chatcli import __version__

    assert result.stdout.strip() == f"chatcli {__version__}"
    result = run_chatcli("--help", env=env, cwd=workdir)
    assert result.returncode == 0
    for flag in ("-p", "--provider", "--model", "--timeout", "--raw", "--debug", "--version"):
        assert flag in result.stdout
    # Every command a user can run is named, each on its own line, within 80 columns.
    commands = result.stdout.split("commands (each has --help):\n")[1].splitlines()
    assert [line.split()[1] for line in commands] == ["session", "storage", "import", "doctor", "mcp-server",
                                                       "acp", "gateway"]
    for action in ("list", "show", "search", "export", "transcript", "delete", "fork", "prune", "rekey"):
        assert action in result.stdout
    assert max(map(len, commands)) <= 80


def test_oneshot_writes_nothing_to_disk(openai_env, home, workdir):
    result = run_chatcli("-p", "hi", env=openai_env, cwd=workdir)
    assert result.returncode == 0
    assert list(home.iterdir()) == []  # no CHATCLI_HOME, no sessions, no prompt history
    assert list(workdir.iterdir()) == []


def test_a_model_the_local_provider_cannot_run_is_a_usage_error(env, workdir):
    result = run_chatcli("--model", "gpt-4o", "-p", "hi", env=env, cwd=workdir)
    assert result.returncode == 2
    assert "the local provider runs .gguf files; 'gpt-4o' is not one" in result.stderr


def test_start_up_paths_import_no_provider_sdk_or_model_runtime(openai_env, workdir):
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from chatcli.main import main\n"
        "code = main(sys.argv[1:])\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'openai', 'anthropic', 'mcp', 'acp', "
        "'llama_cpp', 'numpy', 'httpx', 'prompt_toolkit', 'rich'})\n"
        "sys.stderr.write('HEAVY=' + ','.join(heavy) + '\\n')\n"
    )
    for args in (["--version"], ["-p", "hi"], ["--raw", "-p", "hi"]):
        result = subprocess.run([sys.executable, "-c", probe, *args], env=openai_env, cwd=workdir,
                                capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
        assert "HEAVY=\n" in result.stderr, (args, result.stderr)


def test_bootstrap_files_form_the_system_prompt(openai_env, openai_server, home, tmp_path):
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / "sub").mkdir()
    (project / "AGENTS.md").write_text("Project rule: answer in French.")
    chatcli_home = home / ".chatcli"
    chatcli_home.mkdir()
    (chatcli_home / "USER.md").write_text("The user is called Ana.")
    (chatcli_home / "AGENTS.md").write_text("Global agents file, shadowed by the project's.")
    result = run_chatcli("-p", "hi", env=openai_env, cwd=project / "sub")
    assert result.returncode == 0, result.stderr
    messages = openai_server.requests[0].body["messages"]
    assert messages[0]["role"] == "system"
    system = messages[0]["content"]
    assert "answer in French" in system and "called Ana" in system
    assert "Global agents file" not in system
    assert system.index("called Ana") < system.index("answer in French")  # USER.md before AGENTS.md
    assert messages[1:] == [{"role": "user", "content": "hi"}]


def test_no_bootstrap_files_means_no_system_message(openai_env, openai_server, workdir):
    run_chatcli("-p", "hi", env=openai_env, cwd=workdir)
    assert [m["role"] for m in openai_server.requests[0].body["messages"]] == ["user"]


def test_raw_output_is_plain_text(openai_env, openai_server, workdir):
    openai_server.reply("# Title\n\n", "**bold**")
    result = run_chatcli("--raw", "-p", "hi", env=openai_env, cwd=workdir)
    assert result.stdout == "# Title\n\n**bold**\n"


def test_ollama_preset_needs_no_key(env, openai_server, workdir):
    env.update(LLM_PROVIDER="ollama", OLLAMA_BASE_URL=openai_server.base_url, OLLAMA_MODEL="llama3.2")
    result = run_chatcli("-p", "hi", env=env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    seen = openai_server.requests[0]
    assert "authorization" not in seen.headers and seen.body["model"] == "llama3.2"


def test_a_command_line_byte_that_is_not_utf8_is_replaced_and_the_turn_is_kept(openai_env, openai_server, workdir):
    """The byte comes in as a lone surrogate (Python's surrogateescape): answered, then the turn
    could not be written (an internal UnicodeEncodeError, exit 1, the session left without it)."""
    result = subprocess.run([CHATCLI.encode(), b"--session", b"bytes", b"-p", b"hi \xff there"], env=openai_env,
                            capture_output=True, cwd=workdir, timeout=60)
    assert result.returncode == 0, result.stderr
    assert b"internal error" not in result.stderr
    document = json.loads((Path(openai_env["CHATCLI_HOME"]) / "sessions" / "bytes.json").read_text())
    assert [m["content"] for m in document["chat_history"]] == ["hi \ufffd there", "You said: hi \ufffd there"]


def test_the_exit_line_s_resume_command_works_as_printed_with_p(repl_env, openai_server, workdir):
    """`chatcli`, a question, /exit ("… chatcli --continue resumes it"), then `chatcli -c -p`:
    the autosave it resumes is continued, and the turn kept in it as the REPL would keep it."""
    from repl_driver import Repl

    repl = Repl(repl_env, "m", cwd=workdir)
    repl.send("the first question")
    kept = repl.exit_keeping()
    result = run_chatcli("-c", "-p", "the second question", env=repl_env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert f"Conversation kept in session '{kept}' (chatcli --continue resumes it)." in result.stderr
    saved = json.loads((Path(repl_env["CHATCLI_HOME"]) / "sessions" / f"{kept}.json").read_text())
    assert [m["content"] for m in saved["chat_history"] if m["role"] == "user"] == \
        ["the first question", "the second question"]
    # It still names a journal, and that journal holds the whole conversation, the new turn too.
    journal = Path(repl_env["CHATCLI_HOME"]) / "transcripts" / f"{saved['transcript_id']}.jsonl"
    recorded = [json.loads(line)["message"]["content"] for line in journal.read_text().splitlines()
                if json.loads(line)["type"] == "message"]
    assert "the first question" in recorded and recorded[-2:] == ["the second question", "You said: the second question"], recorded
