"""From a user's model setting (a preset, a path, or nothing) to a resident ModelSession."""

from __future__ import annotations

import logging

from engine.device import cuda_gpu_name
from engine.models import resolve_model
from engine.session import ModelSession

log = logging.getLogger("ghostfim.loader")


def load_session(
    spec: str | None,
    *,
    n_gpu_layers: int = -1,
    n_ctx: int = 4096,
    download: bool = True,
    progress: bool = True,
    **session_options: float,
) -> ModelSession:
    """Resolve the model (cache, hub, offline mirror) and load it.

    Raises engine.models.ModelNotFoundError or engine.native.ModelLoadError with a message that
    names the file and what was tried.
    """
    has_gpu = cuda_gpu_name() is not None
    resolved = resolve_model(spec, has_cuda_gpu=has_gpu, download=download, progress=progress)
    log.info("loading %s from %s", resolved.name, resolved.path)
    return ModelSession.load(
        resolved.path,
        name=resolved.name,
        preset=resolved.preset,
        n_gpu_layers=n_gpu_layers,
        n_ctx=n_ctx,
        **session_options,
    )
