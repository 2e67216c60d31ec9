"""One completion request, from the editor's ask to its answer: its phases, in the order they run.

    answer()           typed_through() -> admit() -> run() -> as_item()
    run()              run_model_job(), again if a model switch cancelled it
    run_model_job()    the job on the model thread: on_growth() as text streams, finish() at
                       its end

- typed through: a suggestion (finished or still streaming) that the typed characters match
  answers at once, with no model work (engine/service/suggestions.py);
- admit: the document's running job is superseded, and so are other documents' (one cursor);
  while no backend serves yet (the model loads) the request is held; the rules before the
  model may answer empty (too much text after the cursor); an adaptive debounce waits when the
  next keystroke is likely to come first (engine/service/scheduler.py);
- run: the model job on the one model thread, within the request's deadline
  (engine/service/deadline.py; a typed-through wait counts in it). An automatic request is
  answered as soon as its suggestion shows its first visible characters; the job keeps
  generating into the cache while the document's screen (engine/service/screen.py) streams
  the growth. The backend (engine/service/host.py owns it) does the prompt, the KV cache and
  the decode: engine/local/session.py `complete` down to `llama_decode`;
- finish: when the job ends, stats, then the follow-ups (engine/service/followups.py).

Its place, confidence rule and backend request are computed once, here.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ghostfim.engine.backend import Completion, CompletionRequest, Mark
from ghostfim.engine.service.cursor import CursorState
from ghostfim.engine.service.deadline import answer_deadline_s, hold_limit_s
from ghostfim.engine.service.documents import Answer, DocJob
from ghostfim.engine.service.requests import PromptMode
from ghostfim.engine.service.scheduler import JobDropped, Priority
from ghostfim.engine.service.screen import GhostTarget
from ghostfim.engine.service.stats import Source, request_stats
from ghostfim.engine.service.suggestions import Suggestion, shown_part
from ghostfim.engine.text.place import place_of

if TYPE_CHECKING:
    from ghostfim.engine.service.completion import CompletionService

log = logging.getLogger("ghostfim.service")


class Keystroke:
    """A request for a suggestion at `state`: automatic (typing) or explicit (the user asked)."""

    def __init__(self, service: CompletionService, state: CursorState, explicit: bool) -> None:
        self.service = service
        self.state = state
        self.explicit = explicit
        self.arrived = time.perf_counter()
        self.record = service.new_request(state)  # numbered: a newer request supersedes it
        self.number = self.record.latest
        self.place = place_of(state.language, state.prefix, state.suffix)
        self.rule = service.requests.rule_for(state, explicit, place=self.place)
        self.debounce_ms = 0.0
        self.waited_s = 0.0  # waiting for a typed-through suggestion to grow
        self.streamed: tuple[Suggestion, GhostTarget] | None = None  # the model job's

    @cached_property
    def request(self) -> CompletionRequest:
        """What the backend is asked: made once, when the request reaches the model."""
        mode: PromptMode = "full" if self.explicit else "keystroke"
        return self.service.requests.request_for(self.state, mode, explicit=self.explicit)

    @property
    def superseded(self) -> bool:
        return self.record.latest != self.number

    # --- the phases -------------------------------------------------------------------------
    async def answer(self) -> Answer:
        answer = None
        if not self.explicit and self.service.config.enable:  # off: not even from the cache
            self.service.debounce.keystroke(self.arrived)
            answer = await self.typed_through()
            self.waited_s = time.perf_counter() - self.arrived
        if answer is None:
            answer = await self.admit()
        if answer is None:
            answer = await self.run()
        return self.as_item(answer)

    async def typed_through(self) -> Answer | None:
        """The answer from a suggestion the typed characters match, if any."""
        hit = self.service.cache.lookup(self.state.prefix, self.state.suffix)
        if hit is None:
            return None
        suggestion, typed, record = hit.suggestion, hit.typed, self.record
        if record.job is not None and record.job.suggestion is not suggestion:
            record.supersede_job()
        if not _shows_past(suggestion, typed):
            # Typed as far as the still-growing suggestion: wait for it to grow past us.
            if not await self._grown_past(suggestion, typed):
                return Answer("", "none", "deadline")
            if self.superseded:
                return Answer("", "none", "superseded")
            if not _shows_past(suggestion, typed):
                return None
        if suggestion.hides_from(typed):
            record.mid_token = True  # asked afresh, once the user stops typing the word
            return None
        target = record.screen.typed_through(
            suggestion, self.state, self.place, typed, asked_at=self.arrived
        )
        self.publish_stats("cache", None, 0.0, 0.0, 0.0, cancelled=False)
        return Answer(suggestion.shown(typed), "cache", target=target)

    async def _grown_past(self, suggestion: Suggestion, typed: str) -> bool:
        """Wait until `suggestion` shows text past `typed` or ends; False at the automatic
        deadline (a stalled stream must not hold the request)."""
        grown = asyncio.Event()

        def on_update(s: Suggestion) -> None:
            if s.done or (s.text.startswith(typed) and s.shown(typed)):
                grown.set()

        suggestion.listeners.append(on_update)
        try:
            left = answer_deadline_s(False, None, 0) - (time.perf_counter() - self.arrived)
            await asyncio.wait_for(grown.wait(), max(0.0, left))
            return True
        except asyncio.TimeoutError:
            log.warning("%s: the suggestion typed into stopped growing", self.state.doc_id)
            return False
        finally:
            suggestion.listeners.remove(on_update)

    async def admit(self) -> Answer | None:
        """Whether the model is asked: None to go on, else the answer that ends the request."""
        service = self.service
        self.record.supersede_job()
        service.leave_others(self.record)
        if not service.config.enable:
            return Answer("", "none", "disabled")
        if service.host.backend is None:
            held = await self._hold()
            if held is not None:
                return held
        if not self.explicit:
            refused = service.filter.refuse_before_model(
                self.state.rest_of_line, service.config.max_rest_of_line
            )
            if refused is not None:
                service.refused_before_model += 1
                return Answer("", "none", refused)
            self.debounce_ms = service.debounce.delay_ms(
                service.latency.expected_first_token_ms(), mid_token=self.record.mid_token
            )
            await asyncio.sleep(self.debounce_ms / 1000)
            if self.superseded:
                return Answer("", "none", "superseded")
        return None

    async def _hold(self) -> Answer | None:
        """Wait for a backend (the model loads); None once one serves, else the answer."""
        host = self.service.host
        started = time.monotonic()
        limit = hold_limit_s()
        while host.backend is None:
            if host.closed:
                return Answer("", "none", "shutdown")
            if host.state == "error" and not host.busy:
                return Answer("", "none", "error")  # nothing is coming
            left = limit - (time.monotonic() - started)
            if left <= 0:
                return Answer("", "none", "loading")
            changed = asyncio.ensure_future(host.changed(left))
            superseded = asyncio.ensure_future(self.record.newer.wait())
            try:
                await asyncio.wait({changed, superseded}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                changed.cancel()
                superseded.cancel()
            if self.superseded:
                return Answer("", "none", "superseded")
        return None

    async def run(self) -> Answer:
        """The model job within the request's deadline (a typed-through wait counts in it)."""
        service = self.service
        c = service.config
        deadline = answer_deadline_s(self.explicit, service.host.backend, c.full_prompt_tokens)
        deadline = max(0.0, deadline - self.waited_s)
        try:
            return await asyncio.wait_for(self._until_answered(), deadline)
        except asyncio.TimeoutError:
            partial = self.whole_lines_so_far()
            if partial is not None:
                log.info("%s: answered what came within %.0f s", self.state.doc_id, deadline)
                return partial
            log.warning(
                "%s: no suggestion within %.0f s; answered empty", self.state.doc_id, deadline
            )
            return Answer("", "none", "deadline")

    def whole_lines_so_far(self) -> Answer | None:
        """At the deadline, an explicit request's suggestion as far as its last whole line:
        its user waits for a block, whose first lines are worth more than nothing (an
        automatic request is answered at its first visible text, long before)."""
        if not self.explicit or self.streamed is None:
            return None
        suggestion, target = self.streamed
        text = suggestion.shown()
        end = text.rfind("\n")
        if end <= 0 or not text[:end].strip():
            return None
        return Answer(text[:end], "model", target=target)

    async def _until_answered(self) -> Answer:
        """The model job, again if a model switch cancelled it: the new model answers."""
        host = self.service.host
        while True:
            changes = host.changes
            answer = await self.run_model_job()
            swapped = host.changes != changes and host.backend is not None
            if not (answer.reason == "cancelled" and swapped and not self.superseded):
                return answer

    async def run_model_job(self) -> Answer:
        """The model job, answered at its first visible text (an explicit request, which the
        user waits for, gets the whole suggestion)."""
        service, state, record = self.service, self.state, self.record
        loop = asyncio.get_running_loop()
        suggestion = Suggestion(rule=self.rule)
        first_visible = asyncio.Event()  # this job's: a retry after a switch starts afresh
        listener = functools.partial(self.on_growth, first_visible=first_visible)
        suggestion.listeners.append(listener)
        service.cache.put(state.prefix, state.suffix, suggestion)
        target = record.screen.answering(suggestion, state, self.place, asked_at=self.arrived)
        self.streamed = (suggestion, target)
        job = service.worker.submit_completion(
            service.host,
            self.request,
            Priority.INTERACTIVE,
            label=f"complete {state.doc_id} v{state.version}",
            on_text=lambda text, marks: _call_soon(loop, grow, suggestion, text, marks),
        )
        record.job = DocJob(state, suggestion, job.cancel.cancel)
        job_future = job.future
        assert job_future is not None
        job_future.add_done_callback(
            lambda fut: self.finish(fut, suggestion, job.queue_ms, listener)
        )
        waiters: set[asyncio.Future[Any]] = {job_future}
        if not self.explicit:
            waiters.add(asyncio.ensure_future(first_visible.wait()))
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            job.cancel.cancel()  # $/cancelRequest (or the deadline) before the answer: stop
            raise
        finally:
            for waiter in waiters - {job_future}:
                waiter.cancel()
        if job_future.done() and not job_future.cancelled() and job_future.exception() is None:
            result: Completion = job_future.result()
            if result.cancelled:
                return Answer("", "none", "cancelled")
            shown = shown_part(result.text, result.marks, self.rule)
            return Answer(shown, "model", target=target)
        if suggestion.cancelled or (job_future.done() and job_future.exception() is not None):
            return Answer("", "none", "cancelled")
        return Answer(suggestion.shown(), "model", target=target)

    def on_growth(self, suggestion: Suggestion, *, first_visible: asyncio.Event) -> None:
        """The job's suggestion grew: the request is answered at its first visible text, and
        from then on the document's screen shows its growth."""
        if suggestion.done or suggestion.shown():
            first_visible.set()
        if first_visible.is_set():
            self.record.screen.grew(suggestion, self.explicit)

    def finish(
        self,
        fut: asyncio.Future[Any],
        suggestion: Suggestion,
        queue_ms: float,
        listener: Callable[[Suggestion], None],
    ) -> None:
        """The job ended: the suggestion is final; stats, then the follow-ups."""
        service, record = self.service, self.record
        completion: Completion | None = None
        if not fut.cancelled() and fut.exception() is None:
            completion = fut.result()
            if not completion.cancelled:  # a cancel proves nothing about the backend
                service.host.request_succeeded()
        elif not fut.cancelled() and not isinstance(fut.exception(), JobDropped):
            service.host.request_failed(fut.exception())
        cancelled = completion is None or completion.cancelled
        if completion is not None and not cancelled:
            grow(suggestion, completion.text, completion.marks, done=True)
        else:  # stopped: what streamed stays, for the user who types into it
            grow(suggestion, suggestion.text, cancelled=True)
        # The finished suggestion stays in the cache; this request (its cursor state: up to
        # 80,000 characters of the document) need not stay with it.
        suggestion.listeners.remove(listener)
        if record.job is not None and record.job.suggestion is suggestion:
            record.job = None
        total_ms = (time.perf_counter() - self.arrived) * 1000
        self.publish_stats(
            "model",
            completion,
            queue_ms,
            self.debounce_ms,
            total_ms,
            cancelled=cancelled,
        )
        if completion is not None and not cancelled:
            service.latency.ttft.append(completion.timings.ttft_ms + queue_ms)
            service.latency.total.append(total_ms)
        service.followups.after_job(self.state, record, completion, self.explicit)

    def publish_stats(
        self,
        source: Source,
        completion: Completion | None,
        queue_ms: float,
        debounce_ms: float,
        total_ms: float,
        *,
        cancelled: bool,
    ) -> None:
        """The request's figures: kept for ghostfim/status, and sent to the editor."""
        backend = self.service.host.backend
        stats = request_stats(
            self.state,
            source=source,
            completion=completion,
            queue_ms=queue_ms,
            debounce_ms=debounce_ms,
            total_ms=total_ms,
            cancelled=cancelled,
            model=backend.info.name if backend else None,
        )
        self.service.latency.recent.append(stats)
        self.service.events.stats(stats)

    def as_item(self, answer: Answer) -> Answer:
        """A non-empty answer is an item on screen: it gets the id its accept will name."""
        if answer.text and answer.target is not None:
            answer.item_id = self.record.screen.item(
                answer.target, answer.text, explicit=self.explicit
            )
        return answer


def grow(
    suggestion: Suggestion,
    text: str,
    marks: tuple[Mark, ...] | None = None,
    *,
    done: bool = False,
    cancelled: bool = False,
) -> None:
    """The suggestion's text grows as the model streams it (or it ends): who waits on it
    hears of it (the request it answers, to answer and to show its growth; typed-through
    requests waiting for text). The one writer of a suggestion, on the event loop."""
    suggestion.update(text, marks, done=done, cancelled=cancelled)
    for listener in list(suggestion.listeners):
        listener(suggestion)


def _shows_past(suggestion: Suggestion, typed: str) -> bool:
    """The suggestion has text beyond what was typed into it (else a typed-through request
    waits for it to grow)."""
    return suggestion.text.startswith(typed) and len(suggestion.text) > len(typed)


def _call_soon(
    loop: asyncio.AbstractEventLoop,
    fn: Callable[[Suggestion, str, tuple[Mark, ...]], None],
    suggestion: Suggestion,
    text: str,
    marks: tuple[Mark, ...],
) -> None:
    """Hand streamed text to the event loop (from the model thread)."""
    loop.call_soon_threadsafe(fn, suggestion, text, marks)
