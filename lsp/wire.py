"""The engine's reports and events as the messages of docs/protocol.md: the one place that
knows their keys.

The engine returns dataclasses (engine/service/stats.py and the types they hold) and tells its
events to `LspEvents`; what goes out is made here: `ghostfim/ghostText`, `ghostfim/stats`,
`ghostfim/status` (and `ghostfim/statusChanged`), the accept command every item carries, model
loading as work-done progress. camelCase keys, documents named by `uri`, milliseconds rounded.
"""

from __future__ import annotations

import logging
import uuid
from concurrent.futures import Future
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from ghostfim.engine.backend import KvStatus, ModelInfo
from ghostfim.engine.config import Budgets, BudgetsInEffect
from ghostfim.engine.context.ring import RingStatus
from ghostfim.engine.service.acceptance import Counts
from ghostfim.engine.service.cursor import CursorState
from ghostfim.engine.service.stats import (
    LatencySummary,
    MemoryStatus,
    RequestStats,
    ServiceStatus,
)
from ghostfim.lsp.rpcguard import CLIENT_ANSWER_S, GuardedProtocol

log = logging.getLogger("ghostfim.server")

# The accept signal (docs/protocol.md): every item carries this command, which LSP clients run
# through workspace/executeCommand after a full accept.
ACCEPTED_COMMAND = "ghostfim.accepted"

# Settings keys of the budgets (lsp/settings.py names them so too).
BUDGET_KEYS = {
    "prefix_tokens": "prefixTokens",
    "suffix_tokens": "suffixTokens",
    "keystroke_prefill_ms": "keystrokePrefillMs",
    "kv_snapshot_mb": "kvSnapshotMb",
}


def _ms(value: float) -> float:
    return round(value, 2)


def stats_json(s: RequestStats) -> dict[str, Any]:
    """One request's `ghostfim/stats` notification."""
    out: dict[str, Any] = {
        "uri": s.doc_id,
        "version": s.version,
        "source": s.source,
        "cancelled": s.cancelled,
        "queueMs": _ms(s.queue_ms),
        "debounceMs": _ms(s.debounce_ms),
        "promptMs": _ms(s.prompt_ms),
        "prefillMs": _ms(s.prefill_ms),
        "ttftMs": _ms(s.ttft_ms),
        "decodeMs": _ms(s.decode_ms),
        "totalMs": _ms(s.total_ms),
        "reusedTokens": s.reused_tokens,
        "newTokens": s.new_tokens,
        "generatedTokens": s.generated_tokens,
        "networkMs": _ms(s.network_ms),
        "extraTokens": s.extra_tokens,
        "definitionTokens": s.definition_tokens,
        "definitions": list(s.definitions),
        "suffixCut": s.suffix_cut,
        "stopReason": s.stop_reason,
        "model": s.model,
    }
    if s.reason:
        out["reason"] = s.reason
    if s.draft_tokens or s.draft_ms:
        out["draftMs"] = _ms(s.draft_ms)
        out["draftTokens"] = s.draft_tokens
        out["draftAccepted"] = s.draft_accepted
    return out


def model_json(info: ModelInfo | None) -> dict[str, Any] | None:
    if info is None:
        return None
    return {
        "name": info.name,
        "preset": info.preset,
        "path": info.path,
        "device": info.device,
        "nGpuLayers": info.n_gpu_layers,
        "fim": info.family,
        "memoryBytes": info.memory_bytes,
        "draft": None
        if info.draft is None
        else {
            "name": info.draft.name,
            "path": info.draft.path,
            "memoryBytes": info.draft.memory_bytes,
            "proposed": info.draft.proposed,
            "accepted": info.draft.accepted,
            "acceptance": None
            if info.draft.acceptance is None
            else round(info.draft.acceptance, 3),
        },
    }


