"""engine/service/opening.py: how a spec becomes a backend (the real opener)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ghostfim.engine.config import EngineConfig, backend_spec
from ghostfim.engine.remote.servers import OpenAIBackend
from ghostfim.engine.service.opening import BackendOpener
from ghostfim.engine.setup.fetch import ModelNotFoundError
from tests.support.fake_http import FakeServer


def test_a_local_spec_is_checked_without_loading(tmp_path: Path) -> None:
    opener = BackendOpener()
    missing = backend_spec(EngineConfig(model_path=str(tmp_path / "none.gguf")))
    with pytest.raises(ModelNotFoundError, match=r"none\.gguf"):
        opener.check(missing)
    opener.check(backend_spec(EngineConfig(model_size="small")))  # a preset: not checked
    opener.check(backend_spec(EngineConfig(backend="openai", backend_url="http://x:1")))


def test_a_missing_local_model_fails_to_open(tmp_path: Path) -> None:
    spec = backend_spec(EngineConfig(model_path=str(tmp_path / "none.gguf")))
    with pytest.raises(ModelNotFoundError):
        BackendOpener().open(spec, lambda _fraction: None)


def test_a_remote_spec_opens_its_server_with_the_budgets() -> None:
    with FakeServer("openai") as server:
        config = EngineConfig(backend="openai", backend_url=server.url, prefix_tokens=300)
        backend = BackendOpener().open(backend_spec(config), lambda _fraction: None)
        try:
            assert isinstance(backend, OpenAIBackend)
            assert backend.builder.prefix_budget == 300
            assert backend.info.device == f"remote ({server.url})"
        finally:
            backend.close()
