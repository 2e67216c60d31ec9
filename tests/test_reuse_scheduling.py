"""Typed-through reuse, the model worker's priorities, the debounce and the cost model."""

from __future__ import annotations

import asyncio

from ghostfim.engine.local.speed import PrefillCostModel
from ghostfim.engine.service.suggestions import Suggestion, SuggestionCache
from ghostfim.engine.service.worker import AdaptiveDebounce, JobDropped, ModelWorker, Priority


def test_typed_characters_that_match_a_suggestion_reuse_it() -> None:
    cache = SuggestionCache()
    s = Suggestion(text="return a + b", done=True)
    cache.put("def add(a, b):\n    ", "\n", s)
    hit = cache.lookup("def add(a, b):\n    ret", "\n")
    assert hit is not None and hit.remaining == "urn a + b"
    assert cache.lookup("def add(a, b):\n    rex", "\n") is None
    assert cache.lookup("def add(a, b):\n    return a + b", "\n") is None  # nothing left


def test_a_streaming_suggestion_can_be_typed_ahead_of() -> None:
    cache = SuggestionCache()
    s = Suggestion(text="ret")
    cache.put("x:\n", "", s)
    hit = cache.lookup("x:\nretu", "")
    assert hit is not None and hit.remaining == ""  # not grown yet, but still may
    s.update("return 1", done=True)
    assert cache.lookup("x:\nretu", "").remaining == "rn 1"  # type: ignore[union-attr]


def test_cancelled_suggestion_does_not_grow() -> None:
    s = Suggestion(text="ab")
    s.update("ab", cancelled=True)
    assert s.done and not s.could_continue("abc")


async def test_interactive_work_preempts_background_work() -> None:
    worker = ModelWorker()
    started = asyncio.Event()

    def slow(cancel) -> str:  # type: ignore[no-untyped-def]
        loop.call_soon_threadsafe(started.set)
        for _ in range(200):
            if cancel.cancelled:
                return "stopped"
            __import__("time").sleep(0.01)
        return "finished"

    loop = asyncio.get_running_loop()
    background = worker.submit(slow, Priority.WARMUP)
    await started.wait()
    queued = worker.submit(lambda c: "never", Priority.SPECULATIVE)
    interactive = worker.submit(lambda c: "answer", Priority.INTERACTIVE)
    assert await interactive.future == "answer"
    assert await background.future == "stopped"
    try:
        await queued.future
        raise AssertionError("the queued speculative job should have been dropped")
    except JobDropped:
        pass
    worker.shutdown()


def test_debounce_waits_only_when_the_next_key_is_likely_first() -> None:
    d = AdaptiveDebounce()
    assert d.delay_ms(100) <= 10  # no rhythm known yet
    t = 0.0
    for _ in range(10):  # a fast typist: 40 ms between keys
        d.keystroke(t)
        t += 0.040
    assert 20 <= d.delay_ms(100) <= 80
    slow = AdaptiveDebounce()
    t = 0.0
    for _ in range(10):  # 250 ms between keys: the answer beats the next key
        slow.keystroke(t)
        t += 0.250
    assert slow.delay_ms(100) <= 10
    assert AdaptiveDebounce(fixed_ms=120).delay_ms(100) == 120


def test_prefill_cost_model_fits_fixed_and_per_token_cost() -> None:
    m = PrefillCostModel()
    for n in (1, 4, 16, 64, 1, 4, 16, 64):
        m.observe(n, 40 + 5 * n)
    assert abs(m.fixed_ms - 40) < 1 and abs(m.per_token_ms - 5) < 0.1
    assert m.tokens_within(80) == 8
    assert m.tokens_within(10) == 1


def test_explicit_deadline_follows_the_measured_prefill_speed() -> None:
    from ghostfim.engine.service.deadline import (
        AUTOMATIC_DEADLINE_S,
        EXPLICIT_DEADLINE_S,
        answer_deadline_s,
    )

    class Backend:  # only what the deadline asks of a backend
        def __init__(self, per_token_ms: float | None) -> None:
            self.per_token_ms = per_token_ms

        def expected_prefill_ms(self, n_tokens: int) -> float | None:
            return None if self.per_token_ms is None else 45 + self.per_token_ms * n_tokens

    tokens = 1024
    assert answer_deadline_s(True, None, tokens) == AUTOMATIC_DEADLINE_S  # no model yet
    assert answer_deadline_s(True, Backend(None), tokens) == AUTOMATIC_DEADLINE_S  # remote
    assert answer_deadline_s(True, Backend(7.0), tokens) == AUTOMATIC_DEADLINE_S  # fast model
    slow = Backend(21.0)
    assert answer_deadline_s(False, slow, tokens) == AUTOMATIC_DEADLINE_S  # automatic
    assert 40.0 < answer_deadline_s(True, slow, tokens) < 50.0  # ~21.5 s, twice plus 2 s
    assert answer_deadline_s(True, Backend(200.0), tokens) == EXPLICIT_DEADLINE_S  # capped
