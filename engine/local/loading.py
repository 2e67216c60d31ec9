"""From a model setting (a preset, a path, or nothing) to a resident, calibrated ModelSession.

Three decisions are made here, once, when a model loads:

- where its layers run: on a GPU exactly when `engine/setup/device.py`'s one predicate,
  `gpu_offload_available()`, says so (a CUDA GPU is visible *and* this llama.cpp build can use
  it). The default preset is chosen on the same predicate, so an NVIDIA machine with a CPU-only
  build gets the CPU's default model, not the 1.5B running on the CPU;
- the device policy: batch size and whether llama.cpp's abort callback can stop a decode (CUDA
  ignores it, so a GPU stops between `llama_decode` calls instead);
- the prefill cost model (engine/local/speed.py), measured with a few decodes, which sizes the
  keystroke windows and the chunks (engine/local/plan.py).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from ghostfim.engine.backend import ModelInfo
from ghostfim.engine.config import DEFAULT_BUDGETS, Budgets
from ghostfim.engine.local import native
from ghostfim.engine.local.kvslots import N_SLOTS
from ghostfim.engine.local.session import DevicePolicy, ModelSession
from ghostfim.engine.local.speed import PrefillCostModel
from ghostfim.engine.setup.device import cuda_gpu_name, gpu_offload_available
from ghostfim.engine.setup.fetch import resolve_model
from ghostfim.engine.setup.presets import PRESETS
from ghostfim.engine.tuning import CELLS_PER_SLOT, FAST_PREFILL_MS_PER_TOKEN

log = logging.getLogger("ghostfim.loading")

ALL_LAYERS = 999


@dataclass(frozen=True)
class Placement:
    """Where the layers run."""

    n_gpu_layers: int  # what llama.cpp is asked to offload (0: none)
    on_gpu: bool

    @classmethod
    def choose(cls, n_gpu_layers: int, offload: bool) -> Placement:
        """n_gpu_layers -1: every layer when the GPU can be used; a count is honoured only
        then too (a CPU-only build cannot offload anything)."""
        if not offload:
            return cls(0, False)
        layers = ALL_LAYERS if n_gpu_layers < 0 else n_gpu_layers
        return cls(layers, layers > 0)


def device_policy(on_gpu: bool, cost: PrefillCostModel) -> DevicePolicy:
    fast = on_gpu or (cost.forced and cost.per_token_ms < FAST_PREFILL_MS_PER_TOKEN)
    return DevicePolicy(n_batch=128 if fast else 256, abort_callback=not on_gpu)


def load_session(
    spec: str | None,
    *,
    n_gpu_layers: int = -1,
    budgets: Budgets = DEFAULT_BUDGETS,
    download: bool = True,
    progress: bool = True,
    on_progress: native.Progress | None = None,
) -> ModelSession:
    """Resolve the model (cache, hub, offline mirror), load it and calibrate it.

    `on_progress(fraction)` hears the load of the weights, on the loading thread (downloads
    report through the log). Raises fetch.ModelNotFoundError or native.ModelLoadError with a
    message that names the file and what was tried.
    """
    offload = gpu_offload_available()
    resolved = resolve_model(spec, gpu_offload=offload, download=download, progress=progress)
    log.info("loading %s from %s", resolved.name, resolved.path)
    return open_model_file(
        resolved.path,
        name=resolved.name,
        preset=resolved.preset,
        n_gpu_layers=n_gpu_layers,
        budgets=budgets,
        on_progress=on_progress,
        offload=offload,
    )


def open_model_file(
    path: Path,
    *,
    name: str | None = None,
    preset: str | None = None,
    n_gpu_layers: int = -1,
    n_ctx: int = CELLS_PER_SLOT * N_SLOTS,
    budgets: Budgets = DEFAULT_BUDGETS,
    calibrate: bool = True,
    on_progress: native.Progress | None = None,
    offload: bool | None = None,
) -> ModelSession:
    """Load a GGUF file into a session (offload None: ask the device predicate)."""
    placement = Placement.choose(
        n_gpu_layers, gpu_offload_available() if offload is None else offload
    )
    cost = PrefillCostModel.from_env()
    policy = device_policy(placement.on_gpu, cost)
    model = native.load(
        path,
        n_ctx=n_ctx,
        n_batch=policy.n_batch,
        n_gpu_layers=placement.n_gpu_layers,
        n_seq=N_SLOTS,
        progress=on_progress,
    )
    try:
        device = f"cuda ({cuda_gpu_name() or 'GPU'})" if placement.on_gpu else "cpu"
        layers = min(placement.n_gpu_layers, model.n_layer + 1) if placement.on_gpu else 0
        info = ModelInfo(
            name=name or path.stem,
            path=str(path),
            preset=preset,
            device=device,
            n_gpu_layers=layers,
            family="",  # the session reads it from the vocabulary
            n_ctx=model.n_ctx,
        )
        session = ModelSession(model, info, budgets=budgets, policy=policy, cost=cost)
        if calibrate:
            calibrate_prefill(session)
    except BaseException:
        model.close()  # a failure after the load must not keep the weights
        raise
    return session


CALIBRATION_REPEATS = 3


def calibrate_prefill(session: ModelSession) -> None:
    """Measure one-token and many-token decodes, so keystroke budgets start out right.

    Each size is timed CALIBRATION_REPEATS times and the fastest counts: the keystroke windows
    are sized once from this, and anything else that has the CPU for a moment (the workspace
    index starting, an editor) only ever makes a decode slower, never faster."""
    model, cost = session.model, session.cost
    token = session.tokenize("\n")[0]
    fastest: dict[int, float] = {}
    sizes = (1, min(64, model.n_batch)) * CALIBRATION_REPEATS
    for i, n in enumerate((1, *sizes)):
        model.kv_clear()
        start = time.perf_counter()
        model.decode([token] * n, 0, want_logits=True)
        if i > 0:  # the very first decode pays one-time allocations
            ms = (time.perf_counter() - start) * 1000
            fastest[n] = min(ms, fastest.get(n, ms))
    for n, ms in sorted(fastest.items()):
        cost.observe(n, ms)
    model.kv_clear()
    session.slots.clear()
    session.cost_at_load = (cost.fixed_ms, cost.per_token_ms)
    session.resize_windows()
    windows = session.planner.windows
    log.info(
        "prefill cost: %.1f ms + %.2f ms/token; keystroke windows %d/%d tokens",
        cost.fixed_ms,
        cost.per_token_ms,
        windows.start_tokens,
        windows.wide_tokens,
    )


def check_model(spec: str | None) -> None:
    """Raise what loading `spec` would raise for a file that is missing or broken, without
    loading it (see native.check_model_file). Presets are not checked: resolving one may
    download it."""
    name = (spec or "").strip()
    if not name or name.lower() in PRESETS:
        return
    resolved = resolve_model(name, download=False, progress=False)
    native.check_model_file(resolved.path)
