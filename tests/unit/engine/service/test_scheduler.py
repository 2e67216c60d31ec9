"""engine/service/scheduler.py: one model worker with priorities, and the adaptive debounce."""

from __future__ import annotations

import asyncio
import time

import pytest

from ghostfim.engine.backend import CancelToken, CompletionRequest
from ghostfim.engine.service.scheduler import (
    MID_TOKEN_MAX_WAIT_MS,
    AdaptiveDebounce,
    JobDropped,
    ModelWorker,
    Priority,
)
from tests.support.fakes import FakeBackend


async def test_interactive_work_preempts_background_work() -> None:
    worker = ModelWorker()
    started = asyncio.Event()
    loop = asyncio.get_running_loop()

    def slow(cancel: CancelToken) -> str:
        loop.call_soon_threadsafe(started.set)
        for _ in range(200):
            if cancel.cancelled:
                return "stopped"
            time.sleep(0.01)
        return "finished"

    background = worker.submit(slow, Priority.WARMUP)
    await started.wait()
    queued = worker.submit(lambda c: "never", Priority.SPECULATIVE)
    interactive = worker.submit(lambda c: "answer", Priority.INTERACTIVE)
    assert await interactive.future == "answer"
    assert await background.future == "stopped"
    with pytest.raises(JobDropped):
        await queued.future
    worker.shutdown()


async def test_jobs_run_one_at_a_time_highest_priority_first() -> None:
    worker = ModelWorker()
    order: list[str] = []
    gate = asyncio.Event()
    loop = asyncio.get_running_loop()

    def blocker(cancel: CancelToken) -> None:
        asyncio.run_coroutine_threadsafe(gate.wait(), loop).result(5)

    first = worker.submit(blocker, Priority.INTERACTIVE, "blocker")
    await asyncio.sleep(0.05)
    jobs = [
        worker.submit(lambda c, n=name: order.append(n), priority, name)
        for name, priority in (
            ("second interactive", Priority.INTERACTIVE),
            ("third interactive", Priority.INTERACTIVE),
        )
    ]
    gate.set()
    await first.future
    for job in jobs:
        await job.future
    assert order == ["second interactive", "third interactive"]  # in order of arrival
    assert all(job.queue_ms > 0 for job in jobs)
    worker.shutdown()


async def test_idle_means_nothing_runs_and_nothing_is_queued() -> None:
    """A job queued behind a running one: idle only once both are done."""
    worker = ModelWorker()
    gate = asyncio.Event()
    loop = asyncio.get_running_loop()
    assert worker.idle
    first = worker.submit(
        lambda c: asyncio.run_coroutine_threadsafe(gate.wait(), loop).result(5),
        Priority.INTERACTIVE,
    )
    second = worker.submit(lambda c: None, Priority.INTERACTIVE)
    await asyncio.sleep(0.05)
    assert worker.running is first and not worker.idle
    gate.set()
    await first.future
    await second.future
    await asyncio.sleep(0)  # the loop's bookkeeping after the last job
    assert worker.idle
    worker.shutdown()


async def test_model_time_is_counted_by_kind_of_job() -> None:
    worker = ModelWorker()
    await worker.submit(lambda c: time.sleep(0.05), Priority.INTERACTIVE).future
    await worker.submit(lambda c: time.sleep(0.02), Priority.WARMUP).future
    await asyncio.sleep(0)  # the loop's bookkeeping after the last job
    assert set(worker.busy_ms) == {"interactive", "warmup"}
    assert worker.busy_ms["interactive"] >= 45 and 15 <= worker.busy_ms["warmup"] < 45
    assert worker.stopped_ms == {}  # none was stopped
    worker.shutdown()


async def test_time_of_stopped_runs_is_counted_apart() -> None:
    worker = ModelWorker()

    def runs_until_stopped(cancel: CancelToken) -> None:
        while not cancel.cancelled:
            time.sleep(0.005)

    background = worker.submit(runs_until_stopped, Priority.WARMUP)
    await asyncio.sleep(0.05)
    await worker.submit(lambda c: None, Priority.INTERACTIVE).future  # preempts it
    await background.future  # it returned once stopped
    await asyncio.sleep(0)
    assert worker.stopped_ms.keys() == {"warmup"} and worker.stopped_ms["warmup"] >= 40
    assert worker.stopped_ms["warmup"] <= worker.busy_ms["warmup"]
    worker.shutdown()


class Serving:
    """What the host offers the worker: the backend that serves now (None: none yet)."""

    backend: FakeBackend | None = None


async def test_a_completion_job_runs_on_whatever_backend_serves_then() -> None:
    worker = ModelWorker()
    serving = Serving()
    none = worker.submit_completion(serving, CompletionRequest("x", ""), Priority.REFRESH, "c")
    with pytest.raises(JobDropped):
        await none.future
    serving.backend = FakeBackend(script=lambda r: "abc")
    job = worker.submit_completion(serving, CompletionRequest("x = ", ""), Priority.REFRESH, "c")
    assert (await job.future).text == "abc"
    assert await worker.run_exclusive(lambda: "between jobs") == "between jobs"
    worker.cancel_all()
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


def test_inside_an_unsure_token_the_request_waits_a_typical_gap() -> None:
    """The user is most likely still typing the word: the next key should supersede the
    request before any model work, however fast the model would answer."""
    d = AdaptiveDebounce()
    assert d.delay_ms(40, mid_token=True) <= 10  # no rhythm known yet
    t = 0.0
    for _ in range(10):  # 150 ms between keys: slower than the model's first token
        d.keystroke(t)
        t += 0.150
    assert d.delay_ms(40) <= 10  # the answer would beat the next key: no wait
    assert 140 <= d.delay_ms(40, mid_token=True) <= 160
    slow = AdaptiveDebounce()
    t = 0.0
    for _ in range(10):  # 900 ms between keys: the wait is bounded
        slow.keystroke(t)
        t += 0.9
    assert slow.delay_ms(40, mid_token=True) == MID_TOKEN_MAX_WAIT_MS
    assert AdaptiveDebounce(fixed_ms=120).delay_ms(40, mid_token=True) == 120


def test_a_pause_is_not_part_of_the_rhythm() -> None:
    d = AdaptiveDebounce()
    t = 0.0
    for gap in (0.04, 0.04, 0.04, 5.0, 0.04):
        d.keystroke(t)
        t += gap
    d.keystroke(t)
    assert 20 <= d.delay_ms(100) <= 80  # the 5 s pause did not make the typist look slow
