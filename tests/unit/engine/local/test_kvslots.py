"""engine/local/kvslots.py: slot choice, snapshots of windows that are evicted, and their
restore; the slots are the only keeper of what the cells hold, and the session's
prepare_slot/drop_cells (engine/local/session.py) the only code that changes them.

Unit tests use fake cells (tests/support/fakes.py); the mechanics test uses a
self-made tiny model, where a restored snapshot must continue exactly as a recomputed prompt
does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ghostfim.engine.backend import Completion, CompletionRequest, KvStatus
from ghostfim.engine.local.kvslots import (
    GENERATION_ROOM,
    KEYSTROKE_SLOTS,
    MIN_SNAPSHOT_TOKENS,
    N_SLOTS,
    SLOT_FULL,
    KvSlots,
    common_prefix_len,
)
from ghostfim.engine.local.plan import Windows
from ghostfim.engine.local.session import ModelSession, drop_cells, prepare_slot
from ghostfim.engine.memory import ints_bytes
from tests.support.fakes import FakeStore


def fill(slots: KvSlots, store: FakeStore, tokens: list[int], doc: str) -> int:
    """What the session does for a keystroke prompt: plan, prepare, prefill (here: copy)."""
    plan = slots.plan_keystroke(tokens)
    keep = min(plan.reuse(tokens), len(tokens) - 1)
    prepare_slot(slots, store, plan, doc, keep)
    slots.append(plan.slot, tokens[slots.length(plan.slot) :])
    store.cells[plan.slot] = slots.tokens(plan.slot)
    return plan.slot


def window(seed: int, n: int = 64) -> list[int]:
    return [seed, *((seed * 7 + i) % 250 for i in range(n - 1))]


def test_common_prefix_len() -> None:
    assert common_prefix_len([1, 2, 3, 4], [1, 2, 9]) == 2
    assert common_prefix_len([], [1]) == 0
    assert common_prefix_len([1, 2], [1, 2, 3]) == 2
    assert common_prefix_len(list(range(1000)), [*range(700), -1]) == 700
    assert common_prefix_len([5], [6]) == 0


def test_room_is_a_share_of_the_context_less_the_generation() -> None:
    slots = KvSlots(n_ctx=3 * 1024)
    assert slots.cells_per_slot == 1024 and N_SLOTS == 3
    assert slots.prompt_room == 1024 - GENERATION_ROOM
    assert slots.fits(1022) and not slots.fits(1023)


def test_the_slots_own_their_token_lists() -> None:
    store = FakeStore()
    slots = KvSlots(n_ctx=3 * 1024)
    slots.append(SLOT_FULL, [1, 2, 3])
    copy = slots.tokens(SLOT_FULL)
    copy.append(99)  # a caller's copy: the slot is unchanged
    assert slots.tokens(SLOT_FULL) == [1, 2, 3] and slots.length(SLOT_FULL) == 3
    store.cells[SLOT_FULL] = [1, 2, 3]
    drop_cells(slots, store, SLOT_FULL, 1)
    assert slots.tokens(SLOT_FULL) == [1] and store.cells[SLOT_FULL] == [1]
    drop_cells(slots, store, SLOT_FULL, 1)  # nothing past keep: the cells are left alone
    assert store.removed == 1
    plan = slots.plan_full()
    plan.cached.append(7)  # a plan's copy too
    assert slots.tokens(SLOT_FULL) == [1]
    slots.clear()
    assert all(slots.length(s) == 0 for s in range(N_SLOTS))


def test_a_keystroke_goes_to_the_slot_that_shares_it_else_the_oldest() -> None:
    store = FakeStore()
    slots = KvSlots(n_ctx=3 * 1024)
    a, b = window(1), window(2)
    first = fill(slots, store, a, "a")
    second = fill(slots, store, b, "b")
    assert {first, second} == set(KEYSTROKE_SLOTS)
    assert slots.plan_keystroke([*a, 9]).slot == first  # a shares a's slot
    assert slots.plan_keystroke(window(3)).slot == first  # nothing shared: the oldest
    assert slots.plan_full().slot == SLOT_FULL


def test_background_work_spares_the_slot_the_user_types_into() -> None:
    """The workspace block starts both keystroke windows: a widen (the block, then a wider
    window) shares the block with the narrow window the user types into, and would cut it
    there. It goes to the other slot; a prefetch, which extends what the user typed, stays."""
    store = FakeStore()
    slots = KvSlots(n_ctx=3 * 1024)
    block = window(5, 40)
    narrow = [*block, *window(6, 30)]
    typing = fill(slots, store, narrow, "a")
    slots.typed_into(typing, len(narrow))
    wide = [*block, *window(7, 120)]
    assert slots.plan_keystroke(wide).slot == typing  # a keystroke: the slot sharing most
    spare = slots.plan_keystroke(wide, background=True)
    assert spare.slot != typing and spare.slot in KEYSTROKE_SLOTS
    assert slots.plan_keystroke([*narrow, 1, 2], background=True).slot == typing  # a prefetch
    # The widen is done and the user types into its slot: the narrow one is fair game.
    prepare_slot(slots, store, spare, "a", 0)
    slots.append(spare.slot, wide)
    slots.typed_into(spare.slot, len(wide))
    assert slots.plan_keystroke([*block, *window(8, 120)], background=True).slot == typing
    assert slots.tokens(typing) == narrow  # nothing cut it meanwhile


def test_an_evicted_window_is_kept_and_restored_when_the_user_is_back() -> None:
    store = FakeStore()
    slots = KvSlots(n_ctx=3 * 1024)
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
    # room for three windows of 64 tokens: their KV state and their token lists
    per_window = 64 * 100 + ints_bytes(list(window(1)))
    limit = 3 * per_window
    slots = KvSlots(n_ctx=3 * 1024, snapshot_bytes=limit)
    for seed in range(1, 9):
        fill(slots, store, window(seed), f"doc{seed}")
    assert slots.snapshot_count == 3 and slots.snapshot_bytes_used <= limit
    assert slots.stats.dropped == 8 - 2 - 3  # 6 evicted windows, 3 kept
    kept = {s.doc_id for s in slots._snapshots.values()}
    slots.forget(sorted(kept)[0])
    assert slots.snapshot_count == 2
    slots.set_snapshot_limit(per_window)  # a smaller limit drops the oldest
    assert slots.snapshot_count == 1
    short_store = FakeStore()
    short = KvSlots(n_ctx=3 * 1024)
    for seed in (1, 2, 3):
        fill(short, short_store, window(seed, MIN_SNAPSHOT_TOKENS - 1), "x")
    assert short.snapshot_count == 0  # too small to be worth keeping


def test_the_status_reports_snapshots_saved_and_restored() -> None:
    store = FakeStore()
    slots = KvSlots(n_ctx=3 * 1024, snapshot_bytes=10_000_000)
    for tokens, doc in ((window(1), "a"), (window(2), "b"), (window(3), "c")):
        fill(slots, store, tokens, doc)
    fill(slots, store, [*window(1), 5], "a")
    status = slots.status()
    assert isinstance(status, KvStatus)
    assert (status.saved, status.restored, status.dropped) == (2, 1, 0)
    assert status.snapshots == slots.snapshot_count and status.snapshot_limit_bytes == 10_000_000
    assert status.snapshot_bytes == slots.snapshot_bytes_used > 0
    assert [e.kind for e in status.recent] == ["save", "save", "restore"]
    assert status.recent[-1].doc_id == "a" and status.recent[-1].tokens == len(window(1))


def test_a_failing_snapshot_never_fails_the_request() -> None:
    class Broken(FakeStore):
        def seq_state(self, seq: int) -> bytes:
            raise RuntimeError("no memory")

    store = Broken()
    slots = KvSlots(n_ctx=3 * 1024)
    for tokens, doc in ((window(1), "a"), (window(2), "b"), (window(3), "c")):
        fill(slots, store, tokens, doc)
    assert slots.snapshot_count == 0 and slots.stats.saved == 0


# --- the real mechanics, on a self-made tiny model ------------------------------------------------
@pytest.fixture
def roomy_tiny(tiny_gguf: Path) -> Iterator[ModelSession]:
    from ghostfim.engine.local.loading import open_model_file

    session = open_model_file(tiny_gguf)  # the default n_ctx: room for wide windows
    session.planner.windows = Windows(256, 256)
    yield session
    session.close()


def source(name: str) -> str:
    return "".join(
        f"def {name}_{i}(x):\n    return x * {i} + {name}_{i - 1}(x)\n" for i in range(30)
    )


def test_switching_back_restores_the_window_and_continues_exactly(
    roomy_tiny: ModelSession,
) -> None:
    s = roomy_tiny

    def keystroke(doc: str, typed: str) -> Completion:
        text = source(doc) + typed
        return s.complete(CompletionRequest(text, "\n", doc_id=doc, mode="keystroke", max_tokens=6))

    for doc in ("a", "b", "c"):
        keystroke(doc, "    ")
    back = keystroke("a", "    r")
    t = back.timings
    assert s.slots.stats.restored == 1
    assert t.prefill_reused_tokens >= 0.9 * (t.prefill_reused_tokens + t.prefill_new_tokens), t
    # The restored cells give what a prompt computed from scratch gives.
    s.slots.clear()
    s.model.kv_clear()
    s.slots.drop_snapshots()
    cold = keystroke("a", "    r")
    assert cold.raw_text == back.raw_text
    assert cold.timings.prefill_reused_tokens == 0
    assert s.kv_status() is not None and s.kv_status().snapshots == 0  # type: ignore[union-attr]
