"""Fakes for testing the service, the host and the planner without a model.

- `FakeBackend` answers every request with a scripted text, "decoded" a few characters at a
  time with a delay per piece after a prefill delay, and honours the cancel token at every step
  as the real backends do. It records what it was asked (requests, budgets), so tests can tell
  model work from cache answers.
- `FakeOpener` is the host's Opener: it maps `spec.model` (what EngineConfig's model_path or
  model_size says; None for the default model) to backend factories, so that
  `await service.configure(EngineConfig(model_path="fake", debounce_ms=0))` loads a FakeBackend.
- `RecordingEvents` keeps what the service tells its editor integration, as the JSON the LSP
  server would send (lsp/wire.py), so assertions read like the protocol.
- `FakeStore` is the KV cells the session changes (engine/local/session.py `Cells`: a list
  of tokens a sequence), and `words` a stand-in tokenizer.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from ghostfim.engine.backend import (
    NEVER_CANCELLED,
    CancelToken,
    Completion,
    CompletionBackend,
    CompletionRequest,
    KvStatus,
    ModelInfo,
    OnText,
)
from ghostfim.engine.config import BackendSpec, Budgets, BudgetsInEffect, EngineConfig
from ghostfim.engine.prompt.builder import fit_budgets
from ghostfim.engine.service.completion import CompletionService
from ghostfim.engine.service.cursor import CursorState, cursor_state
from ghostfim.engine.service.stats import RequestStats, ServiceStatus
from ghostfim.engine.text.finish import finish, stop_policy
from ghostfim.engine.timings import Timings
from ghostfim.lsp.wire import stats_json, status_json

Script = Callable[[CompletionRequest], str]


@dataclass
class FakeBackend:
    script: Script = lambda request: "suggestion"
    piece_chars: int = 4  # characters per "token"
    prefill_s: float = 0.0
    piece_s: float = 0.0
    cut_suffix: bool = False  # keystroke prompts report a cut suffix (a CPU's plain prefix)
    narrow: bool = False  # keystroke prompts report the narrow window (asks for widen)
    prefill_ms_per_token: float | None = None  # what expected_prefill_ms reports
    prompt_room: int | None = None  # clamp budgets as a KV slot of this many tokens would
    # The model's probability of each piece (None: not known, as for a remote server).
    piece_prob: Callable[[str], float] | None = None
    name: str = "fake"
    log: list[str] | None = None  # "open <name>" / "close <name>", in order
    requests: list[CompletionRequest] = field(default_factory=list)
    budgets: list[Budgets] = field(default_factory=list)
    closed: bool = False
    decode_steps: int = 0
    prefill_chunks: int = 0

    def __post_init__(self) -> None:
        self.info = ModelInfo(self.name, "/fake", None, "cpu", 0, "qwen", 4096)
        self._lock = threading.Lock()
        if self.log is not None:
            self.log.append(f"open {self.name}")

    # --- CompletionBackend -----------------------------------------------------------------
    def complete(
        self,
        request: CompletionRequest,
        cancel: CancelToken | None = None,
        on_text: OnText | None = None,
    ) -> Completion:
        cancel = cancel or NEVER_CANCELLED
        with self._lock:
            self.requests.append(request)
        timings = Timings()
        start = time.perf_counter()
        ctx, policy = stop_policy(request)
        keystroke = request.mode == "keystroke"
        flags = {"suffix_cut": keystroke and self.cut_suffix, "widen": keystroke and self.narrow}
        if not _sleep(self.prefill_s, cancel):
            return finish(request, ctx, "", "cancelled", timings, **flags)
        self.prefill_chunks += 1
        timings.ttft_ms = (time.perf_counter() - start) * 1000
        if request.max_tokens <= 0:
            return finish(request, ctx, "", "prefill_only", timings, **flags)
        text, raw = self.script(request), ""
        ends: list[int] = []
        probs: list[float] = []

        def end(reason: str) -> Completion:
            return finish(
                request, ctx, raw, reason, timings, token_probs=tuple(probs),
                token_ends=tuple(ends), **flags,
            )  # fmt: skip

        while raw != text:
            if cancel.cancelled:
                return end("cancelled")
            piece = text[len(raw) : len(raw) + self.piece_chars]
            raw += piece
            if self.piece_prob is not None:
                ends.append(len(raw))
                probs.append(self.piece_prob(piece))
            self.decode_steps += 1
            timings.decode_tokens += 1
            if on_text is not None:
                on_text(raw, tuple(zip(ends, probs, strict=True)))
            if not _sleep(self.piece_s, cancel):
                return end("cancelled")
        del policy  # the script is the suggestion: no stop rule cuts it
        return end("eog")

    def expected_prefill_ms(self, n_tokens: int) -> float | None:
        if self.prefill_ms_per_token is None:
            return None
        return self.prefill_ms_per_token * n_tokens

    def set_budgets(self, budgets: Budgets) -> BudgetsInEffect:
        self.budgets.append(budgets)
        if self.prompt_room is None:
            return BudgetsInEffect(budgets)
        return fit_budgets(budgets, self.prompt_room)

    def forget_document(self, doc_id: str) -> None: ...

    def kv_status(self) -> KvStatus | None:
        return None

    def close(self) -> None:
        self.closed = True
        if self.log is not None:
            self.log.append(f"close {self.name}")

    # --- for tests -------------------------------------------------------------------------
    def model_requests(self, mode: str | None = None, background: bool | None = None) -> int:
        return sum(
            1
            for r in self.requests
            if (mode is None or r.mode == mode)
            and (background is None or r.background == background)
            and r.max_tokens > 0
        )


def _sleep(seconds: float, cancel: CancelToken) -> bool:
    """Sleep, waking for a cancel; False when cancelled."""
    deadline = time.perf_counter() + seconds
    while True:
        if cancel.cancelled:
            return False
        left = deadline - time.perf_counter()
        if left <= 0:
            return True
        time.sleep(min(left, 0.005))


Factory = Callable[[], CompletionBackend]


class FakeOpener:
    """The host's Opener over factories named by `spec.model` (None: the default model).

    A model with no factory, or named in `broken`, fails to open and fails the quick check
    of a skipped switch, as a missing or broken model file does. Every open and check is
    recorded, and so is the most loads that ever ran at once."""

    def __init__(
        self,
        factories: Mapping[str | None, Factory] | None = None,
        broken: Mapping[str, str] | None = None,
    ) -> None:
        self.factories: dict[str | None, Factory] = dict(factories or {})
        self.broken: dict[str, str] = dict(broken or {})
        self.opened: list[BackendSpec] = []
        self.checked: list[BackendSpec] = []
        self.progress_steps: tuple[float, ...] = ()  # reported before each factory runs
        self._lock = threading.Lock()
        self._running = 0
        self.most_at_once = 0

    def _problem(self, spec: BackendSpec) -> str | None:
        model = spec.model
        if model in self.broken:
            return self.broken[model]
        if model not in self.factories:
            return f"no such model: {spec.label}"
        return None

    def open(self, spec: BackendSpec, progress: Callable[[float], None]) -> CompletionBackend:
        with self._lock:
            self.opened.append(spec)
            self._running += 1
            self.most_at_once = max(self.most_at_once, self._running)
        try:
            problem = self._problem(spec)
            if problem is not None:
                raise RuntimeError(problem)
            for fraction in self.progress_steps:
                progress(fraction)
            return self.factories[spec.model]()
        finally:
            with self._lock:
                self._running -= 1

    def check(self, spec: BackendSpec) -> None:
        self.checked.append(spec)
        problem = self._problem(spec)
        if problem is not None:
            raise RuntimeError(problem)

    def models_opened(self) -> list[str | None]:
        return [spec.model for spec in self.opened]


class RecordingEvents:
    """engine.service.completion.Events, kept as the JSON the server sends (lsp/wire.py)."""

    def __init__(self) -> None:
        self.ghost: list[tuple[CursorState, str, bool]] = []
        self.ghost_items: list[str] = []  # the item each ghost_text event shows
        self.stats_seen: list[dict[str, Any]] = []
        self.statuses: list[dict[str, Any]] = []
        self.problems: list[str] = []
        self.notices: list[str] = []
        self.progresses: list[tuple[str, int | None, bool]] = []
        self.stats_arrived = asyncio.Event()

    def ghost_text(self, state: CursorState, text: str, done: bool, item_id: str) -> None:
        self.ghost.append((state, text, done))
        self.ghost_items.append(item_id)

    def stats(self, stats: RequestStats) -> None:
        self.stats_seen.append(stats_json(stats))
        self.stats_arrived.set()

    def status(self, status: ServiceStatus) -> None:
        self.statuses.append(status_json(status))

    def progress(self, message: str, percentage: int | None, done: bool) -> None:
        self.progresses.append((message, percentage, done))

    def problem(self, message: str) -> None:
        self.problems.append(message)

    def notice(self, message: str) -> None:
        self.notices.append(message)


class NoEvents:
    """Events nobody listens to."""

    def __getattr__(self, name: str) -> object:
        return lambda *args, **kwargs: None


def cursor(
    text: str, offset: int | None = None, doc_id: str = "file:///a.py", version: int = 1
) -> CursorState:
    """The cursor state at `offset` of a document (its end when None), as the server makes it."""
    offset = len(text) if offset is None else offset
    return cursor_state(doc_id, version, None, text, offset, text[:offset].count("\n"))


# --- a service over fakes --------------------------------------------------------------------
FIXED_DEBOUNCE = EngineConfig(model_path="fake", debounce_ms=0)


async def serving(
    backend: FakeBackend, config: EngineConfig = FIXED_DEBOUNCE
) -> tuple[CompletionService, RecordingEvents]:
    """A service whose `config.model_path` (default "fake") opens `backend`, loaded."""
    events = RecordingEvents()
    model = config.model_spec or "fake"
    service = CompletionService(events, opener=FakeOpener({model: lambda: backend}))
    assert await service.configure(replace(config, model_path=model))
    return service, events


async def settle(service: CompletionService, timeout_s: float = 20.0) -> None:
    """Until the model worker is idle and no follow-up is pending, twice in a row: what a
    finished job's callbacks schedule (its stats, its last ghost text, a follow-up) has run."""
    quiet = 0
    for _ in range(int(timeout_s / 0.01)):
        await asyncio.sleep(0.01)
        quiet = quiet + 1 if service.worker.idle and service.followups.idle else 0
        if quiet >= 2:
            return
    raise AssertionError("the service never went idle")


