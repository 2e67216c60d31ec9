"""The completion service: what an editor integration talks to (the LSP server does).

It owns the resident model's lifecycle (load, hot switch, warm-up), the worker and the reuse
cache, and turns cursor states into suggestions:

    complete(state)
      1. typed-through: a suggestion (finished or still streaming) that the typed characters
         match answers at once, with no model work;
      2. otherwise the document's running job is superseded (cancelled), and after an adaptive
         debounce a model job starts;
      3. the request is answered as soon as the suggestion shows its first visible characters;
         the job keeps generating into the cache and `Events.ghost_text` streams the growth;
      4. when it ends: stats, then at a pause a full-prompt refresh (if the keystroke prompt had
         to cut the suffix) and a speculative prefetch of the continuation, both droppable.

It knows nothing of LSP: positions are opaque, and events go out through `Events`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import logging
import sys
import time
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from ghostfim.engine.backend import CompletionBackend
from ghostfim.engine.context import CHANGE_PICK_S, ContextRing, ExtraContext, document_name, root_path
from ghostfim.engine.postprocess import too_much_after_cursor
from ghostfim.engine.scheduler import AdaptiveDebounce, JobDropped, ModelWorker, Priority
from ghostfim.engine.session import Completion, CompletionRequest
from ghostfim.engine.stops import Multiline
from ghostfim.engine.suggestions import Suggestion, SuggestionCache
from ghostfim.engine.timings import percentile

log = logging.getLogger("ghostfim.service")

PREFIX_WINDOW_CHARS = 64_000  # text before the cursor handed to the prompt builder
SUFFIX_WINDOW_CHARS = 16_000
SLOW_PREFILL_MS_PER_TOKEN = 15.0  # slower than this at load: explicit requests may wait longer
PAUSE_REFRESH_S = 0.35  # a pause this long gets the full prompt (when the keystroke one cut it)
SPECULATIVE_MAX_TOKENS = 24
CONSISTENCY_CHARS = 64  # text either side of a job's cursor that must survive an edit

State = Literal["loading", "ready", "error"]


class Events(Protocol):
    """What the service tells its editor integration."""

    def ghost_text(self, state: CursorState, text: str, done: bool) -> None: ...
    def stats(self, payload: dict[str, Any]) -> None: ...
    def status(self, payload: dict[str, Any]) -> None: ...
    def progress(self, message: str, percentage: int | None, done: bool) -> None: ...
    def problem(self, message: str) -> None: ...


@dataclass(frozen=True)
class CompletionOptions:
    enable: bool = True
    max_tokens: int = 64
    multiline: Multiline = "auto"
    debounce_ms: float | None = None  # None: adaptive
    max_rest_of_line: int = 8  # llama.vim's max_line_suffix (ghostfim.engine.postprocess)
    prefix_tokens: int = 768
    suffix_tokens: int = 256
    keystroke_prefill_ms: float = 80.0
    postprocess: bool = True  # the clean-up rules of engine/postprocess.py
    extra_context: bool = False  # chunks of other files before full prompts (engine/context.py)
    extra_context_tokens: int | None = None  # their token budget; None: auto, 0: off


@dataclass(frozen=True)
class CursorState:
    doc_id: str
    version: int
    position: Any  # echoed back in ghost_text events (the LSP position)
    prefix: str  # text before the cursor, at most PREFIX_WINDOW_CHARS
    suffix: str  # text after the cursor, at most SUFFIX_WINDOW_CHARS
    cursor_line: int
    offset: int  # absolute character offset of the cursor in the document
    doc_length: int
    edge_before: str = ""  # raw document text just before / after the cursor (line ends as
    edge_after: str = ""  # the document has them): an edit elsewhere must leave these intact

    @property
    def rest_of_line(self) -> str:
        nl = self.suffix.find("\n")
        return self.suffix if nl < 0 else self.suffix[:nl]


@dataclass
class Answer:
    text: str
    source: Literal["model", "cache", "none"]
    reason: str = ""


@dataclass
class _DocJob:
    """The model job currently generating for a document, and what it was made for."""

    state: CursorState
    suggestion: Suggestion
    cancel: Callable[[], None]


@dataclass
class _LatencyLog:
    ttft: deque[float] = field(default_factory=lambda: deque(maxlen=500))
    total: deque[float] = field(default_factory=lambda: deque(maxlen=500))
    recent: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=20))

    def summary(self) -> dict[str, float | int | None]:
        def p(values: deque[float], q: float) -> float | None:
            return round(percentile(list(values), q), 1) if values else None

        return {
            "n": len(self.ttft),
            "ttftP50": p(self.ttft, 50),
            "ttftP95": p(self.ttft, 95),
            "ttftP99": p(self.ttft, 99),
            "totalP50": p(self.total, 50),
            "totalP95": p(self.total, 95),
        }


def visible(text: str) -> str:
    """What of a partial suggestion is worth showing: no trailing whitespace."""
    return text.rstrip()


@dataclass
class _Load:
    """A model switch asked for: what to open, and its caller's answer (swapped in or not)."""

    generation: int
    label: str
    open_backend: Callable[[], CompletionBackend]
    key: Hashable
    check: Callable[[], None] | None = None  # what tells a broken one quickly (if skipped)
    done: asyncio.Future[bool] | None = None


def _settle(load: _Load, ok: bool) -> None:
    if load.done is not None and not load.done.done():
        load.done.set_result(ok)


def _close_backend(backend: CompletionBackend) -> None:
    try:
        backend.close()
    except Exception:  # a backend that fails to close must not stop the switch
        log.exception("closing %s failed", backend.info.name)


def _close_and_release(box: list[CompletionBackend]) -> None:
    """Close the backend in box (its only reference) and hand its memory back."""
    backend = box.pop()
    _close_backend(backend)
    del backend
    release_memory()


def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        trim = libc.malloc_trim  # glibc only (musl has none)
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]


_MALLOC_TRIM = _malloc_trim()


def release_memory() -> None:
    """Hand a closed model's memory back to the system.

    A closed session is garbage only to the cycle collector (its abort callback refers back
    to it): collect now, not at some later allocation. Then glibc's malloc keeps freed heap
    pages (llama.cpp's and numpy's) for reuse; malloc_trim returns them, in every arena.
    """
    gc.collect()
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


class CompletionService:
    def __init__(self, events: Events, options: CompletionOptions | None = None) -> None:
        self.events = events
        self.options = options or CompletionOptions()
        self.worker = ModelWorker()
        self.cache = SuggestionCache()
        self.debounce = AdaptiveDebounce(self.options.debounce_ms)
        self.session: CompletionBackend | None = None
        self.state: State = "loading"
        self.error: str | None = None
        self.latency = _LatencyLog()
        self._latest: dict[str, int] = {}  # doc -> newest request number (supersession)
        self._counter = 0
        self._jobs: dict[str, _DocJob] = {}
        self._ghost_target: dict[str, tuple[Suggestion, CursorState, str]] = {}
        self._load_generation = 0  # bumped by every switch asked for (newest wins)
        self._pending_load: _Load | None = None  # the newest switch not yet started
        self._loading: _Load | None = None  # the switch in flight
        self._loader: asyncio.Future[None] | None = None
        self._session_key: Hashable = None  # the key the serving backend was loaded for
        self._load_error: str | None = None  # the message of the last failed switch
        self._load_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ghostfim-load")
        self._closed = False
        self._last_state: CursorState | None = None
        self._background_tasks: set[asyncio.Future[Any]] = set()
        self._widening = False  # a background job preparing the wide keystroke window
        # Context from other files (engine/context.py): the ring, and per document the line
        # last edited or completed at and when it last gave a chunk.
        self.context = ContextRing()
        self.workspace_roots: list[str] = []
        self._context_line: dict[str, int] = {}
        self._context_picked: dict[str, float] = {}

    # --- options and model lifecycle ---------------------------------------------------------
    def set_options(self, options: CompletionOptions) -> None:
        old = self.options
        self.options = options
        if (old.postprocess, old.multiline, old.max_tokens) != (
            options.postprocess,
            options.multiline,
            options.max_tokens,
        ):
            self.cache.clear()  # suggestions made under other rules must not be reused
        self.debounce.fixed_ms = options.debounce_ms
        if self.session is not None:
            self.session.keystroke_prefill_ms = options.keystroke_prefill_ms

    def status(self) -> dict[str, Any]:
        info = self.session.info if self.session else None
        switching = self._pending_load or self._loading  # loads in flight or waiting
        return {
            "state": self.state,
            "error": self.error,
            "model": None
            if info is None
            else {
                "name": info.name,
                "preset": info.preset,
                "path": info.path,
                "device": info.device,
                "nGpuLayers": info.n_gpu_layers,
                "fim": info.family,
            },
            "switchingTo": None if switching is None else switching.label,
            "context": self.context.status(),
            "latency": self.latency.summary(),
            "recent": list(self.latency.recent),
            "work": None
            if self.session is None
            else {
                "decodeSteps": self.session.decode_steps,
                "prefillChunks": self.session.prefill_chunks,
                "running": self.worker.running is not None,
            },
        }

    def _set_state(self, state: State, error: str | None = None) -> None:
        self.state, self.error = state, error
        self.events.status(self.status())

    async def load_model(
        self, spec: str | None, *, n_gpu_layers: int = -1, key: Hashable = None
    ) -> bool:
        """Load the in-process model named by spec (a preset, a path, or the default)."""
        return await self.request_model(spec, n_gpu_layers=n_gpu_layers, key=key)

    def request_model(
        self, spec: str | None, *, n_gpu_layers: int = -1, key: Hashable = None
    ) -> asyncio.Future[bool]:
        """`load_model`, registered now (see `request_backend`)."""
        from ghostfim.engine.loader import check_model, load_session  # llama.cpp only when needed

        opts = self.options
        return self.request_backend(
            spec or "default model",
            lambda: load_session(
                spec,
                n_gpu_layers=n_gpu_layers,
                progress=False,
                prefix_tokens=opts.prefix_tokens,
                suffix_tokens=opts.suffix_tokens,
                keystroke_prefill_ms=opts.keystroke_prefill_ms,
            ),
            key=(spec, n_gpu_layers) if key is None else key,
            check=lambda: check_model(spec),
        )

    async def load_backend(
        self, label: str, open_backend: Callable[[], CompletionBackend], *, key: Hashable = None
    ) -> bool:
        """Open a backend in the background; the current one serves until the new one is ready.

        Loads are serialized: at most one is in flight, and switches asked for meanwhile are
        coalesced (only the newest waits; the ones it replaces are skipped). Returns True when
        this backend was swapped in, False when it could not be had (the old backend keeps
        serving) or was skipped for a newer switch. `key` names what is opened (the caller's
        settings): `session_key` and `switching_key` tell whether it serves or is on its way.
        """
        return await asyncio.shield(self.request_backend(label, open_backend, key=key))

    def request_backend(
        self,
        label: str,
        open_backend: Callable[[], CompletionBackend],
        *,
        key: Hashable = None,
        check: Callable[[], None] | None = None,
    ) -> asyncio.Future[bool]:
        """`load_backend`, registered before this returns (so `switching_key` names it at
        once); the future says whether it was swapped in. `check`, if given, raises quickly
        for a backend that cannot be opened: a switch that is skipped is still checked, so
        that every broken model asked for is reported."""
        self._load_generation += 1
        key = label if key is None else key
        loading = self._loading
        if loading is not None and loading.key == key and loading.done is not None:
            # The switch in flight is wanted again (A, B, A in quick succession): it is the
            # newest once more, and nothing new loads.
            loading.generation = self._load_generation
            if self._pending_load is not None:
                self._skip(self._pending_load)
                self._pending_load = None
            return loading.done
        load = _Load(self._load_generation, label, open_backend, key, check)
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        load.done = done
        if self._closed:
            done.set_result(False)
            return done
        if self._pending_load is not None:  # superseded before it started: never opened
            self._skip(self._pending_load)
        self._pending_load = load
        if self._loader is None or self._loader.done():
            self._loader = asyncio.ensure_future(self._run_loads())
        return done

    @property
    def session_key(self) -> Hashable:
        """The key of the backend serving now (None when none serves)."""
        return self._session_key

    @property
    def switching_key(self) -> Hashable:
        """The key of the newest switch still wanted and not yet done (None when none)."""
        if self._pending_load is not None:
            return self._pending_load.key
        if self._loading is not None and self._loading.generation == self._load_generation:
            return self._loading.key
        return None

    def keep_current(self) -> None:
        """The backend serving now is wanted after all: skip the pending switch, discard the
        one in flight when it is ready, and drop the message of a switch that failed."""
        self._load_generation += 1
        if self._pending_load is not None:
            self._skip(self._pending_load)
            self._pending_load = None
        if self.session is not None and self.error is not None and self.error == self._load_error:
            self._load_error = None
            self._set_state("ready")

    def _skip(self, load: _Load) -> None:
        """A switch replaced before it started: its caller hears False, and a broken model
        is reported all the same (a quick check, on the load thread)."""
        _settle(load, False)
        if load.check is not None and not self._closed:
            self._spawn(self._check_skipped(load))

    async def _check_skipped(self, load: _Load) -> None:
        assert load.check is not None
        try:
            await self._off_loop(load.check)
        except Exception as exc:
            message = f"ghostfim: cannot load {load.label}: {exc}"
            self.events.problem(message)
            return
        log.info("switch to %s skipped: a newer switch replaced it", load.label)

    async def _run_loads(self) -> None:
        while self._pending_load is not None and not self._closed:
            load, self._pending_load = self._pending_load, None
            self._loading = load
            ok = False
            try:
                ok = await self._load_one(load)
            except Exception as exc:  # never leave a caller waiting
                log.exception("model switch to %s failed", load.label)
                self._set_state("ready" if self.session else "error", f"{exc}")
            finally:
                self._loading = None
                _settle(load, ok)
        if self._closed and self._pending_load is not None:
            _settle(self._pending_load, False)
            self._pending_load = None

    async def _load_one(self, load: _Load) -> bool:
        if self.session is None:
            self._set_state("loading")
        self.events.progress(f"loading {load.label}", 0, False)
        try:
            new = await self._off_loop(load.open_backend)
        except Exception as exc:  # any failure keeps the old model serving
            message = f"ghostfim: cannot load {load.label}: {exc}"
        else:
            message = None
        if message is not None:
            # Out of the except block: the traceback (frames of the load, and whatever it had
            # built before failing) is gone before memory is handed back.
            await self._off_loop(release_memory)
            self.events.progress(message, None, True)
            self.events.problem(message)
            self._load_error = message
            self._set_state("ready" if self.session else "error", message)
            return False
        superseded = load.generation != self._load_generation
        if self._closed or (superseded and self.session is not None):
            # A newer switch was asked for meanwhile (or the server is going away): this one
            # is not wanted, and everything it allocated goes back now.
            box = [new]
            del new  # the load thread drops the last reference, then frees
            await self._off_loop(lambda: _close_and_release(box))
            self.events.progress(
                f"{load.label}: dropped (another switch was asked for)", None, True
            )
            return False
        self.worker.cancel_all()
        await self.worker.run_exclusive(lambda: self._swap_session(new, load.key))
        self.cache.clear()
        self._load_error = None
        self.events.progress(f"{new.info.name} ready on {new.info.device}", 100, True)
        self._set_state("ready")
        if self._last_state is not None and self._pending_load is None:
            self.warm(self._last_state)
        await self._off_loop(release_memory)  # what the old backend held
        return True

    async def _off_loop(self, fn: Callable[[], Any]) -> Any:
        """Run fn on the load thread (one thread: loads allocate from one malloc arena, and
        never two at once); after shutdown, on any thread."""
        if self._closed:  # the executor is shut down
            return await asyncio.to_thread(fn)
        return await asyncio.get_running_loop().run_in_executor(self._load_executor, fn)

    def _swap_session(self, new: CompletionBackend, key: Hashable) -> None:
        """Runs on the model thread, between jobs, so no job ever sees a closed session."""
        old, self.session, self._session_key = self.session, new, key
        if old is not None:
            _close_backend(old)

    async def shutdown(self) -> None:
        self._closed = True
        self._load_generation += 1
        if self._pending_load is not None:
            _settle(self._pending_load, False)
            self._pending_load = None
        self.worker.cancel_all()
        if self.session is not None:
            session = self.session
            with contextlib.suppress(Exception):
                await self.worker.run_exclusive(lambda: _close_backend(session))
            self.session = self._session_key = None
        self.worker.shutdown()
        # A load in flight is not waited for (llama.cpp cannot stop one): its thread closes
        # what it opened once it ends (see _load_one), unless the process exits first.
        self._load_executor.shutdown(wait=False, cancel_futures=True)

    # --- documents ---------------------------------------------------------------------------
    def document_changed(self, doc_id: str, text: str) -> None:
        """Stop a running job at once when the edit is not typing into its suggestion."""
        job = self._jobs.get(doc_id)
        if job is None or job.suggestion.done:
            return
        s = job.state
        delta = len(text) - s.doc_length
        consistent = (
            delta >= 0
            and text[max(0, s.offset - len(s.edge_before)) : s.offset] == s.edge_before
            and text[s.offset + delta : s.offset + delta + len(s.edge_after)] == s.edge_after
            and job.suggestion.could_continue(text[s.offset : s.offset + delta])
        )
        if not consistent:
            job.cancel()

    def document_closed(self, doc_id: str) -> None:
        job = self._jobs.pop(doc_id, None)
        if job is not None:
            job.cancel()
        self._latest.pop(doc_id, None)
        self._ghost_target.pop(doc_id, None)
        self._context_line.pop(doc_id, None)
        self._context_picked.pop(doc_id, None)
        self.context.forget(doc_id)

    # --- context from other files (engine/context.py) ------------------------------------------
    def set_workspace_roots(self, roots: list[str]) -> None:
        """Workspace folders (URIs or paths): chunks are named relative to them."""
        self.workspace_roots = [root_path(r) for r in roots if r]

    def _context_name(self, doc_id: str) -> str:
        return document_name(doc_id, self.workspace_roots)

    def _context_pick(self, doc_id: str, text: str, line: int | None) -> None:
        self._context_picked[doc_id] = time.monotonic()
        self.context.pick(text, self._context_name(doc_id), doc_id, line)

    def document_opened(self, doc_id: str, text: str) -> None:
        """An opened document gives its top (imports, first definitions): LSP tells no cursor."""
        self._context_pick(doc_id, text, None)

    def document_edited(self, doc_id: str, text: str, line: int | None) -> None:
        """Called on every edit: remembers where, and gives a chunk around it at most once a
        CHANGE_PICK_S per document (the ring must not move with typing)."""
        if line is not None:
            self._context_line[doc_id] = line
        picked = self._context_picked.get(doc_id)
        if picked is not None and time.monotonic() - picked < CHANGE_PICK_S:
            return
        self._context_pick(doc_id, text, self._context_line.get(doc_id))

    def document_saved(self, doc_id: str, text: str) -> None:
        """A saved document gives the chunk around its last edit (or completion)."""
        self._context_pick(doc_id, text, self._context_line.get(doc_id))

    def client_context(self, text: str, doc_id: str | None = None) -> int:
        """Text the client sends (`ghostfim/context`); returns the chunks queued."""
        name = self._context_name(doc_id) if doc_id else "snippet"
        return self.context.add_text(text, name, doc_id or "")

    def _note_cursor(self, state: CursorState) -> None:
        """Where the user completes is where the next save's chunk is picked; when requests
        move to another document, the one left gives the chunk around its last cursor."""
        previous = self._last_state
        self._context_line[state.doc_id] = state.cursor_line
        still_open = previous is not None and previous.doc_id in self._latest
        if previous is not None and previous.doc_id != state.doc_id and still_open:
            self._context_pick(
                previous.doc_id,
                previous.prefix + previous.suffix,
                previous.prefix.count("\n"),
            )

    def _extra_context(self, state: CursorState) -> ExtraContext | None:
        """What a full prompt for `state` gets from the ring (None when switched off)."""
        opts = self.options
        if not opts.extra_context or opts.extra_context_tokens == 0:
            return None
        chunks = self.context.snapshot(state.doc_id)
        if not chunks:
            return None
        roots = self.workspace_roots
        project = roots[0].rstrip("/").rsplit("/", 1)[-1] if roots else ""
        return ExtraContext(
            chunks, self._context_name(state.doc_id), project, opts.extra_context_tokens
        )

    # --- completion ----------------------------------------------------------------------------
    async def complete(self, state: CursorState, *, explicit: bool = False) -> Answer:
        arrived = time.perf_counter()
        self._counter += 1
        number = self._latest[state.doc_id] = self._counter
        self._note_cursor(state)  # context from other files: a document left gives a chunk
        self._last_state = state
        if not explicit:
            self.debounce.keystroke(arrived)
            hit = self.cache.lookup(state.prefix[-512:], state.suffix[:256])
            if hit is not None:
                answer = await self._answer_from_cache(state, hit.suggestion, hit.typed, number)
                if answer is not None:
                    return answer
        self._supersede(state.doc_id)
        if not self.options.enable:
            return Answer("", "none", "disabled")
        if self.session is None:
            return Answer("", "none", self.state)
        if not explicit and too_much_after_cursor(
            state.rest_of_line, self.options.max_rest_of_line
        ):
            return Answer("", "none", "rest of line")
        debounce_ms = 0.0
        if not explicit:
            debounce_ms = self.debounce.delay_ms(self._expected_first_token_ms())
            await asyncio.sleep(debounce_ms / 1000)
            if self._latest.get(state.doc_id) != number:
                return Answer("", "none", "superseded")
        return await self._complete_with_model(state, explicit, debounce_ms, arrived)

    def answer_deadline_s(self, explicit: bool, automatic_s: float, longest_s: float) -> float:
        """How long a request may take before it is answered empty.

        Automatic requests: `automatic_s` (a late suggestion is useless in an editor). An
        explicit one gets the full prompt; on a slow model (one that prefilled slower than
        SLOW_PREFILL_MS_PER_TOKEN when it loaded: the small model on 2 CPU cores, ~20 ms) its
        cold prefill takes ~20 s, so it may take twice what the measured prefill speed
        predicts, at most `longest_s`. A fast model (the tiny one: ~7 ms, ~5 s for a full
        prompt) keeps `automatic_s`, so that a busy machine never makes it hang.
        """
        session = self.session
        at_load = getattr(session, "calibrated_ms_per_token", None)
        if not explicit or at_load is None or at_load < SLOW_PREFILL_MS_PER_TOKEN:
            return automatic_s
        tokens = self.options.prefix_tokens + self.options.suffix_tokens
        expected_s = session.cost.predict_ms(tokens) / 1000  # type: ignore[union-attr]
        return min(longest_s, max(automatic_s, 2 * expected_s + 2))

    def _expected_first_token_ms(self) -> float:
        ttft = list(self.latency.ttft)[-32:]
        return percentile(ttft, 50) if ttft else 100.0

    def _supersede(self, doc_id: str) -> None:
        job = self._jobs.pop(doc_id, None)
        if job is not None and not job.suggestion.done:
            job.cancel()

    async def _answer_from_cache(
        self, state: CursorState, suggestion: Suggestion, typed: str, number: int
    ) -> Answer | None:
        """Answer from a suggestion the typed characters match; None if it has nothing left."""
        job = self._jobs.get(state.doc_id)
        if job is not None and job.suggestion is not suggestion:
            self._supersede(state.doc_id)
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
            if self._latest.get(state.doc_id) != number:
                return Answer("", "none", "superseded")
            if not suggestion.text.startswith(typed) or len(suggestion.text) <= len(typed):
                return None
        self._ghost_target[state.doc_id] = (suggestion, state, typed)
        remaining = (
            visible(suggestion.text[len(typed) :])
            if suggestion.done
            else visible(suggestion.text)[len(typed) :]
        )
        self._publish_stats(
            state,
            source="cache",
            completion=None,
            queue_ms=0.0,
            debounce_ms=0.0,
            total_ms=0.0,
            cancelled=False,
        )
        return Answer(remaining, "cache")

    async def _complete_with_model(
        self, state: CursorState, explicit: bool, debounce_ms: float, arrived: float
    ) -> Answer:
        loop = asyncio.get_running_loop()
        suggestion = Suggestion()
        first_visible = asyncio.Event()
        doc = state.doc_id

        def on_update(s: Suggestion) -> None:
            if s.done or visible(s.text):
                first_visible.set()
            target = self._ghost_target.get(doc)
            if target is not None and target[0] is s and first_visible.is_set():
                _, shown_state, typed = target
                if s.text.startswith(typed):
                    self.events.ghost_text(shown_state, visible(s.text)[len(typed) :], s.done)

        suggestion.listeners.append(on_update)
        self.cache.put(state.prefix[-512:], state.suffix[:256], suggestion)
        self._ghost_target[doc] = (suggestion, state, "")
        request = self._request_for(state, "full" if explicit else "keystroke")

        def run(cancel: Any) -> Completion:
            session = self.session
            if session is None:
                raise JobDropped("no model")
            return session.complete(
                request,
                cancel,
                on_text=lambda text: loop.call_soon_threadsafe(suggestion.update, text),
            )

        job = self.worker.submit(
            run, Priority.INTERACTIVE, label=f"complete {doc} v{state.version}"
        )
        self._jobs[doc] = _DocJob(state, suggestion, job.cancel.cancel)
        job_future = job.future
        assert job_future is not None
        job_future.add_done_callback(
            lambda fut: self._job_finished(
                fut, state, suggestion, job.queue_ms, debounce_ms, arrived, explicit
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
            job.cancel.cancel()  # $/cancelRequest before the answer: stop the work
            raise
        finally:
            for waiter in waiters - {job_future}:
                waiter.cancel()
        if job_future.done() and not job_future.cancelled() and job_future.exception() is None:
            return Answer(job_future.result().text, "model")
        if suggestion.cancelled or (job_future.done() and job_future.exception() is not None):
            return Answer("", "none", "cancelled")
        return Answer(visible(suggestion.text), "model")

    def _request_for(
        self, state: CursorState, mode: Literal["keystroke", "full"], max_tokens: int | None = None
    ) -> CompletionRequest:
        return CompletionRequest(
            prefix=state.prefix,
            suffix=state.suffix,
            doc_id=state.doc_id,
            cursor_line=state.cursor_line,
            mode=mode,
            max_tokens=max_tokens or self.options.max_tokens,
            multiline=self.options.multiline,
            postprocess=self.options.postprocess,
            extra_context=self._extra_context(state) if mode == "full" else None,
        )

    def _job_finished(
        self,
        fut: asyncio.Future[Any],
        state: CursorState,
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
        if (
            self._jobs.get(state.doc_id) is not None
            and self._jobs[state.doc_id].suggestion is suggestion
        ):
            del self._jobs[state.doc_id]
        total_ms = (time.perf_counter() - arrived) * 1000
        self._publish_stats(
            state,
            source="model",
            completion=completion,
            queue_ms=queue_ms,
            debounce_ms=debounce_ms,
            total_ms=total_ms,
            cancelled=cancelled,
        )
        if completion is not None and completion.widen:
            self._widen(state.doc_id)
        if cancelled or completion is None:
            return
        self.latency.ttft.append(completion.timings.ttft_ms + queue_ms)
        self.latency.total.append(total_ms)
        self._after_suggestion(state, completion, explicit)

    def _backend_failed(self, exc: BaseException | None) -> None:
        """A failed request (a remote server down or silent) puts the status in error, told
        once per distinct message rather than once per keystroke; requests keep trying."""
        message = f"ghostfim: completion failed: {exc}"
        if message != self.error:
            self.events.problem(message)
            self._set_state("error", message)

    def _backend_recovered(self) -> None:
        if self.state == "error" and self.session is not None:
            self._set_state("ready")

    # --- background work after a suggestion ---------------------------------------------------
    def _after_suggestion(self, state: CursorState, completion: Completion, explicit: bool) -> None:
        """At a pause: refresh with the full prompt if the keystroke prompt cut the suffix,
        and prefetch what comes after the suggestion. Both are dropped by any keystroke."""
        number = self._latest.get(state.doc_id)
        loop = asyncio.get_running_loop()
        suffix_was_cut = (
            not explicit and completion.timings.suffix_tokens < self._full_suffix_tokens(state)
        )

        def at_pause() -> None:
            if self._latest.get(state.doc_id) != number:
                return
            if suffix_was_cut:
                self._spawn(self._refresh(state, number))
            elif completion.text:
                self._spawn(self._prefetch(state, completion.text, number))

        loop.call_later(PAUSE_REFRESH_S if suffix_was_cut else 0.0, at_pause)

    def _full_suffix_tokens(self, state: CursorState) -> int:
        session = self.session
        if session is None or not state.suffix:
            return 0
        return session.full_suffix_tokens(state.suffix)

    async def _refresh(self, state: CursorState, number: int) -> None:
        request = self._request_for(state, "full")
        result = await self._background(request, Priority.REFRESH)
        if result is None or self._latest.get(state.doc_id) != number:
            return
        suggestion = Suggestion(text=result.text, done=True)
        self.cache.put(state.prefix[-512:], state.suffix[:256], suggestion)
        target = self._ghost_target.get(state.doc_id)
        if target is not None and target[1] is state:
            self._ghost_target[state.doc_id] = (suggestion, state, "")
            self.events.ghost_text(state, result.text, True)
        if result.text:
            await self._prefetch(state, result.text, number)

    async def _prefetch(self, state: CursorState, text: str, number: int) -> None:
        """The suggestion after this one is accepted (or typed through): ready before asked."""
        accepted = replace(
            state, prefix=state.prefix + text, cursor_line=state.cursor_line + text.count("\n")
        )
        request = self._request_for(accepted, "keystroke", SPECULATIVE_MAX_TOKENS)
        result = await self._background(request, Priority.SPECULATIVE)
        if result is None or self._latest.get(state.doc_id) != number:
            return
        self.cache.put(
            accepted.prefix[-512:], accepted.suffix[:256], Suggestion(text=result.text, done=True)
        )

    def _widen(self, doc_id: str) -> None:
        """The keystroke used the narrow start window (a new place, on a CPU): prepare the
        wide one while the user types. Droppable; asked for again after the next keystroke."""
        state = self._last_state
        if self._widening or state is None or state.doc_id != doc_id:
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
            request = replace(self._request_for(state, mode), max_tokens=0)  # type: ignore[arg-type]
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
        *,
        source: str,
        completion: Completion | None,
        queue_ms: float,
        debounce_ms: float,
        total_ms: float,
        cancelled: bool,
    ) -> None:
        t = completion.timings if completion is not None else None
        payload = {
            "uri": state.doc_id,
            "version": state.version,
            "source": source,
            "cancelled": cancelled,
            "queueMs": round(queue_ms, 2),
            "debounceMs": round(debounce_ms, 2),
            "promptMs": round(t.prompt_ms, 2) if t else 0.0,
            "prefillMs": round(t.prefill_ms, 2) if t else 0.0,
            "ttftMs": round(t.ttft_ms + queue_ms, 2) if t else 0.0,
            "decodeMs": round(t.decode_ms, 2) if t else 0.0,
            "totalMs": round(total_ms, 2),
            "reusedTokens": t.prefill_reused_tokens if t else 0,
            "newTokens": t.prefill_new_tokens if t else 0,
            "generatedTokens": t.decode_tokens if t else 0,
            "networkMs": round(t.network_ms, 2) if t else 0.0,
            "extraTokens": t.extra_tokens if t else 0,
            "model": self.session.info.name if self.session else None,
        }
        self.latency.recent.append(payload)
        self.events.stats(payload)
