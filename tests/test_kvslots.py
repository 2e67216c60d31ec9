"""engine/kvslots.py: slot choice, snapshots of windows that are evicted, and their restore.

Unit tests use a fake sequence store; the mechanics test uses a self-made tiny model, where a
restored snapshot must continue exactly as a recomputed prompt does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ghostfim.engine.backend import CompletionRequest
from ghostfim.engine.local.kvslots import (
    KEYSTROKE_SLOTS,
    MIN_SNAPSHOT_TOKENS,
    SLOT_FULL,
    KvSlots,
)


class FakeStore:
    def __init__(self) -> None:
        self.cells: dict[int, list[int]] = {0: [], 1: [], 2: []}
        self.saved = 0
        self.restored = 0

    def kv_remove_from(self, pos: int, seq: int = 0) -> None:
        del self.cells[seq][pos:]

    def seq_state(self, seq: int) -> bytes:
        self.saved += 1
        return bytes(self.cells[seq]) * 100  # ~100 bytes a token

    def restore_seq_state(self, data: bytes, seq: int) -> None:
        self.restored += 1
        self.cells[seq] = list(data[: len(data) // 100])


def fill(slots: KvSlots, store: FakeStore, tokens: list[int], doc: str) -> int:
    """What the session does for a keystroke prompt: plan, prepare, prefill (here: copy)."""
    plan = slots.plan_keystroke(tokens)
    keep = min(plan.reuse(tokens), len(tokens) - 1)
    slots.prepare(plan, doc, keep)
    held = slots.tokens(plan.slot)
    held.extend(tokens[len(held) :])
    store.cells[plan.slot] = list(held)
    return plan.slot


def window(seed: int, n: int = 64) -> list[int]:
    return [seed, *((seed * 7 + i) % 250 for i in range(n - 1))]


def test_a_keystroke_goes_to_the_slot_that_shares_it_else_the_oldest() -> None:
    store = FakeStore()
    slots = KvSlots(store, n_ctx=3 * 1024)
    a, b = window(1), window(2)
    first = fill(slots, store, a, "a")
    second = fill(slots, store, b, "b")
    assert {first, second} == set(KEYSTROKE_SLOTS)
    assert slots.plan_keystroke([*a, 9]).slot == first  # a shares a's slot
    assert slots.plan_keystroke(window(3)).slot == first  # nothing shared: the oldest
    assert slots.plan_full().slot == SLOT_FULL


def test_an_evicted_window_is_kept_and_restored_when_the_user_is_back() -> None:
    store = FakeStore()
    slots = KvSlots(store, n_ctx=3 * 1024)
    a, b, c = window(1), window(2), window(3)
    for tokens, doc in ((a, "a"), (b, "b"), (c, "c")):  # c evicts a
        fill(slots, store, tokens, doc)
    assert store.saved == 1 and slots.snapshot_count == 1
    back = [*a, 42]  # the user types in a again
    plan = slots.plan_keystroke(back)
    assert plan.restore is not None and plan.restore.doc_id == "a"
    assert plan.reuse(back) == len(a)  # warm: only the typed token is new
    fill(slots, store, back, "a")
    assert store.restored == 1 and store.cells[plan.slot][: len(a)] == a
    assert store.saved == 2  # what the restore overwrote (b) was kept in turn
    assert slots.snapshot_count == 1  # a's snapshot is in a slot again: no copy kept


def test_snapshots_are_bounded_in_bytes_and_forgotten_with_their_document() -> None:
    store = FakeStore()
    limit = 3 * 64 * 100 + 3 * 64 * 8  # room for three windows of 64 tokens
    slots = KvSlots(store, n_ctx=3 * 1024, snapshot_bytes=limit)
    for seed in range(1, 9):
        fill(slots, store, window(seed), f"doc{seed}")
    assert slots.snapshot_count == 3 and slots.snapshot_bytes_used <= limit
    assert slots.stats.dropped == 8 - 2 - 3  # 6 evicted windows, 3 kept
    kept = {s.doc_id for s in slots._snapshots.values()}
    slots.forget(sorted(kept)[0])
    assert slots.snapshot_count == 2
    short = KvSlots(FakeStore(), n_ctx=3 * 1024)
    for seed in (1, 2, 3):
        fill(short, short.store, window(seed, MIN_SNAPSHOT_TOKENS - 1), "x")  # type: ignore[arg-type]
    assert short.snapshot_count == 0  # too small to be worth keeping


# --- the real mechanics, on a self-made tiny model ------------------------------------------------
@pytest.fixture
def roomy_tiny(tiny_gguf: Path) -> Iterator[object]:
    from ghostfim.engine.local.session import ModelSession

    session = ModelSession.load(tiny_gguf)  # the default n_ctx: room for wide windows
    session.keystroke_start_tokens = session.keystroke_wide_tokens = 256
    yield session
    session.close()


def source(name: str) -> str:
    return "".join(
        f"def {name}_{i}(x):\n    return x * {i} + {name}_{i - 1}(x)\n" for i in range(30)
    )


def test_switching_back_restores_the_window_and_continues_exactly(roomy_tiny: object) -> None:
    from ghostfim.engine.local.session import ModelSession

    s: ModelSession = roomy_tiny  # type: ignore[assignment]

    def keystroke(doc: str, typed: str) -> object:
        text = source(doc) + typed
        return s.complete(CompletionRequest(text, "\n", doc_id=doc, mode="keystroke", max_tokens=6))

    for doc in ("a", "b", "c"):
        keystroke(doc, "    ")
    back = keystroke("a", "    r")
    t = back.timings  # type: ignore[attr-defined]
    assert s.slots.stats.restored == 1
    assert t.prefill_reused_tokens >= 0.9 * (t.prefill_reused_tokens + t.prefill_new_tokens), t
    # The restored cells give what a prompt computed from scratch gives.
    s.slots.clear()
    s.model.kv_clear()
    s.slots.drop_snapshots()
    cold = keystroke("a", "    r")
    assert cold.raw_text == back.raw_text  # type: ignore[attr-defined]
    assert cold.timings.prefill_reused_tokens == 0  # type: ignore[attr-defined]


@pytest.mark.model
@pytest.mark.slow
async def test_back_in_the_first_of_three_files_the_prompt_comes_from_the_kv_cache() -> None:
    """The real server and model, three real files (bench/file_switch.py's run, shortened):
    the first keystroke back in A is served from A's restored snapshot."""
    from bench.file_switch import load_traces, run_system

    traces = load_traces(seed=7)
    run, per_doc = await run_system(
        "snapshots on", {"model": {"size": "small"}}, traces, chars=6, dwell_s=1.0, seed=7
    )
    back = per_doc["back"][0]
    assert back.source == "model", back
    assert back.cache_share >= 0.9, back
    assert any(e["kind"] == "restore" for e in run.kv.get("recent", [])), run.kv
