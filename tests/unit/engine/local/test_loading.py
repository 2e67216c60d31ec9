"""engine/local/loading.py: from a model setting to a resident, calibrated session. Where the
layers run and which preset is the default come from one predicate (engine/setup/device.py
gpu_offload_available), tested here on machines simulated with monkeypatch."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from ghostfim.engine.config import Budgets
from ghostfim.engine.local import loading, native
from ghostfim.engine.local.loading import (
    ALL_LAYERS,
    Placement,
    check_model,
    device_policy,
    load_session,
    open_model_file,
)
from ghostfim.engine.local.speed import FORCED_COST_ENV, PrefillCostModel
from ghostfim.engine.setup import device, fetch
from ghostfim.engine.setup.fetch import ModelNotFoundError
from ghostfim.engine.setup.presets import PRESETS


def test_layers_go_to_the_gpu_only_when_it_can_be_used() -> None:
    assert Placement.choose(-1, offload=False) == Placement(0, False)
    assert Placement.choose(20, offload=False) == Placement(0, False)  # a CPU build: none
    assert Placement.choose(-1, offload=True) == Placement(ALL_LAYERS, True)
    assert Placement.choose(12, offload=True) == Placement(12, True)
    assert Placement.choose(0, offload=True) == Placement(0, False)  # asked for none


def test_the_policy_follows_the_device_and_the_prefill_speed() -> None:
    cpu = device_policy(False, PrefillCostModel())
    assert cpu.n_batch == 256 and cpu.abort_callback
    gpu = device_policy(True, PrefillCostModel())
    assert gpu.n_batch == 128 and not gpu.abort_callback  # CUDA ignores the abort callback
    fast = device_policy(False, PrefillCostModel.pinned("3+0.02"))
    assert fast.n_batch == gpu.n_batch and fast.abort_callback  # a CPU can still abort
    with pytest.raises(ValueError, match=FORCED_COST_ENV):
        PrefillCostModel.pinned("fast")


# --- the one GPU predicate: the default preset and the layers agree -------------------------
class Loaded(Exception):
    """Raised by the stand-in for llama.cpp's load: what it was asked is all a test needs."""


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    """No download, no llama.cpp load: resolve_model finds every preset "in the cache", and
    native.load records what it was asked for and stops."""
    asked: dict[str, Any] = {}

    def fake_obtain(p: Any, *, download: bool, progress: bool) -> Path:
        return tmp_path / p.filename

    def fake_load(path: Path, **kwargs: Any) -> native.NativeModel:
        asked.update(kwargs, path=path)
        raise Loaded

    monkeypatch.setattr(fetch, "_obtain", fake_obtain)
    monkeypatch.setattr(native, "load", fake_load)
    return asked


def nvidia(monkeypatch: pytest.MonkeyPatch, *, build_offloads: bool) -> None:
    """nvidia-smi names a GPU; the llama.cpp build can offload to it or not."""
    for module in (device, loading):  # loading names the device with it
        monkeypatch.setattr(module, "cuda_gpu_name", lambda: "NVIDIA H200")
    monkeypatch.setattr(native, "supports_gpu_offload", lambda: build_offloads)


