"""What the service reports: per-request stats (`ghostfim/stats`) and its status.

Latency is kept as a window of recent samples and reported as percentiles, never a mean alone.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ghostfim.engine.backend import Completion, ModelInfo
from ghostfim.engine.service.documents import CursorState
from ghostfim.engine.timings import percentile


@dataclass
class LatencyLog:
    ttft: deque[float] = field(default_factory=lambda: deque(maxlen=500))
    total: deque[float] = field(default_factory=lambda: deque(maxlen=500))
    recent: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=20))

    def summary(self) -> dict[str, float | int | None]:
        def p(values: deque[float], q: float) -> float | None:
            return round(percentile(list(values), q), 1) if values else None

        return {
            "n": len(self.ttft),
            "ttftP50": p(self.ttft, 50),
            "ttftP95": p(self.ttft, 95),
            "ttftP99": p(self.ttft, 99),
            "totalP50": p(self.total, 50),
            "totalP95": p(self.total, 95),
        }

    def expected_first_token_ms(self) -> float:
        """The recent median time to first token (what the adaptive debounce weighs)."""
        ttft = list(self.ttft)[-32:]
        return percentile(ttft, 50) if ttft else 100.0


def stats_payload(
    state: CursorState,
    *,
    source: str,
    completion: Completion | None,
    queue_ms: float,
    debounce_ms: float,
    total_ms: float,
    cancelled: bool,
    model: str | None,
) -> dict[str, Any]:
    """One request's `ghostfim/stats` notification (docs/protocol.md)."""
    t = completion.timings if completion is not None else None
    return {
        "uri": state.doc_id,
        "version": state.version,
        "source": source,
        "cancelled": cancelled,
        "queueMs": round(queue_ms, 2),
        "debounceMs": round(debounce_ms, 2),
        "promptMs": round(t.prompt_ms, 2) if t else 0.0,
        "prefillMs": round(t.prefill_ms, 2) if t else 0.0,
        "ttftMs": round(t.ttft_ms + queue_ms, 2) if t else 0.0,
        "decodeMs": round(t.decode_ms, 2) if t else 0.0,
        "totalMs": round(total_ms, 2),
        "reusedTokens": t.prefill_reused_tokens if t else 0,
        "newTokens": t.prefill_new_tokens if t else 0,
        "generatedTokens": t.decode_tokens if t else 0,
        "networkMs": round(t.network_ms, 2) if t else 0.0,
        "extraTokens": t.extra_tokens if t else 0,
        # The prompt held less suffix than a full prompt (a CPU keystroke's plain prefix).
        "suffixCut": bool(completion.suffix_cut) if completion is not None else False,
        "model": model,
    }


def model_status(info: ModelInfo | None) -> dict[str, Any] | None:
    if info is None:
        return None
    return {
        "name": info.name,
        "preset": info.preset,
        "path": info.path,
        "device": info.device,
        "nGpuLayers": info.n_gpu_layers,
        "fim": info.family,
    }
