"""Is there a CUDA GPU, and can this llama.cpp build use it?"""

from __future__ import annotations

import functools
import shutil
import subprocess


@functools.cache
def cuda_gpu_name() -> str | None:
    """The first NVIDIA GPU's name, or None (no driver, no GPU, or nvidia-smi missing)."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    name = (
        out.stdout.strip().splitlines()[0].strip()
        if out.returncode == 0 and out.stdout.strip()
        else ""
    )
    return name or None


def build_supports_gpu() -> bool:
    """Whether the installed llama.cpp was built with a GPU backend."""
    from ghostfim.engine import native  # imported late: the CLI's `models` must not need llama.cpp

    return native.supports_gpu_offload()


def has_usable_cuda_gpu() -> bool:
    return cuda_gpu_name() is not None and build_supports_gpu()
