"""CMAKE_ARGS for building llama-cpp-python on this machine.

Run as a script before llama.cpp is installed (`python3 engine/setup/build_flags.py`); it needs
nothing but the standard library. Why not ggml's native build: on machines whose CPU advertises
AMX but whose sandbox does not grant it, the native build compiles AMX kernels and the first
decode dies in `ldtilecfg`. So: GGML_NATIVE=OFF and each instruction set the CPU really has,
AMX never.

The CUDA backend is added with GHOSTFIM_CUDA=1 (or, with GHOSTFIM_CUDA unset, when nvidia-smi
sees a GPU and nvcc is there). A CUDA build needs no GPU, only a toolkit: it compiles here and
runs on the CPU until a GPU is visible. What this script settles for such a build:
  - the architecture: GHOSTFIM_CUDA_ARCH (86 Ampere, 89 Ada, 90 Hopper, 120 Blackwell, or
    `native`); unset, `native` where a GPU is visible (CMake asks it) and 90 where none is
    (`native` cannot be resolved without a GPU);
  - the toolkit: CUDA_HOME / CUDA_PATH, else /usr/local/cuda, else where nvcc is (nvcc on PATH
    may be a wrapper script, so CMake is told the real compiler);
  - cuBLAS: the toolkit's own, else pip's `nvidia-cublas` wheel in this Python's site-packages
    (`--cublas-requirement` prints the package to install first). Those wheels ship only
    `libcublas.so.N` (no unversioned name CMake could find), so the library files are named;
  - the VMM memory pool links libcuda.so; toolkits without the driver stub (pip-assembled ones)
    cannot link it, and a build linked to libcuda cannot even be imported where no driver is
    installed, so such builds use ggml's legacy pool (GGML_CUDA_NO_VMM).

    python3 engine/setup/build_flags.py                      # CMAKE_ARGS
    python3 engine/setup/build_flags.py --cublas-requirement # e.g. nvidia-cublas~=13.0.0
    python3 engine/setup/build_flags.py --wheel-dir          # where make setup keeps the wheel
    GHOSTFIM_CPU_FEATURES="avx avx2 fma f16c" ...            # for another machine's CPU
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

LLAMA_CPP_PYTHON_VERSION = "0.3.36"

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

# Without a visible GPU `native` has nothing to ask; Hopper is what this project benchmarks on.
DEFAULT_ARCH_WITHOUT_GPU = "90"

WHEEL_CACHE = Path.home() / ".cache" / "ghostfim" / "wheels"
DEFAULT_TOOLKIT = Path("/usr/local/cuda")
# Where a driver package's libcuda.so (unversioned: what CMake links) may be, besides the toolkit.
SYSTEM_LIB_DIRS = (Path("/usr/lib/x86_64-linux-gnu"), Path("/usr/lib64"), Path("/usr/lib"))


def which(name: str, path: str | None = None) -> str | None:
    """`shutil.which` over the absolute entries of PATH only (a relative entry names a folder
    of the working directory, which may be a workspace ghostfim does not trust). This module
    runs before ghostfim is installed, so it cannot use engine/setup/child.py's twin."""
    search = os.environ.get("PATH", os.defpath) if path is None else path
    absolute = [d for d in search.split(os.pathsep) if d and os.path.isabs(d)]
    return shutil.which(name, path=os.pathsep.join(absolute))


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def has_nvidia_gpu() -> bool:
    exe = which("nvidia-smi")
    if not exe:
        return False
    try:
        return (
            subprocess.run([exe, "-L"], capture_output=True, timeout=5, check=False).returncode == 0
        )
    except (OSError, subprocess.SubprocessError):
        return False


@dataclass(frozen=True)
class CudaToolkit:
    root: Path
    version: tuple[int, int]  # (major, minor) of nvcc

    @property
    def nvcc(self) -> Path:
        return self.root / "bin" / "nvcc"

    def lib_dirs(self) -> list[Path]:
        dirs = [self.root / "lib64", self.root / "lib"]
        dirs += sorted((self.root / "targets").glob("*/lib"))
        return [d for d in dirs if d.is_dir()]


