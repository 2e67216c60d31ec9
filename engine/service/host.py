"""Model switching: opening backends in the background, one at a time, newest wins.

The backend that serves keeps serving until the new one is ready. Loads are serialized on one
load thread (loads allocate from one malloc arena, and never two at once) and coalesced: while
one is in flight, switches asked for meanwhile replace each other and only the newest waits;
the ones it replaces are skipped (a skipped local model is still checked quickly, so that every
broken model asked for is reported). A load that finishes after a newer switch was asked for is
closed at once and its memory handed back.

The switcher knows what serves (`serving_key`) and what is on its way (`switching_key`): after
a failed switch the record names what actually serves, so switching back to it loads nothing,
and asking for the failed one again retries it. It does not know what a backend is used for:
the service hands it `swap_in`, run when a new backend is ready.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import logging
import sys
from collections.abc import Awaitable, Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from ghostfim.engine.backend import CompletionBackend

log = logging.getLogger("ghostfim.switching")


class SwitchEvents(Protocol):
    def progress(self, message: str, percentage: int | None, done: bool) -> None: ...
    def problem(self, message: str) -> None: ...
    def loading(self, label: str | None, percentage: int | None) -> None:
        """What loads now and how far it is (None: nothing loads)."""
        ...

    def failed(self, message: str) -> None:
        """A switch failed (the old backend, if any, keeps serving)."""
        ...

    def recovered(self) -> None:
        """The failed switch's message no longer applies (what serves is wanted after all)."""
        ...


OpenBackend = Callable[[Callable[[float], None]], CompletionBackend]  # takes a progress sink


@dataclass
class _Load:
    """A switch asked for: what to open, and its caller's answer (swapped in or not)."""

    generation: int
    label: str
    open_backend: OpenBackend
    key: Hashable
    check: Callable[[], None] | None = None  # what tells a broken one quickly (if skipped)
    done: asyncio.Future[bool] | None = None


def _settle(load: _Load, ok: bool) -> None:
    if load.done is not None and not load.done.done():
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


