"""The KV slots of one llama.cpp context, and the per-document snapshots that outlive them.

A slot is a llama.cpp sequence; the sequences share one pool of n_ctx cells (unified KV), and
each slot's prompt must fit its share. The session asks this module where a prompt goes and
what it may reuse; this module keeps, per slot, the tokens its cells hold, when it was last
used (LRU) and which document wrote it.

- Slot 0 takes full prompts (the pause refresh, explicit invocations), so a refresh never
  evicts the prompt the next keystroke extends, and vice versa.
- Slots 1 and 2 take keystroke prompts: the one typing extends, and one where a wider window is
  prepared in the background. A prompt goes to the keystroke slot that shares most of it; when
  neither shares a useful part, to the one used longest ago. Background work never cuts into
  the text before the cursor in the slot typing extends (`typed_into`).

Switching files would make every return a cold start: editing A, then B, then C evicts A's
window. So before a keystroke slot is overwritten, its cells are serialized
(`llama_state_seq_get_data` for that one sequence: about 12 KB a token for the 0.5B model, not
the whole context) and kept with their token list in a RAM LRU bounded in bytes. When a prompt
shares more with a snapshot than with any slot, the snapshot is restored into the slot it goes
to (`llama_state_seq_set_data`), and the prompt costs what a warm keystroke costs.

This module keeps the books and calls no llama.cpp: planning (`plan_*`) only reads; the session
(engine/local/session.py, the one owner of the context) changes the cells, saving, restoring or
dropping them, and records each change here (`append`, `truncate`, `keep_snapshot`,
`restored`): this module is the only keeper of what the cells hold. Not thread-safe: the session
calls it under its lock, on the model thread.
"""

from __future__ import annotations

import logging
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from ghostfim.engine.backend import KvEvent, KvStatus
from ghostfim.engine.config import DEFAULT_BUDGETS
from ghostfim.engine.memory import CacheUsage, ints_bytes
from ghostfim.engine.tuning import GENERATION_ROOM, MIN_SNAPSHOT_TOKENS, MIN_USEFUL_REUSE

log = logging.getLogger("ghostfim.kvslots")

SLOT_FULL = 0
KEYSTROKE_SLOTS = (1, 2)
N_SLOTS = 3


@dataclass
class Snapshot:
    """One keystroke window that was evicted: its tokens and its serialized KV cells."""

    doc_id: str
    tokens: list[int]
    state: bytes
    save_ms: float

    @property
    def nbytes(self) -> int:
        return len(self.state) + ints_bytes(self.tokens)


@dataclass(frozen=True)
class SlotPlan:
    """Where a prompt goes: the slot, what it holds once prepared, and a snapshot to restore."""

    slot: int
    cached: list[int]  # what the slot holds once prepared (session.prepare_slot): a copy
    restore: Snapshot | None = None

    def reuse(self, tokens: list[int]) -> int:
        return common_prefix_len(self.cached, tokens)


@dataclass
class SnapshotStats:
    recent: deque[KvEvent] = field(default_factory=lambda: deque(maxlen=32))  # newest last
    saved: int = 0
    restored: int = 0
    dropped: int = 0  # evicted by the byte bound
    last_save_ms: float = 0.0
    last_restore_ms: float = 0.0
    last_bytes: int = 0


@dataclass
class _Slot:
    tokens: list[int] = field(default_factory=list)
    used: int = 0  # when it was last prefilled (a counter: LRU)
    doc_id: str = ""


