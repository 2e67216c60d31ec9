"""The CUDA build of llama-cpp-python, as far as a machine without a GPU can prove it.

Build flags (engine/build_flags.py) against fake toolkits and fake pip cuBLAS wheels; the
doctor's GPU line from the probes; and, where `GHOSTFIM_CUDA=1 make setup
VENV=~/.cache/ghostfim/venv-cuda` has built a real CUDA llama.cpp, that build with this
checkout's code: CUDA compiled in, no device, the doctor says so, and completion and the server
work on the CPU. Those real tests are skipped only when that venv is absent.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ghostfim.engine.setup import build_flags, doctor
from ghostfim.engine.setup.build_flags import CudaBuildError, cmake_args, detect_cuda_build
from ghostfim.engine.setup.device import CudaBackend, cuda_archs

REPO = Path(__file__).resolve().parent.parent
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


# --- the doctor's GPU line -----------------------------------------------------------------------
def test_cuda_archs_from_system_info() -> None:
    info = "CUDA : ARCHS = 900 | NO_VMM = 1 | USE_GRAPHS = 1 | CPU : SSE3 = 1 |"
    assert cuda_archs(info) == (90,)
    assert cuda_archs("CUDA : ARCHS = 860,890 | x") == (86, 89)
    assert cuda_archs("CPU : SSE3 = 1 |") == ()


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


@pytest.mark.model
def test_run_doctor_with_cuda_build_probe_and_no_gpu(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole doctor with the probes answering as a CUDA build on a GPU-less machine."""
    monkeypatch.setattr(doctor, "cuda_backend", lambda: CudaBackend(True, 0, (90,)))
    monkeypatch.setattr(doctor, "cuda_gpu_name", lambda: None)
    monkeypatch.setattr(doctor, "cuda_gpu_compute_capability", lambda: None)
    rc = doctor.run_doctor()
    out = capsys.readouterr().out
    gpu_line = next(line for line in out.splitlines() if "] GPU:" in line)
    assert gpu_line.startswith("[ok]") and "has CUDA (sm_90)" in gpu_line
    assert "runs on the CPU" in gpu_line
    assert rc == 0, out


# --- the real CUDA build (GHOSTFIM_CUDA=1 make setup VENV=...) ---------------------------------
def cuda_venv_llama() -> Path | None:
    venv = Path(
        os.environ.get("GHOSTFIM_CUDA_VENV") or Path.home() / ".cache/ghostfim/venv-cuda"
    ).expanduser()
    found = sorted(venv.glob("lib/python*/site-packages/llama_cpp/__init__.py"))
    return found[0].parent if found else None


@pytest.fixture(scope="module")
def cuda_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """This checkout's ghostfim with the CUDA venv's llama_cpp in front of .venv's."""
    llama = cuda_venv_llama()
    if llama is None:
        pytest.skip("no CUDA venv (GHOSTFIM_CUDA=1 make setup VENV=~/.cache/ghostfim/venv-cuda)")
    front = tmp_path_factory.mktemp("cuda-llama")
    (front / "llama_cpp").symlink_to(llama)
    return {**os.environ, "PYTHONPATH": str(front), "GHOSTFIM_OFFLINE": "1"}


def run_py(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.model
def test_real_cuda_build_has_cuda_and_no_device(cuda_env: dict[str, str]) -> None:
    proc = run_py(
        cuda_env,
        "-c",
        "import llama_cpp; from ghostfim.engine.local import native;"
        "from ghostfim.engine.setup import device;"
        "b = device.cuda_backend(); print(llama_cpp.__file__);"
        "print(b.compiled, b.devices, b.archs, native.supports_gpu_offload())",
    )
    assert proc.returncode == 0, proc.stderr
    where, probe = proc.stdout.strip().splitlines()[-2:]
    assert "cuda-llama" in where
    # Compiled in with Hopper kernels; without a GPU llama.cpp reports no offload device.
    assert probe == "True 0 (90,) False", probe


@pytest.mark.model
@pytest.mark.slow
def test_real_cuda_build_doctor_and_complete_on_the_cpu(cuda_env: dict[str, str]) -> None:
    proc = run_py(cuda_env, "-m", "ghostfim.cli.main", "doctor")
    gpu_line = next(line for line in proc.stdout.splitlines() if "] GPU:" in line)
    assert gpu_line.startswith("[ok]") and "has CUDA (sm_90)" in gpu_line, proc.stdout
    assert "runs on the CPU" in gpu_line
    decode = next(line for line in proc.stdout.splitlines() if "decode check" in line)
    assert decode.startswith("[ok]") and " on cpu " in decode, proc.stdout
    assert proc.returncode == 0, proc.stdout + proc.stderr

    proc = run_py(
        cuda_env, "-m", "ghostfim.cli.main", "complete", "docs/examples/stats.py:19:5",
        "--model", "tiny", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip(), "no completion printed"


@pytest.mark.model
@pytest.mark.slow
def test_real_cuda_build_serves_on_the_cpu(cuda_env: dict[str, str]) -> None:
    from tests.support.lspclient import LspProcess

    async def session() -> tuple[dict, object]:
        client = await LspProcess.start(
            [sys.executable, "-m", "ghostfim.cli.main", "serve"],
            env={k: cuda_env[k] for k in ("PYTHONPATH", "GHOSTFIM_OFFLINE")},
        )
        try:
            await client.initialize({"model": {"size": "tiny"}})
            status = await client.wait_ready(timeout=120)
            uri = "file:///cuda/stats.py"
            text = (REPO / "docs/examples/stats.py").read_text()
            await client.notify(
                "textDocument/didOpen",
                {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}},
            )
            result = await client.call(
                "textDocument/inlineCompletion",
                {
                    "textDocument": {"uri": uri},
                    "position": {"line": 18, "character": 4},
                    "context": {"triggerKind": 1},
                },
                timeout=120,
            )
            return status, result
        finally:
            await client.stop()

    status, result = asyncio.run(session())
    assert status["state"] == "ready", status
    assert status["model"]["device"] == "cpu", status
    assert status["model"]["nGpuLayers"] == 0, status
    assert result["items"] and result["items"][0]["insertText"].strip(), result
