"""The backend host: the one owner of what serves.

Everything about the backend that answers requests lives here, and only here is it written:
the backend itself and the spec it was opened for, the state (`loading`, `ready`, `error`) and
its error, the load in progress and how far it is, and the budgets in effect. The completion
service reads them; it never writes them.

Switching backends: the backend that serves keeps serving until the new one is ready. Loads are
serialized on one load thread (loads allocate from one malloc arena, and never two at once) and
coalesced: while one is in flight, switches asked for meanwhile replace each other and only the
newest waits; the ones it replaces are skipped (a skipped local model is still checked quickly,
so that every broken model asked for is reported). A load that finishes after a newer switch was
asked for is closed at once and its memory handed back. After a failed switch the host still
names what actually serves, so asking for it again loads nothing, and asking for the failed one
again retries it.

A new backend replaces the old one between jobs, on the model thread (`ModelWorker.run_exclusive`),
so that no job ever sees a closed backend; then `on_swapped` tells the service.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import logging
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ghostfim.engine.backend import CompletionBackend
from ghostfim.engine.config import BackendSpec, Budgets, BudgetsInEffect
from ghostfim.engine.service.scheduler import ModelWorker, Priority

log = logging.getLogger("ghostfim.host")

State = Literal["loading", "ready", "error"]
Progress = Callable[[float], None]


class HostEvents(Protocol):
    def progress(self, message: str, percentage: int | None, done: bool) -> None: ...
    def problem(self, message: str) -> None: ...
    def host_changed(self) -> None:
        """State, error, load progress or budgets changed (the status is worth publishing)."""
        ...


class Opener(Protocol):
    """How a spec becomes a backend (engine/service/opening.py; tests bring fakes)."""

    def open(self, spec: BackendSpec, progress: Progress) -> CompletionBackend: ...
    def check(self, spec: BackendSpec) -> None:
        """Raise quickly for a backend that cannot be opened (a missing model file)."""
        ...


@dataclass
class _Load:
    """A switch asked for: what to open, and its caller's answer (swapped in or not)."""

    generation: int
    spec: BackendSpec
    done: asyncio.Future[bool]


@dataclass(frozen=True)
class Loading:
    label: str
    percentage: int | None


