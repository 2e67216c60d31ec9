"""engine/setup/device.py: is there a CUDA GPU, and can this llama.cpp build use it (the one
predicate both the default preset and the layers offloaded follow)."""

from __future__ import annotations

import subprocess

import pytest

from ghostfim.engine.local import native
from ghostfim.engine.setup import device
from ghostfim.engine.setup.device import cuda_archs


def test_cuda_archs_from_system_info() -> None:
    info = "CUDA : ARCHS = 900 | NO_VMM = 1 | USE_GRAPHS = 1 | CPU : SSE3 = 1 |"
    assert cuda_archs(info) == (90,)
    assert cuda_archs("CUDA : ARCHS = 860,890 | x") == (86, 89)
    assert cuda_archs("CPU : SSE3 = 1 |") == ()


@pytest.mark.parametrize(
    ("gpu", "build", "offload"),
    [
        ("NVIDIA H200", True, True),
        ("NVIDIA H200", False, False),
        (None, True, False),
        (None, False, False),
    ],
)
def test_layers_run_on_a_gpu_only_with_both_a_gpu_and_a_gpu_build(
    monkeypatch: pytest.MonkeyPatch, gpu: str | None, build: bool, offload: bool
) -> None:
    monkeypatch.setattr(device, "cuda_gpu_name", lambda: gpu)
    monkeypatch.setattr(native, "supports_gpu_offload", lambda: build)
    assert device.gpu_offload_available() is offload


def test_no_nvidia_smi_means_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device, "which", lambda _name: None)
    assert device._nvidia_smi_first("name") is None


def test_nvidia_smi_answers_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device, "which", lambda _name: "/usr/bin/nvidia-smi")

    def run(cmd: list[str], **_kw: object) -> subprocess.CompletedProcess[str]:
        field = cmd[1].split("=", 1)[1]
        out = {"name": "NVIDIA H200\nNVIDIA H200\n", "compute_cap": "9.0\n"}[field]
        return subprocess.CompletedProcess(cmd, 0, stdout=out, stderr="")

    monkeypatch.setattr(device.subprocess, "run", run)
    assert device._nvidia_smi_first("name") == "NVIDIA H200"  # the first GPU
    device.cuda_gpu_compute_capability.cache_clear()
    try:
        assert device.cuda_gpu_compute_capability() == 90
    finally:
        device.cuda_gpu_compute_capability.cache_clear()

    def fails(cmd: list[str], **_kw: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(cmd, 9, stdout="", stderr="no driver")

    monkeypatch.setattr(device.subprocess, "run", fails)
    assert device._nvidia_smi_first("name") is None


def test_the_installed_build_is_described() -> None:
    backend = device.cuda_backend()
    assert isinstance(backend.compiled, bool) and backend.devices >= 0
    if not backend.compiled:
        assert backend.devices == 0 and backend.archs == ()