def kv_json(kv: KvStatus | None) -> dict[str, Any] | None:
    if kv is None:
        return None
    return {
        "snapshots": kv.snapshots,
        "snapshotBytes": kv.snapshot_bytes,
        "snapshotLimitBytes": kv.snapshot_limit_bytes,
        "saved": kv.saved,
        "restored": kv.restored,
        "dropped": kv.dropped,
        "lastSaveMs": _ms(kv.last_save_ms),
        "lastRestoreMs": _ms(kv.last_restore_ms),
        "recent": [
            {"kind": e.kind, "uri": e.doc_id, "tokens": e.tokens, "bytes": e.bytes, "ms": _ms(e.ms)}
            for e in kv.recent
        ],
    }


def latency_json(s: LatencySummary) -> dict[str, Any]:
    return {
        "n": s.n,
        "ttftP50": s.ttft_p50,
        "ttftP95": s.ttft_p95,
        "ttftP99": s.ttft_p99,
        "totalP50": s.total_p50,
        "totalP95": s.total_p95,
    }


def context_json(s: RingStatus) -> dict[str, Any]:
    return {
        "chunks": s.chunks,
        "pending": s.pending,
        "evicted": s.evicted,
        "version": s.version,
        "files": list(s.files),
    }


def acceptance_json(c: Counts) -> dict[str, Any]:
    rate = c.accept_rate
    return {
        "shown": c.shown,
        "accepted": c.accepted,
        "partial": c.partial,
        "refused": c.refused,
        "acceptedChars": c.accepted_chars,
        "acceptRate": None if rate is None else round(rate, 3),
    }


def budgets_json(b: BudgetsInEffect | None) -> dict[str, Any] | None:
    """The budgets in effect, in settings' terms, and each clamp with its reason."""
    if b is None:
        return None
    return {
        "effective": _budgets(b.effective),
        "clamped": [
            {
                "setting": BUDGET_KEYS.get(c.budget, c.budget),
                "asked": c.asked,
                "effective": c.effective,
                "reason": c.reason,
            }
            for c in b.clamps
        ],
    }


def _budgets(b: Budgets) -> dict[str, Any]:
    return {key: getattr(b, name) for name, key in BUDGET_KEYS.items()}


def status_json(s: ServiceStatus) -> dict[str, Any]:
    """The `ghostfim/status` result (and the `ghostfim/statusChanged` notification)."""
    return {
        "state": s.state,
        "error": s.error,
        "model": model_json(s.model),
        "switchingTo": s.switching_to,
        "loading": None
        if s.loading is None
        else {"label": s.loading.label, "percentage": s.loading.percentage},
        "context": context_json(s.context),
        "kv": kv_json(s.kv),
        "latency": latency_json(s.latency),
        "recent": [stats_json(r) for r in s.recent],
        "work": None
        if s.work is None
        else {
            "decodeSteps": s.work.decode_steps,
            "prefillChunks": s.work.prefill_chunks,
            "running": s.work.running,
            "busyMs": {kind: round(ms, 1) for kind, ms in s.work.busy_ms.items()},
            "stoppedMs": {kind: round(ms, 1) for kind, ms in s.work.stopped_ms.items()},
        },
        "acceptance": acceptance_json(s.acceptance),
        "budgets": budgets_json(s.budgets),
        "savedCpuMs": round(s.saved_cpu_ms, 1),
        "memory": memory_json(s.memory),
        "workspace": workspace_json(s),
    }


def workspace_json(s: ServiceStatus) -> dict[str, Any] | None:
    """The workspace index (`state`: off, indexing, ready, capped) and the definitions the last
    request selected (those that fit its budget are in its `recent` entry's `definitions`)."""
    w = s.workspace
    if w is None:
        return None
    block = s.definitions
    return {
        "state": w.state,
        "files": w.files,
        "definitions": w.definitions,
        "bytes": w.bytes,
        "indexMs": w.index_ms,
        "lastRequest": None
        if block is None
        else [{"name": e.name, "file": e.file} for e in block.entries]
        + [{"snippet": s.label, "file": s.file} for s in block.snippets],
    }


