"""What a new user meets first, in the real REPL: which model answers when nothing is configured,
the prompt's short name for a .gguf model, and the spinner while /compact waits for the summary."""

from __future__ import annotations

import re

import pytest
from repl_driver import Repl, plain

from chatcli.providers.local import bundled_model_path

# The bundled model's file name without its folder and the .gguf extension: what the prompt shows.
BUNDLED_LABEL = "SmolLM2-135M-Instruct.Q4_1"
# The spinner's first frames (rich's "dots"), drawn before the first token of an answer.
SPINNER_FRAMES = re.compile("[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]")


def model_notes(text: str) -> list[str]:
    """The lines that name the model answering and how to switch to a stronger one."""
    return [line for line in plain(text).splitlines() if "OPENAI_API_KEY" in line]


def test_a_default_local_model_is_named_once_before_the_first_prompt(env, workdir):
    repl = Repl(env, BUNDLED_LABEL, cwd=workdir)  # nothing configured: no provider, no key
    try:
        notes = model_notes(repl.child.before)  # all the REPL printed before its first prompt
        assert len(notes) == 1, plain(repl.child.before)
        note = notes[0]
        assert BUNDLED_LABEL in note and str(bundled_model_path().parent) not in note
        size = bundled_model_path().stat().st_size // 1_000_000
        assert "small" in note and "local" in note and "offline" in note and f"{size} MB" in note
        assert "ANTHROPIC_API_KEY" in note and "LLM_PROVIDER=ollama" in note and "stronger" in note
        assert model_notes(repl.send("/help")) == []  # said once, at the start
    finally:
        repl.close()


def test_no_model_note_when_a_provider_key_is_set(env, openai_server, workdir):
    env.update(OPENAI_API_KEY="x", OPENAI_BASE_URL=openai_server.base_url, OPENAI_MODEL="m")
    repl = Repl(env, "m", cwd=workdir)
    try:
        assert model_notes(repl.child.before) == []
        assert "offline" not in plain(repl.child.before)
    finally:
        repl.close()


@pytest.mark.parametrize("asked", [("--provider", "local", "--model", "BUNDLED"), ("LLM_PROVIDER=local",)],
                         ids=["--provider local --model PATH", "LLM_PROVIDER=local"])
def test_a_local_model_asked_for_is_not_explained_and_its_path_is_shown_by_name(env, workdir, asked):
    args = tuple(str(bundled_model_path()) if arg == "BUNDLED" else arg for arg in asked if "=" not in arg)
    env.update(arg.split("=", 1) for arg in asked if "=" in arg)
    repl = Repl(env, BUNDLED_LABEL, cwd=workdir, args=args)
    try:
        assert model_notes(repl.child.before) == []
        # The prompt ends in the name; the folder would come just before it.
        assert str(bundled_model_path().parent) not in plain(repl.child.before)
    finally:
        repl.close()


def test_a_gguf_path_as_the_model_is_shown_by_its_file_name_in_the_prompt(openai_env, openai_server, workdir,
                                                                          tmp_path):
    # A llama.cpp server behind the OpenAI API may know its model by the path it loaded it from.
    path = tmp_path / "models" / "downloaded-from-the-hub" / "quantised" / "Qwen2.5-7B-Instruct.Q4_K_M.gguf"
    openai_env.update(OPENAI_MODEL=str(path), NO_COLOR="1")
    repl = Repl(openai_env, "Qwen2.5-7B-Instruct.Q4_K_M", cwd=workdir)
    try:
        assert str(path.parent) not in plain(repl.child.before)  # (the prompt ends in the name, not ".gguf")
        repl.send("hi")
        assert openai_server.requests[0].body["model"] == str(path)  # the server still gets the path
    finally:
        repl.close()


def test_compact_shows_the_answer_spinner_until_the_summary_is_written(openai_env, openai_server, workdir):
    repl = Repl(openai_env, "m", cwd=workdir)  # a terminal with colour: answers show the spinner too
    try:
        for i in range(1, 5):
            repl.send(f"turn {i} question")
        openai_server.reply("Briefing: four questions were asked.", stall_before=1.5)
        out = plain(repl.send("/compact"))
        done = re.search(r"Compacted \d+ messages into one summary", out).start()
        assert "working on /compact" in out[:done] and SPINNER_FRAMES.search(out[:done]), out
        assert "working on" not in out[done:] and not SPINNER_FRAMES.search(out[done:]), out  # cleared when done
    finally:
        repl.close()


def test_ctrl_c_during_compact_clears_the_spinner_and_changes_nothing(openai_env, openai_server, workdir):
    repl = Repl(openai_env, "m", cwd=workdir)
    try:
        for i in range(1, 5):
            repl.send(f"turn {i} question")
        openai_server.reply("never sent", stall_before=30)
        repl.child.send("/compact\r")
        repl.child.expect("working on /compact")
        repl.child.send("\x03")
        repl.child.expect("Compaction interrupted; the history is unchanged.")
        assert "working on" not in plain(repl.expect_prompt())  # stopped: no frame after the line
        repl.send("turn 5 question")
        assert len(openai_server.requests[-1].body["messages"]) == 9  # the whole history, then the question
    finally:
        repl.close()


def test_a_quick_command_draws_no_spinner(openai_env, openai_server, workdir):
    repl = Repl(openai_env, "m", cwd=workdir)
    try:
        out = plain(repl.send("/help"))
        assert "Commands:" in out and not SPINNER_FRAMES.search(out), out
    finally:
        repl.close()


def test_an_automatic_compaction_shows_the_answer_spinner_while_the_summary_is_written(openai_env, openai_server,
                                                                                      workdir):
    # As in test_compact.py: a long first answer, then short turns; the fifth compacts first.
    openai_env.update(CHATCLI_CONTEXT_WINDOW="540", CHATCLI_AUTO_COMPACT="50%")
    repl = Repl(openai_env, "m", cwd=workdir)
    try:
        openai_server.reply("Long answer. " + "y" * 800)
        for i in range(1, 5):
            repl.send(f"turn {i} question")
        openai_server.reply("Short briefing.", stall_before=1.5)
        out = plain(repl.send("turn 5 question"))
        said = out.index("Automatic compaction")
        assert "thinking" in out[:said] and SPINNER_FRAMES.search(out[:said]), out
    finally:
        repl.close()
