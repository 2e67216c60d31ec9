"""The contract between the completion service and whatever generates suggestions.

`ghostfim.engine.local.session.ModelSession` (the in-process model) is one backend; a remote
inference server behind HTTP (`ghostfim.engine.remote.backends`: llama-server, an OpenAI-compatible
server, Ollama) is another. The service calls them from its single model thread; a
`CancelToken` may be set from any thread and must stop the work (a remote backend closes its
stream so that the server stops generating).

Both end a request the same way, `finish()`: the stop rules have cut the raw text, the clean-up
rules make the suggestion an editor shows, and the `Completion` says what the service needs to
decide its follow-ups (whether the prompt cut the suffix, whether a wider window is wanted).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from ghostfim.engine.context.ring import ExtraContext
from ghostfim.engine.text.cursor import CursorContext
from ghostfim.engine.text.postprocess import clean_suggestion
from ghostfim.engine.text.stops import Multiline, StopPolicy
from ghostfim.engine.timings import Timings

PromptMode = Literal["keystroke", "full"]
OnText = Callable[[str], None]


class Cancelled(Exception):
    """The request's CancelToken was set; the KV cache holds only fully decoded tokens."""


class CancelToken:
    """A flag the engine polls between chunks/steps (and llama.cpp between graph nodes)."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


NEVER_CANCELLED = CancelToken()


@dataclass(frozen=True)
class CompletionRequest:
    prefix: str  # document text before the cursor
    suffix: str  # document text after the cursor
    doc_id: str = ""  # keeps the prefix window sticky per document
    cursor_line: int | None = None  # 0-based; counted from prefix when None
    mode: PromptMode = "full"  # "keystroke": suffix within the prefill budget
    max_tokens: int = 64
    multiline: Multiline = "auto"
    background: bool = False  # droppable work: a cancel may abort any part of the prefill
    postprocess: bool = True  # the clean-up rules of engine/postprocess.py (off: benchmark)
    # Chunks of other files for a full prompt (engine/context.py); keystroke prompts ignore it.
    extra_context: ExtraContext | None = None

    @property
    def line(self) -> int:
        """The cursor's 0-based line."""
        return self.prefix.count("\n") if self.cursor_line is None else self.cursor_line


@dataclass
class Completion:
    text: str  # cleaned suggestion (what an editor shows)
    raw_text: str  # what the model generated, cut by the stop rules
    timings: Timings
    stop_reason: str
    cancelled: bool = False
    mode: PromptMode = "full"
    # The prompt held less suffix than a full prompt would: a pause refresh with the full
    # prompt can do better.
    suffix_cut: bool = False
    # The keystroke prompt used the narrow start window: a background prefill of the wide
    # window (the same request, background=True, max_tokens=0) makes the next keystrokes better.
    widen: bool = False


@dataclass(frozen=True)
class ModelInfo:
    name: str
    path: str
    preset: str | None
    device: str  # "cpu" or "cuda (<gpu name>)"
    n_gpu_layers: int
    family: str  # FIM template family
    n_ctx: int

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "path": self.path,
            "preset": self.preset,
            "device": self.device,
            "n_gpu_layers": self.n_gpu_layers,
            "fim": self.family,
            "n_ctx": self.n_ctx,
        }


class CompletionBackend(Protocol):
    info: ModelInfo
    decode_steps: int  # work counters, reported in ghostfim/status
    prefill_chunks: int

    def complete(
        self,
        request: CompletionRequest,
        cancel: CancelToken | None = None,
        on_text: OnText | None = None,
    ) -> Completion: ...

    def expected_prefill_ms(self, n_tokens: int) -> float | None:
        """What a cold prefill of n_tokens is expected to take here (None: not known, as for
        a remote server). The explicit request deadline is sized from it."""
        ...

    def set_budgets(
        self,
        prefix_tokens: int,
        suffix_tokens: int,
        keystroke_prefill_ms: float,
        snapshot_bytes: int,
    ) -> None:
        """Change the prompt budgets and the RAM for KV snapshots in place (on the model
        thread, between requests)."""
        ...

    def forget_document(self, doc_id: str) -> None:
        """A document was closed: what is kept for it (KV snapshots) can go."""
        ...

    def kv_status(self) -> dict[str, object] | None:
        """What the backend keeps of its KV cache, for ghostfim/status (None: nothing)."""
        ...

    def close(self) -> None: ...


def stop_policy(request: CompletionRequest) -> tuple[CursorContext, StopPolicy]:
    """The cursor's surroundings and the stop rules for this request."""
    ctx = CursorContext.around(request.prefix, request.suffix)
    return ctx, StopPolicy.for_context(request.multiline, ctx)


def finish(
    request: CompletionRequest,
    ctx: CursorContext,
    raw: str,
    reason: str,
    timings: Timings,
    *,
    suffix_cut: bool = False,
    widen: bool = False,
) -> Completion:
    """The end of every request, local or remote: the cleaned suggestion and what it says."""
    return Completion(
        clean_suggestion(raw, ctx, request.postprocess) if raw else "",
        raw,
        timings,
        reason,
        cancelled=reason == "cancelled",
        mode=request.mode,
        suffix_cut=suffix_cut,
        widen=widen,
    )
