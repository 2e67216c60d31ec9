"""The CUDA build of llama-cpp-python, as far as a machine without a GPU can prove it, for
real: the whole doctor (it decodes a token in a child process) with the probes answering as a
CUDA build on a GPU-less machine; and, where `GHOSTFIM_CUDA=1 make setup
VENV=~/.cache/ghostfim/venv-cuda` has built a real CUDA llama.cpp, that build with this
checkout's code: CUDA compiled in, no device, the doctor says so, and completion and the server
work on the CPU. Those real tests are skipped only when that venv is absent. The build flags and
the doctor's GPU line are tests/unit/engine/setup/'s.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ghostfim.engine.setup import doctor
from ghostfim.engine.setup.device import CudaBackend
from harness.lspclient import LspProcess

REPO = Path(__file__).resolve().parents[2]


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
    async def session() -> tuple[dict, object]:
        client = await LspProcess.start(
            [sys.executable, "-m", "ghostfim.lsp.main", "serve"],
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
