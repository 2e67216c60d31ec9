"""The completion service: what an editor integration talks to (the LSP server does).

This is its facade: the documents it is told of, its configuration, its status and the accept
signals. A completion request is one `Keystroke` (engine/service/keystroke.py), whose methods
are the request's phases in the order they run; what each document shows is its `Screen`
(engine/service/screen.py); what a state asks of the backend is the `RequestFactory`
(engine/service/requests.py); the background work a suggestion leads to is the `FollowUps`
(engine/service/followups.py); the backend is the `BackendHost`'s (engine/service/host.py).

Every non-empty answer is an item the editor can accept (engine/service/acceptance.py). The
service knows nothing of LSP: positions are opaque, and what it reports are dataclasses
(engine/service/stats.py) that lsp/wire.py turns into JSON.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

from ghostfim.engine.config import EngineConfig, backend_spec
from ghostfim.engine.context.feed import ContextFeed
from ghostfim.engine.memory import KeepsCaches, rss_bytes
from ghostfim.engine.service.acceptance import AcceptanceLog
from ghostfim.engine.service.cursor import CursorState
from ghostfim.engine.service.doclimit import DocumentSizeLimit
from ghostfim.engine.service.documents import Answer, DocumentRecord
from ghostfim.engine.service.events import Events
from ghostfim.engine.service.filter import ConfidenceFilter
from ghostfim.engine.service.followups import FollowUps
from ghostfim.engine.service.host import BackendHost, Opener
from ghostfim.engine.service.keystroke import Keystroke
from ghostfim.engine.service.localstats import LocalStats
from ghostfim.engine.service.requests import RequestFactory
from ghostfim.engine.service.scheduler import AdaptiveDebounce, ModelWorker, Priority
from ghostfim.engine.service.screen import Screen, typed_all_of, typed_into
from ghostfim.engine.service.stats import (
    LatencyLog,
    MemoryStatus,
    ServiceStatus,
    WorkCounters,
)
from ghostfim.engine.service.suggestions import SuggestionCache
from ghostfim.engine.service.workspace import FileChange, WorkspaceContext
from ghostfim.engine.tuning import DEFINITIONS_KEYSTROKE_PREFILL_MS

__all__ = ["Answer", "CompletionService", "CursorState", "Events"]


class _HostEvents:
    """The host's events: progress and problems go to the editor, changes publish the status."""

    def __init__(self, service: CompletionService) -> None:
        self._service = service

    def progress(self, message: str, percentage: int | None, done: bool) -> None:
        self._service.events.progress(message, percentage, done)

    def problem(self, message: str) -> None:
        self._service.events.problem(message)

    def host_changed(self) -> None:
        self._service.workspace.model_loading(self._service.host.loading is not None)
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
        self.doc_limit = DocumentSizeLimit(self.config.max_document_mb)
        self.context = ContextFeed(skip=self.doc_limit.is_over)
        self.workspace = WorkspaceContext(  # its definitions
            skip=self.doc_limit.is_over, first_block_fits=self._first_block_fits
        )
        self.requests = RequestFactory(
            lambda: self.config, self.filter, self.context, self.workspace
        )
        self.docs: dict[str, DocumentRecord] = {}
        self.host = BackendHost(_HostEvents(self), self.worker, opener, self._backend_swapped)
        self.followups = FollowUps(self.worker, self.host, self.cache, self.requests)
        self._counter = 0
        self._last_state: CursorState | None = None
        self.refused_before_model = 0  # automatic requests the rules answered empty
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
        self.doc_limit.max_mb = config.max_document_mb
        self.filter.mode = config.filter
        self.local_stats.enabled = config.acceptance_stats
        self.workspace.set_enabled(config.workspace_context != "off")
        if config.acceptance_stats and not self._stats_read:
            self._stats_read = True  # the adaptive filter starts from the earlier sessions
            self.filter.start_from(self.local_stats.records())

    def _first_block_fits(self) -> bool:
        """Whether a document's first prompt takes the workspace's block: where the keystroke's
        block prefills within DEFINITIONS_KEYSTROKE_PREFILL_MS on the serving backend. The
        "auto" budget is sized so on any backend whose speed is measured
        (engine/prompt/definitions.py); a fixed `workspaceContextTokens` fits where that
        many tokens prefill in time (a GPU). A backend of unknown speed (a remote server)
        gets it at the first lull, as before."""
        backend = self.host.backend
        tokens = self.config.workspace_context_tokens
        expected = None if backend is None else backend.expected_prefill_ms(tokens or 1)
        if expected is None:
            return False
        return tokens is None or expected <= DEFINITIONS_KEYSTROKE_PREFILL_MS

    def _backend_swapped(self, _backend: object) -> None:
        """A new backend serves: suggestions of the old one go, the last document warms."""
        self.cache.clear()
        if self._last_state is not None and not self.host.newer_pending:
            self.followups.warm(self._last_state)

    # --- status --------------------------------------------------------------------------------
    def status(self) -> ServiceStatus:
        host, backend = self.host, self.host.backend
        caches = backend.caches() if isinstance(backend, KeepsCaches) else ()
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
            saved_cpu_ms=self.refused_before_model * self.latency.expected_job_ms(),
            # every cache's bytes against its limit (engine/memory.py): the backend's first
            memory=MemoryStatus(
                (*caches, self.cache.usage(), self.context.usage(), self.workspace.usage()),
                rss_bytes(),
                len(self.doc_limit.over),
            ),
            workspace=self.workspace.status(),
            definitions=self.workspace.last_block,
        )

    def publish_status(self) -> None:
        self.events.status(self.status())

    async def shutdown(self) -> None:
        self.followups.stop()
        self.workspace.stop()
        self.worker.cancel_all()
        await self.host.shutdown()
        self.worker.shutdown()

    # --- documents -----------------------------------------------------------------------------
    def _doc(self, doc_id: str) -> DocumentRecord:
        record = self.docs.get(doc_id)
        if record is None:
            record = self.docs[doc_id] = DocumentRecord(Screen(self.acceptance, self.events))
        return record

    def document_changed(self, doc_id: str, text: str) -> None:
        """An edit that is not typing into the suggestion stops what was made for it: the
        running job at once, and the follow-ups (refresh, prefetch of its continuation)."""
        record = self.docs.get(doc_id)
        if record is None:
            return
        job = record.job
        if job is not None and not job.suggestion.done:
            if not typed_into(job.state, job.suggestion, text):
                job.cancel()
                if not typed_all_of(job.state, job.suggestion, text):
                    self.acceptance.left(doc_id, time.monotonic())
            return
        if record.screen.edited(text):
            self.worker.preempt_background()

    def document_closed(self, doc_id: str) -> None:
        self.acceptance.closed(doc_id)
        record = self.docs.pop(doc_id, None)
        if record is not None:
            if record.job is not None:
                record.job.cancel()
            record.newer.set()  # a request held for it is not wanted any more
        self.context.closed(doc_id)
        self.workspace.closed(doc_id)
        self.doc_limit.closed(doc_id)
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

    # --- completion (engine/service/keystroke.py) ------------------------------------------
    async def complete(self, state: CursorState, *, explicit: bool = False) -> Answer:
        """A suggestion at `state`: the request's phases are the Keystroke's methods."""
        return await Keystroke(self, state, explicit).answer()

    def new_request(self, state: CursorState) -> DocumentRecord:
        """Number a request (newer ones supersede it) and note where the user is."""
        self._counter += 1
        record = self._doc(state.doc_id)
        record.next_request(self._counter)
        left = self._last_state
        self.context.cursor_moved(
            state.doc_id,
            state.cursor_line,
            None if left is None else (left.doc_id, left.prefix + left.suffix, left.cursor_line),
        )
        self._last_state = state
        return record

    def leave_others(self, record: DocumentRecord) -> None:
        """One cursor: model work here stops what other documents' jobs still generate.
        Their requests were answered at their first visible text and the rest only streams
        into ghost text the user has left; but they run at interactive priority, which
        nothing else stops, so this request would queue behind the rest of theirs (going
        back to a file waited 0.2-1.9 s for the one just left)."""
        for other in self.docs.values():
            if other is not record:
                other.supersede_job()

    # --- context from other files (engine/context/feed.py, engine/service/workspace.py) -------
    def set_workspace_roots(self, roots: list[str]) -> None:
        self.context.set_workspace_roots(roots)
        self.workspace.set_roots(roots)

    def document_opened(self, doc_id: str, text: str) -> None:
        self._doc(doc_id)
        self._measure(doc_id, text)
        self.context.opened(doc_id, text)
        self.workspace.opened(doc_id, text)

    def document_edited(self, doc_id: str, text: str, line: int | None) -> None:
        self._measure(doc_id, text)
        self.context.edited(doc_id, text, line)
        self.workspace.edited(doc_id, text)

    def files_changed(self, changes: list[FileChange]) -> None:
        """Files changed on disk (`workspace/didChangeWatchedFiles`): (URI, deleted)."""
        self.workspace.files_changed(changes)

    def _measure(self, doc_id: str, text: str) -> None:
        """Over the size limit, a document gets no context picks (engine/service/doclimit.py);
        the user is told once."""
        notice = self.doc_limit.seen(doc_id, len(text))
        if notice is not None:
            self.events.notice(notice)

    def document_saved(self, doc_id: str, text: str) -> None:
        self.context.saved(doc_id, text)
        self.workspace.saved(doc_id)

    def client_context(self, text: str, doc_id: str | None = None) -> int:
        return self.context.client_text(text, doc_id)
