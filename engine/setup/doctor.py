"""`ghostfim doctor`: is this installation able to complete code, and how fast?

The llama.cpp build is checked by decoding in a child process: a build with kernels the CPU may
not run (the AMX case: the first decode dies with SIGSEGV/SIGILL in `ldtilecfg`) kills the child,
not us, and we can explain the fix.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

from ghostfim.engine.setup import build_flags
from ghostfim.engine.setup.child import run_python
from ghostfim.engine.setup.device import (
    CudaBackend,
    cuda_backend,
    cuda_gpu_compute_capability,
    cuda_gpu_name,
)
from ghostfim.engine.setup.fetch import list_models

PROBE_TIMEOUT_S = 180


def _probe_child(model_path: str) -> None:
    """Runs in the child: load, decode a short prompt, generate one token, report as JSON."""
    import time

    from ghostfim.engine.backend import CompletionRequest
    from ghostfim.engine.local.loading import open_model_file

    start = time.perf_counter()
    session = open_model_file(Path(model_path), calibrate=True)
    loaded = time.perf_counter()
    c = session.complete(
        CompletionRequest(prefix="def add(a, b):\n    return ", suffix="\n", max_tokens=4)
    )
    sys.stdout.write(
        json.dumps(
            {
                "load_s": round(loaded - start, 2),
                "device": session.info.device,
                "n_gpu_layers": session.info.n_gpu_layers,
                "fim": session.info.family,
                "completion": c.text,
                "ttft_ms": round(c.timings.ttft_ms, 1),
                "prefill_fixed_ms": round(session.cost.fixed_ms, 1),
                "prefill_per_token_ms": round(session.cost.per_token_ms, 3),
            }
        )
        + "\n"
    )
    session.close()


def _smallest_present_model() -> dict[str, Any] | None:
    present = [m for m in list_models() if m["present"]]
    return min(present, key=lambda m: m["bytes"] or 0) if present else None


def _crash_advice(returncode: int) -> str:
    sig = -returncode
    name = signal.Signals(sig).name if sig in {s.value for s in signal.Signals} else str(sig)
    flags = build_flags.cmake_args(build_flags.cpu_flags(), cuda=None)
    return (
        f"the decode crashed with {name}. This is the known bad-build case: llama.cpp was "
        "compiled for CPU features this machine does not grant (AMX tiles: `ldtilecfg`). "
        "Rebuild without native detection:\n"
        f'    CMAKE_ARGS="{flags}" pip install --force-reinstall --no-cache-dir '
        "--no-binary llama-cpp-python llama-cpp-python==0.3.36"
    )


REBUILD_CUDA = "GHOSTFIM_CUDA=1 make setup (engine/build_flags.py; README: On an NVIDIA GPU)"


def gpu_verdict(
    gpu: str | None, compute_capability: int | None, cuda: CudaBackend
) -> tuple[bool, str]:
    """The doctor's GPU line: (fine, what to say), from what nvidia-smi and ggml report."""
    archs = ", ".join(f"sm_{a}" for a in cuda.archs) or "unknown architectures"
    if gpu is None:
        if cuda.compiled and cuda.devices == 0:
            return True, (
                f"none visible. This llama.cpp build has CUDA ({archs}) and would offload every "
                "layer to an NVIDIA GPU, but no GPU or driver is visible (nvidia-smi finds none, "
                "CUDA reports 0 devices): it runs on the CPU"
            )
        if cuda.compiled:
            return False, (
                f"CUDA reports {cuda.devices} device(s) but nvidia-smi finds no GPU; ghostfim "
                "asks nvidia-smi whether to offload, so it runs on the CPU (put nvidia-smi on PATH)"
            )
        return True, "none: running on the CPU (CPU-only build)"
    if not cuda.compiled:
        return False, (
            f"{gpu} is visible but this llama.cpp build has no GPU backend; it runs on the CPU. "
            f"Reinstall with {REBUILD_CUDA}"
        )
    if cuda.devices == 0:
        return False, (
            f"{gpu} is visible and this build has CUDA ({archs}), but CUDA found no device "
            "(driver older than the CUDA runtime this build uses?); it runs on the CPU"
        )
    if compute_capability and cuda.archs and compute_capability < min(cuda.archs):
        return False, (
            f"{gpu} is compute capability {compute_capability / 10:.1f} but this build has "
            f"kernels for {archs} only; rebuild with GHOSTFIM_CUDA_ARCH={compute_capability} "
            f"{REBUILD_CUDA}"
        )
    return True, f"{gpu} (CUDA build for {archs}: all layers offloaded)"


def run_doctor() -> int:
    ok = True
    out = sys.stdout

    def report(good: bool, label: str, detail: str) -> None:
        nonlocal ok
        ok = ok and good
        out.write(f"[{'ok' if good else 'FAIL'}] {label}: {detail}\n")

    try:
        import llama_cpp

        report(True, "llama-cpp-python", f"{llama_cpp.__version__}")
        system = llama_cpp.llama_print_system_info().decode(errors="replace").strip()
        out.write(f"       features: {system}\n")
    except Exception as exc:
        report(False, "llama-cpp-python", f"cannot import: {exc}")
        return 1

    good, detail = gpu_verdict(cuda_gpu_name(), cuda_gpu_compute_capability(), cuda_backend())
    report(good, "GPU", detail)

    for m in list_models():
        where = m["path"] or f"not fetched (ghostfim models --fetch {m['preset']})"
        out.write(f"       model {m['preset']:<6} {m['name']}: {where}\n")

    model = _smallest_present_model()
    if model is None:
        report(False, "decode check", "no model in the cache; run: ghostfim models --fetch tiny")
        return 1
    # Isolated, in ghostfim's cache (engine/setup/child.py): `python -c` in the working
    # directory would import the workspace's `llama_cpp/` or `ghostfim/` before ours.
    proc = run_python(
        [
            "-c",
            "from ghostfim.engine.setup.doctor import _probe_child; "
            f"_probe_child({model['path']!r})",
        ],
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT_S,
        check=False,
    )
    if proc.returncode < 0:
        report(False, "decode check", _crash_advice(proc.returncode))
    elif proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        report(False, "decode check", f"the child failed (exit {proc.returncode}): {last}")
    else:
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        report(
            True,
            "decode check",
            f"{model['name']} on {r['device']} loaded in {r['load_s']} s, first token in "
            f"{r['ttft_ms']} ms; prefill costs {r['prefill_fixed_ms']} ms + "
            f"{r['prefill_per_token_ms']} ms/token; FIM template {r['fim']}",
        )
    return 0 if ok else 1
