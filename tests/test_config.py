"""Provider selection and model precedence (SPEC §2), on the real Settings."""

from __future__ import annotations

import pytest

from chatcli.config.settings import Settings, parse_size
from chatcli.core.errors import ConfigError


def load(env, **flags):
    return Settings.load({"HOME": "/nonexistent", **env}, **flags)


def test_no_configuration_selects_the_local_model():
    settings = load({})
    assert settings.provider == "local"
    assert settings.model_label == "SmolLM2-135M-Instruct.Q4_1"


def test_first_provider_whose_key_is_set_wins():
    assert load({"ANTHROPIC_API_KEY": "a"}).provider == "anthropic"
    assert load({"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o"}).provider == "openai"


def test_llm_provider_beats_keys_and_flag_beats_llm_provider():
    env = {"OPENAI_API_KEY": "o", "LLM_PROVIDER": "ollama"}
    assert load(env).provider == "ollama"
    assert load(env, provider="anthropic").provider == "anthropic"


@pytest.mark.parametrize("alias,canonical", [("OPENAI", "openai"), ("CLAUDEAI", "anthropic"),
                                             ("OLLAMA", "ollama"), ("Local", "local")])
def test_chatcli_names_are_aliases(alias, canonical):
    assert load({"LLM_PROVIDER": alias}).provider == canonical


def test_unknown_provider_names_the_choices():
    with pytest.raises(ConfigError, match="choose from: openai, anthropic, ollama, local"):
        load({"LLM_PROVIDER": "gemini"})


def test_model_precedence_flag_then_llm_model_then_provider_model_then_default():
    env = {"OPENAI_API_KEY": "o", "LLM_MODEL": "general", "OPENAI_MODEL": "specific"}
    assert load(env, model="flag").model == "flag"
    assert load(env).model == "general"
    assert load({"OPENAI_API_KEY": "o", "OPENAI_MODEL": "specific"}).model == "specific"
    assert load({"OPENAI_API_KEY": "o"}).model == "gpt-4o-mini"
    assert load({"ANTHROPIC_API_KEY": "a", "ANTHROPIC_MODEL": "claude-x"}).model == "claude-x"
    assert load({"LLM_PROVIDER": "ollama", "OLLAMA_MODEL": "qwen"}).model == "qwen"


def test_local_provider_takes_gguf_paths_only():
    assert load({"LLM_MODEL": "gpt-4o"}).model_label == "SmolLM2-135M-Instruct.Q4_1"
    settings = load({"CHATCLI_LOCAL_MODEL": "/models/tiny.gguf"})
    assert settings.model == "/models/tiny.gguf" and settings.model_label == "tiny"


def test_a_local_model_that_is_not_gguf_is_reported_once():
    settings = load({"CHATCLI_LOCAL_MODEL": "/models/model.bin"})
    assert settings.model_label == "SmolLM2-135M-Instruct.Q4_1"
    assert settings.warnings == ("CHATCLI_LOCAL_MODEL='/models/model.bin' is not a .gguf file; using the bundled model",)


def test_switching_provider_follows_that_providers_precedence():
    settings = load({"OPENAI_API_KEY": "o", "ANTHROPIC_MODEL": "claude-x"})
    assert settings.with_provider("claudeai").model == "claude-x"


def test_endpoints_and_aliases():
    settings = load({"OPENAI_API_URL": "http://h:1/v1/", "ANTHROPIC_BASE_URL": "http://a:2"})
    assert settings.endpoint("openai").base_url == "http://h:1/v1"
    assert settings.endpoint("anthropic").base_url == "http://a:2"
    assert settings.endpoint("ollama").base_url == "http://localhost:11434/v1"
    assert load({"OPENAI_BASE_URL": "http://b/v1", "OPENAI_API_URL": "http://c/v1"}).endpoint("openai").base_url == "http://b/v1"


def test_ollama_base_url_without_a_path_gets_v1():
    assert load({"OLLAMA_BASE_URL": "http://gpu-box:11434"}).endpoint("ollama").base_url == "http://gpu-box:11434/v1"
    assert load({"OLLAMA_BASE_URL": "http://gpu-box:11434/v1/"}).endpoint("ollama").base_url == "http://gpu-box:11434/v1"


