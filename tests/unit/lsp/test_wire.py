"""lsp/wire.py: the engine's reports as the JSON of docs/protocol.md (camelCase keys,
documents named by `uri`, milliseconds rounded)."""

from __future__ import annotations

import json

from ghostfim.engine.backend import KvEvent, KvStatus, ModelInfo
from ghostfim.engine.config import Budgets, BudgetsInEffect, Clamp
from ghostfim.engine.context.ring import RingStatus
from ghostfim.engine.memory import CacheUsage
from ghostfim.engine.service.acceptance import Counts
from ghostfim.engine.service.host import Loading
from ghostfim.engine.service.stats import (
    LatencySummary,
    MemoryStatus,
    RequestStats,
    ServiceStatus,
    WorkCounters,
)
from ghostfim.lsp.wire import budgets_json, kv_json, model_json, stats_json, status_json

# The keys docs/protocol.md shows for ghostfim/stats and ghostfim/status.
STATS_KEYS = {
    "uri", "version", "source", "cancelled", "queueMs", "debounceMs", "promptMs", "prefillMs",
    "ttftMs", "decodeMs", "totalMs", "reusedTokens", "newTokens", "generatedTokens",
    "suffixCut", "networkMs", "extraTokens", "model",
}  # fmt: skip
STATUS_KEYS = {"state", "error", "model", "latency", "recent", "context", "switchingTo"}


def stats(**changes: object) -> RequestStats:
    fields: dict[str, object] = dict(
        doc_id="file:///a.py",
        version=7,
        source="model",
        cancelled=False,
        queue_ms=0.4444,
        debounce_ms=35.0,
        prompt_ms=0.6,
        prefill_ms=41.2,
        ttft_ms=43.0,
        decode_ms=180.5,
        total_ms=230.1,
        reused_tokens=812,
        new_tokens=6,
        generated_tokens=5,
        network_ms=0.0,
        extra_tokens=0,
        definition_tokens=0,
        suffix_cut=False,
        model="small",
    )
    fields.update(changes)
    return RequestStats(**fields)  # type: ignore[arg-type]


def status(**changes: object) -> ServiceStatus:
    fields: dict[str, object] = dict(
        state="ready",
        error=None,
        model=ModelInfo("small", "/m/small.gguf", "small", "cpu", 0, "qwen", 12288, 491_000_000),
        switching_to=None,
        loading=None,
        context=RingStatus(1, 0, 0, 1, ("pkg/util.py",)),
        kv=None,
        latency=LatencySummary(2, 50.0, 60.0, 60.0, 120.0, 130.0),
        recent=(stats(),),
        work=WorkCounters(10, 3, False, {"interactive": 12.345}, {"interactive": 4.5}),
        acceptance=Counts(shown=4, accepted=1, partial=1, refused=1, accepted_chars=9),
        budgets=None,
    )
    fields.update(changes)
    return ServiceStatus(**fields)  # type: ignore[arg-type]


def test_stats_are_the_documented_object() -> None:
    out = stats_json(stats())
    assert set(out) >= STATS_KEYS
    assert out["uri"] == "file:///a.py" and out["queueMs"] == 0.44  # rounded
    assert "reason" not in out  # only when no model work ran
    assert stats_json(stats(source="none", reason="rest of line"))["reason"] == "rest of line"
    json.dumps(out)


def test_the_status_is_the_documented_object() -> None:
    out = status_json(status())
    assert set(out) >= STATUS_KEYS
    assert out["model"] == {
        "name": "small",
        "preset": "small",
        "path": "/m/small.gguf",
        "device": "cpu",
        "nGpuLayers": 0,
        "fim": "qwen",
        "memoryBytes": 491_000_000,
        "draft": None,  # no draft model checks this one's suggestions
    }
    assert out["latency"] == {
        "n": 2,
        "ttftP50": 50.0,
        "ttftP95": 60.0,
        "ttftP99": 60.0,
        "totalP50": 120.0,
        "totalP95": 130.0,
    }
    assert out["recent"] == [stats_json(stats())]
    assert out["context"] == {
        "chunks": 1,
        "pending": 0,
        "evicted": 0,
        "version": 1,
        "files": ["pkg/util.py"],
    }
    assert out["work"] == {
        "decodeSteps": 10,
        "prefillChunks": 3,
        "running": False,
        "busyMs": {"interactive": 12.3},
        "stoppedMs": {"interactive": 4.5},
    }
    assert out["acceptance"] == {
        "shown": 4,
        "accepted": 1,
        "partial": 1,
        "refused": 1,
        "acceptedChars": 9,
        "acceptRate": 0.667,
    }
    assert out["loading"] is None and out["kv"] is None and out["budgets"] is None
    loading = status_json(status(state="loading", model=None, loading=Loading("tiny", 40)))
    assert loading["model"] is None and loading["loading"] == {"label": "tiny", "percentage": 40}
    json.dumps(out)


def test_budgets_in_effect_are_said_in_settings_terms_with_each_clamp() -> None:
    in_effect = BudgetsInEffect(
        Budgets(2114, 256, 80.0, 256),
        (Clamp("prefix_tokens", 16384, 2114, "a KV slot holds 3776 prompt tokens"),),
    )
    assert budgets_json(in_effect) == {
        "effective": {
            "prefixTokens": 2114,
            "suffixTokens": 256,
            "keystrokePrefillMs": 80.0,
            "kvSnapshotMb": 256,
        },
        "clamped": [
            {
                "setting": "prefixTokens",
                "asked": 16384,
                "effective": 2114,
                "reason": "a KV slot holds 3776 prompt tokens",
            }
        ],
    }
    assert budgets_json(None) is None
    assert status_json(status(budgets=in_effect))["budgets"] == budgets_json(in_effect)


def test_kv_snapshots_and_a_missing_model() -> None:
    kv = KvStatus(
        1, 2048, 4096, 2, 1, 0, 1.234, 0.5, (KvEvent("save", "file:///b", 64, 2048, 1.2),)
    )
    assert kv_json(kv) == {
        "snapshots": 1,
        "snapshotBytes": 2048,
        "snapshotLimitBytes": 4096,
        "saved": 2,
        "restored": 1,
        "dropped": 0,
        "lastSaveMs": 1.23,
        "lastRestoreMs": 0.5,
        "recent": [{"kind": "save", "uri": "file:///b", "tokens": 64, "bytes": 2048, "ms": 1.2}],
    }
    assert kv_json(None) is None and model_json(None) is None


def test_the_status_reports_each_cache_against_its_limit() -> None:
    memory = MemoryStatus(
        (CacheUsage("lineTokens", 1_000, 4_194_304), CacheUsage("kvSnapshots", 0, 16_777_216)),
        rss_bytes=512 * 2**20 + 2**19,
        large_documents=1,
    )
    out = status_json(status(memory=memory))["memory"]
    assert out == {
        "caches": {
            "lineTokens": {"bytes": 1_000, "limit": 4_194_304},
            "kvSnapshots": {"bytes": 0, "limit": 16_777_216},
        },
        "rssMb": 512.5,
        "largeDocuments": 1,
    }
    assert status_json(status())["memory"] is None  # a service that did not say
    json.dumps(out)
