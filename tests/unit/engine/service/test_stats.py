"""engine/service/stats.py: one record per request, and the latency summary."""

from __future__ import annotations

import math

from ghostfim.engine.backend import Completion
from ghostfim.engine.service.stats import LatencyLog, RequestStats, request_stats
from ghostfim.engine.timings import Timings
from tests.support.fakes import cursor


def completion(**timings: float) -> Completion:
    return Completion("text", "text ", Timings(**timings), "eog", suffix_cut=True)  # type: ignore[arg-type]


def test_a_model_answer_reports_where_its_time_went() -> None:
    state = cursor("x = ", version=7)
    t = dict(
        prefill_reused_tokens=40,
        prefill_new_tokens=3,
        prompt_ms=1.5,
        prefill_ms=12.0,
        ttft_ms=14.0,
        decode_tokens=5,
        decode_ms=30.0,
        network_ms=2.0,
        extra_tokens=9,
    )
    s = request_stats(
        state,
        source="model",
        completion=completion(**t),
        queue_ms=4.0,
        debounce_ms=5.0,
        total_ms=60.0,
        cancelled=False,
        model="small",
    )
    assert (s.doc_id, s.version, s.source, s.model) == (state.doc_id, 7, "model", "small")
    assert s.ttft_ms == 18.0  # the job's time to first token plus its wait for the thread
    assert (s.reused_tokens, s.new_tokens, s.generated_tokens) == (40, 3, 5)
    assert (s.prompt_ms, s.prefill_ms, s.decode_ms, s.network_ms) == (1.5, 12.0, 30.0, 2.0)
    assert s.extra_tokens == 9 and s.suffix_cut and not s.cancelled
    assert (s.queue_ms, s.debounce_ms, s.total_ms) == (4.0, 5.0, 60.0)


def test_an_answer_without_model_work_is_all_zeros() -> None:
    s = request_stats(
        cursor("x"),
        source="cache",
        completion=None,
        queue_ms=0.0,
        debounce_ms=0.0,
        total_ms=0.0,
        cancelled=False,
        model=None,
        reason="",
    )
    assert isinstance(s, RequestStats) and s.source == "cache"
    assert s.ttft_ms == s.prefill_ms == 0.0 and s.new_tokens == s.generated_tokens == 0
    assert not s.suffix_cut and s.model is None


def test_latency_is_summarised_as_percentiles_of_a_window() -> None:
    log = LatencyLog()
    empty = log.summary()
    assert empty.n == 0 and empty.ttft_p50 is None and empty.total_p95 is None
    assert log.expected_first_token_ms() == 100.0  # nothing measured: a guess
    for ms in range(1, 101):
        log.ttft.append(float(ms))
        log.total.append(float(ms) * 2)
    s = log.summary()
    assert (s.n, s.ttft_p50, s.ttft_p95, s.ttft_p99) == (100, 50.0, 95.0, 99.0)
    assert (s.total_p50, s.total_p95) == (100.0, 190.0)
    assert log.expected_first_token_ms() == 84.0  # the median of the last 32
    for _ in range(600):
        log.ttft.append(1.0)
    assert len(log.ttft) == 500 and not math.isnan(log.summary().ttft_p50 or math.nan)