@asynccontextmanager
async def shutting_down(*services: CompletionService) -> AsyncIterator[list[CompletionService]]:
    """Services (and any appended meanwhile) are shut down on the way out."""
    kept = list(services)
    try:
        yield kept
    finally:
        for service in kept:
            await service.shutdown()


# --- the KV slots and the planner without llama.cpp -----------------------------------------
class FakeStore:
    """A llama.cpp context's sequences as token lists (the session's `Cells`)."""

    def __init__(self) -> None:
        self.cells: dict[int, list[int]] = {0: [], 1: [], 2: []}
        self.saved = 0
        self.restored = 0
        self.removed = 0

    def kv_remove_from(self, pos: int, seq: int = 0) -> None:
        self.removed += 1
        del self.cells[seq][pos:]

    def seq_state(self, seq: int) -> bytes:
        self.saved += 1
        return bytes(self.cells[seq]) * 100  # ~100 bytes a token

    def restore_seq_state(self, data: bytes, seq: int) -> None:
        self.restored += 1
        self.cells[seq] = list(data[: len(data) // 100])


def words(text: str) -> list[int]:
    """A stand-in tokenizer: one token per whitespace-separated word, plus one per newline
    (ids below 997, so that FIM token ids of 1000 and more never collide with text)."""
    return [hash(w) % 997 for w in text.replace("\n", " \n ").split(" ") if w]
