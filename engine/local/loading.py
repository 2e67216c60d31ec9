"""From a user's model setting (a preset, a path, or nothing) to a resident ModelSession."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ghostfim.engine.local.kvslots import N_SLOTS
from ghostfim.engine.local.session import ModelSession
from ghostfim.engine.setup.device import cuda_gpu_name
from ghostfim.engine.setup.models import PRESETS, models_dir, resolve_model

log = logging.getLogger("ghostfim.loader")


def load_session(
    spec: str | None,
    *,
    n_gpu_layers: int = -1,
    n_ctx: int = 4096 * N_SLOTS,  # 4096 per KV slot (engine/session.py)
    download: bool = True,
    progress: bool = True,
    on_progress: Callable[[str, float], None] | None = None,
    **session_options: Any,
) -> ModelSession:
    """Resolve the model (cache, hub, offline mirror) and load it.

    `on_progress("load", fraction)` hears the load of the weights, on the loading thread
    (downloads report through the log).

    Raises models.ModelNotFoundError or native.ModelLoadError with a message that names
    the file and what was tried.
    """
    has_gpu = cuda_gpu_name() is not None
    resolved = resolve_model(spec, has_cuda_gpu=has_gpu, download=download, progress=progress)
    log.info("loading %s from %s", resolved.name, resolved.path)

    def weights(fraction: float) -> None:
        if on_progress is not None:
            on_progress("load", fraction)

    return ModelSession.load(
        resolved.path,
        name=resolved.name,
        preset=resolved.preset,
        n_gpu_layers=n_gpu_layers,
        n_ctx=n_ctx,
        on_progress=weights,
        **session_options,
    )


def check_model(spec: str | None) -> None:
    """Raise what loading `spec` would raise for a file that is missing or broken, without
    loading it (see native.check_model_file). Presets are not checked: resolving one may
    download it."""
    from ghostfim.engine.local import native

    name = (spec or "").strip()
    if not name or name.lower() in PRESETS:
        return
    resolved = resolve_model(name, download=False, progress=False)
    native.check_model_file(resolved.path)


def model_identity(spec: str | None) -> str | None:
    """The file a model setting names, when it can be told without work (no hashing, no
    network): a preset's file in the cache or a path, resolved. Two settings naming one file
    (`{"size": "tiny"}` and the cached file's path) are one model: switching between them
    loads nothing. None for the default model; the spec itself when the file is not there."""
    name = (spec or "").strip()
    if not name:
        return None
    preset = PRESETS.get(name.lower())
    path = models_dir() / preset.filename if preset is not None else Path(name).expanduser()
    try:
        return str(path.resolve()) if path.is_file() else name
    except OSError:  # an unreadable path: the load reports it
        return name
