"""What the service reports: one record per request, and its status.

Plain dataclasses: lsp/wire.py turns them into the JSON of docs/protocol.md (`ghostfim/stats`,
`ghostfim/status`), and the command line prints them its own way. Latency is kept as a window
of recent samples and reported as percentiles, never a mean alone.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from ghostfim.engine.backend import Completion, KvStatus, ModelInfo
from ghostfim.engine.config import BudgetsInEffect
from ghostfim.engine.context.definitions import DefinitionBlock
from ghostfim.engine.context.index import IndexStatus
from ghostfim.engine.context.ring import RingStatus
from ghostfim.engine.memory import CacheUsage
from ghostfim.engine.service.acceptance import Counts
from ghostfim.engine.service.cursor import CursorState
from ghostfim.engine.service.host import Loading, State
from ghostfim.engine.timings import percentile

Source = Literal["model", "cache", "none"]


@dataclass(frozen=True)
class RequestStats:
    """One request: where its answer came from and where its time went (milliseconds)."""

    doc_id: str
    version: int
    source: Source
    cancelled: bool
    queue_ms: float  # waiting for the model thread
    debounce_ms: float
    prompt_ms: float  # building and tokenizing the prompt
    prefill_ms: float
    ttft_ms: float  # from the job's submission to its first token (queue included)
    decode_ms: float
    total_ms: float  # from the request's arrival to the job's end
    reused_tokens: int  # prompt tokens served from the KV cache
    new_tokens: int  # prompt tokens decoded
    generated_tokens: int
    network_ms: float  # remote backends: request sent -> response headers
    extra_tokens: int  # context from other files
    definition_tokens: int  # the workspace's definitions (workspaceContext)
    suffix_cut: bool  # the prompt held less suffix than a full prompt (a CPU keystroke)
    model: str | None
    reason: str = ""  # why no model work ran (source "none"): the rule that stopped it
    # The model's stop reason (eog, a stop rule such as newline, max_tokens, cancelled).
    stop_reason: str = ""
    draft_ms: float = 0.0  # a draft model's own suggestion, before the target checked it
    draft_tokens: int = 0  # tokens the draft proposed, and those the target kept
    draft_accepted: int = 0
    definitions: tuple[str, ...] = ()  # the workspace's definitions the prompt held, by name


def request_stats(
    state: CursorState,
    *,
    source: Source,
    completion: Completion | None,
    queue_ms: float,
    debounce_ms: float,
    total_ms: float,
    cancelled: bool,
    model: str | None,
    reason: str = "",
) -> RequestStats:
    t = completion.timings if completion is not None else None
    return RequestStats(
        doc_id=state.doc_id,
        version=state.version,
        source=source,
        cancelled=cancelled,
        queue_ms=queue_ms,
        debounce_ms=debounce_ms,
        prompt_ms=t.prompt_ms if t else 0.0,
        prefill_ms=t.prefill_ms if t else 0.0,
        ttft_ms=t.ttft_ms + queue_ms if t else 0.0,
        decode_ms=t.decode_ms if t else 0.0,
        total_ms=total_ms,
        reused_tokens=t.prefill_reused_tokens if t else 0,
        new_tokens=t.prefill_new_tokens if t else 0,
        generated_tokens=t.decode_tokens if t else 0,
        network_ms=t.network_ms if t else 0.0,
        extra_tokens=t.extra_tokens if t else 0,
        definition_tokens=t.definition_tokens if t else 0,
        definitions=completion.definitions if completion is not None else (),
        suffix_cut=bool(completion.suffix_cut) if completion is not None else False,
        model=model,
        reason=reason,
        stop_reason=completion.stop_reason if completion is not None else "",
        draft_ms=t.draft_ms if t else 0.0,
        draft_tokens=t.draft_tokens if t else 0,
        draft_accepted=t.draft_accepted if t else 0,
    )


@dataclass(frozen=True)
class LatencySummary:
    n: int
    ttft_p50: float | None
    ttft_p95: float | None
    ttft_p99: float | None
    total_p50: float | None
    total_p95: float | None


@dataclass
class LatencyLog:
    ttft: deque[float] = field(default_factory=lambda: deque(maxlen=500))
    total: deque[float] = field(default_factory=lambda: deque(maxlen=500))
    recent: deque[RequestStats] = field(default_factory=lambda: deque(maxlen=20))

    def summary(self) -> LatencySummary:
        def p(values: deque[float], q: float) -> float | None:
            return round(percentile(list(values), q), 1) if values else None

        return LatencySummary(
            len(self.ttft),
            p(self.ttft, 50),
            p(self.ttft, 95),
            p(self.ttft, 99),
            p(self.total, 50),
            p(self.total, 95),
        )

    def expected_job_ms(self) -> float:
        """The recent median time of a model job (what a request stopped before it spares)."""
        total = list(self.total)[-32:]
        return percentile(total, 50) if total else 0.0

    def expected_first_token_ms(self) -> float:
        """The recent median time to first token (what the adaptive debounce weighs)."""
        ttft = list(self.ttft)[-32:]
        return percentile(ttft, 50) if ttft else 100.0


@dataclass(frozen=True)
class WorkCounters:
    decode_steps: int  # one-token decodes run (tests watch them stop after a cancel)
    prefill_chunks: int
    running: bool  # a model job is running now
    busy_ms: dict[str, float] = field(default_factory=dict)  # model time by kind of job
    stopped_ms: dict[str, float] = field(default_factory=dict)  # of it, in runs stopped early


@dataclass(frozen=True)
class MemoryStatus:
    """What the server keeps, against each limit (engine/memory.py), and its resident size."""

    caches: tuple[CacheUsage, ...]
    rss_bytes: int | None  # None where the system does not say
    large_documents: int = 0  # open documents over the size limit (no whole-document work)


@dataclass(frozen=True)
class ServiceStatus:
    state: State
    error: str | None
    model: ModelInfo | None
    switching_to: str | None
    loading: Loading | None
    context: RingStatus
    kv: KvStatus | None
    latency: LatencySummary
    recent: tuple[RequestStats, ...]
    work: WorkCounters | None
    acceptance: Counts
    budgets: BudgetsInEffect | None
    saved_cpu_ms: float = 0.0  # model work the rules before the model spared (estimated)
    memory: MemoryStatus | None = None
    workspace: IndexStatus | None = None  # the workspace index (workspaceContext)
    definitions: DefinitionBlock | None = None  # the last request's, as selected
