"""Scheduling, in one place: one model worker with priorities, and the adaptive debounce.

- One thread runs model work (the model has one KV cache; two jobs at once would thrash it).
  It is not pygls' thread pool: if model work held that pool, edits and `$/cancelRequest` would
  stop arriving.
- Interactive jobs go first. When one arrives, queued speculative and warm-up jobs are dropped
  and a running one is cancelled (it stops within one prefill chunk or one decode step).
- The debounce adapts to the user's typing rhythm: it only waits when the next keystroke is
  likely to arrive before an answer could, never a fixed 300 ms.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import statistics
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Protocol

from ghostfim.engine.backend import (
    CancelToken,
    Completion,
    CompletionBackend,
    CompletionRequest,
    OnText,
)
from ghostfim.engine.tuning import (
    DEBOUNCE_GAPS,
    DEBOUNCE_MAX_MS,
    DEBOUNCE_MIN_MS,
    DEBOUNCE_PAUSE_MS,
    DEBOUNCE_SHARE_OF_GAP,
    MID_TOKEN_MAX_WAIT_MS,
)

log = logging.getLogger("ghostfim.scheduler")


class Serving(Protocol):
    """Whoever knows the backend that serves now (engine/service/host.py)."""

    @property
    def backend(self) -> CompletionBackend | None: ...


class Priority(IntEnum):
    INTERACTIVE = 0
    REFRESH = 1  # the full-prompt refresh at a pause
    SPECULATIVE = 2  # the continuation after a shown suggestion
    WARMUP = 3


class JobDropped(Exception):
    """The job was dropped or cancelled before it ran."""


@dataclass(order=True)
class Job:
    priority: Priority
    seq: int
    run: Callable[[CancelToken], Any] = field(compare=False)
    cancel: CancelToken = field(compare=False, default_factory=CancelToken)
    future: asyncio.Future[Any] | None = field(compare=False, default=None)
    label: str = field(compare=False, default="")
    submitted: float = field(compare=False, default_factory=time.perf_counter)
    started: float | None = field(compare=False, default=None)

    @property
    def queue_ms(self) -> float:
        end = self.started if self.started is not None else time.perf_counter()
        return (end - self.submitted) * 1000


class ModelWorker:
    """Runs jobs one at a time on its own thread, highest priority first."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ghostfim-model")
        self._queue: list[Job] = []
        self._seq = itertools.count()
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self.running: Job | None = None
        # Model time by kind of job (a priority's name), cancelled runs included: where the
        # model's CPU goes (ghostfim/status `work.busyMs`).
        self.busy_ms: dict[str, float] = {}
        # Of it, the runs stopped before they finished (a keystroke superseded or preempted
        # them): work that bought nothing unless its KV cells are reused (`work.stoppedMs`).
        self.stopped_ms: dict[str, float] = {}

    @property
    def idle(self) -> bool:
        """Nothing runs and nothing waits to run."""
        return self.running is None and not self._queue

    def start(self) -> None:
        if self._task is None:
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._loop())

    def submit(self, run: Callable[[CancelToken], Any], priority: Priority, label: str = "") -> Job:
        """Queue model work; await `job.future` for its result (JobDropped if dropped)."""
        self.start()
        job = Job(
            priority,
            next(self._seq),
            run,
            label=label,
            future=asyncio.get_running_loop().create_future(),
        )
        if priority == Priority.INTERACTIVE:
            self.preempt_background()
        heapq.heappush(self._queue, job)
        assert self._wake is not None
        self._wake.set()
        return job

    def submit_completion(
        self,
        serving: Serving,
        request: CompletionRequest,
        priority: Priority,
        label: str,
        on_text: OnText | None = None,
    ) -> Job:
        """Queue a completion on whatever backend serves when it runs (JobDropped if none)."""

        def run(cancel: CancelToken) -> Completion:
            backend = serving.backend
            if backend is None:
                raise JobDropped("no backend")
            return backend.complete(request, cancel, on_text)

        return self.submit(run, priority, label)

    def preempt_background(self) -> None:
        """Drop queued non-interactive jobs and stop a running one."""
        kept = []
        for job in self._queue:
            if job.priority == Priority.INTERACTIVE:
                kept.append(job)
            else:
                self._drop(job)
        heapq.heapify(kept)
        self._queue = kept
        if self.running is not None and self.running.priority != Priority.INTERACTIVE:
            self.running.cancel.cancel()

    def cancel_all(self) -> None:
        for job in self._queue:
            self._drop(job)
        self._queue.clear()
        if self.running is not None:
            self.running.cancel.cancel()

    @staticmethod
    def _drop(job: Job) -> None:
        log.debug("drop %s", job.label)
        job.cancel.cancel()
        if job.future is not None and not job.future.done():
            job.future.set_exception(JobDropped(job.label))
            job.future.exception()  # mark retrieved: nobody may be waiting for a dropped job

    async def _loop(self) -> None:
        assert self._wake is not None
        loop = asyncio.get_running_loop()
        while True:
            while not self._queue:
                self._wake.clear()
                await self._wake.wait()
            job = heapq.heappop(self._queue)
            if job.cancel.cancelled:
                self._drop(job)
                continue
            job.started = time.perf_counter()
            self.running = job
            log.debug("start %s (queued %.1f ms)", job.label, job.queue_ms)
            try:
                result = await loop.run_in_executor(self._executor, job.run, job.cancel)
            except Exception as exc:  # reported to whoever awaits the job
                if job.future is not None and not job.future.done():
                    job.future.set_exception(exc)
                    job.future.exception()
            else:
                if job.future is not None and not job.future.done():
                    job.future.set_result(result)
            finally:
                self.running = None
                ran_ms = (time.perf_counter() - job.started) * 1000
                kind = job.priority.name.lower()
                self.busy_ms[kind] = self.busy_ms.get(kind, 0.0) + ran_ms
                token: CancelToken = job.cancel  # set from other threads while it ran
                if token.cancelled:
                    self.stopped_ms[kind] = self.stopped_ms.get(kind, 0.0) + ran_ms
                log.debug(
                    "end %s (ran %.1f ms%s)",
                    job.label,
                    ran_ms,
                    ", cancelled" if job.cancel.cancelled else "",
                )

    async def run_exclusive(self, fn: Callable[[], Any]) -> Any:
        """Run fn on the model thread between jobs (model load/unload)."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    def shutdown(self) -> None:
        self.cancel_all()
        if self._task is not None:
            self._task.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)


class AdaptiveDebounce:
    """How long to wait before starting an automatic request, from the typing rhythm.

    If the user's recent keystrokes come faster than we can show a first token, the next one
    will probably arrive first and the work would be wasted: wait a little (a share of the
    typical gap). Otherwise start at once: every millisecond of waiting is latency.
    """

    def __init__(self, fixed_ms: float | None = None) -> None:
        self.fixed_ms = fixed_ms
        self._last_key: float | None = None
        self._gaps: deque[float] = deque(maxlen=DEBOUNCE_GAPS)

    def keystroke(self, now: float | None = None) -> None:
        now = time.perf_counter() if now is None else now
        if self._last_key is not None:
            gap = (now - self._last_key) * 1000
            if gap < DEBOUNCE_PAUSE_MS:  # a pause is not part of the rhythm
                self._gaps.append(gap)
        self._last_key = now

    def delay_ms(self, expected_first_token_ms: float, mid_token: bool = False) -> float:
        """`mid_token`: the user stopped inside a token the suggestion was unsure of, where
        nothing shows (engine/service/suggestions.py `hides_from`): they are most likely
        still typing the word, so the fresh request waits a typical gap, and the next key
        supersedes it before any model work (measured: a third of the extra model requests
        the filter made on the accepting-user replay). A user who pauses there still gets
        it well within the time it takes to read ghost text."""
        if self.fixed_ms is not None:
            return self.fixed_ms
        if len(self._gaps) < 3:
            return DEBOUNCE_MIN_MS
        typical_gap = statistics.median(self._gaps)
        if mid_token:
            return min(typical_gap, MID_TOKEN_MAX_WAIT_MS)
        if typical_gap < expected_first_token_ms:
            return min(DEBOUNCE_SHARE_OF_GAP * typical_gap, DEBOUNCE_MAX_MS)
        return DEBOUNCE_MIN_MS
