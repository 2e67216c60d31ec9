"""engine/setup/doctor.py: the GPU line from the probes' answers (the whole doctor, which
decodes a token in a child process, is tests/integration/test_cuda_build.py's)."""

from __future__ import annotations

from ghostfim.engine.setup import doctor
from ghostfim.engine.setup.device import CudaBackend


def test_doctor_cuda_build_without_gpu_says_it_runs_on_the_cpu() -> None:
    good, text = doctor.gpu_verdict(None, None, CudaBackend(True, 0, (90,)))
    assert good
    assert "has CUDA (sm_90)" in text
    assert "no GPU" in text and "runs on the CPU" in text


def test_doctor_other_gpu_cases() -> None:
    ok, text = doctor.gpu_verdict(None, None, CudaBackend(False, 0))
    assert ok and "CPU-only build" in text
    ok, text = doctor.gpu_verdict("NVIDIA H200", 90, CudaBackend(False, 0))
    assert not ok and "no GPU backend" in text and "GHOSTFIM_CUDA=1 make setup" in text
    ok, text = doctor.gpu_verdict("NVIDIA H200", 90, CudaBackend(True, 1, (90,)))
    assert ok and "all layers offloaded" in text
    ok, text = doctor.gpu_verdict("NVIDIA RTX A6000", 86, CudaBackend(True, 1, (90,)))
    assert not ok and "GHOSTFIM_CUDA_ARCH=86" in text
    ok, text = doctor.gpu_verdict("NVIDIA H200", 90, CudaBackend(True, 0, (90,)))
    assert not ok and "CUDA found no device" in text