def memory_json(m: MemoryStatus | None) -> dict[str, Any] | None:
    """Each cache's bytes against its limit (engine/memory.py), the process's resident MB,
    and the open documents over maxDocumentMb."""
    if m is None:
        return None
    return {
        "caches": {c.name: {"bytes": c.bytes, "limit": c.limit} for c in m.caches},
        "rssMb": None if m.rss_bytes is None else round(m.rss_bytes / 2**20, 1),
        "largeDocuments": m.large_documents,
    }


def accept_command(item_id: str) -> types.Command:
    """What every item carries: an editor runs it after a full accept (docs/protocol.md)."""
    return types.Command(title="ghostfim: accepted", command=ACCEPTED_COMMAND, arguments=[item_id])


def ghost_text_json(state: CursorState, text: str, done: bool, item_id: str) -> dict[str, Any]:
    """`ghostfim/ghostText`: the suggestion for a cursor as it grows (with the item's accept
    command once it is an item)."""
    pos = state.position
    params: dict[str, Any] = {
        "uri": state.doc_id,
        "version": state.version,
        "position": {"line": pos.line, "character": pos.character},
        "insertText": text,
        "done": done,
    }
    if item_id:  # the item the text shows: an editor showing it runs this on accept
        command = accept_command(item_id)
        params["command"] = {
            "title": command.title,
            "command": command.command,
            "arguments": command.arguments,
        }
    return params


def _log_unanswered(request: Future[Any]) -> None:
    if not request.cancelled() and request.exception() is not None:
        log.info("progress bar: %s", request.exception())


class LspEvents:
    """The engine's events, as LSP notifications and messages."""

    def __init__(self, server: LanguageServer) -> None:
        self.server = server
        self._progress_token: str | None = None

    def ghost_text(self, state: CursorState, text: str, done: bool, item_id: str) -> None:
        self.server.protocol.notify(
            "ghostfim/ghostText", ghost_text_json(state, text, done, item_id)
        )

    def stats(self, stats: RequestStats) -> None:
        self.server.protocol.notify("ghostfim/stats", stats_json(stats))

    def status(self, status: ServiceStatus) -> None:
        self.server.protocol.notify("ghostfim/statusChanged", status_json(status))

    def problem(self, message: str) -> None:
        self.server.window_show_message(
            types.ShowMessageParams(type=types.MessageType.Error, message=message)
        )
        log.error(message)

    def notice(self, message: str) -> None:
        self.server.window_show_message(
            types.ShowMessageParams(type=types.MessageType.Info, message=message)
        )
        log.info(message)

    def progress(self, message: str, percentage: int | None, done: bool) -> None:
        """Model loading as work-done progress, when the client supports it."""
        caps = self.server.client_capabilities
        if not (caps and caps.window and caps.window.work_done_progress):
            log.info(message)
            return
        progress = self.server.work_done_progress
        if self._progress_token is None and not done:
            token = self._progress_token = f"ghostfim-load-{uuid.uuid4().hex[:8]}"
            self._create_progress(token)
            progress.begin(
                token,
                types.WorkDoneProgressBegin(
                    title="ghostfim", message=message, percentage=percentage or 0, cancellable=False
                ),
            )
        elif self._progress_token is not None and not done:
            progress.report(
                self._progress_token,
                types.WorkDoneProgressReport(message=message, percentage=percentage),
            )
        elif self._progress_token is not None:
            progress.end(self._progress_token, types.WorkDoneProgressEnd(message=message))
            progress.tokens.pop(self._progress_token, None)  # pygls keeps them otherwise
            self._progress_token = None

    def _create_progress(self, token: str) -> None:
        """window/workDoneProgress/create, given up after CLIENT_ANSWER_S (pygls would keep
        an unanswered request for ever). The bar's notifications follow at once, as before."""
        protocol = self.server.protocol
        if not isinstance(protocol, GuardedProtocol):
            self.server.work_done_progress.create(token)
            return
        request = protocol.send_request_expiring(
            types.WINDOW_WORK_DONE_PROGRESS_CREATE,
            types.WorkDoneProgressCreateParams(token=token),
            CLIENT_ANSWER_S,
        )
        request.add_done_callback(_log_unanswered)
