"""Per-completion timings and the percentile summaries reported everywhere (never a mean alone)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass


@dataclass
class Timings:
    prefill_reused_tokens: int = 0  # prompt tokens served from the KV cache
    prefill_new_tokens: int = 0  # prompt tokens decoded for this request
    prompt_ms: float = 0.0  # prompt building and tokenization
    prefill_ms: float = 0.0  # decoding the new prompt tokens
    ttft_ms: float = 0.0  # request start -> first generated token known
    decode_tokens: int = 0  # tokens generated
    decode_ms: float = 0.0  # time generating after the first token
    total_ms: float = 0.0
    suffix_tokens: int = 0  # suffix tokens the prompt held (budgeted per keystroke)
    extra_tokens: int = 0  # tokens of context from other files before the prefix
    definition_tokens: int = 0  # tokens of the workspace's definitions (workspaceContext)
    network_ms: float = 0.0  # remote backends: request sent -> response headers (0: local)
    draft_ms: float = 0.0  # a draft model's own suggestion, before this one checked it
    draft_tokens: int = 0  # tokens the draft proposed
    draft_accepted: int = 0  # of them, those this model kept

    @property
    def reuse_share(self) -> float:
        total = self.prefill_reused_tokens + self.prefill_new_tokens
        return self.prefill_reused_tokens / total if total else 0.0

    def to_dict(self) -> dict[str, float | int]:
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, float):
                d[k] = round(v, 2)
        return d


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return float(ordered[min(rank, len(ordered)) - 1])


def summarize(values: Sequence[float]) -> dict[str, float]:
    """n, p50, p95, p99 of a sample."""
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
    }