def test_an_nvidia_machine_with_a_cpu_only_build_gets_the_cpu_default(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    nvidia(monkeypatch, build_offloads=False)
    assert not device.gpu_offload_available()
    with pytest.raises(Loaded):
        load_session(None, progress=False)
    assert machine["path"].name == PRESETS["small"].filename  # not the 1.5B on the CPU
    assert machine["n_gpu_layers"] == 0


def test_an_nvidia_machine_with_a_gpu_build_gets_the_gpu_default_on_every_layer(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    nvidia(monkeypatch, build_offloads=True)
    assert device.gpu_offload_available()
    with pytest.raises(Loaded):
        load_session(None, progress=False)
    assert machine["path"].name == PRESETS["medium"].filename
    assert machine["n_gpu_layers"] == ALL_LAYERS
    assert machine["n_batch"] == 128  # the GPU's policy too


def test_no_gpu_means_the_small_model_on_the_cpu(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in (device, loading):
        monkeypatch.setattr(module, "cuda_gpu_name", lambda: None)
    monkeypatch.setattr(native, "supports_gpu_offload", lambda: True)  # a CUDA build, no GPU
    assert not device.gpu_offload_available()
    with pytest.raises(Loaded):
        load_session(None, n_gpu_layers=20, progress=False)
    assert machine["path"].name == PRESETS["small"].filename and machine["n_gpu_layers"] == 0


# --- a real load of a self-made tiny model ------------------------------------------------------
def test_a_model_file_loads_calibrated_with_its_budgets(tiny_gguf: Path) -> None:
    fractions: list[float] = []
    budgets = Budgets(200, 100, 60.0, 16)
    session = open_model_file(
        tiny_gguf, name="t", n_ctx=3 * 1024, budgets=budgets, on_progress=fractions.append
    )
    try:
        assert fractions and fractions[-1] == 1.0  # the weights' load, as it happened
        info = session.info
        assert (info.name, info.path, info.device, info.n_gpu_layers) == (
            "t",
            str(tiny_gguf),
            "cpu",
            0,
        )
        assert info.n_ctx == 3 * 1024 and info.family == "qwen"
        assert session.budgets.effective == budgets and session.budgets.clamps == ()
        assert session.cost_at_load is not None  # calibrated: the explicit deadline knows it
        assert session.expected_prefill_ms(100) is not None
        assert session.planner.windows.wide_tokens <= 200
    finally:
        session.close()
    assert session.model.closed


def test_an_uncalibrated_session_knows_no_prefill_speed(tiny_gguf: Path) -> None:
    session = open_model_file(tiny_gguf, n_ctx=1024, calibrate=False)
    try:
        assert session.cost_at_load is None and session.expected_prefill_ms(100) is None
        loading.calibrate_prefill(session)
        assert session.cost_at_load is not None and session.slots.length(0) == 0
    finally:
        session.close()


def test_calibration_takes_each_sizes_fastest_decode(
    tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Something else had the CPU during the first timings (the workspace index starting):
    the keystroke windows, sized once from the calibration, must not shrink for it."""
    session = open_model_file(tiny_gguf, n_ctx=1024, calibrate=False)
    try:
        decode = session.model.decode
        calls = [0]

        def busy_at_first(*args: Any, **kwargs: Any) -> Any:
            calls[0] += 1
            if calls[0] <= 3:  # the warm-up decode, then one of each size
                time.sleep(0.3)
            return decode(*args, **kwargs)

        monkeypatch.setattr(session.model, "decode", busy_at_first)
        loading.calibrate_prefill(session)
        assert calls[0] == 1 + 2 * loading.CALIBRATION_REPEATS
        assert session.cost_at_load is not None
        fixed, per_token = session.cost_at_load
        assert fixed < 100 and per_token < 100 / 64  # the slow ones did not count
    finally:
        session.close()


def test_a_failure_after_the_load_frees_the_model(
    tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[native.NativeModel] = []
    real_load = native.load

    def load(path: Path, **kwargs: Any) -> native.NativeModel:
        opened.append(real_load(path, **kwargs))
        return opened[-1]

    def broken(session: object) -> None:
        raise RuntimeError("calibration failed")

    monkeypatch.setattr(native, "load", load)
    monkeypatch.setattr(loading, "calibrate_prefill", broken)
    with pytest.raises(RuntimeError, match="calibration failed"):
        open_model_file(tiny_gguf, n_ctx=1024)
    assert opened and opened[0].closed  # the weights did not stay


def test_load_session_takes_a_path(tiny_gguf: Path) -> None:
    session = load_session(str(tiny_gguf), progress=False)
    try:
        assert session.info.path == str(tiny_gguf.resolve()) and session.info.preset is None
    finally:
        session.close()


def test_a_broken_model_file_is_found_without_loading_it(tmp_path: Path, tiny_gguf: Path) -> None:
    truncated = tmp_path / "cut.gguf"
    truncated.write_bytes(tiny_gguf.read_bytes()[: tiny_gguf.stat().st_size // 3])
    text = tmp_path / "notes.gguf"
    text.write_text("not a model")
    for path in (truncated, text, tmp_path / "missing.gguf", tmp_path):
        with pytest.raises((native.ModelLoadError, ModelNotFoundError)):
            check_model(str(path))
    check_model(str(tiny_gguf))  # a good file passes
    check_model("small")  # presets are not checked (resolving one may download it)
    check_model(None)  # nor is the default
