"""Real generation with the embedded offline model (llama-cpp-python + the SmolLM2 GGUF)."""

from __future__ import annotations

import pytest
from conftest import run_chatcli
from repl_driver import Repl, plain

pytest.importorskip("llama_cpp", reason="the 'local' extra is part of the test install")
BUNDLED_LABEL = "SmolLM2-135M-Instruct.Q4_1"


def test_oneshot_generates_offline_with_no_provider_configured(env, workdir):
    env["LLM_PROVIDER"] = ""  # nothing set: the local model is chosen
    result = run_chatcli("-p", "Say hello.", env=env, cwd=workdir, timeout=180)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.strip()) > 0
    assert result.stderr == ""  # llama.cpp's own logging stays quiet


def test_repl_answers_hello_with_the_local_model(env, workdir):
    env["NO_COLOR"] = "1"
    repl = Repl(env, BUNDLED_LABEL, cwd=workdir)
    try:
        out = plain(repl.send("hello", timeout=180))
        answer = out.split("hello", 1)[1].rsplit(BUNDLED_LABEL, 1)[0]
        assert any(ch.isalpha() for ch in answer), out
        assert "error" not in answer.lower()
    finally:
        repl.close()


def test_another_gguf_runs_from_chatcli_local_model(env, workdir, tmp_path):
    from chatcli.providers.local import bundled_model_path

    other = tmp_path / "my-model.gguf"
    other.symlink_to(bundled_model_path())
    env["CHATCLI_LOCAL_MODEL"] = str(other)
    result = run_chatcli("-p", "Name a colour.", env=env, cwd=workdir, timeout=180)
    assert result.returncode == 0, result.stderr
    assert any(ch.isalpha() for ch in result.stdout)
    env["NO_COLOR"] = "1"
    repl = Repl(env, "my-model", cwd=workdir)
    try:
        assert "Model: my-model (provider local)" in plain(repl.send("/model"))
    finally:
        repl.close()


def test_missing_gguf_is_a_clear_error(env, workdir, tmp_path):
    env["CHATCLI_LOCAL_MODEL"] = str(tmp_path / "absent.gguf")
    result = run_chatcli("-p", "hi", env=env, cwd=workdir)
    assert result.returncode == 1
    assert result.stderr == f"chatcli: error: local: model file not found: {tmp_path / 'absent.gguf'}\n"