class ModelSwitcher:
    def __init__(
        self,
        events: SwitchEvents,
        swap_in: Callable[[CompletionBackend, Hashable], Awaitable[None]],
    ) -> None:
        self.events = events
        self._swap_in = swap_in
        self.serving: CompletionBackend | None = None
        self._serving_key: Hashable = None
        self._generation = 0  # bumped by every switch asked for (newest wins)
        self._pending: _Load | None = None  # the newest switch not yet started
        self._loading: _Load | None = None  # the switch in flight
        self._loader: asyncio.Future[None] | None = None
        self.load_error: str | None = None  # the message of the last failed switch
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ghostfim-load")
        self._closed = False
        self._tasks: set[asyncio.Future[Any]] = set()

    # --- what serves, what comes -----------------------------------------------------------
    @property
    def serving_key(self) -> Hashable:
        """The key of the backend serving now (None when none serves)."""
        return self._serving_key

    @property
    def switching_key(self) -> Hashable:
        """The key of the newest switch still wanted and not yet done (None when none)."""
        if self._pending is not None:
            return self._pending.key
        if self._loading is not None and self._loading.generation == self._generation:
            return self._loading.key
        return None

    @property
    def switching_label(self) -> str | None:
        switching = self._pending or self._loading  # loads in flight or waiting
        return None if switching is None else switching.label

    @property
    def busy(self) -> bool:
        """A load is in flight or waiting."""
        return self._pending is not None or self._loading is not None

    # --- asking for a switch -----------------------------------------------------------------
    def request(
        self,
        label: str,
        open_backend: OpenBackend,
        *,
        key: Hashable = None,
        check: Callable[[], None] | None = None,
    ) -> asyncio.Future[bool]:
        """Register a switch now (so `switching_key` names it at once); the future says
        whether it was swapped in (False: it could not be had, or a newer switch replaced it).
        `check`, if given, raises quickly for a backend that cannot be opened."""
        self._generation += 1
        key = label if key is None else key
        loading = self._loading
        if loading is not None and loading.key == key and loading.done is not None:
            # The switch in flight is wanted again (A, B, A in quick succession): it is the
            # newest once more, and nothing new loads.
            loading.generation = self._generation
            if self._pending is not None:
                self._skip(self._pending)
                self._pending = None
            return loading.done
        load = _Load(self._generation, label, open_backend, key, check)
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        load.done = done
        if self._closed:
            done.set_result(False)
            return done
        if self._pending is not None:  # superseded before it started: never opened
            self._skip(self._pending)
        self._pending = load
        if self._loader is None or self._loader.done():
            self._loader = asyncio.ensure_future(self._run_loads())
        return done

    def keep_current(self) -> None:
        """The backend serving now is wanted after all: skip the pending switch, discard the
        one in flight when it is ready, and drop the message of a switch that failed."""
        self._generation += 1
        if self._pending is not None:
            self._skip(self._pending)
            self._pending = None
        if self.serving is not None and self.load_error is not None:
            self.load_error = None
            self.events.recovered()

    # --- the loads ---------------------------------------------------------------------------
    def _skip(self, load: _Load) -> None:
        """A switch replaced before it started: its caller hears False, and a broken model
        is reported all the same (a quick check, on the load thread)."""
        _settle(load, False)
        if load.check is not None and not self._closed:
            self._spawn(self._check_skipped(load))

    async def _check_skipped(self, load: _Load) -> None:
        assert load.check is not None
        try:
            await self.off_loop(load.check)
        except Exception as exc:
            self.events.problem(f"ghostfim: cannot load {load.label}: {exc}")
            return
        log.info("switch to %s skipped: a newer switch replaced it", load.label)

    async def _run_loads(self) -> None:
        while self._pending is not None and not self._closed:
            load, self._pending = self._pending, None
            self._loading = load
            ok = False
            try:
                ok = await self._load_one(load)
            except Exception as exc:  # never leave a caller waiting
                log.exception("model switch to %s failed", load.label)
                self.events.failed(f"{exc}")
            finally:
                self._loading = None
                self.events.loading(self.switching_label, None)
                _settle(load, ok)
        if self._closed and self._pending is not None:
            _settle(self._pending, False)
            self._pending = None

    def _progress_sink(self, load: _Load) -> Callable[[float], None]:
        """A load thread's progress (0..1) as events on the loop, in steps of 5%."""
        loop = asyncio.get_running_loop()
        last = [-1]

        def report(fraction: float) -> None:
            percentage = max(0, min(100, int(fraction * 100)))
            if percentage < 100 and percentage - last[0] < 5:
                return
            last[0] = percentage

            def tell() -> None:
                if self._loading is load:
                    self.events.loading(load.label, percentage)
                    self.events.progress(f"loading {load.label}", percentage, False)

            loop.call_soon_threadsafe(tell)

        return report

    async def _load_one(self, load: _Load) -> bool:
        self.events.loading(load.label, 0)
        self.events.progress(f"loading {load.label}", 0, False)
        sink = self._progress_sink(load)
        message: str | None = None
        try:
            new: CompletionBackend = await self.off_loop(lambda: load.open_backend(sink))
        except Exception as exc:  # any failure keeps the old model serving
            message = f"ghostfim: cannot load {load.label}: {exc}"
        if message is not None:
            # Out of the except block: the traceback (frames of the load, and whatever it had
            # built before failing) is gone before memory is handed back.
            await self.off_loop(release_memory)
            self.events.progress(message, None, True)
            self.events.problem(message)
            self.load_error = message
            self.events.failed(message)
            return False
        superseded = load.generation != self._generation
        if self._closed or (superseded and self.serving is not None):
            # A newer switch was asked for meanwhile (or the server is going away): this one
            # is not wanted, and everything it allocated goes back now.
            box = [new]
            del new  # the load thread drops the last reference, then frees
            await self.off_loop(lambda: _close_and_release(box))
            self.events.progress(
                f"{load.label}: dropped (another switch was asked for)", None, True
            )
            return False
        await self._swap_in(new, load.key)
        self._serving_key = load.key
        self.serving = new
        self.load_error = None
        self.events.progress(f"{new.info.name} ready on {new.info.device}", 100, True)
        await self.off_loop(release_memory)  # what the old backend held
        return True

    async def off_loop(self, fn: Callable[[], Any]) -> Any:
        """Run fn on the load thread; after shutdown, on any thread."""
        if self._closed:  # the executor is shut down
            return await asyncio.to_thread(fn)
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def shutdown(self) -> None:
        """No more switches; a load in flight is not waited for (llama.cpp cannot stop one):
        its thread closes what it opened once it ends, unless the process exits first."""
        self._closed = True
        self._generation += 1
        if self._pending is not None:
            _settle(self._pending, False)
            self._pending = None
        self.serving = self._serving_key = None
        self._executor.shutdown(wait=False, cancel_futures=True)
