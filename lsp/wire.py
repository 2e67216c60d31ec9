"""The engine's reports as the JSON of docs/protocol.md: the one place that knows its keys.

The engine returns dataclasses (engine/service/stats.py and the types they hold); the server
sends what these functions make of them: `ghostfim/stats`, `ghostfim/status` (and
`ghostfim/statusChanged`). camelCase keys, documents named by `uri`, milliseconds rounded.
"""

from __future__ import annotations

from typing import Any

from ghostfim.engine.backend import KvStatus, ModelInfo
from ghostfim.engine.config import Budgets, BudgetsInEffect
from ghostfim.engine.context.ring import RingStatus
from ghostfim.engine.service.acceptance import Counts
from ghostfim.engine.service.stats import LatencySummary, RequestStats, ServiceStatus

# Settings keys of the budgets (lsp/settings.py names them so too).
BUDGET_KEYS = {
    "prefix_tokens": "prefixTokens",
    "suffix_tokens": "suffixTokens",
    "keystroke_prefill_ms": "keystrokePrefillMs",
    "kv_snapshot_mb": "kvSnapshotMb",
}


def _ms(value: float) -> float:
    return round(value, 2)


def stats_json(s: RequestStats) -> dict[str, Any]:
    """One request's `ghostfim/stats` notification."""
    out: dict[str, Any] = {
        "uri": s.doc_id,
        "version": s.version,
        "source": s.source,
        "cancelled": s.cancelled,
        "queueMs": _ms(s.queue_ms),
        "debounceMs": _ms(s.debounce_ms),
        "promptMs": _ms(s.prompt_ms),
        "prefillMs": _ms(s.prefill_ms),
        "ttftMs": _ms(s.ttft_ms),
        "decodeMs": _ms(s.decode_ms),
        "totalMs": _ms(s.total_ms),
        "reusedTokens": s.reused_tokens,
        "newTokens": s.new_tokens,
        "generatedTokens": s.generated_tokens,
        "networkMs": _ms(s.network_ms),
        "extraTokens": s.extra_tokens,
        "suffixCut": s.suffix_cut,
        "stopReason": s.stop_reason,
        "model": s.model,
    }
    if s.reason:
        out["reason"] = s.reason
    if s.draft_tokens or s.draft_ms:
        out["draftMs"] = _ms(s.draft_ms)
        out["draftTokens"] = s.draft_tokens
        out["draftAccepted"] = s.draft_accepted
    return out


def model_json(info: ModelInfo | None) -> dict[str, Any] | None:
    if info is None:
        return None
    return {
        "name": info.name,
        "preset": info.preset,
        "path": info.path,
        "device": info.device,
        "nGpuLayers": info.n_gpu_layers,
        "fim": info.family,
        "memoryBytes": info.memory_bytes,
        "draft": None
        if info.draft is None
        else {
            "name": info.draft.name,
            "path": info.draft.path,
            "memoryBytes": info.draft.memory_bytes,
            "proposed": info.draft.proposed,
            "accepted": info.draft.accepted,
            "acceptance": None
            if info.draft.acceptance is None
            else round(info.draft.acceptance, 3),
        },
    }


def kv_json(kv: KvStatus | None) -> dict[str, Any] | None:
    if kv is None:
        return None
    return {
        "snapshots": kv.snapshots,
        "snapshotBytes": kv.snapshot_bytes,
        "snapshotLimitBytes": kv.snapshot_limit_bytes,
        "saved": kv.saved,
        "restored": kv.restored,
        "dropped": kv.dropped,
        "lastSaveMs": _ms(kv.last_save_ms),
        "lastRestoreMs": _ms(kv.last_restore_ms),
        "recent": [
            {"kind": e.kind, "uri": e.doc_id, "tokens": e.tokens, "bytes": e.bytes, "ms": _ms(e.ms)}
            for e in kv.recent
        ],
    }


def latency_json(s: LatencySummary) -> dict[str, Any]:
    return {
        "n": s.n,
        "ttftP50": s.ttft_p50,
        "ttftP95": s.ttft_p95,
        "ttftP99": s.ttft_p99,
        "totalP50": s.total_p50,
        "totalP95": s.total_p95,
    }


def context_json(s: RingStatus) -> dict[str, Any]:
    return {
        "chunks": s.chunks,
        "pending": s.pending,
        "evicted": s.evicted,
        "version": s.version,
        "files": list(s.files),
    }


def acceptance_json(c: Counts) -> dict[str, Any]:
    rate = c.accept_rate
    return {
        "shown": c.shown,
        "accepted": c.accepted,
        "partial": c.partial,
        "refused": c.refused,
        "acceptedChars": c.accepted_chars,
        "acceptRate": None if rate is None else round(rate, 3),
    }


def budgets_json(b: BudgetsInEffect | None) -> dict[str, Any] | None:
    """The budgets in effect, in settings' terms, and each clamp with its reason."""
    if b is None:
        return None
    return {
        "effective": _budgets(b.effective),
        "clamped": [
            {
                "setting": BUDGET_KEYS.get(c.budget, c.budget),
                "asked": c.asked,
                "effective": c.effective,
                "reason": c.reason,
            }
            for c in b.clamps
        ],
    }


def _budgets(b: Budgets) -> dict[str, Any]:
    return {key: getattr(b, name) for name, key in BUDGET_KEYS.items()}


def status_json(s: ServiceStatus) -> dict[str, Any]:
    """The `ghostfim/status` result (and the `ghostfim/statusChanged` notification)."""
    return {
        "state": s.state,
        "error": s.error,
        "model": model_json(s.model),
        "switchingTo": s.switching_to,
        "loading": None
        if s.loading is None
        else {"label": s.loading.label, "percentage": s.loading.percentage},
        "context": context_json(s.context),
        "kv": kv_json(s.kv),
        "latency": latency_json(s.latency),
        "recent": [stats_json(r) for r in s.recent],
        "work": None
        if s.work is None
        else {
            "decodeSteps": s.work.decode_steps,
            "prefillChunks": s.work.prefill_chunks,
            "running": s.work.running,
            "busyMs": {kind: round(ms, 1) for kind, ms in s.work.busy_ms.items()},
        },
        "acceptance": acceptance_json(s.acceptance),
        "budgets": budgets_json(s.budgets),
        "savedCpuMs": round(s.saved_cpu_ms, 1),
    }
