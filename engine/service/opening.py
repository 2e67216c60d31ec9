"""How a backend spec becomes a backend: the in-process model or a remote server."""

from __future__ import annotations

from ghostfim.engine.backend import CompletionBackend
from ghostfim.engine.config import BackendSpec
from ghostfim.engine.local.loading import check_model, load_session
from ghostfim.engine.remote.backends import RemoteConfig, open_remote_backend
from ghostfim.engine.service.host import Progress


class BackendOpener:
    """The host's `Opener` for real backends (tests bring their own)."""

    def open(self, spec: BackendSpec, progress: Progress) -> CompletionBackend:
        if spec.kind == "local":
            return load_session(
                spec.model,
                n_gpu_layers=spec.n_gpu_layers,
                budgets=spec.budgets,
                progress=False,
                on_progress=progress,
            )
        return open_remote_backend(RemoteConfig.of(spec))

    def check(self, spec: BackendSpec) -> None:
        if spec.kind == "local":
            check_model(spec.model)
