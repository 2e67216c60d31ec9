"""CMAKE_ARGS for building llama-cpp-python on this machine.

Run as a script before llama.cpp is installed (`python3 engine/build_flags.py`); it needs nothing
but the standard library. Why not ggml's native build: on machines whose CPU advertises AMX but
whose sandbox does not grant it, the native build compiles AMX kernels and the first decode dies
in `ldtilecfg`. So: GGML_NATIVE=OFF and each instruction set the CPU really has, AMX never.
With a visible NVIDIA GPU and nvcc, the CUDA backend is added (all layers then run on the GPU).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

# (cpu flag in /proc/cpuinfo, cmake option)
X86_FEATURES = (
    ("avx", "GGML_AVX"),
    ("avx2", "GGML_AVX2"),
    ("fma", "GGML_FMA"),
    ("f16c", "GGML_F16C"),
    ("avx512f", "GGML_AVX512"),
    ("avx512_vnni", "GGML_AVX512_VNNI"),
    ("avx512_bf16", "GGML_AVX512_BF16"),
)


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def has_nvidia_gpu() -> bool:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return False
    try:
        return (
            subprocess.run([exe, "-L"], capture_output=True, timeout=5, check=False).returncode == 0
        )
    except (OSError, subprocess.SubprocessError):
        return False


def cmake_args(flags: set[str], *, cuda: bool) -> str:
    args = ["-DGGML_NATIVE=OFF"]
    if "avx" in flags:  # x86: name each instruction set; other CPUs: ggml's portable defaults
        args += [f"-D{opt}={'ON' if flag in flags else 'OFF'}" for flag, opt in X86_FEATURES]
        args.append("-DGGML_AMX_TILE=OFF")
    if cuda:
        args += ["-DGGML_CUDA=on", "-DCMAKE_CUDA_ARCHITECTURES=native"]
    return " ".join(args)


def main() -> int:
    want_cuda = os.environ.get("GHOSTFIM_CUDA", "auto")
    cuda = (want_cuda == "1") or (
        want_cuda == "auto" and has_nvidia_gpu() and bool(shutil.which("nvcc"))
    )
    sys.stdout.write(cmake_args(cpu_flags(), cuda=cuda) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
