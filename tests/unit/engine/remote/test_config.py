"""engine/remote/config.py: a remote backend's configuration, its errors, and token counting
without a tokenizer."""

from __future__ import annotations

import pytest

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
from ghostfim.engine.secrets import BackendUrlError


def test_urls_default_per_server_and_never_show_credentials() -> None:
    assert RemoteConfig("llama-server").base_url == "http://127.0.0.1:8080"
    assert RemoteConfig("ollama").base_url == "http://127.0.0.1:11434"
    assert RemoteConfig("openai").base_url == DEFAULT_URLS["openai"]
    assert RemoteConfig("openai", "http://gpu-box:8000/v1/").base_url == "http://gpu-box:8000"
    shown = RemoteConfig("openai", "https://me:secret@gpu-box:8443").shown_url
    assert shown == "https://***@gpu-box:8443"
    assert RemoteConfig("llama-server", "http://h:1/v1").base_url == "http://h:1/v1"  # not openai


def test_a_url_without_a_scheme_is_an_error_naming_the_scheme_to_add() -> None:
    with pytest.raises(BackendUrlError, match="add https://"):
        _ = RemoteConfig("openai", "me:secret@gpu-box:8000").base_url
    with pytest.raises(BackendUrlError) as raised:
        _ = RemoteConfig("openai", "me:secret@gpu-box:8000").base_url
    assert "secret" not in str(raised.value)


def test_a_key_in_the_query_follows_every_endpoint() -> None:
    remote = RemoteConfig("openai", "https://h/v1?api_key=k3y&x=1")
    assert remote.endpoint_url("/v1/completions") == "https://h/v1/completions?api_key=k3y&x=1"
    assert remote.shown_url == "https://h?api_key=***&x=1"


def test_a_key_goes_in_clear_to_loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GHOSTFIM_TEST_KEY", "sk-0123456789")
    keyed = {"api_key_env": "GHOSTFIM_TEST_KEY"}
    RemoteConfig("openai", "http://127.0.0.1:8000", **keyed).refuse_clear_text()
    RemoteConfig("openai", "http://[::1]:8000", **keyed).refuse_clear_text()
    RemoteConfig("openai", "https://gpu-box:8000", **keyed).refuse_clear_text()
    RemoteConfig("openai", "http://gpu-box:8000").refuse_clear_text()  # no key: allowed
    with pytest.raises(RemoteBackendError, match="backendAllowInsecure") as raised:
        RemoteConfig("openai", "http://gpu-box:8000", **keyed).refuse_clear_text()
    assert "sk-0123456789" not in str(raised.value)
    with pytest.raises(RemoteBackendError, match="the URL's credentials"):
        RemoteConfig("openai", "http://me:pass@gpu-box:8000").refuse_clear_text()
    allowed = RemoteConfig("openai", "http://gpu-box:8000", allow_insecure=True, **keyed)
    allowed.refuse_clear_text()


def test_the_configuration_comes_whole_from_the_backend_spec() -> None:
    config = EngineConfig(
        backend="ollama",
        backend_url="http://box:11434",
        backend_model="qwen2.5-coder:1.5b-base",
        backend_api_key_env="KEY_VAR",
        backend_timeout_ms=900.0,
        backend_allow_insecure=True,
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
    assert remote.allow_insecure
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
