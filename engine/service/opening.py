"""How a backend spec becomes a backend: the in-process model (with its draft, if any) or a
remote server."""

from __future__ import annotations

import logging

from ghostfim.engine.backend import CompletionBackend
from ghostfim.engine.config import BackendSpec
from ghostfim.engine.local.drafted import DraftedSession
from ghostfim.engine.local.loading import check_model, load_session
from ghostfim.engine.local.session import ModelSession
from ghostfim.engine.remote.config import RemoteConfig
from ghostfim.engine.remote.servers import open_remote_backend
from ghostfim.engine.service.host import Progress

log = logging.getLogger("ghostfim.opening")

DRAFTS_FOR = {"medium": "small", "large": "small"}  # "auto": a preset's draft


def draft_for(spec: BackendSpec, target: ModelSession) -> str | None:
    """The draft model to load for `target` (None: it runs alone)."""
    if spec.draft == "none":
        return None
    if spec.draft == "auto":
        return DRAFTS_FOR.get(target.info.preset or "")
    return spec.draft


class BackendOpener:
    """The host's `Opener` for real backends (tests bring their own)."""

    def open(self, spec: BackendSpec, progress: Progress) -> CompletionBackend:
        if spec.kind != "local":
            return open_remote_backend(RemoteConfig.of(spec))
        target = load_session(
            spec.model,
            n_gpu_layers=spec.n_gpu_layers,
            budgets=spec.budgets,
            progress=False,
            on_progress=progress,
        )
        name = draft_for(spec, target)
        if name is None or name in (target.info.preset, target.info.path):
            return target
        try:
            draft = load_session(
                name, n_gpu_layers=spec.n_gpu_layers, budgets=spec.budgets, progress=False
            )
            return DraftedSession(target, draft)
        except Exception as exc:
            if spec.draft != "auto":
                target.close()
                raise
            log.warning("no draft for %s (%s): it runs alone", target.info.name, exc)
            return target

    def check(self, spec: BackendSpec) -> None:
        if spec.kind == "local":
            check_model(spec.model)
            if spec.draft not in ("auto", "none"):
                check_model(spec.draft)
