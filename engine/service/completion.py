"""The completion service: what an editor integration talks to (the LSP server does).

A keystroke, top to bottom (`complete`):

  1. typed-through: a suggestion (finished or still streaming) that the typed characters match
     answers at once, with no model work (engine/service/suggestions.py);
  2. admission: the document's running job is superseded (cancelled); while no backend serves
     yet (the model loads at start-up) the request is held; the rules before the model may
     answer empty (too much text after the cursor, a place where suggestions are refused:
     engine/service/filter.py); an adaptive debounce waits when the next keystroke is likely
     to come first; a deadline bounds the rest (engine/service/deadline.py);
  3. the model job runs on the one model thread (engine/service/scheduler.py) on whatever
     backend serves (engine/service/host.py owns it); the request is answered as soon as the
     suggestion shows its first visible characters, and the job keeps generating into the
     cache while `Events.ghost_text` streams the growth;
  4. when it ends: stats, then the follow-ups (engine/service/followups.py).

Every non-empty answer is an item the editor can accept (engine/service/acceptance.py). The
service knows nothing of LSP: positions are opaque, and what it reports are dataclasses
(engine/service/stats.py) that lsp/wire.py turns into JSON.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal, Protocol

from ghostfim.engine.backend import Completion, CompletionRequest, Mark
from ghostfim.engine.config import EngineConfig, backend_spec
from ghostfim.engine.context.feed import ContextFeed
from ghostfim.engine.service.acceptance import AcceptanceLog
from ghostfim.engine.service.deadline import answer_deadline_s, hold_limit_s
from ghostfim.engine.service.documents import (
    Answer,
    CursorState,
    DocJob,
    DocumentRecord,
    GhostTarget,
)
from ghostfim.engine.service.filter import ConfidenceFilter
from ghostfim.engine.service.followups import FollowUps
from ghostfim.engine.service.host import BackendHost, Opener
from ghostfim.engine.service.localstats import LocalStats
from ghostfim.engine.service.scheduler import AdaptiveDebounce, JobDropped, ModelWorker, Priority
from ghostfim.engine.service.stats import (
    LatencyLog,
    RequestStats,
    ServiceStatus,
    Source,
    WorkCounters,
    request_stats,
)
from ghostfim.engine.service.suggestions import Suggestion, SuggestionCache, shown_part
from ghostfim.engine.text.confidence import Confidence
from ghostfim.engine.text.place import place_of

log = logging.getLogger("ghostfim.service")

__all__ = ["Answer", "CompletionService", "CursorState", "Events"]


class Events(Protocol):
    """What the service tells its editor integration."""

    def ghost_text(self, state: CursorState, text: str, done: bool, item_id: str) -> None: ...
    def stats(self, stats: RequestStats) -> None: ...
    def status(self, status: ServiceStatus) -> None: ...
    def progress(self, message: str, percentage: int | None, done: bool) -> None: ...
    def problem(self, message: str) -> None: ...


class _HostEvents:
    """The host's events: progress and problems go to the editor, changes publish the status."""

    def __init__(self, service: CompletionService) -> None:
        self._service = service

    def progress(self, message: str, percentage: int | None, done: bool) -> None:
        self._service.events.progress(message, percentage, done)

    def problem(self, message: str) -> None:
        self._service.events.problem(message)

    def host_changed(self) -> None:
        self._service.publish_status()


class CompletionService:
    def __init__(
        self,
        events: Events,
        config: EngineConfig | None = None,
        opener: Opener | None = None,
    ) -> None:
        if opener is None:
            from ghostfim.engine.service.opening import BackendOpener  # llama.cpp, httpx

            opener = BackendOpener()
        self.events = events
        self.config = config or EngineConfig()
        self.worker = ModelWorker()
        self.cache = SuggestionCache()
        self.debounce = AdaptiveDebounce(self.config.debounce_ms)
        self.latency = LatencyLog()
        self.acceptance = AcceptanceLog()
        self.filter = ConfidenceFilter(self.config.filter)
        self.local_stats = LocalStats(enabled=False)  # enabled by the configuration
        self.acceptance.listeners += [self.local_stats.record, self.filter.learn]
        self.context = ContextFeed()
        self.docs: dict[str, DocumentRecord] = {}
        self.host = BackendHost(_HostEvents(self), self.worker, opener, self._backend_swapped)
        self.followups = FollowUps(
            self.worker,
            self.host,
            self.cache,
            self.acceptance,
            events,
            self._request_for,
            self._rule_for,
        )
        self._counter = 0
        self._last_state: CursorState | None = None
        self._refused_before_model = 0  # automatic requests the rules answered empty
        self._stats_read = False
        self.set_options(self.config)

    # --- configuration -------------------------------------------------------------------------
    def configure(
        self, config: EngineConfig, default_model: str | None = None
    ) -> asyncio.Future[bool]:
        """Run with `config`: completion options now, and the backend it names (a switch in
        the background unless it serves or is on its way; new budgets in place). The future
        says whether that backend serves in the end."""
        self.set_options(config)
        return self.host.want(backend_spec(config, default_model))

    def set_options(self, config: EngineConfig) -> None:
        old = self.config
        self.config = config
        if (old.postprocess, old.multiline, old.max_tokens, old.filter) != (
            config.postprocess,
            config.multiline,
            config.max_tokens,
            config.filter,
        ):
            self.cache.clear()  # suggestions made under other rules must not be reused
        self.debounce.fixed_ms = config.debounce_ms
        self.filter.mode = config.filter
        self.local_stats.enabled = config.acceptance_stats
        if config.acceptance_stats and not self._stats_read:
            self._stats_read = True  # the adaptive filter starts from the earlier sessions
            self.filter.start_from(self.local_stats.records())

    def _backend_swapped(self, _backend: object) -> None:
        """A new backend serves: suggestions of the old one go, the last document warms."""
        self.cache.clear()
        if self._last_state is not None and not self.host.newer_pending:
            self.followups.warm(self._last_state)

    # --- status --------------------------------------------------------------------------------
    def status(self) -> ServiceStatus:
        host, backend = self.host, self.host.backend
        return ServiceStatus(
            state=host.state,
            error=host.error,
            model=backend.info if backend else None,
            switching_to=host.switching_label,
            loading=host.loading,
            context=self.context.status(),
            kv=backend.kv_status() if backend else None,
            latency=self.latency.summary(),
            recent=tuple(self.latency.recent),
            work=None
            if backend is None
            else WorkCounters(
                backend.decode_steps,
                backend.prefill_chunks,
                self.worker.running is not None,
                dict(self.worker.busy_ms),
                dict(self.worker.stopped_ms),
            ),
            acceptance=replace(self.acceptance.counts),
            budgets=host.budgets,
            saved_cpu_ms=self._refused_before_model * self.latency.expected_job_ms(),
        )

    def publish_status(self) -> None:
        self.events.status(self.status())

    async def shutdown(self) -> None:
        self.followups.stop()
        self.worker.cancel_all()
        await self.host.shutdown()
        self.worker.shutdown()

    # --- documents -----------------------------------------------------------------------------
    def _doc(self, doc_id: str) -> DocumentRecord:
        record = self.docs.get(doc_id)
        if record is None:
            record = self.docs[doc_id] = DocumentRecord()
        return record

    def document_changed(self, doc_id: str, text: str) -> None:
        """An edit that is not typing into the suggestion stops what was made for it: the
        running job at once, and the follow-ups (refresh, prefetch of its continuation)."""
        record = self.docs.get(doc_id)
        if record is None:
            return
        job = record.job
        if job is not None and not job.suggestion.done:
            if not _typed_into(job.state, job.suggestion, text):
                job.cancel()
                if not _typed_all_of(job.state, job.suggestion, text):
                    self.acceptance.left(doc_id, time.monotonic())
            return
        ghost = record.ghost
        if ghost is None:
            return
        if _typed_into(ghost.state, ghost.suggestion, text, ghost.typed):
            self.acceptance.inserted(doc_id, len(text) - ghost.state.doc_length)
            return
        record.ghost = None
        self.worker.preempt_background()
        # The editor inserting the whole suggestion (an accept, whose command follows) or the
        # user typing all of it is not leaving it: no refusal.
        if _typed_all_of(ghost.state, ghost.suggestion, text, ghost.typed):
            self.acceptance.inserted(doc_id, len(text) - ghost.state.doc_length)
        else:
            self.acceptance.left(doc_id, time.monotonic())

    def document_closed(self, doc_id: str) -> None:
        self.acceptance.closed(doc_id)
        record = self.docs.pop(doc_id, None)
        if record is not None:
            if record.job is not None:
                record.job.cancel()
            record.newer.set()  # a request held for it is not wanted any more
        self.context.closed(doc_id)
        backend = self.host.backend
        if backend is not None:
            self.worker.submit(
                lambda _cancel: backend.forget_document(doc_id), Priority.WARMUP, "forget"
            )

    # --- accept signals (engine/service/acceptance.py) -----------------------------------------
    def accepted(self, item_id: str) -> bool:
        known = self.acceptance.accepted(item_id)
        self.publish_status()
        return known

    def partially_accepted(self, item_id: str, chars: int) -> bool:
        known = self.acceptance.partially_accepted(item_id, chars)
        self.publish_status()
        return known

    def displayed(self, item_id: str) -> None:
        self.acceptance.displayed(item_id, time.monotonic())

    def dismissed(self, item_id: str) -> None:
        self.acceptance.dismissed(item_id, time.monotonic())

    # --- completion ----------------------------------------------------------------------------
    async def complete(self, state: CursorState, *, explicit: bool = False) -> Answer:
        arrived = time.perf_counter()
        record = self._new_request(state)
        answer = None
        if not explicit:
            self.debounce.keystroke(arrived)
            answer = await self._typed_through(state, record, arrived)
        if answer is None:
            answer = await self._from_model(state, record, explicit, arrived)
        return self._shown(answer, explicit)

    def _new_request(self, state: CursorState) -> DocumentRecord:
        """Number the request (newer ones supersede it) and note where the user is."""
        self._counter += 1
        record = self._doc(state.doc_id)
        record.next_request(self._counter)
        left = self._last_state
        self.context.cursor_moved(
            state.doc_id,
            state.cursor_line,
            None if left is None else (left.doc_id, left.prefix + left.suffix, left.cursor_line),
        )
        record.last_state = self._last_state = state
        return record

    async def _typed_through(
        self, state: CursorState, record: DocumentRecord, arrived: float
    ) -> Answer | None:
        """Step 1: the answer from a suggestion the typed characters match, if any."""
        hit = self.cache.lookup(state.prefix, state.suffix)
        if hit is None:
            return None
        suggestion, typed, number = hit.suggestion, hit.typed, record.latest
        if record.job is not None and record.job.suggestion is not suggestion:
            self._supersede(record)
        if not suggestion.text.startswith(typed) or len(suggestion.text) <= len(typed):
            # Typed as far as the still-growing suggestion: wait for it to grow past us.
            grown = asyncio.Event()

            def on_update(s: Suggestion) -> None:
                if s.done or (s.text.startswith(typed) and s.shown(typed)):
                    grown.set()

            suggestion.listeners.append(on_update)
            try:
                await grown.wait()
            finally:
                suggestion.listeners.remove(on_update)
            if record.latest != number:
                return Answer("", "none", "superseded")
            if not suggestion.text.startswith(typed) or len(suggestion.text) <= len(typed):
                return None
        if suggestion.hides_from(typed):
            record.mid_token = True  # asked afresh, once the user stops typing the word
            return None
        target = record.ghost = GhostTarget(suggestion, state, typed, asked_at=arrived)
        remaining = suggestion.shown(typed)
        self._publish_stats(state, "cache", None, 0.0, 0.0, 0.0, cancelled=False)
        return Answer(remaining, "cache", target=target)

    async def _from_model(
        self, state: CursorState, record: DocumentRecord, explicit: bool, arrived: float
    ) -> Answer:
        """Step 2, admission, then step 3 within the request's deadline."""
        self._supersede(record)
        self._leave_others(record)
        number = record.latest
        if not self.config.enable:
            return Answer("", "none", "disabled")
        if self.host.backend is None:
            held = await self._hold(record, number)
            if held is not None:
                return held
        refused = self._rules_before_model(state, explicit)
        if refused is not None:
            self._refused_before_model += 1
            return Answer("", "none", refused)
        debounce_ms = 0.0
        if not explicit:
            debounce_ms = self.debounce.delay_ms(
                self.latency.expected_first_token_ms(), mid_token=record.mid_token
            )
            await asyncio.sleep(debounce_ms / 1000)
            if record.latest != number:
                return Answer("", "none", "superseded")
        c = self.config
        deadline = answer_deadline_s(explicit, self.host.backend, c.prefix_tokens + c.suffix_tokens)
        try:
            return await asyncio.wait_for(
                self._run_until_answered(state, record, explicit, debounce_ms, arrived), deadline
            )
        except asyncio.TimeoutError:
            log.warning("%s: no suggestion within %.0f s; answered empty", state.doc_id, deadline)
            return Answer("", "none", "deadline")

    def _rules_before_model(self, state: CursorState, explicit: bool) -> str | None:
        """The rules that answer an automatic request empty before any model work."""
        if explicit:
            return None
        place = place_of(state.language, state.prefix, state.suffix)
        return self.filter.refuse_before_model(
            state.rest_of_line, place, self.config.max_rest_of_line
        )

    def _supersede(self, record: DocumentRecord) -> None:
        job, record.job = record.job, None
        if job is not None and not job.suggestion.done:
            job.cancel()

    def _leave_others(self, record: DocumentRecord) -> None:
        """One cursor: model work here stops what other documents' jobs still generate.
        Their requests were answered at their first visible text and the rest only streams
        into ghost text the user has left; but they run at interactive priority, which
        nothing else stops, so this request would queue behind the rest of theirs (going
        back to a file waited 0.2-1.9 s for the one just left)."""
        for other in self.docs.values():
            if other is not record:
                self._supersede(other)

    async def _hold(self, record: DocumentRecord, number: int) -> Answer | None:
        """Wait for a backend (the model loads); None once one serves, else the answer."""
        started = time.monotonic()
        limit = hold_limit_s()
        while self.host.backend is None:
            if self.host.closed:
                return Answer("", "none", "shutdown")
            if self.host.state == "error" and not self.host.busy:
                return Answer("", "none", "error")  # nothing is coming
            left = limit - (time.monotonic() - started)
            if left <= 0:
                return Answer("", "none", "loading")
            changed = asyncio.ensure_future(self.host.changed(left))
            superseded = asyncio.ensure_future(record.newer.wait())
            try:
                await asyncio.wait({changed, superseded}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                changed.cancel()
                superseded.cancel()
            if record.latest != number:
                return Answer("", "none", "superseded")
        return None

    async def _run_until_answered(
        self,
        state: CursorState,
        record: DocumentRecord,
        explicit: bool,
        debounce_ms: float,
        arrived: float,
    ) -> Answer:
        number = record.latest
        while True:
            changes = self.host.changes
            answer = await self._run_model_job(state, record, explicit, debounce_ms, arrived)
            swapped = self.host.changes != changes and self.host.backend is not None
            if answer.reason == "cancelled" and swapped and record.latest == number:
                continue  # a model switch cancelled it: the new model answers instead
            return answer

    async def _run_model_job(
        self,
        state: CursorState,
        record: DocumentRecord,
        explicit: bool,
        debounce_ms: float,
        arrived: float,
    ) -> Answer:
        """Step 3: the model job, answered at its first visible text (an explicit request,
        which the user waits for, gets the whole suggestion)."""
        loop = asyncio.get_running_loop()
        request = self._request_for(state, "full" if explicit else "keystroke", explicit=explicit)
        rule = self._rule_for(state, explicit)
        suggestion = Suggestion(rule=rule)
        first_visible = asyncio.Event()

        def on_update(s: Suggestion) -> None:
            if s.done or s.shown():
                first_visible.set()
            target = record.ghost
            if (
                target is not None
                and target.suggestion is s
                and first_visible.is_set()
                and s.text.startswith(target.typed)
            ):
                shown = s.shown(target.typed)
                item_id = target.item(self.acceptance, shown, explicit=explicit)
                self.acceptance.grown(target.state.doc_id, s, shown)
                self.events.ghost_text(target.state, shown, s.done, item_id)

        suggestion.listeners.append(on_update)
        self.cache.put(state.prefix, state.suffix, suggestion)
        first_target = record.ghost = GhostTarget(suggestion, state, asked_at=arrived)
        job = self.worker.submit_completion(
            self.host,
            request,
            Priority.INTERACTIVE,
            label=f"complete {state.doc_id} v{state.version}",
            on_text=lambda text, marks: _call_soon(loop, grow, suggestion, text, marks),
        )
        record.job = DocJob(state, suggestion, job.cancel.cancel)
        job_future = job.future
        assert job_future is not None
        job_future.add_done_callback(
            lambda fut: self._job_finished(
                fut, state, record, suggestion, job.queue_ms, debounce_ms, arrived, explicit
            )
        )
        waiters: set[asyncio.Future[Any]] = {job_future}
        if not explicit:
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
            shown = shown_part(result.text, result.marks, rule)
            return Answer(shown, "model", target=first_target)
        if suggestion.cancelled or (job_future.done() and job_future.exception() is not None):
            return Answer("", "none", "cancelled")
        return Answer(suggestion.shown(), "model", target=first_target)

    def _rule_for(self, state: CursorState, explicit: bool = False) -> Confidence | None:
        """What is worth showing of a suggestion for this state (engine/service/filter.py)."""
        place = place_of(state.language, state.prefix, state.suffix)
        return self.filter.confidence_for(place, explicit)

    def _request_for(
        self,
        state: CursorState,
        mode: Literal["keystroke", "full"],
        max_tokens: int | None = None,
        *,
        explicit: bool = False,
    ) -> CompletionRequest:
        c = self.config
        extra = None
        if mode == "full":
            extra = self.context.for_prompt(state.doc_id, c.extra_context, c.extra_context_tokens)
        return CompletionRequest(
            prefix=state.prefix,
            suffix=state.suffix,
            doc_id=state.doc_id,
            cursor_line=state.cursor_line,
            mode=mode,
            max_tokens=max_tokens or c.max_tokens,
            multiline=c.multiline,
            postprocess=c.postprocess,
            extra_context=extra,
            give_up_below=self.filter.give_up_below(explicit),
        )

    def _job_finished(
        self,
        fut: asyncio.Future[Any],
        state: CursorState,
        record: DocumentRecord,
        suggestion: Suggestion,
        queue_ms: float,
        debounce_ms: float,
        arrived: float,
        explicit: bool,
    ) -> None:
        """Step 4: the suggestion is final; stats, then the follow-ups."""
        completion: Completion | None = None
        if not fut.cancelled() and fut.exception() is None:
            completion = fut.result()
            if not completion.cancelled:  # a cancel proves nothing about the backend
                self.host.request_succeeded()
        elif not fut.cancelled() and not isinstance(fut.exception(), JobDropped):
            self.host.request_failed(fut.exception())
        cancelled = completion is None or completion.cancelled
        if completion is not None and not cancelled:
            grow(suggestion, completion.text, completion.marks, done=True)
        else:  # stopped: what streamed stays, for the user who types into it
            grow(suggestion, suggestion.text, cancelled=True)
        if record.job is not None and record.job.suggestion is suggestion:
            record.job = None
        total_ms = (time.perf_counter() - arrived) * 1000
        self._publish_stats(
            state, "model", completion, queue_ms, debounce_ms, total_ms, cancelled=cancelled
        )
        if completion is not None and not cancelled:
            self.latency.ttft.append(completion.timings.ttft_ms + queue_ms)
            self.latency.total.append(total_ms)
        self.followups.after_job(state, record, completion, explicit)

    def _shown(self, answer: Answer, explicit: bool) -> Answer:
        """A non-empty answer is an item on screen: it gets the id its accept will name."""
        if answer.text and answer.target is not None:
            answer.item_id = answer.target.item(self.acceptance, answer.text, explicit=explicit)
        return answer

    # --- context from other files (engine/context/feed.py) -------------------------------------
    def set_workspace_roots(self, roots: list[str]) -> None:
        self.context.set_workspace_roots(roots)

    def document_opened(self, doc_id: str, text: str) -> None:
        self._doc(doc_id)
        self.context.opened(doc_id, text)

    def document_edited(self, doc_id: str, text: str, line: int | None) -> None:
        self.context.edited(doc_id, text, line)

    def document_saved(self, doc_id: str, text: str) -> None:
        self.context.saved(doc_id, text)

    def client_context(self, text: str, doc_id: str | None = None) -> int:
        return self.context.client_text(text, doc_id)

    # --- stats ---------------------------------------------------------------------------------
    def _publish_stats(
        self,
        state: CursorState,
        source: Source,
        completion: Completion | None,
        queue_ms: float,
        debounce_ms: float,
        total_ms: float,
        *,
        cancelled: bool,
        reason: str = "",
    ) -> None:
        backend = self.host.backend
        stats = request_stats(
            state,
            source=source,
            completion=completion,
            queue_ms=queue_ms,
            debounce_ms=debounce_ms,
            total_ms=total_ms,
            cancelled=cancelled,
            model=backend.info.name if backend else None,
            reason=reason,
        )
        self.latency.recent.append(stats)
        self.events.stats(stats)


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


def _typed_into(state: CursorState, suggestion: Suggestion, text: str, typed: str = "") -> bool:
    """Whether `text` (the document after an edit) is `state`'s document with characters of
    the suggestion typed at the cursor (after `typed`, already typed into it at `state`): the
    text either side of the cursor is intact."""
    delta = len(text) - state.doc_length
    return (
        delta >= 0
        and text[max(0, state.offset - len(state.edge_before)) : state.offset] == state.edge_before
        and text[state.offset + delta : state.offset + delta + len(state.edge_after)]
        == state.edge_after
        and suggestion.could_continue(typed + text[state.offset : state.offset + delta])
    )


def _typed_all_of(state: CursorState, suggestion: Suggestion, text: str, typed: str = "") -> bool:
    """Whether `text` is `state`'s document with the rest of the suggestion (what it shows, no
    trailing whitespace) typed at the cursor: all of it taken."""
    delta = len(text) - state.doc_length
    inserted = typed + text[state.offset : state.offset + delta]
    shown = typed + suggestion.shown(typed)
    return (
        delta > 0
        and bool(shown)
        and inserted.rstrip() == shown
        and text[max(0, state.offset - len(state.edge_before)) : state.offset] == state.edge_before
        and text[state.offset + delta : state.offset + delta + len(state.edge_after)]
        == state.edge_after
    )


def _call_soon(
    loop: asyncio.AbstractEventLoop,
    fn: Callable[[Suggestion, str, tuple[Mark, ...]], None],
    suggestion: Suggestion,
    text: str,
    marks: tuple[Mark, ...],
) -> None:
    """Hand streamed text to the event loop (from the model thread)."""
    loop.call_soon_threadsafe(fn, suggestion, text, marks)
