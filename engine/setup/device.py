"""Is there a CUDA GPU, and can this llama.cpp build use it?"""

from __future__ import annotations

import functools
import re
import subprocess
from dataclasses import dataclass

from ghostfim.engine.setup.child import which


def _nvidia_smi_first(field: str) -> str | None:
    """One `--query-gpu` field of the first NVIDIA GPU, or None (no driver, no GPU, or
    nvidia-smi missing)."""
    exe = which("nvidia-smi")  # absolute PATH entries only: not the workspace's
    if not exe:
        return None
    try:
        out = subprocess.run(
            [exe, f"--query-gpu={field}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.strip().splitlines() if out.returncode == 0 else []
    return (lines[0].strip() or None) if lines else None


@functools.cache
def cuda_gpu_name() -> str | None:
    """The first NVIDIA GPU's name, or None."""
    return _nvidia_smi_first("name")


def build_supports_gpu() -> bool:
    """Whether the installed llama.cpp was built with a GPU backend."""
    from ghostfim.engine.local import (
        native,  # imported late: the CLI's `models` must not need llama.cpp
    )

    return native.supports_gpu_offload()


def gpu_offload_available() -> bool:
    """The one predicate for "the model's layers run on a GPU": an NVIDIA GPU is visible and
    this llama.cpp build can use it. The default preset (engine/local/loading.py) and the
    layers offloaded are both decided by it, so they cannot disagree: an NVIDIA machine with
    a CPU-only build gets the CPU's default model, on the CPU."""
    return cuda_gpu_name() is not None and build_supports_gpu()


@dataclass(frozen=True)
class CudaBackend:
    """What ggml's backend registry says about CUDA in the installed llama.cpp build."""

    compiled: bool  # the CUDA backend is in this build
    devices: int  # CUDA devices it found (0 without a GPU or driver)
    archs: tuple[int, ...] = ()  # compute capabilities it has kernels for, e.g. (90,)


def cuda_backend() -> CudaBackend:
    """Ask ggml's registry directly: `llama_supports_gpu_offload()` is false for a CUDA build
    on a machine with no GPU (it counts devices, not backends), so it cannot tell a CUDA build
    that found no GPU from a CPU-only build."""
    import ctypes

    import llama_cpp
    from llama_cpp import _ggml

    from ghostfim.engine.local import native  # late, as above

    native.init_backend()
    lib = _ggml.libggml
    lib.ggml_backend_reg_by_name.argtypes = [ctypes.c_char_p]
    lib.ggml_backend_reg_by_name.restype = ctypes.c_void_p
    lib.ggml_backend_reg_dev_count.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_reg_dev_count.restype = ctypes.c_size_t
    reg = lib.ggml_backend_reg_by_name(b"CUDA")
    if not reg:
        return CudaBackend(compiled=False, devices=0)
    return CudaBackend(
        compiled=True,
        devices=int(lib.ggml_backend_reg_dev_count(reg)),
        archs=cuda_archs(llama_cpp.llama_print_system_info().decode(errors="replace")),
    )


def cuda_archs(system_info: str) -> tuple[int, ...]:
    """`CUDA : ARCHS = 900 | ...` in llama_print_system_info() -> (90,)."""
    m = re.search(r"CUDA : ARCHS = ([0-9,]+)", system_info)
    return tuple(int(a) // 10 for a in m.group(1).split(",") if a) if m else ()


@functools.cache
def cuda_gpu_compute_capability() -> int | None:
    """The first NVIDIA GPU's compute capability as CMake writes it (8.6 -> 86), or None."""
    m = re.match(r"(\d+)\.(\d+)", _nvidia_smi_first("compute_cap") or "")
    return int(m.group(1)) * 10 + int(m.group(2)) if m else None
