"""Typed-through reuse, the model worker's priorities, the debounce and the cost model."""

from __future__ import annotations

import asyncio

from ghostfim.engine.scheduler import AdaptiveDebounce, JobDropped, ModelWorker, Priority
from ghostfim.engine.speed import PrefillCostModel
from ghostfim.engine.suggestions import Suggestion, SuggestionCache


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
    from types import SimpleNamespace

    from ghostfim.engine.service import CompletionService

    class NoEvents:
        def __getattr__(self, name: str) -> object:
            return lambda *args, **kwargs: None

    service = CompletionService(NoEvents())  # type: ignore[arg-type]
    assert service.answer_deadline_s(True, 8.0, 120.0) == 8.0  # no model: the usual deadline
    fast = SimpleNamespace(
        cost=PrefillCostModel(fixed_ms=5.0, per_token_ms=30.0), calibrated_ms_per_token=7.0
    )
    service.session = fast  # type: ignore[assignment]
    assert service.answer_deadline_s(True, 8.0, 120.0) == 8.0  # fast at load: never longer
    slow = SimpleNamespace(
        cost=PrefillCostModel(fixed_ms=45.0, per_token_ms=21.0), calibrated_ms_per_token=21.0
    )
    service.session = slow  # type: ignore[assignment]
    assert service.answer_deadline_s(False, 8.0, 120.0) == 8.0  # automatic: never longer
    deadline = service.answer_deadline_s(True, 8.0, 120.0)
    assert 40.0 < deadline < 50.0  # ~21.5 s for 1024 tokens, twice that plus 2 s
    crawling = SimpleNamespace(
        cost=PrefillCostModel(fixed_ms=45.0, per_token_ms=200.0), calibrated_ms_per_token=21.0
    )
    service.session = crawling  # type: ignore[assignment]
    assert service.answer_deadline_s(True, 8.0, 120.0) == 120.0