class KvSlots:
    def __init__(self, n_ctx: int, snapshot_bytes: int = DEFAULT_BUDGETS.snapshot_bytes) -> None:
        self.n_ctx = n_ctx
        self.snapshot_bytes = snapshot_bytes
        self._slots = [_Slot() for _ in range(N_SLOTS)]
        self._uses = 0
        self._snapshots: OrderedDict[int, Snapshot] = OrderedDict()  # oldest first
        # Their bytes, kept as they change: ghostfim/status reads it from the event loop while
        # the model thread changes the snapshots (a sum over them there could see one change).
        self._snapshot_bytes_used = 0
        self._snapshot_ids = 0
        self.stats = SnapshotStats()
        # The keystroke slot the user types into, and how many of its tokens are the text
        # before the cursor there: background work (a widen, a block switch) must not take it
        # (`plan_keystroke`).
        self._typing: tuple[int, int] | None = None

    # --- room ------------------------------------------------------------------------------
    @property
    def cells_per_slot(self) -> int:
        return self.n_ctx // N_SLOTS

    @property
    def prompt_room(self) -> int:
        """The most prompt tokens a slot takes, leaving room for the generation."""
        return self.cells_per_slot - GENERATION_ROOM

    def fits(self, n_tokens: int) -> bool:
        return n_tokens + 1 < self.cells_per_slot

    # --- what the slots hold ---------------------------------------------------------------
    def tokens(self, slot: int) -> list[int]:
        """A copy of the tokens slot's KV cells hold, in order."""
        return list(self._slots[slot].tokens)

    def length(self, slot: int) -> int:
        """How many cells slot holds: the position the next decoded token takes."""
        return len(self._slots[slot].tokens)

    def append(self, slot: int, tokens: list[int]) -> None:
        """The session decoded `tokens` into slot's cells (after what it held)."""
        self._slots[slot].tokens.extend(tokens)

    @property
    def snapshot_count(self) -> int:
        return len(self._snapshots)

    @property
    def snapshot_bytes_used(self) -> int:
        return self._snapshot_bytes_used

    # --- planning (reads only) ---------------------------------------------------------------
    def plan_full(self) -> SlotPlan:
        return SlotPlan(SLOT_FULL, self.tokens(SLOT_FULL))

    def plan_keystroke(self, tokens: list[int], background: bool = False) -> SlotPlan:
        """The keystroke slot for a prompt whose text before the edit point is `tokens`.

        The slot that shares most of it; when neither shares a useful part (a BOS token is no
        reason to evict), the one used longest ago, since the other holds what the user types
        into. A snapshot that shares more than that slot does is restored into it.

        Background work never cuts into the text the user types after: a prompt that shares
        only its start with that slot (the workspace block at the top of a wider window) would
        otherwise go there, and the next keystroke would pay its whole window again. It takes
        the other slot."""
        common = {s: common_prefix_len(self._slots[s].tokens, tokens) for s in KEYSTROKE_SLOTS}
        candidates = self._slots_for(common, background)
        shared = {s: n if n >= MIN_USEFUL_REUSE else 0 for s, n in common.items()}
        slot = max(candidates, key=lambda s: (shared[s], -self._slots[s].used))
        best = shared[slot]
        if best >= len(tokens) - 1:
            return SlotPlan(slot, self.tokens(slot))  # the usual keystroke: warm
        snapshot = self._best_snapshot(tokens, better_than=best)
        if snapshot is None:
            return SlotPlan(slot, self.tokens(slot))
        if best and len(candidates) > 1:
            # A slot holds part of it, but a snapshot holds more: restore into the other one,
            # which keeps what the first slot has.
            slot = max(candidates, key=lambda s: (s != slot, -self._slots[s].used))
        return SlotPlan(slot, list(snapshot.tokens), snapshot)

    def typed_into(self, slot: int, before_cursor: int) -> None:
        """An interactive keystroke prefilled `slot`, its first `before_cursor` tokens the text
        before the cursor."""
        self._typing = (slot, before_cursor)

    def _slots_for(self, common: dict[int, int], background: bool) -> tuple[int, ...]:
        """The keystroke slots a prompt may take (`common`: the tokens it shares with each):
        background work spares the typing slot unless it keeps all the text before the cursor
        there (a prefetch extends it)."""
        if not background or self._typing is None:
            return KEYSTROKE_SLOTS
        typing, before_cursor = self._typing
        if common[typing] >= min(before_cursor, len(self._slots[typing].tokens)):
            return KEYSTROKE_SLOTS
        return tuple(s for s in KEYSTROKE_SLOTS if s != typing)

    def _best_snapshot(self, tokens: list[int], better_than: int) -> Snapshot | None:
        found, found_n = None, max(better_than, MIN_USEFUL_REUSE - 1)
        for snapshot in self._snapshots.values():
            n = common_prefix_len(snapshot.tokens, tokens)
            if n > found_n:
                found, found_n = snapshot, n
        return found

    # --- what the session did to the cells ---------------------------------------------------
    def claim(self, slot: int, doc_id: str) -> None:
        """The slot is being prefilled for doc_id (its LRU clock and owner)."""
        self._uses += 1
        self._slots[slot].used = self._uses
        self._slots[slot].doc_id = doc_id

    def truncate(self, slot: int, keep: int) -> None:
        """The slot's cells from position keep on were dropped."""
        del self._slots[slot].tokens[keep:]

    def restored(self, plan: SlotPlan, ms: float) -> None:
        """plan.restore's cells were written into plan.slot: its snapshot is a slot again."""
        snapshot = plan.restore
        assert snapshot is not None
        self._slots[plan.slot].tokens = list(snapshot.tokens)
        self._drop_snapshot(snapshot)
        self.stats.restored += 1
        self.stats.last_restore_ms = ms
        self.stats.recent.append(
            KvEvent("restore", snapshot.doc_id, len(snapshot.tokens), snapshot.nbytes, ms)
        )
        log.debug(
            "restored %d tokens of %s into slot %d (%.1f ms)",
            len(snapshot.tokens),
            snapshot.doc_id,
            plan.slot,
            ms,
        )

    def clear(self) -> None:
        """Every slot emptied (the caller cleared the context); snapshots stay valid."""
        for slot in self._slots:
            slot.tokens = []
            slot.doc_id = ""

    def forget(self, doc_id: str) -> None:
        """A closed document's snapshots go."""
        for key in [k for k, s in self._snapshots.items() if s.doc_id == doc_id]:
            self._remove(key)

    def set_snapshot_limit(self, snapshot_bytes: int) -> None:
        self.snapshot_bytes = snapshot_bytes
        self._drop_oldest_over(snapshot_bytes)

    def drop_snapshots(self) -> None:
        self._snapshots.clear()
        self._snapshot_bytes_used = 0

    def _remove(self, key: int) -> None:
        self._snapshot_bytes_used -= self._snapshots.pop(key).nbytes

    def _drop_oldest_over(self, limit: int) -> None:
        """The oldest snapshots go until the rest fit `limit` (each counted as dropped)."""
        while self._snapshots and self._snapshot_bytes_used > limit:
            self._remove(next(iter(self._snapshots)))
            self.stats.dropped += 1

    # --- snapshots ---------------------------------------------------------------------------
    def save_before(self, plan: SlotPlan, keep: int) -> bool:
        """Whether the window plan.slot holds is worth a snapshot before the plan overwrites it:
        a restore overwrites all of it; a keystroke slot that keeps less than half of it
        loses most of it (the user may come back)."""
        held = len(self._slots[plan.slot].tokens)
        evicts = plan.restore is not None or (plan.slot in KEYSTROKE_SLOTS and keep < held // 2)
        return evicts and self.wants_snapshot(plan.slot)

    def wants_snapshot(self, slot: int) -> bool:
        """A window long enough to be worth keeping, not kept already, with room for some."""
        tokens = self._slots[slot].tokens
        if len(tokens) < MIN_SNAPSHOT_TOKENS or self.snapshot_bytes <= 0:
            return False
        # A restored window left again unchanged is still kept.
        return not any(s.tokens == tokens for s in self._snapshots.values())

    def keep_snapshot(self, slot_index: int, state: bytes, save_ms: float) -> None:
        """The slot's cells, serialized by the session (one sequence's KV)."""
        slot = self._slots[slot_index]
        snapshot = Snapshot(slot.doc_id, list(slot.tokens), state, save_ms)
        if snapshot.nbytes > self.snapshot_bytes:
            return
        self._snapshot_ids += 1
        self._snapshots[self._snapshot_ids] = snapshot
        self._snapshot_bytes_used += snapshot.nbytes
        self.stats.saved += 1
        self.stats.last_save_ms = snapshot.save_ms
        self.stats.last_bytes = snapshot.nbytes
        self.stats.recent.append(
            KvEvent(
                "save", snapshot.doc_id, len(snapshot.tokens), snapshot.nbytes, snapshot.save_ms
            )
        )
        self._drop_oldest_over(self.snapshot_bytes)
        log.debug(
            "saved %d tokens of %s from slot %d: %d bytes, %.1f ms",
            len(snapshot.tokens),
            snapshot.doc_id,
            slot_index,
            snapshot.nbytes,
            snapshot.save_ms,
        )

    def _drop_snapshot(self, snapshot: Snapshot) -> None:
        for key, kept in list(self._snapshots.items()):
            if kept is snapshot:
                self._remove(key)

    def usage(self) -> CacheUsage:
        return CacheUsage("kvSnapshots", self._snapshot_bytes_used, self.snapshot_bytes)

    def status(self) -> KvStatus:
        st = self.stats
        return KvStatus(
            snapshots=len(self._snapshots),
            snapshot_bytes=self.snapshot_bytes_used,
            snapshot_limit_bytes=self.snapshot_bytes,
            saved=st.saved,
            restored=st.restored,
            dropped=st.dropped,
            last_save_ms=st.last_save_ms,
            last_restore_ms=st.last_restore_ms,
            recent=tuple(st.recent),
        )


def common_prefix_len(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:  # the common case on a keystroke; list compare runs in C
        return n
    lo, hi = 0, n  # binary search on prefix equality, each probe a C-speed slice compare
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo
