"""The completion service: what an editor integration talks to (the LSP server does).

It turns cursor states into suggestions and runs their follow-ups:

    complete(state)
      0. while no backend serves yet (the model loads at start-up), the request is held: an
         explicit one waits for the model, and of the automatic ones the newest per document;
      1. typed-through: a suggestion (finished or still streaming) that the typed characters
         match answers at once, with no model work;
      2. otherwise the document's running job is superseded (cancelled), and after an adaptive
         debounce a model job starts, within the request's deadline (engine/deadline.py);
      3. the request is answered as soon as the suggestion shows its first visible characters;
         the job keeps generating into the cache and `Events.ghost_text` streams the growth;
      4. when it ends: stats, then the follow-ups, all droppable background jobs: widen (the
         keystroke used the narrow window: prepare the wide one), at a pause a full-prompt
         refresh (the keystroke prompt cut the suffix) and a speculative prefetch of the
         continuation.

Model switching is engine/switching.py, context from other files engine/context_feed.py,
stats and status engine/stats.py. It knows nothing of LSP: positions are opaque, and events
go out through `Events`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Hashable
from dataclasses import replace
from typing import Any, Literal, Protocol

from ghostfim.engine.backend import Completion, CompletionBackend, CompletionRequest
from ghostfim.engine.config import BackendSpec, EngineConfig, backend_spec
from ghostfim.engine.context.feed import ContextFeed
from ghostfim.engine.service.acceptance import AcceptanceLog
from ghostfim.engine.service.deadline import HOLD_LIMIT_S, answer_deadline_s
from ghostfim.engine.service.documents import (
    Answer,
    CursorState,
    DocJob,
    DocumentRecord,
    GhostTarget,
)
from ghostfim.engine.service.host import ModelSwitcher, close_backend
from ghostfim.engine.service.stats import LatencyLog, model_status, stats_payload
from ghostfim.engine.service.suggestions import Suggestion, SuggestionCache
from ghostfim.engine.service.worker import AdaptiveDebounce, JobDropped, ModelWorker, Priority
from ghostfim.engine.text.place import place_of
from ghostfim.engine.text.postprocess import too_much_after_cursor

log = logging.getLogger("ghostfim.service")

PAUSE_REFRESH_S = 0.35  # a pause this long gets the full prompt (when the keystroke one cut it)
SPECULATIVE_MAX_TOKENS = 24

State = Literal["loading", "ready", "error"]

__all__ = ["Answer", "CompletionService", "CursorState", "Events"]


class Events(Protocol):
    """What the service tells its editor integration."""

    def ghost_text(self, state: CursorState, text: str, done: bool) -> None: ...
    def stats(self, payload: dict[str, Any]) -> None: ...
    def status(self, payload: dict[str, Any]) -> None: ...
    def progress(self, message: str, percentage: int | None, done: bool) -> None: ...
    def problem(self, message: str) -> None: ...


def visible(text: str) -> str:
    """What of a partial suggestion is worth showing: no trailing whitespace."""
    return text.rstrip()


class _SwitchEvents:
    """The switcher's events, as the service's state and its editor's events."""

    def __init__(self, service: CompletionService) -> None:
        self.service = service

    def progress(self, message: str, percentage: int | None, done: bool) -> None:
        self.service.events.progress(message, percentage, done)

    def problem(self, message: str) -> None:
        self.service.events.problem(message)

    def loading(self, label: str | None, percentage: int | None) -> None:
        service = self.service
        service.load_progress = None if label is None else (label, percentage)
        if label is not None and service.session is None:
            service.state = "loading"
        service.publish_status()

    def failed(self, message: str) -> None:
        self.service.set_state("ready" if self.service.session else "error", message)
        self.service.backend_changed()

    def recovered(self) -> None:
        self.service.set_state("ready")


class CompletionService:
    def __init__(self, events: Events, config: EngineConfig | None = None) -> None:
        self.events = events
        self.config = config or EngineConfig()
        self.worker = ModelWorker()
        self.cache = SuggestionCache()
        self.debounce = AdaptiveDebounce(self.config.debounce_ms)
        self.session: CompletionBackend | None = None
        self.state: State = "loading"
        self.error: str | None = None
        self.load_progress: tuple[str, int | None] | None = None  # what loads, how far
        self.latency = LatencyLog()
        self.acceptance = AcceptanceLog()
        self.docs: dict[str, DocumentRecord] = {}
        self.context = ContextFeed()
        self.switcher = ModelSwitcher(_SwitchEvents(self), self._swap_in)
        self._spec: BackendSpec | None = None  # what serves (or comes), budgets included
        self._counter = 0
        self._closed = False
        self._last_state: CursorState | None = None
        self._background_tasks: set[asyncio.Future[Any]] = set()
        self._widening = False  # a background job preparing the wide keystroke window
        self._backend_generation = 0  # bumped when a backend is swapped in (or a load fails)
        self._backend_event = asyncio.Event()
        self._budgets: tuple[int, tuple[int, int, float, int]] | None = None  # applied to whom

    # --- configuration ---------------------------------------------------------------------
    def configure(self, config: EngineConfig, default_model: str | None = None) -> None:
        """Run with `config`: completion options now, and the backend it names (a switch in
        the background unless it serves or is on its way; new budgets in place)."""
        self.set_options(config)
        wanted = backend_spec(config, default_model)
        if wanted.same_backend(self.switcher.serving_key):
            # What serves: a switch in flight is abandoned, a failed one's message dropped.
            self.switcher.keep_current()
            self._apply_budgets()
            return
        if wanted.same_backend(self.switcher.switching_key):
            return  # on its way (its budgets are applied when it swaps in)
        self._request(wanted)

    def set_options(self, config: EngineConfig) -> None:
        old = self.config
        self.config = config
        if (old.postprocess, old.multiline, old.max_tokens) != (
            config.postprocess,
            config.multiline,
            config.max_tokens,
        ):
            self.cache.clear()  # suggestions made under other rules must not be reused
        self.debounce.fixed_ms = config.debounce_ms
        self._apply_budgets()

    def _apply_budgets(self) -> None:
        """The serving backend's prompt budgets follow the configuration, in place."""
        session, c = self.session, self.config
        if session is None or self._closed:
            return
        budgets = (c.prefix_tokens, c.suffix_tokens, c.keystroke_prefill_ms, c.snapshot_bytes)
        if self._budgets == (id(session), budgets):
            return
        self._budgets = (id(session), budgets)

        def reconfigure(_cancel: Any) -> None:
            session.set_budgets(*budgets)

        self.worker.submit(reconfigure, Priority.INTERACTIVE, label="budgets")
        self.cache.clear()

    def _request(self, spec: BackendSpec) -> asyncio.Future[bool]:
        if spec.kind == "local":
            return self.request_model(spec)
        from ghostfim.engine.remote.backends import (  # httpx when used
            RemoteConfig,
            open_remote_backend,
        )

        remote = RemoteConfig(
            kind=spec.kind,
            url=spec.identity or "",
            model=spec.remote_model,
            api_key_env=spec.api_key_env,
            timeout_ms=spec.timeout_ms,
            prefix_tokens=spec.prefix_tokens,
            suffix_tokens=spec.suffix_tokens,
        )
        return self.switcher.request(
            f"{remote.kind} at {remote.shown_url}",
            lambda _progress: open_remote_backend(remote),
            key=spec,
        )

    def request_model(self, spec: BackendSpec) -> asyncio.Future[bool]:
        """Load the in-process model `spec` names, in the background."""
        from ghostfim.engine.local.loading import check_model, load_session  # llama.cpp when needed

        def open_model(progress: Callable[[float], None]) -> CompletionBackend:
            c = self.config  # the budgets wanted when the load starts
            return load_session(
                spec.model,
                n_gpu_layers=spec.n_gpu_layers,
                progress=False,
                on_progress=lambda _stage, fraction: progress(fraction),
                prefix_tokens=c.prefix_tokens,
                suffix_tokens=c.suffix_tokens,
                keystroke_prefill_ms=c.keystroke_prefill_ms,
                snapshot_bytes=spec.snapshot_bytes,
            )

        return self.switcher.request(
            spec.label, open_model, key=spec, check=lambda: check_model(spec.model)
        )

    def request_backend(
        self,
        label: str,
        open_backend: Callable[[], CompletionBackend],
        *,
        key: Hashable = None,
        check: Callable[[], None] | None = None,
    ) -> asyncio.Future[bool]:
        """Open any backend through the switcher (registered now); the future says whether
        it was swapped in."""
        return self.switcher.request(label, lambda _progress: open_backend(), key=key, check=check)

    async def load_backend(
        self, label: str, open_backend: Callable[[], CompletionBackend], *, key: Hashable = None
    ) -> bool:
        """`request_backend`, awaited: True when swapped in."""
        return await asyncio.shield(self.request_backend(label, open_backend, key=key))

    def keep_current(self) -> None:
        """The backend serving now is wanted after all (see ModelSwitcher.keep_current)."""
        self.switcher.keep_current()

    @property
    def session_key(self) -> Hashable:
        return self.switcher.serving_key

    @property
    def switching_key(self) -> Hashable:
        return self.switcher.switching_key

    async def _swap_in(self, new: CompletionBackend, key: Hashable) -> None:
        """A new backend is ready: it replaces the old one between jobs, on the model thread,
        so that no job ever sees a closed backend. Requests cancelled by the swap run again on
        the new one (see _complete_with_model)."""
        self.worker.cancel_all()

        def swap() -> None:
            old, self.session = self.session, new
            if old is not None:
                close_backend(old)

        await self.worker.run_exclusive(swap)
        self.cache.clear()
        self._budgets = None
        self._apply_budgets()  # the configuration may have changed while it loaded
        self.set_state("ready")
        self.backend_changed()
        if self._last_state is not None and not self.switcher.busy:
            self.warm(self._last_state)

    def backend_changed(self) -> None:
        """Wake the requests held while no backend served (a backend is in, or a load failed)."""
        self._backend_generation += 1
        self._backend_event.set()
        self._backend_event = asyncio.Event()

    # --- status --------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        session = self.session
        loading = self.load_progress
        return {
            "state": self.state,
            "error": self.error,
            "model": model_status(session.info if session else None),
            "switchingTo": self.switcher.switching_label,
            "loading": None if loading is None else {"label": loading[0], "percentage": loading[1]},
            "context": self.context.status(),
            "kv": session.kv_status() if session else None,
            "latency": self.latency.summary(),
            "acceptance": self.acceptance.summary(),
            "recent": list(self.latency.recent),
            "work": None
            if session is None
            else {
                "decodeSteps": session.decode_steps,
                "prefillChunks": session.prefill_chunks,
                "running": self.worker.running is not None,
            },
        }

    def set_state(self, state: State, error: str | None = None) -> None:
        self.state, self.error = state, error
        self.publish_status()

    def publish_status(self) -> None:
        self.events.status(self.status())

    async def shutdown(self) -> None:
        self._closed = True
        self.switcher.shutdown()
        self.worker.cancel_all()
        if self.session is not None:
            session = self.session
            with contextlib.suppress(Exception):
                await self.worker.run_exclusive(lambda: close_backend(session))
            self.session = None
        self.worker.shutdown()
        self.backend_changed()

    # --- documents ---------------------------------------------------------------------------
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
                self.acceptance.left(doc_id, time.monotonic())
            return
        ghost = record.ghost
        if ghost is not None and not _typed_into(ghost.state, ghost.suggestion, text, ghost.typed):
            record.ghost = None
            self.acceptance.left(doc_id, time.monotonic())
            self.worker.preempt_background()

    def document_closed(self, doc_id: str) -> None:
        self.acceptance.closed(doc_id)
        record = self.docs.pop(doc_id, None)
        if record is not None:
            if record.job is not None:
                record.job.cancel()
            record.newer.set()  # a request held for it is not wanted any more
        self.context.closed(doc_id)
        session = self.session
        if session is not None:
            self.worker.submit(
                lambda _cancel: session.forget_document(doc_id), Priority.WARMUP, "forget"
            )

    # --- context from other files (engine/context_feed.py) -------------------------------------
    def set_workspace_roots(self, roots: list[str]) -> None:
        self.context.set_workspace_roots(roots)

    def document_opened(self, doc_id: str, text: str) -> None:
        self.context.opened(doc_id, self._doc(doc_id), text)

    def document_edited(self, doc_id: str, text: str, line: int | None) -> None:
        self.context.edited(doc_id, self._doc(doc_id), text, line)

    def document_saved(self, doc_id: str, text: str) -> None:
        self.context.saved(doc_id, self._doc(doc_id), text)

    def client_context(self, text: str, doc_id: str | None = None) -> int:
        return self.context.client_text(text, doc_id)

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

    def _shown(self, state: CursorState, answer: Answer, arrived: float, explicit: bool) -> Answer:
        """A non-empty answer is an item on screen: it gets the id its accept will name."""
        if not answer.text or answer.suggestion is None:
            return answer
        answer.item_id = self.acceptance.show(
            state.doc_id,
            answer.text,
            place_of(state.language, state.prefix, state.suffix),
            now=time.monotonic(),
            ttgt_ms=(time.perf_counter() - arrived) * 1000,
            explicit=explicit,
            origin=answer.suggestion,
        )
        return answer

    # --- completion ----------------------------------------------------------------------------
    async def complete(self, state: CursorState, *, explicit: bool = False) -> Answer:
        arrived = time.perf_counter()
        answer = await self._complete(state, explicit, arrived)
        return self._shown(state, answer, arrived, explicit)

    async def _complete(self, state: CursorState, explicit: bool, arrived: float) -> Answer:
        self._counter += 1
        number = self._counter
        record = self._doc(state.doc_id)
        record.next_request(number)
        left = self._last_state
        self.context.cursor_moved(
            state, record, left, self.docs.get(left.doc_id) if left is not None else None
        )
        record.last_state = self._last_state = state
        if not explicit:
            self.debounce.keystroke(arrived)
            hit = self.cache.lookup(state.prefix, state.suffix)
            if hit is not None:
                answer = await self._answer_from_cache(state, hit.suggestion, hit.typed, number)
                if answer is not None:
                    return answer
        self._supersede(record)
        if not self.config.enable:
            return Answer("", "none", "disabled")
        if self.session is None:
            held = await self._hold(record, number)
            if held is not None:
                return held
        if not explicit and too_much_after_cursor(state.rest_of_line, self.config.max_rest_of_line):
            return Answer("", "none", "rest of line")
        debounce_ms = 0.0
        if not explicit:
            debounce_ms = self.debounce.delay_ms(self.latency.expected_first_token_ms())
            await asyncio.sleep(debounce_ms / 1000)
            if record.latest != number:
                return Answer("", "none", "superseded")
        deadline = answer_deadline_s(
            explicit, self.session, self.config.prefix_tokens + self.config.suffix_tokens
        )
        try:
            return await asyncio.wait_for(
                self._complete_with_model(state, record, number, explicit, debounce_ms, arrived),
                deadline,
            )
        except asyncio.TimeoutError:
            log.warning("%s: no suggestion within %.0f s; answered empty", state.doc_id, deadline)
            return Answer("", "none", "deadline")

    async def _hold(self, record: DocumentRecord, number: int) -> Answer | None:
        """Wait for a backend (the model loads); None once one serves, else the answer."""
        started = time.monotonic()
        while self.session is None:
            if self._closed:
                return Answer("", "none", "shutdown")
            if self.state == "error" and not self.switcher.busy:
                return Answer("", "none", "error")  # nothing is coming
            left = HOLD_LIMIT_S - (time.monotonic() - started)
            if left <= 0:
                return Answer("", "none", "loading")
            changed = asyncio.ensure_future(self._backend_event.wait())
            superseded = asyncio.ensure_future(record.newer.wait())
            try:
                await asyncio.wait(
                    {changed, superseded}, timeout=left, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                changed.cancel()
                superseded.cancel()
            if record.latest != number:
                return Answer("", "none", "superseded")
        return None

    def _supersede(self, record: DocumentRecord) -> None:
        job, record.job = record.job, None
        if job is not None and not job.suggestion.done:
            job.cancel()

    async def _answer_from_cache(
        self, state: CursorState, suggestion: Suggestion, typed: str, number: int
    ) -> Answer | None:
        """Answer from a suggestion the typed characters match; None if it has nothing left."""
        record = self._doc(state.doc_id)
        if record.job is not None and record.job.suggestion is not suggestion:
            self._supersede(record)
        if not suggestion.text.startswith(typed) or len(suggestion.text) <= len(typed):
            # Typed as far as the still-growing suggestion: wait for it to grow past us.
            grown = asyncio.Event()

            def on_update(s: Suggestion) -> None:
                if s.done or (s.text.startswith(typed) and len(visible(s.text)) > len(typed)):
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
        record.ghost = GhostTarget(suggestion, state, typed)
        remaining = (
            visible(suggestion.text[len(typed) :])
            if suggestion.done
            else visible(suggestion.text)[len(typed) :]
        )
        self._publish_stats(state, "cache", None, 0.0, 0.0, 0.0, cancelled=False)
        return Answer(remaining, "cache", suggestion=suggestion)

    async def _complete_with_model(
        self,
        state: CursorState,
        record: DocumentRecord,
        number: int,
        explicit: bool,
        debounce_ms: float,
        arrived: float,
    ) -> Answer:
        while True:
            generation = self._backend_generation
            answer = await self._run_model_job(state, record, explicit, debounce_ms, arrived)
            swapped = self._backend_generation != generation and self.session is not None
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
        loop = asyncio.get_running_loop()
        suggestion = Suggestion()
        first_visible = asyncio.Event()

        def on_update(s: Suggestion) -> None:
            if s.done or visible(s.text):
                first_visible.set()
            target = record.ghost
            if (
                target is not None
                and target.suggestion is s
                and first_visible.is_set()
                and s.text.startswith(target.typed)
            ):
                shown = visible(s.text)[len(target.typed) :]
                self.acceptance.grown(target.state.doc_id, s, shown)
                self.events.ghost_text(target.state, shown, s.done)

        suggestion.listeners.append(on_update)
        self.cache.put(state.prefix, state.suffix, suggestion)
        record.ghost = GhostTarget(suggestion, state)
        request = self._request_for(state, "full" if explicit else "keystroke")

        def run(cancel: Any) -> Completion:
            session = self.session
            if session is None:
                raise JobDropped("no model")
            return session.complete(
                request,
                cancel,
                on_text=lambda text: _call_soon(loop, suggestion.update, text),
            )

        job = self.worker.submit(
            run, Priority.INTERACTIVE, label=f"complete {state.doc_id} v{state.version}"
        )
        record.job = DocJob(state, suggestion, job.cancel.cancel)
        job_future = job.future
        assert job_future is not None
        job_future.add_done_callback(
            lambda fut: self._job_finished(
                fut, state, record, suggestion, job.queue_ms, debounce_ms, arrived, explicit
            )
        )
        # An automatic request is answered at the first visible text (the rest streams in
        # ghostfim/ghostText); an explicit one, which the user waits for, gets it whole.
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
            return Answer(result.text, "model", suggestion=suggestion)
        if suggestion.cancelled or (job_future.done() and job_future.exception() is not None):
            return Answer("", "none", "cancelled")
        return Answer(visible(suggestion.text), "model", suggestion=suggestion)

    def _request_for(
        self, state: CursorState, mode: Literal["keystroke", "full"], max_tokens: int | None = None
    ) -> CompletionRequest:
        c = self.config
        extra = None
        if mode == "full":
            extra = self.context.for_prompt(state, c.extra_context, c.extra_context_tokens)
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
        completion: Completion | None = None
        if not fut.cancelled() and fut.exception() is None:
            completion = fut.result()
            if not completion.cancelled:  # a cancel proves nothing about the backend
                self._backend_recovered()
        elif not fut.cancelled() and not isinstance(fut.exception(), JobDropped):
            self._backend_failed(fut.exception())
        cancelled = completion is None or completion.cancelled
        final = (
            completion.text
            if completion is not None and not cancelled
            else visible(suggestion.text)
        )
        suggestion.update(final, done=True, cancelled=cancelled)
        if record.job is not None and record.job.suggestion is suggestion:
            record.job = None
        total_ms = (time.perf_counter() - arrived) * 1000
        self._publish_stats(
            state, "model", completion, queue_ms, debounce_ms, total_ms, cancelled=cancelled
        )
        if completion is not None and completion.widen:
            self._widen(state)
        if cancelled or completion is None:
            return
        self.latency.ttft.append(completion.timings.ttft_ms + queue_ms)
        self.latency.total.append(total_ms)
        self._after_suggestion(state, record, completion, explicit)

    def _backend_failed(self, exc: BaseException | None) -> None:
        """A failed request (a remote server down or silent) puts the status in error, told
        once per distinct message rather than once per keystroke; requests keep trying."""
        message = f"ghostfim: completion failed: {exc}"
        if message != self.error:
            self.events.problem(message)
            self.set_state("error", message)

    def _backend_recovered(self) -> None:
        if self.state == "error" and self.session is not None:
            self.set_state("ready")

    # --- follow-ups: background work after a suggestion ----------------------------------------
    def _after_suggestion(
        self, state: CursorState, record: DocumentRecord, completion: Completion, explicit: bool
    ) -> None:
        """At a pause: refresh with the full prompt if the keystroke prompt cut the suffix,
        and prefetch what comes after the suggestion. Both are dropped by any keystroke."""
        number = record.latest
        suffix_was_cut = not explicit and completion.suffix_cut

        def at_pause() -> None:
            if record.latest != number:
                return
            if suffix_was_cut:
                self._spawn(self._refresh(state, record, number))
            elif completion.text:
                self._spawn(self._prefetch(state, record, completion.text, number))

        asyncio.get_running_loop().call_later(PAUSE_REFRESH_S if suffix_was_cut else 0.0, at_pause)

    async def _refresh(self, state: CursorState, record: DocumentRecord, number: int) -> None:
        request = self._request_for(state, "full")
        result = await self._background(request, Priority.REFRESH)
        if result is None or record.latest != number:
            return
        suggestion = Suggestion(text=result.text, done=True)
        self.cache.put(state.prefix, state.suffix, suggestion)
        target = record.ghost
        if target is not None and target.state is state:
            record.ghost = GhostTarget(suggestion, state)
            self.acceptance.now_shows(state.doc_id, target.suggestion, suggestion, result.text)
            self.events.ghost_text(state, result.text, True)
        if result.text:
            await self._prefetch(state, record, result.text, number)

    async def _prefetch(
        self, state: CursorState, record: DocumentRecord, text: str, number: int
    ) -> None:
        """The suggestion after this one is accepted (or typed through): ready before asked."""
        accepted = replace(
            state, prefix=state.prefix + text, cursor_line=state.cursor_line + text.count("\n")
        )
        request = self._request_for(accepted, "keystroke", SPECULATIVE_MAX_TOKENS)
        result = await self._background(request, Priority.SPECULATIVE)
        if result is None or record.latest != number:
            return
        self.cache.put(accepted.prefix, accepted.suffix, Suggestion(text=result.text, done=True))

    def _widen(self, state: CursorState) -> None:
        """The keystroke used the narrow start window (a new place, on a CPU): prepare the
        wide one, for the job's own cursor state, while the user types. Droppable; asked for
        again after the next keystroke."""
        if self._widening:
            return
        self._widening = True
        request = replace(self._request_for(state, "keystroke"), max_tokens=0)

        async def run() -> None:
            try:
                await self._background(request, Priority.WARMUP)
            finally:
                self._widening = False

        self._spawn(run())

    def warm(self, state: CursorState) -> None:
        """Prefill a document's context so its first keystroke is not a cold prompt."""
        for mode in ("keystroke", "full"):  # each has its own KV slot; keystrokes first
            request = replace(self._request_for(state, mode), max_tokens=0)
            self._spawn(self._background(request, Priority.WARMUP))

    def _spawn(self, coro: Any) -> None:
        """Run a coroutine in the background, holding a reference until it ends."""
        task = asyncio.ensure_future(coro)
        self._background_tasks.add(task)
        task.add_done_callback(self._background_tasks.discard)

    async def _background(
        self, request: CompletionRequest, priority: Priority
    ) -> Completion | None:
        request = replace(request, background=True)

        def run(cancel: Any) -> Completion:
            session = self.session
            if session is None:
                raise JobDropped("no model")
            return session.complete(request, cancel)

        job = self.worker.submit(run, priority, label=priority.name.lower())
        assert job.future is not None
        try:
            result: Completion = await job.future
        except (JobDropped, asyncio.CancelledError):
            return None
        except Exception as exc:
            log.warning("background job failed: %s", exc)
            return None
        return None if result.cancelled else result

    # --- stats ---------------------------------------------------------------------------------
    def _publish_stats(
        self,
        state: CursorState,
        source: str,
        completion: Completion | None,
        queue_ms: float,
        debounce_ms: float,
        total_ms: float,
        *,
        cancelled: bool,
    ) -> None:
        payload = stats_payload(
            state,
            source=source,
            completion=completion,
            queue_ms=queue_ms,
            debounce_ms=debounce_ms,
            total_ms=total_ms,
            cancelled=cancelled,
            model=self.session.info.name if self.session else None,
        )
        self.latency.recent.append(payload)
        self.events.stats(payload)


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


def _call_soon(loop: asyncio.AbstractEventLoop, fn: Callable[[str], None], text: str) -> None:
    """Hand streamed text to the event loop (from the model thread)."""
    loop.call_soon_threadsafe(fn, text)
