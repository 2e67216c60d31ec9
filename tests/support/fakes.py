"""A fake completion backend for testing the service without a model.

It answers every request with a scripted text, "decoded" a few characters at a time with a
delay per piece after a prefill delay, and honours the cancel token at every step as the real
backends do. It records what it was asked, so tests can tell model work from cache answers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ghostfim.engine.backend import (
    NEVER_CANCELLED,
    CancelToken,
    Completion,
    CompletionRequest,
    ModelInfo,
    OnText,
    finish,
    stop_policy,
)
from ghostfim.engine.service.documents import CursorState
from ghostfim.engine.timings import Timings
from ghostfim.lsp.documents import cursor_state

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
    name: str = "fake"
    requests: list[CompletionRequest] = field(default_factory=list)
    budgets: list[tuple[int, int, float]] = field(default_factory=list)
    closed: bool = False
    decode_steps: int = 0
    prefill_chunks: int = 0

    def __post_init__(self) -> None:
        self.info = ModelInfo(self.name, "/fake", None, "cpu", 0, "qwen", 4096)
        self._lock = threading.Lock()

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
        while raw != text:
            if cancel.cancelled:
                return finish(request, ctx, raw, "cancelled", timings, **flags)
            raw = text[: len(raw) + self.piece_chars]
            self.decode_steps += 1
            timings.decode_tokens += 1
            if on_text is not None:
                on_text(raw)
            if not _sleep(self.piece_s, cancel):
                return finish(request, ctx, raw, "cancelled", timings, **flags)
        del policy  # the script is the suggestion: no stop rule cuts it
        return finish(request, ctx, raw, "eog", timings, **flags)

    def expected_prefill_ms(self, n_tokens: int) -> float | None:
        if self.prefill_ms_per_token is None:
            return None
        return self.prefill_ms_per_token * n_tokens

    def set_budgets(
        self, prefix_tokens: int, suffix_tokens: int, keystroke_ms: float, snapshot_bytes: int
    ) -> None:
        self.budgets.append((prefix_tokens, suffix_tokens, keystroke_ms))

    def forget_document(self, doc_id: str) -> None: ...

    def kv_status(self) -> dict[str, object] | None:
        return None

    def close(self) -> None:
        self.closed = True

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


class RecordingEvents:
    """engine.service.Events, kept for assertions."""

    def __init__(self) -> None:
        self.ghost: list[tuple[CursorState, str, bool]] = []
        self.stats_seen: list[dict[str, Any]] = []
        self.statuses: list[dict[str, Any]] = []
        self.problems: list[str] = []

    def ghost_text(self, state: CursorState, text: str, done: bool) -> None:
        self.ghost.append((state, text, done))

    def stats(self, payload: dict[str, Any]) -> None:
        self.stats_seen.append(payload)

    def status(self, payload: dict[str, Any]) -> None:
        self.statuses.append(payload)

    def progress(self, message: str, percentage: int | None, done: bool) -> None: ...

    def problem(self, message: str) -> None:
        self.problems.append(message)


def cursor(
    text: str, offset: int | None = None, doc_id: str = "file:///a.py", version: int = 1
) -> CursorState:
    """The cursor state at `offset` of a document (its end when None), as the server makes it."""
    offset = len(text) if offset is None else offset
    return cursor_state(doc_id, version, None, text, offset, text[:offset].count("\n"))