class BackendHost:
    def __init__(
        self,
        events: HostEvents,
        worker: ModelWorker,
        opener: Opener,
        on_swapped: Callable[[CompletionBackend], None],
    ) -> None:
        self._events = events
        self._worker = worker
        self._opener = opener
        self._on_swapped = on_swapped
        self._backend: CompletionBackend | None = None
        self._serving: BackendSpec | None = None
        self._state: State = "loading"
        self._error: str | None = None
        self._loading: Loading | None = None
        self._budgets_wanted: Budgets | None = None
        self._budgets: BudgetsInEffect | None = None
        self._budgets_applied_to: tuple[int, Budgets] | None = None
        self._generation = 0  # bumped by every switch asked for (newest wins)
        self._pending: _Load | None = None  # the newest switch not yet started
        self._in_flight: _Load | None = None
        self._loader: asyncio.Future[None] | None = None
        self._load_failed = False  # the last switch failed (its message is the error)
        self._changed = asyncio.Event()  # set when a backend swaps in or a load fails
        self.changes = 0  # counts those (a request cancelled by a swap runs again)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ghostfim-load")
        self._closed = False
        self._tasks: set[asyncio.Future[Any]] = set()

    # --- what serves ---------------------------------------------------------------------------
    @property
    def backend(self) -> CompletionBackend | None:
        return self._backend

    @property
    def serving(self) -> BackendSpec | None:
        return self._serving

    @property
    def state(self) -> State:
        return self._state

    @property
    def error(self) -> str | None:
        return self._error

    @property
    def loading(self) -> Loading | None:
        return self._loading

    @property
    def budgets(self) -> BudgetsInEffect | None:
        return self._budgets

    @property
    def switching(self) -> BackendSpec | None:
        """The newest switch still wanted and not yet done (None when none)."""
        if self._pending is not None:
            return self._pending.spec
        if self._in_flight is not None and self._in_flight.generation == self._generation:
            return self._in_flight.spec
        return None

    @property
    def switching_label(self) -> str | None:
        switching = self._pending or self._in_flight  # loads in flight or waiting
        return None if switching is None else switching.spec.label

    @property
    def busy(self) -> bool:
        """A load is in flight or waiting."""
        return self._pending is not None or self._in_flight is not None

    @property
    def newer_pending(self) -> bool:
        """Another switch waits behind the one in flight (the backend swapping in now will
        not serve for long)."""
        return self._pending is not None

    @property
    def closed(self) -> bool:
        return self._closed

    # --- what is wanted ------------------------------------------------------------------------
    def want(self, spec: BackendSpec) -> asyncio.Future[bool]:
        """Serve `spec`: its budgets now if it serves already (a switch in flight is then
        abandoned and a failed one's message dropped); else a switch in the background.
        The future says whether `spec` serves in the end."""
        self._budgets_wanted = spec.budgets
        loop = asyncio.get_running_loop()
        if spec.same_backend(self._serving):
            self._keep_current()
            self.apply_budgets()
            done: asyncio.Future[bool] = loop.create_future()
            done.set_result(True)
            return done
        switching = self._pending or self._in_flight
        if switching is not None and spec.same_backend(switching.spec):
            # On its way (A, B, A in quick succession: the one in flight is the newest again).
            self._generation += 1
            switching.generation = self._generation
            if self._pending is not None and self._pending is not switching:
                self._skip(self._pending)
                self._pending = None
            return switching.done
        return self._request(spec)

    def _request(self, spec: BackendSpec) -> asyncio.Future[bool]:
        self._generation += 1
        load = _Load(self._generation, spec, asyncio.get_running_loop().create_future())
        if self._closed:
            load.done.set_result(False)
            return load.done
        if self._pending is not None:  # superseded before it started: never opened
            self._skip(self._pending)
        self._pending = load
        if self._loader is None or self._loader.done():
            self._loader = asyncio.ensure_future(self._run_loads())
        return load.done

    def _keep_current(self) -> None:
        """What serves now is wanted after all: skip the pending switch, discard the one in
        flight when it is ready, and drop the message of a switch that failed."""
        self._generation += 1
        if self._pending is not None:
            self._skip(self._pending)
            self._pending = None
        if self._load_failed and self._backend is not None:
            self._load_failed = False
            self._set_state("ready")

    # --- budgets -------------------------------------------------------------------------------
    def apply_budgets(self) -> None:
        """The serving backend runs with the budgets wanted, changed in place on the model
        thread; what it can honour (and what it clamped) is recorded and reported."""
        backend, wanted = self._backend, self._budgets_wanted
        if backend is None or wanted is None or self._closed:
            return
        if self._budgets_applied_to == (id(backend), wanted):
            return
        self._budgets_applied_to = (id(backend), wanted)

        def reconfigure(_cancel: Any) -> BudgetsInEffect:
            return backend.set_budgets(wanted)

        job = self._worker.submit(reconfigure, Priority.INTERACTIVE, label="budgets")
        assert job.future is not None
        job.future.add_done_callback(lambda fut: self._budgets_set(backend, fut))

    def _budgets_set(self, backend: CompletionBackend, fut: asyncio.Future[Any]) -> None:
        if fut.cancelled() or fut.exception() is not None or backend is not self._backend:
            return
        in_effect: BudgetsInEffect = fut.result()
        if in_effect.clamps and (self._budgets is None or self._budgets != in_effect):
            for clamp in in_effect.clamps:
                log.warning(
                    "%s: %g asked, %g in effect (%s)",
                    clamp.budget,
                    clamp.asked,
                    clamp.effective,
                    clamp.reason,
                )
        self._budgets = in_effect
        self._events.host_changed()

    # --- requests' outcomes --------------------------------------------------------------------
    def request_failed(self, exc: BaseException | None) -> None:
        """A failed request (a remote server down or silent) puts the state in error, told
        once per distinct message rather than once per keystroke; requests keep trying."""
        message = f"ghostfim: completion failed: {exc}"
        if message != self._error:
            self._events.problem(message)
            self._set_state("error", message)

    def request_succeeded(self) -> None:
        if self._state == "error" and self._backend is not None:
            self._set_state("ready")

    # --- waiting for a backend -----------------------------------------------------------------
    async def changed(self, timeout: float) -> None:
        """Until a backend swaps in or a load fails (or timeout seconds pass)."""
        event = self._changed
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)

    def _tell_changed(self) -> None:
        self.changes += 1
        self._changed.set()
        self._changed = asyncio.Event()

    def _set_state(self, state: State, error: str | None = None) -> None:
        self._state, self._error = state, error
        self._events.host_changed()

    # --- the loads -----------------------------------------------------------------------------
    def _skip(self, load: _Load) -> None:
        """A switch replaced before it started: its caller hears False, and a broken model
        is reported all the same (a quick check, on the load thread)."""
        _settle(load, False)
        if not self._closed:
            self._spawn(self._check_skipped(load))

    async def _check_skipped(self, load: _Load) -> None:
        try:
            await self._off_loop(lambda: self._opener.check(load.spec))
        except Exception as exc:
            self._events.problem(f"ghostfim: cannot load {load.spec.label}: {exc}")
            return
        log.info("switch to %s skipped: a newer switch replaced it", load.spec.label)

    async def _run_loads(self) -> None:
        while self._pending is not None and not self._closed:
            load, self._pending = self._pending, None
            self._in_flight = load
            ok = False
            try:
                ok = await self._load_one(load)
            except Exception as exc:  # never leave a caller waiting
                log.exception("model switch to %s failed", load.spec.label)
                self._failed(f"{exc}")
            finally:
                self._in_flight = None
                self._set_loading(self.switching_label, None)
                _settle(load, ok)
        if self._closed and self._pending is not None:
            _settle(self._pending, False)
            self._pending = None

    def _set_loading(self, label: str | None, percentage: int | None) -> None:
        self._loading = None if label is None else Loading(label, percentage)
        if label is not None and self._backend is None:
            self._state = "loading"
        self._events.host_changed()

    def _progress_sink(self, load: _Load) -> Progress:
        """A load thread's progress (0..1) as events on the loop, in steps of 5%."""
        loop = asyncio.get_running_loop()
        last = [-1]

        def report(fraction: float) -> None:
            percentage = max(0, min(100, int(fraction * 100)))
            if percentage < 100 and percentage - last[0] < 5:
                return
            last[0] = percentage

            def tell() -> None:
                if self._in_flight is load:
                    self._set_loading(load.spec.label, percentage)
                    self._events.progress(f"loading {load.spec.label}", percentage, False)

            loop.call_soon_threadsafe(tell)

        return report

    async def _load_one(self, load: _Load) -> bool:
        label = load.spec.label
        self._set_loading(label, 0)
        self._events.progress(f"loading {label}", 0, False)
        sink = self._progress_sink(load)
        message: str | None = None
        try:
            new: CompletionBackend = await self._off_loop(
                lambda: self._opener.open(load.spec, sink)
            )
        except Exception as exc:  # any failure keeps the old backend serving
            message = f"ghostfim: cannot load {label}: {exc}"
        if message is not None:
            # Out of the except block: the traceback (frames of the load, and whatever it had
            # built before failing) is gone before memory is handed back.
            await self._off_loop(release_memory)
            self._events.progress(message, None, True)
            self._events.problem(message)
            self._failed(message)
            return False
        superseded = load.generation != self._generation
        if self._closed or (superseded and self._backend is not None):
            # A newer switch was asked for meanwhile (or the server is going away): this one
            # is not wanted, and everything it allocated goes back now.
            box = [new]
            del new  # the load thread drops the last reference, then frees
            await self._off_loop(lambda: _close_and_release(box))
            self._events.progress(f"{label}: dropped (another switch was asked for)", None, True)
            return False
        await self._swap_in(new, load.spec)
        self._events.progress(f"{new.info.name} ready on {new.info.device}", 100, True)
        await self._off_loop(release_memory)  # what the old backend held
        return True

    def _failed(self, message: str) -> None:
        self._load_failed = True
        self._set_state("ready" if self._backend is not None else "error", message)
        self._tell_changed()

    async def _swap_in(self, new: CompletionBackend, spec: BackendSpec) -> None:
        """Requests cancelled by the swap run again on the new backend (see `changes`): the
        swap is counted before its cancels, so a request that sees one also sees the count
        move, and a job it submits again runs after the swap (the model thread runs both in
        order)."""
        self.changes += 1
        self._worker.cancel_all()

        def swap() -> None:
            old, self._backend = self._backend, new
            if old is not None:
                close_backend(old)

        await self._worker.run_exclusive(swap)
        self._serving = spec
        self._load_failed = False
        self._budgets = None
        self._budgets_applied_to = None
        self.apply_budgets()  # the configuration may have changed while it loaded
        self._set_state("ready")
        self._tell_changed()
        self._on_swapped(new)

    async def _off_loop(self, fn: Callable[[], Any]) -> Any:
        """Run fn on the load thread; after shutdown, on any thread."""
        if self._closed:  # the executor is shut down
            return await asyncio.to_thread(fn)
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def shutdown(self) -> None:
        """No more switches; a load in flight is not waited for (llama.cpp cannot stop one):
        its thread closes what it opened once it ends, unless the process exits first."""
        self._closed = True
        self._generation += 1
        if self._pending is not None:
            _settle(self._pending, False)
            self._pending = None
        self._executor.shutdown(wait=False, cancel_futures=True)
        backend, self._backend, self._serving = self._backend, None, None
        if backend is not None:
            try:
                await self._worker.run_exclusive(lambda: close_backend(backend))
            except Exception:  # the worker may be gone already
                close_backend(backend)
        self._tell_changed()


def _settle(load: _Load, ok: bool) -> None:
    if not load.done.done():
        load.done.set_result(ok)


def close_backend(backend: CompletionBackend) -> None:
    try:
        backend.close()
    except Exception:  # a backend that fails to close must not stop the switch
        log.exception("closing %s failed", backend.info.name)


def _close_and_release(box: list[CompletionBackend]) -> None:
    """Close the backend in box (its only reference) and hand its memory back."""
    backend = box.pop()
    close_backend(backend)
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
    return trim


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
