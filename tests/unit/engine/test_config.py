"""engine/config.py: every default once, the budgets as one value, and the backend's identity
(two specs that differ only in budgets are one backend, reconfigured in place)."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

import pytest

from ghostfim.engine.config import (
    BACKENDS,
    DEFAULT_BUDGETS,
    DEFAULTS,
    FILTER_MODES,
    MODEL_SIZES,
    BackendSpec,
    Budgets,
    EngineConfig,
    backend_spec,
)
from ghostfim.engine.setup.presets import PRESET_NAMES


def test_the_defaults() -> None:
    c = EngineConfig()
    assert c == DEFAULTS and c.model_spec is None
    assert (c.filter, c.acceptance_stats, c.extra_context) == ("adaptive", True, False)
    assert c.budgets == DEFAULT_BUDGETS == Budgets(768, 256, 80.0, 256)
    assert DEFAULT_BUDGETS.snapshot_bytes == 256 * 1024 * 1024
    assert MODEL_SIZES == PRESET_NAMES and "local" in BACKENDS
    assert FILTER_MODES == ("adaptive", "fixed", "off")
    assert {f.name for f in fields(Budgets)} <= {f.name for f in fields(EngineConfig)}


def test_a_path_wins_over_a_size() -> None:
    assert EngineConfig(model_size="tiny").model_spec == "tiny"
    assert EngineConfig(model_size="tiny", model_path="/m.gguf").model_spec == "/m.gguf"


def test_a_local_spec_is_the_model_and_its_layers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GHOSTFIM_CACHE_DIR", str(tmp_path))
    spec = backend_spec(EngineConfig(model_size="small", n_gpu_layers=10))
    assert (spec.kind, spec.identity, spec.model, spec.n_gpu_layers) == (
        "local",
        "small",
        "small",
        10,
    )
    assert spec.label == "small"
    default = backend_spec(EngineConfig())
    assert default.model is None and default.identity is None and default.label == "default model"
    named = backend_spec(EngineConfig(), default_model="tiny")  # `ghostfim serve --model`
    assert named.model == "tiny"
    assert backend_spec(EngineConfig(model_size="small"), default_model="tiny").model == "small"


def test_budgets_change_in_place_anything_else_opens_another_backend() -> None:
    base = EngineConfig(model_path="/m.gguf")
    spec = backend_spec(base)
    same = backend_spec(replace(base, prefix_tokens=100, kv_snapshot_mb=1, max_tokens=3))
    assert spec.same_backend(same) and spec == same and hash(spec) == hash(same)
    assert same.budgets == Budgets(100, 256, 80.0, 1)
    assert not spec.same_backend(backend_spec(replace(base, n_gpu_layers=0)))
    assert not spec.same_backend(backend_spec(replace(base, model_path="/other.gguf")))
    assert not spec.same_backend(None) and not spec.same_backend("local")


def test_a_remote_spec_is_the_server_and_how_it_is_asked() -> None:
    config = EngineConfig(
        backend="openai",
        backend_url="http://gpu:8000",
        backend_model="m",
        backend_api_key_env="KEY",
        backend_timeout_ms=900.0,
        model_size="tiny",  # the local model is not what a remote spec names
    )
    spec = backend_spec(config)
    assert (spec.kind, spec.identity, spec.model, spec.remote_model) == (
        "openai",
        "http://gpu:8000",
        None,
        "m",
    )
    assert (spec.api_key_env, spec.timeout_ms) == ("KEY", 900.0)
    assert spec.label == "openai at http://gpu:8000"
    assert BackendSpec("ollama", "").label == "ollama at its default port"
    assert not spec.same_backend(backend_spec(replace(config, backend_model="n")))
    assert not spec.same_backend(backend_spec(replace(config, backend_timeout_ms=1000.0)))
