"""cli/complete.py: `ghostfim complete` drives a CompletionService as the server does. Here
the service opens fake backends (tests/support/fakes.py): each step's row says where its
answer came from, and typed-through steps are cache rows with no model work."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from ghostfim.cli import complete as complete_module
from ghostfim.cli.complete import config_of, read_source, run_complete, split_at
from ghostfim.cli.errors import UserError
from ghostfim.engine.service.completion import CompletionService
from tests.support.fakes import FakeBackend, FakeOpener


def args(location: str, model: str = "fake", **changes: Any) -> argparse.Namespace:
    values: dict[str, Any] = dict(
        location=location,
        model=model,
        json=True,
        type_text=None,
        pace_ms=0.0,
        max_tokens=64,
        multiline="auto",
        postprocess=True,
        n_gpu_layers=-1,
        prefix_tokens=768,
        suffix_tokens=256,
        keystroke_prefill_ms=80.0,
    )
    values.update(changes)
    return argparse.Namespace(**values)


@pytest.fixture
def fake_models(monkeypatch: pytest.MonkeyPatch) -> FakeBackend:
    """The service `ghostfim complete` makes opens `--model fake` as a scripted backend."""
    backend = FakeBackend(script=lambda r: "return value")
    opener = FakeOpener({"fake": lambda: backend})

    def service(sink: Any) -> CompletionService:
        return CompletionService(sink, opener=opener)

    monkeypatch.setattr(complete_module, "CompletionService", service)
    return backend


def rows(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_positions_are_one_based_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "a.py"
    text = "x = 1\ny = 2\n"
    assert split_at(text, 1, 1, path) == 0 and split_at(text, 2, 6, path) == len("x = 1\ny = 2")
    for line, col in ((9, 1), (0, 1), (1, 99), (1, 0)):
        with pytest.raises(UserError):
            split_at(text, line, col, path)


def test_sources_are_text_files(tmp_path: Path) -> None:
    text = tmp_path / "a.py"
    text.write_bytes(b"x = 1\r\ny = \xff\n")
    assert read_source(text) == "x = 1\ny = \ufffd\n"
    binary = tmp_path / "b.bin"
    binary.write_bytes(b"\x00\x01")
    with pytest.raises(UserError, match="binary"):
        read_source(binary)
    with pytest.raises(UserError, match="no such file"):
        read_source(tmp_path / "none.py")


def test_the_model_option_is_a_preset_or_a_path() -> None:
    preset = config_of(args("a:1:1", model="Tiny"))
    assert (preset.model_size, preset.model_path) == ("tiny", None)
    path = config_of(args("a:1:1", model="/m/x.gguf", max_tokens=9))
    assert (path.model_size, path.model_path, path.max_tokens) == (None, "/m/x.gguf", 9)
    default = config_of(args("a:1:1", model=None))
    assert default.model_spec is None and default.acceptance_stats is False


def test_typed_through_steps_are_cache_rows_with_no_model_work(
    fake_models: FakeBackend, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "a.py"
    src.write_text("def f(x):\n    \n")
    assert run_complete(args(f"{src}:2:5", type_text="retX")) == 0
    out = rows(capsys)
    assert [r["step"] for r in out] == [0, 1, 2, 3, 4]
    assert [r["typed"] for r in out] == ["", "r", "re", "ret", "retX"]
    first = out[0]
    assert first["source"] == "model" and first["completion"] == "return value"
    assert first["model"]["name"] == "fake" and first["timings"]["decode_tokens"] > 0
    for row, left in zip(out[1:4], ("eturn value", "turn value", "urn value"), strict=True):
        assert row["source"] == "cache" and row["completion"] == left, row
        assert row["timings"]["decode_tokens"] == 0 and row["timings"]["prefill_new_tokens"] == 0
    assert out[4]["source"] == "model"  # "retX" is not what it said: the model again
    asked = [r for r in fake_models.requests if not r.background]
    assert len(asked) == 2  # step 0 and step 4 only


def test_a_model_that_cannot_load_is_one_user_error(
    fake_models: FakeBackend, tmp_path: Path
) -> None:
    src = tmp_path / "a.py"
    src.write_text("x = 1\n")
    with pytest.raises(UserError, match="no such model"):
        run_complete(args(f"{src}:1:5", model="missing"))
