"""engine/timings.py: per-completion timings and percentile summaries (never a mean alone)."""

from __future__ import annotations

import math

from ghostfim.engine.timings import Timings, percentile, summarize


def test_nearest_rank_percentiles() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0 and percentile(values, 95) == 95.0
    assert percentile(values, 100) == 100.0 and percentile(values, 0) == 1.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0  # sorted first
    assert math.isnan(percentile([], 50))
    assert summarize([1.0, 2.0]) == {"n": 2, "p50": 1.0, "p95": 2.0, "p99": 2.0}


def test_reuse_share_and_rounding() -> None:
    t = Timings(prefill_reused_tokens=90, prefill_new_tokens=10, ttft_ms=12.3456)
    assert t.reuse_share == 0.9 and Timings().reuse_share == 0.0
    d = t.to_dict()
    assert d["ttft_ms"] == 12.35 and d["prefill_reused_tokens"] == 90
