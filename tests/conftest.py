"""Shared fixtures: tiny self-made models for mechanics, the real small model for behaviour.

The tests are packages (tests/unit mirrors the code, tests/integration drives the server
process and the real models); their shared helpers are in tests/support.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from harness.gguf_factory import tiny_model_path
from tests.support.editor import SAMPLE

if TYPE_CHECKING:
    from ghostfim.engine.local.session import ModelSession


@pytest.fixture(autouse=True)
def private_state_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """The acceptance statistics (engine/service/localstats.py) of a test go to a directory of
    its own, never the user's: the adaptive filter must not learn from them, and they must not
    start from the user's. Servers started by a test inherit it."""
    state = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("GHOSTFIM_STATE_DIR", str(state))
    return state


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-weight qwen2 model with Qwen's FIM tokens (mechanics only, no quality)."""
    return tiny_model_path(tmp_path_factory, "qwen")


@pytest.fixture(scope="session")
def small_model_path() -> Path:
    """The real small model (Qwen2.5-Coder 0.5B), fetched into the cache if needed."""
    from ghostfim.engine.setup.fetch import fetch_model

    return fetch_model("small")


@pytest.fixture(scope="session")
def small_session(small_model_path: Path) -> Iterator[ModelSession]:
    from ghostfim.engine.local.loading import open_model_file

    session = open_model_file(small_model_path, preset="small")
    yield session
    session.close()


@pytest.fixture(scope="session")
def tiny_session(tiny_gguf: Path) -> Iterator[ModelSession]:
    from ghostfim.engine.local.loading import open_model_file

    session = open_model_file(tiny_gguf, n_ctx=1024)
    yield session
    session.close()


@pytest.fixture
def sample_source() -> str:
    return SAMPLE