def test_an_explicit_model_the_local_provider_cannot_run_is_refused():
    with pytest.raises(ConfigError, match="runs .gguf files"):
        load({}, model="gpt-4o")


def test_provider_switch_does_not_carry_llm_model_over():
    settings = load({"OPENAI_API_KEY": "o", "LLM_MODEL": "gpt-4o"})
    assert settings.model == "gpt-4o"
    assert settings.with_provider("anthropic").model == "claude-sonnet-4-5"


def test_proxies_skip_loopback_and_no_proxy_hosts():
    settings = load({"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": ".internal,example.org"})
    assert settings.proxies.for_url("https", "api.openai.com") == "http://proxy:3128"
    assert settings.proxies.for_url("https", "llm.internal") is None
    assert settings.proxies.for_url("https", "example.org") is None
    assert settings.proxies.for_url("https", "127.0.0.1") is None
    assert settings.proxies.for_url("http", "api.openai.com") is None  # no HTTP_PROXY set


def test_home_relative_paths_use_the_given_home():
    settings = Settings.load({"HOME": "/users/ana"})
    assert str(settings.home) == "/users/ana/.chatcli"
    assert str(settings.history_file) == "/users/ana/.chatcli_history"


def test_history_settings_and_a_bad_size_warns_once_and_uses_the_default():
    settings = load({"HISTORY_FILE": "/tmp/h", "HISTORY_MAX_SIZE": "2MB"})
    assert str(settings.history_file) == "/tmp/h" and settings.history_max_size == 2 * 1024 * 1024
    settings = load({"HISTORY_MAX_SIZE": "lots"})
    assert settings.history_max_size == 100 * 1024 * 1024
    assert len(settings.warnings) == 1 and "HISTORY_MAX_SIZE" in settings.warnings[0]


@pytest.mark.parametrize("text,size", [("100MB", 100 * 1024**2), ("512k", 512 * 1024), ("1048576", 1048576),
                                       ("1.5 KB", 1536)])
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "MB", "-1", "0", "ten"])
def test_parse_size_rejects(text):
    with pytest.raises(ValueError):
        parse_size(text)


def test_project_root_is_found_by_walking_up_to_git(tmp_path):
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "a" / "b").mkdir(parents=True)
    settings = load({"CHATCLI_HOME": str(tmp_path / "h")})
    assert settings.bootstrap_dirs(tmp_path / "repo" / "a" / "b") == [tmp_path / "repo", tmp_path / "h"]
    assert settings.bootstrap_dirs(tmp_path) == [tmp_path / "h"]


@pytest.mark.parametrize("value,share", [("80%", 0.8), ("0.5", 0.5), ("75", 0.75), ("off", 0.0), ("0", 0.0),
                                         ("100%", 1.0)])
def test_auto_compact_share(value, share):
    settings = load({"CHATCLI_AUTO_COMPACT": value})
    assert settings.auto_compact == pytest.approx(share) and settings.warnings == ()


@pytest.mark.parametrize("value", ["lots", "150%", "-1", "nan"])
def test_a_bad_auto_compact_share_warns_and_uses_80_percent(value):
    settings = load({"CHATCLI_AUTO_COMPACT": value})
    assert settings.auto_compact == 0.8
    assert len(settings.warnings) == 1 and settings.warnings[0].startswith("CHATCLI_AUTO_COMPACT=")


def test_context_window_defaults_per_provider_and_can_be_set():
    assert load({}).context_tokens == 4096  # the bundled local model
    assert load({"ANTHROPIC_API_KEY": "k"}).context_tokens == 200_000
    assert load({"OPENAI_API_KEY": "k", "CHATCLI_CONTEXT_WINDOW": "32_000"}).context_tokens == 32_000
    bad = load({"CHATCLI_CONTEXT_WINDOW": "big"})
    assert bad.context_tokens == 4096 and bad.warnings[0].startswith("CHATCLI_CONTEXT_WINDOW=")
