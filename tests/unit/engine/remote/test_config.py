"""engine/remote/config.py: a remote backend's configuration, its errors, and token counting
without a tokenizer."""

from __future__ import annotations

from ghostfim.engine.config import Budgets, EngineConfig, backend_spec
from ghostfim.engine.remote.config import (
    CHARS_PER_TOKEN,
    DEFAULT_URLS,
    RemoteBackendError,
    RemoteConfig,
    RemoteTimeout,
    RemoteUnavailable,
    approx_tokenize,
    approx_tokens,
)


def test_urls_default_per_server_and_never_show_credentials() -> None:
    assert RemoteConfig("llama-server").base_url == "http://127.0.0.1:8080"
    assert RemoteConfig("ollama").base_url == "http://127.0.0.1:11434"
    assert RemoteConfig("openai").base_url == DEFAULT_URLS["openai"]
    assert RemoteConfig("openai", "http://gpu-box:8000/v1/").base_url == "http://gpu-box:8000"
    assert RemoteConfig("openai", "gpu-box:8000").base_url == "http://gpu-box:8000"
    shown = RemoteConfig("openai", "https://me:secret@gpu-box:8443").shown_url
    assert shown == "https://gpu-box:8443"
    assert RemoteConfig("llama-server", "http://h:1/v1").base_url == "http://h:1/v1"  # not openai


def test_the_configuration_comes_whole_from_the_backend_spec() -> None:
    config = EngineConfig(
        backend="ollama",
        backend_url="http://box:11434",
        backend_model="qwen2.5-coder:1.5b-base",
        backend_api_key_env="KEY_VAR",
        backend_timeout_ms=900.0,
        prefix_tokens=300,
        suffix_tokens=40,
    )
    remote = RemoteConfig.of(backend_spec(config))
    assert (remote.kind, remote.url, remote.model, remote.api_key_env) == (
        "ollama",
        "http://box:11434",
        "qwen2.5-coder:1.5b-base",
        "KEY_VAR",
    )
    assert remote.timeout_ms == 900.0 and remote.timeout_s == 0.9
    assert remote.budgets == Budgets(300, 40, 80.0, 256)


def test_tokens_are_counted_from_characters() -> None:
    assert approx_tokens("") == 0
    assert approx_tokens("x" * 7) == 2 and CHARS_PER_TOKEN == 3.5
    assert approx_tokens("x" * 8) == 3  # rounded up: prompts err on the short side
    assert len(approx_tokenize("def f(): pass")) == approx_tokens("def f(): pass")


def test_the_errors_are_one_family() -> None:
    assert issubclass(RemoteUnavailable, RemoteBackendError)
    assert issubclass(RemoteTimeout, RemoteBackendError)
    assert issubclass(RemoteBackendError, RuntimeError)