def _nvcc_version(nvcc: Path) -> tuple[int, int] | None:
    try:
        out = subprocess.run(
            [str(nvcc), "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"release (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _toolkit_roots(env: Mapping[str, str]) -> Iterable[Path]:
    for var in ("CUDA_HOME", "CUDA_PATH", "CUDAToolkit_ROOT"):
        if env.get(var):
            yield Path(env[var])
    yield DEFAULT_TOOLKIT
    nvcc = which("nvcc", path=env.get("PATH"))
    if nvcc:
        yield Path(os.path.realpath(nvcc)).parent.parent
        # A wrapper script (`exec /opt/cuda-X/bin/nvcc "$@"`) hides the real root.
        try:
            text = Path(nvcc).read_text(errors="replace")[:4096]
        except OSError:
            text = ""
        for found in re.findall(r"(/\S+)/bin/nvcc\b", text):
            yield Path(found)


def find_cuda_toolkit(env: Mapping[str, str] | None = None) -> CudaToolkit | None:
    """The first folder with bin/nvcc and include/cuda_runtime.h, with nvcc's version."""
    env = os.environ if env is None else env
    for root in _toolkit_roots(env):
        root = Path(os.path.realpath(root))
        nvcc = root / "bin" / "nvcc"
        if nvcc.is_file() and (root / "include" / "cuda_runtime.h").is_file():
            version = _nvcc_version(nvcc)
            if version:
                return CudaToolkit(root, version)
    return None


def toolkit_has_cublas(toolkit: CudaToolkit) -> bool:
    return any((d / "libcublas.so").exists() for d in toolkit.lib_dirs()) and (
        (toolkit.root / "include" / "cublas_v2.h").is_file()
    )


def toolkit_has_driver_stub(toolkit: CudaToolkit) -> bool:
    """Whether CMake's CUDA::cuda_driver (libcuda.so, unversioned) can be found to link."""
    dirs = [*toolkit.lib_dirs(), *(d / "stubs" for d in toolkit.lib_dirs())]
    dirs += SYSTEM_LIB_DIRS
    return any((d / "libcuda.so").exists() for d in dirs)


def cublas_requirement(version: tuple[int, int]) -> str:
    """pip's cuBLAS for this nvcc: the same major and minor release as the compiler."""
    major, minor = version
    name = "nvidia-cublas" if major >= 13 else f"nvidia-cublas-cu{major}"
    return f"{name}~={major}.{minor}.0"


@dataclass(frozen=True)
class PipCublas:
    include: Path
    lib: Path
    major: int

    @property
    def libcublas(self) -> Path:
        return self.lib / f"libcublas.so.{self.major}"

    @property
    def libcublaslt(self) -> Path:
        return self.lib / f"libcublasLt.so.{self.major}"


def site_dirs() -> list[Path]:
    """This interpreter's site-packages (run with the venv's python to find its wheels)."""
    seen: list[Path] = []
    for key in ("purelib", "platlib"):
        p = Path(sysconfig.get_paths()[key])
        if p not in seen:
            seen.append(p)
    return seen


def find_pip_cublas(major: int, sites: Iterable[Path]) -> PipCublas | None:
    # nvidia-cublas (CUDA 13+) installs nvidia/cu13/{include,lib}; nvidia-cublas-cu12 installs
    # nvidia/cublas/{include,lib}.
    layouts = (f"nvidia/cu{major}", "nvidia/cublas")
    for site in sites:
        for layout in layouts:
            base = site / layout
            found = PipCublas(base / "include", base / "lib", major)
            if (found.include / "cublas_v2.h").is_file() and found.libcublas.exists():
                return found
    return None


@dataclass(frozen=True)
class CudaBuild:
    """Everything a CUDA build of llama.cpp needs to be told."""

    arch: str
    toolkit: CudaToolkit | None  # None: leave it to CMake (nvcc on PATH)
    cublas: PipCublas | None  # None: the toolkit's own cuBLAS
    vmm: bool

    def cmake_args(self) -> list[str]:
        args = ["-DGGML_CUDA=on", f"-DCMAKE_CUDA_ARCHITECTURES={self.arch}"]
        if self.toolkit:
            args += [
                f"-DCUDAToolkit_ROOT={self.toolkit.root}",
                f"-DCMAKE_CUDA_COMPILER={self.toolkit.nvcc}",
            ]
        if self.cublas:
            args += [
                f"-DCUDA_cublas_LIBRARY={self.cublas.libcublas}",
                f"-DCUDA_cublasLt_LIBRARY={self.cublas.libcublaslt}",
                # ggml-cuda's sources include cublas_v2.h; only nvcc compiles them.
                f"-DCMAKE_CUDA_FLAGS=-I{self.cublas.include}",
            ]
        if not self.vmm:
            args.append("-DGGML_CUDA_NO_VMM=ON")
        # The multimodal library (mtmd) is not used by ghostfim; skipping it saves build time.
        args.append("-DLLAVA_BUILD=OFF")
        return args


class CudaBuildError(RuntimeError):
    pass


def detect_cuda_build(
    env: Mapping[str, str] | None = None,
    sites: Iterable[Path] | None = None,
    gpu_visible: bool | None = None,
) -> CudaBuild:
    env = os.environ if env is None else env
    if gpu_visible is None:
        gpu_visible = has_nvidia_gpu()
    arch = env.get("GHOSTFIM_CUDA_ARCH") or ("native" if gpu_visible else DEFAULT_ARCH_WITHOUT_GPU)
    if arch == "native" and not gpu_visible:
        raise CudaBuildError(
            "GHOSTFIM_CUDA_ARCH=native needs a visible GPU; name one, e.g. 86, 89, 90 or 120"
        )
    toolkit = find_cuda_toolkit(env)
    if toolkit is None:
        raise CudaBuildError("no CUDA toolkit (nvcc) found; set CUDA_HOME")
    cublas = None
    if not toolkit_has_cublas(toolkit):
        cublas = find_pip_cublas(toolkit.version[0], site_dirs() if sites is None else sites)
        if cublas is None:
            raise CudaBuildError(
                f"the toolkit in {toolkit.root} has no cuBLAS; install "
                f"`{cublas_requirement(toolkit.version)}` into this Python first"
            )
    return CudaBuild(arch, toolkit, cublas, vmm=toolkit_has_driver_stub(toolkit))


def cmake_args(flags: set[str], *, cuda: CudaBuild | None) -> str:
    args = ["-DGGML_NATIVE=OFF"]
    if "avx" in flags:  # x86: name each instruction set; other CPUs: ggml's portable defaults
        args += [f"-D{opt}={'ON' if flag in flags else 'OFF'}" for flag, opt in X86_FEATURES]
        args.append("-DGGML_AMX_TILE=OFF")
    if cuda:
        args += cuda.cmake_args()
    return " ".join(args)


def missing_cpu_flags(args: str, flags: set[str]) -> list[str]:
    """CPU features that a build made with `args` uses and a CPU with `flags` lacks: a wheel
    built on one machine runs on another only if this is empty (else SIGILL)."""
    on = {a.removeprefix("-D").removesuffix("=ON") for a in args.split() if a.endswith("=ON")}
    return [flag for flag, opt in X86_FEATURES if opt in on and flag not in flags]


def wants_cuda(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    want = env.get("GHOSTFIM_CUDA", "auto")
    if want == "auto":
        return has_nvidia_gpu() and bool(which("nvcc"))
    return want == "1"


def wheel_dir(args: str) -> Path:
    """A folder per distinct build: pip's own wheel cache is keyed by the sdist alone, so it
    would hand a CPU wheel to a CUDA build (and one architecture's wheel to another)."""
    key = hashlib.sha256(f"{LLAMA_CPP_PYTHON_VERSION} {args}".encode()).hexdigest()[:16]
    return WHEEL_CACHE / f"llama-cpp-python-{LLAMA_CPP_PYTHON_VERSION}-{key}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--cublas-requirement", action="store_true")
    what.add_argument("--wheel-dir", action="store_true")
    what.add_argument(
        "--missing-cpu-flags",
        metavar="CMAKE_ARGS",
        help="print the CPU features a build made with CMAKE_ARGS needs and this CPU lacks",
    )
    opts = parser.parse_args(argv)
    if opts.missing_cpu_flags is not None:
        sys.stdout.write(" ".join(missing_cpu_flags(opts.missing_cpu_flags, cpu_flags())) + "\n")
        return 0

    cuda = None
    if wants_cuda():
        if opts.cublas_requirement:
            toolkit = find_cuda_toolkit()
            if toolkit and not toolkit_has_cublas(toolkit):
                sys.stdout.write(cublas_requirement(toolkit.version) + "\n")
            return 0
        try:
            cuda = detect_cuda_build()
        except CudaBuildError as exc:
            sys.stderr.write(f"build_flags.py: {exc}\n")
            return 1
    elif opts.cublas_requirement:
        return 0
    # GHOSTFIM_CPU_FEATURES="avx avx2 fma f16c" builds for another machine's CPU (a wheel to
    # carry to a host whose CPU is not known); unset, this CPU's own features.
    named = os.environ.get("GHOSTFIM_CPU_FEATURES")
    args = cmake_args(set(named.split()) if named else cpu_flags(), cuda=cuda)
    sys.stdout.write(f"{wheel_dir(args) if opts.wheel_dir else args}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
