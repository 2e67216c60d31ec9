"""Shared fixtures: tiny self-made models for mechanics, the real small model for behaviour."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # gguf_factory

from bench.sample import stats_before_cursor
from tests.support.gguf_factory import tiny_model_path

SAMPLE = stats_before_cursor() + "\n"  # the cursor's line: indented, empty


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-weight qwen2 model with Qwen's FIM tokens (mechanics only, no quality)."""
    return tiny_model_path(tmp_path_factory, "qwen")


@pytest.fixture(scope="session")
def small_model_path() -> Path:
    """The real small model (Qwen2.5-Coder 0.5B), fetched into the cache if needed."""
    from ghostfim.engine.setup.models import fetch_model

    return fetch_model("small")


@pytest.fixture(scope="session")
def small_session(small_model_path: Path) -> Iterator[object]:
    from ghostfim.engine.local.session import ModelSession

    session = ModelSession.load(small_model_path, preset="small")
    yield session
    session.close()


@pytest.fixture(scope="session")
def tiny_session(tiny_gguf: Path) -> Iterator[object]:
    from ghostfim.engine.local.session import ModelSession

    session = ModelSession.load(tiny_gguf, n_ctx=1024)
    yield session
    session.close()


@pytest.fixture
def sample_source() -> str:
    return SAMPLE
