"""`ghostfim doctor`: is this installation able to complete code, and how fast?

The llama.cpp build is checked by decoding in a child process: a build with kernels the CPU may
not run (the AMX case: the first decode dies with SIGSEGV/SIGILL in `ldtilecfg`) kills the child,
not us, and we can explain the fix.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from ghostfim.engine import build_flags
from ghostfim.engine.device import cuda_gpu_name
from ghostfim.engine.models import list_models

PROBE_TIMEOUT_S = 180


def _probe_child(model_path: str) -> None:
    """Runs in the child: load, decode a short prompt, generate one token, report as JSON."""
    import time

    from ghostfim.engine.session import CompletionRequest, ModelSession

    start = time.perf_counter()
    session = ModelSession.load(Path(model_path), calibrate=True)
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


def _smallest_present_model() -> dict | None:
    present = [m for m in list_models() if m["present"]]
    return min(present, key=lambda m: m["bytes"] or 0) if present else None


def _crash_advice(returncode: int) -> str:
    sig = -returncode
    name = signal.Signals(sig).name if sig in {s.value for s in signal.Signals} else str(sig)
    flags = build_flags.cmake_args(build_flags.cpu_flags(), cuda=False)
    return (
        f"the decode crashed with {name}. This is the known bad-build case: llama.cpp was "
        "compiled for CPU features this machine does not grant (AMX tiles: `ldtilecfg`). "
        "Rebuild without native detection:\n"
        f'    CMAKE_ARGS="{flags}" pip install --force-reinstall --no-cache-dir '
        "--no-binary llama-cpp-python llama-cpp-python==0.3.36"
    )


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

    gpu = cuda_gpu_name()
    gpu_build = bool(llama_cpp.llama_supports_gpu_offload())
    if gpu and not gpu_build:
        report(
            False,
            "GPU",
            f"{gpu} is visible but this llama.cpp build has no GPU backend; "
            "reinstall with GHOSTFIM_CUDA=1 make setup (CMAKE_ARGS -DGGML_CUDA=on)",
        )
    else:
        report(True, "GPU", f"{gpu} (all layers offloaded)" if gpu else "none: running on the CPU")

    for m in list_models():
        where = m["path"] or f"not fetched (ghostfim models --fetch {m['preset']})"
        out.write(f"       model {m['preset']:<6} {m['name']}: {where}\n")

    model = _smallest_present_model()
    if model is None:
        report(False, "decode check", "no model in the cache; run: ghostfim models --fetch tiny")
        return 1
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from ghostfim.engine.doctor import _probe_child; _probe_child({model['path']!r})",
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
