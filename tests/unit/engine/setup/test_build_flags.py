"""engine/setup/build_flags.py: the CMake flags for llama-cpp-python's build, CUDA among
them, against fake toolkits and fake pip cuBLAS wheels (no GPU, no nvcc needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ghostfim.engine.setup import build_flags
from ghostfim.engine.setup.build_flags import CudaBuildError, cmake_args, detect_cuda_build

CPU = {"avx", "avx2", "fma", "f16c"}


# --- fakes ---------------------------------------------------------------------------------------
def fake_toolkit(root: Path, *, release: str = "13.0", cublas: bool = False, stub: bool = False):
    (root / "bin").mkdir(parents=True)
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.88'\n")
    nvcc.chmod(0o755)
    (root / "include").mkdir()
    (root / "include" / "cuda_runtime.h").write_text("")
    (root / "lib").mkdir()
    (root / "lib" / "libcudart.so").write_text("")
    if cublas:
        (root / "include" / "cublas_v2.h").write_text("")
        (root / "lib" / "libcublas.so").write_text("")
    if stub:
        (root / "lib" / "stubs").mkdir()
        (root / "lib" / "stubs" / "libcuda.so").write_text("")
    return root


def fake_pip_cublas(site: Path, major: int = 13) -> Path:
    base = site / "nvidia" / f"cu{major}"
    (base / "include").mkdir(parents=True)
    (base / "include" / "cublas_v2.h").write_text("")
    (base / "lib").mkdir()
    for lib in (f"libcublas.so.{major}", f"libcublasLt.so.{major}"):
        (base / "lib" / lib).write_text("")
    return base


@pytest.fixture(autouse=True)
def no_system_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    # The fakes decide whether libcuda.so can be linked, not this machine's /usr/lib.
    monkeypatch.setattr(build_flags, "SYSTEM_LIB_DIRS", ())


def env_for(root: Path, **extra: str) -> dict[str, str]:
    return {"CUDA_HOME": str(root), "PATH": "/nonexistent", **extra}


# --- build flags ---------------------------------------------------------------------------------
def test_cuda_flags_with_pip_cublas_and_no_gpu(tmp_path: Path) -> None:
    root = fake_toolkit(tmp_path / "cuda")
    base = fake_pip_cublas(tmp_path / "site")
    build = detect_cuda_build(env_for(root), sites=[tmp_path / "site"], gpu_visible=False)
    args = cmake_args(CPU, cuda=build).split()
    assert "-DGGML_CUDA=on" in args
    assert "-DCMAKE_CUDA_ARCHITECTURES=90" in args  # no GPU to ask: Hopper
    assert f"-DCUDAToolkit_ROOT={root.resolve()}" in args
    assert f"-DCMAKE_CUDA_COMPILER={root.resolve()}/bin/nvcc" in args
    assert f"-DCUDA_cublas_LIBRARY={base}/lib/libcublas.so.13" in args
    assert f"-DCUDA_cublasLt_LIBRARY={base}/lib/libcublasLt.so.13" in args
    assert f"-DCMAKE_CUDA_FLAGS=-I{base}/include" in args
    assert "-DGGML_CUDA_NO_VMM=ON" in args  # no libcuda.so to link
    assert args[0] == "-DGGML_NATIVE=OFF" and "-DGGML_AMX_TILE=OFF" in args


@pytest.mark.parametrize("arch", ["86", "89", "90", "120"])
def test_architecture_is_chosen_by_env(tmp_path: Path, arch: str) -> None:
    root = fake_toolkit(tmp_path / "cuda", cublas=True)
    build = detect_cuda_build(env_for(root, GHOSTFIM_CUDA_ARCH=arch), sites=[], gpu_visible=False)
    assert f"-DCMAKE_CUDA_ARCHITECTURES={arch}" in build.cmake_args()


def test_native_needs_a_gpu_and_is_the_default_with_one(tmp_path: Path) -> None:
    root = fake_toolkit(tmp_path / "cuda", cublas=True)
    with pytest.raises(CudaBuildError, match="native needs a visible GPU"):
        detect_cuda_build(env_for(root, GHOSTFIM_CUDA_ARCH="native"), sites=[], gpu_visible=False)
    build = detect_cuda_build(env_for(root), sites=[], gpu_visible=True)
    assert build.arch == "native"


def test_toolkit_cublas_and_driver_stub_need_no_extra_flags(tmp_path: Path) -> None:
    root = fake_toolkit(tmp_path / "cuda", cublas=True, stub=True)
    args = detect_cuda_build(env_for(root), sites=[], gpu_visible=False).cmake_args()
    assert not [a for a in args if a.startswith(("-DCUDA_cublas", "-DCMAKE_CUDA_FLAGS"))]
    assert "-DGGML_CUDA_NO_VMM=ON" not in args  # VMM pool: libcuda.so links


def test_missing_cublas_names_the_pip_package(tmp_path: Path) -> None:
    root = fake_toolkit(tmp_path / "cuda")
    with pytest.raises(CudaBuildError, match=r"nvidia-cublas~=13\.0\.0"):
        detect_cuda_build(env_for(root), sites=[tmp_path], gpu_visible=False)


def test_nvcc_wrapper_script_leads_to_the_real_toolkit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # /usr/local/bin/nvcc here is `exec /usr/local/cuda-13.0/bin/nvcc "$@"`.
    root = fake_toolkit(tmp_path / "cuda-13.0", cublas=True)
    (tmp_path / "bin").mkdir()
    wrapper = tmp_path / "bin" / "nvcc"
    wrapper.write_text(f'#!/bin/sh\nexec {root}/bin/nvcc "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setattr(build_flags, "DEFAULT_TOOLKIT", tmp_path / "no-such-cuda")
    found = build_flags.find_cuda_toolkit({"PATH": str(tmp_path / "bin")})
    assert found is not None and found.root == root.resolve() and found.version == (13, 0)


def test_cublas_requirement_follows_nvcc() -> None:
    assert build_flags.cublas_requirement((13, 0)) == "nvidia-cublas~=13.0.0"
    assert build_flags.cublas_requirement((12, 4)) == "nvidia-cublas-cu12~=12.4.0"


def test_wheel_dir_differs_per_build() -> None:
    cpu = cmake_args(CPU, cuda=None)
    cuda90 = cpu + " -DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90"
    cuda86 = cpu + " -DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=86"
    dirs = {build_flags.wheel_dir(a) for a in (cpu, cuda90, cuda86)}
    assert len(dirs) == 3
    assert build_flags.wheel_dir(cuda90) == build_flags.wheel_dir(cuda90)


def test_missing_cpu_flags_of_a_carried_wheel() -> None:
    args = cmake_args({"avx", "avx2", "fma", "f16c", "avx512f", "avx512_vnni"}, cuda=None)
    assert build_flags.missing_cpu_flags(args, CPU) == ["avx512f", "avx512_vnni"]
    assert build_flags.missing_cpu_flags(args, CPU | {"avx512f", "avx512_vnni"}) == []


def test_script_prints_cuda_flags_and_requirement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = fake_toolkit(tmp_path / "cuda")
    monkeypatch.setenv("CUDA_HOME", str(root))
    monkeypatch.setenv("GHOSTFIM_CUDA", "1")
    monkeypatch.delenv("GHOSTFIM_CUDA_ARCH", raising=False)
    monkeypatch.setattr(build_flags, "has_nvidia_gpu", lambda: False)
    monkeypatch.setattr(build_flags, "site_dirs", lambda: [tmp_path / "site"])
    assert build_flags.main(["--cublas-requirement"]) == 0
    assert capsys.readouterr().out == "nvidia-cublas~=13.0.0\n"
    assert build_flags.main([]) == 1  # not installed yet: says what to install
    assert "nvidia-cublas~=13.0.0" in capsys.readouterr().err
    fake_pip_cublas(tmp_path / "site")
    assert build_flags.main([]) == 0
    out = capsys.readouterr().out
    assert "-DGGML_CUDA=on" in out and "-DCMAKE_CUDA_ARCHITECTURES=90" in out
    monkeypatch.setenv("GHOSTFIM_CUDA", "0")
    assert build_flags.main([]) == 0
    assert "CUDA" not in capsys.readouterr().out
