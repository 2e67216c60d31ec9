"""The KV slots of one llama.cpp context, and the per-document snapshots that outlive them.

A slot is a llama.cpp sequence; the sequences share one pool of n_ctx cells (unified KV), and
each slot's prompt must fit its share. The session asks this module where a prompt goes and
what it may reuse; this module keeps, per slot, the tokens its cells hold, when it was last
used (LRU) and which document wrote it.

- Slot 0 takes full prompts (the pause refresh, explicit invocations), so a refresh never
  evicts the prompt the next keystroke extends, and vice versa.
- Slots 1 and 2 take keystroke prompts: the one typing extends, and one where a wider window is
  prepared in the background. A prompt goes to the keystroke slot that shares most of it; when
  neither shares a useful part, to the one used longest ago.

Switching files would make every return a cold start: editing A, then B, then C evicts A's
window. So before a keystroke slot is overwritten, its cells are serialized
(`llama_state_seq_get_data` for that one sequence: about 12 KB a token for the 0.5B model, not
the whole context) and kept with their token list in a RAM LRU bounded in bytes. When a prompt
shares more with a snapshot than with any slot, the snapshot is restored into the slot it goes
to (`llama_state_seq_set_data`), and the prompt costs what a warm keystroke costs.

Planning (`plan_*`) only reads; `prepare` carries a plan out, and the session reports every
token it decodes into a slot (`append`): this module is the only keeper of what the cells hold.
Not thread-safe: the session calls it under its lock, on the model thread.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Protocol

from ghostfim.engine.backend import KvEvent, KvStatus
from ghostfim.engine.config import DEFAULT_BUDGETS

log = logging.getLogger("ghostfim.kvslots")

SLOT_FULL = 0
KEYSTROKE_SLOTS = (1, 2)
N_SLOTS = 3
# Cells each slot keeps free beyond its prompt: what is generated after it, and some slack.
GENERATION_ROOM = 256 + 64
MIN_USEFUL_REUSE = 8  # cached tokens a prompt must share with a slot to be written into it
# A slot's window worth keeping when it is overwritten: less than this re-prefills in a moment.
MIN_SNAPSHOT_TOKENS = 32


class SequenceStore(Protocol):
    """What the slots need from the context (engine.native.NativeModel has it)."""

    def kv_remove_from(self, pos: int, seq: int = 0) -> None: ...
    def seq_state(self, seq: int) -> bytes: ...
    def restore_seq_state(self, data: bytes, seq: int) -> None: ...


@dataclass
class Snapshot:
    """One keystroke window that was evicted: its tokens and its serialized KV cells."""

    doc_id: str
    tokens: list[int]
    state: bytes
    save_ms: float

    @property
    def nbytes(self) -> int:
        return len(self.state) + 8 * len(self.tokens)


@dataclass(frozen=True)
class SlotPlan:
    """Where a prompt goes: the slot, what it holds once prepared, and a snapshot to restore."""

    slot: int
    cached: list[int]  # the tokens the slot holds after `prepare` (before the prefill): a copy
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
    def __init__(
        self,
        store: SequenceStore,
        n_ctx: int,
        snapshot_bytes: int = DEFAULT_BUDGETS.snapshot_bytes,
    ) -> None:
        self.store = store
        self.n_ctx = n_ctx
        self.snapshot_bytes = snapshot_bytes
        self._slots = [_Slot() for _ in range(N_SLOTS)]
        self._uses = 0
        self._snapshots: OrderedDict[int, Snapshot] = OrderedDict()  # oldest first
        self._snapshot_ids = 0
        self.stats = SnapshotStats()

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
        return sum(s.nbytes for s in self._snapshots.values())

    # --- planning (reads only) ---------------------------------------------------------------
    def plan_full(self) -> SlotPlan:
        return SlotPlan(SLOT_FULL, self.tokens(SLOT_FULL))

    def plan_keystroke(self, tokens: list[int]) -> SlotPlan:
        """The keystroke slot for a prompt whose text before the edit point is `tokens`.

        The slot that shares most of it; when neither shares a useful part (a BOS token is no
        reason to evict), the one used longest ago, since the other holds what the user types
        into. A snapshot that shares more than that slot does is restored into it."""

        def shared(slot: int) -> int:
            n = common_prefix_len(self._slots[slot].tokens, tokens)
            return n if n >= MIN_USEFUL_REUSE else 0

        slot = max(KEYSTROKE_SLOTS, key=lambda s: (shared(s), -self._slots[s].used))
        best = shared(slot)
        if best >= len(tokens) - 1:
            return SlotPlan(slot, self.tokens(slot))  # the usual keystroke: warm
        snapshot = self._best_snapshot(tokens, better_than=best)
        if snapshot is None:
            return SlotPlan(slot, self.tokens(slot))
        if best:
            # A slot holds part of it, but a snapshot holds more: restore into the other one,
            # which keeps what the first slot has.
            slot = max(KEYSTROKE_SLOTS, key=lambda s: (s != slot, -self._slots[s].used))
        return SlotPlan(slot, list(snapshot.tokens), snapshot)

    def _best_snapshot(self, tokens: list[int], better_than: int) -> Snapshot | None:
        found, found_n = None, max(better_than, MIN_USEFUL_REUSE - 1)
        for snapshot in self._snapshots.values():
            n = common_prefix_len(snapshot.tokens, tokens)
            if n > found_n:
                found, found_n = snapshot, n
        return found

    # --- carrying a plan out ---------------------------------------------------------------
    def prepare(self, plan: SlotPlan, doc_id: str, keep: int) -> None:
        """Make plan.slot hold plan.cached[:keep], saving a window that would be lost."""
        slot = self._slots[plan.slot]
        if plan.restore is not None:
            self._save(plan.slot)
            started = time.perf_counter()
            self.store.restore_seq_state(plan.restore.state, plan.slot)
            slot.tokens = list(plan.restore.tokens)
            self._drop_snapshot(plan.restore)
            self.stats.restored += 1
            self.stats.last_restore_ms = (time.perf_counter() - started) * 1000
            self.stats.recent.append(
                KvEvent(
                    "restore",
                    plan.restore.doc_id,
                    len(slot.tokens),
                    plan.restore.nbytes,
                    self.stats.last_restore_ms,
                )
            )
            log.debug(
                "restored %d tokens of %s into slot %d (%.1f ms)",
                len(slot.tokens),
                plan.restore.doc_id,
                plan.slot,
                self.stats.last_restore_ms,
            )
        elif plan.slot in KEYSTROKE_SLOTS and keep < len(slot.tokens) // 2:
            self._save(plan.slot)  # most of its window goes: keep it for when the user is back
        self._uses += 1
        slot.used = self._uses
        slot.doc_id = doc_id
        self.truncate(plan.slot, keep)

    def truncate(self, slot: int, keep: int) -> None:
        """Drop a slot's cells from position keep on."""
        tokens = self._slots[slot].tokens
        if keep < len(tokens):
            self.store.kv_remove_from(keep, slot)
            del tokens[keep:]

    def clear(self) -> None:
        """Every slot emptied (the caller cleared the context); snapshots stay valid."""
        for slot in self._slots:
            slot.tokens = []
            slot.doc_id = ""

    def forget(self, doc_id: str) -> None:
        """A closed document's snapshots go."""
        for key in [k for k, s in self._snapshots.items() if s.doc_id == doc_id]:
            del self._snapshots[key]

    def set_snapshot_limit(self, snapshot_bytes: int) -> None:
        self.snapshot_bytes = snapshot_bytes
        while self._snapshots and self.snapshot_bytes_used > snapshot_bytes:
            self._snapshots.popitem(last=False)
            self.stats.dropped += 1

    def drop_snapshots(self) -> None:
        self._snapshots.clear()

    # --- snapshots ---------------------------------------------------------------------------
    def _save(self, slot_index: int) -> None:
        slot = self._slots[slot_index]
        if len(slot.tokens) < MIN_SNAPSHOT_TOKENS or self.snapshot_bytes <= 0:
            return
        if any(s.tokens == slot.tokens for s in self._snapshots.values()):
            return  # already kept (restored, then left again unchanged)
        started = time.perf_counter()
        try:
            state = self.store.seq_state(slot_index)
        except Exception as exc:  # a snapshot is an optimisation: never fail the request
            log.warning("could not snapshot slot %d: %s", slot_index, exc)
            return
        snapshot = Snapshot(
            slot.doc_id, list(slot.tokens), state, (time.perf_counter() - started) * 1000
        )
        if snapshot.nbytes > self.snapshot_bytes:
            return
        self._snapshot_ids += 1
        self._snapshots[self._snapshot_ids] = snapshot
        self.stats.saved += 1
        self.stats.last_save_ms = snapshot.save_ms
        self.stats.last_bytes = snapshot.nbytes
        self.stats.recent.append(
            KvEvent(
                "save", snapshot.doc_id, len(snapshot.tokens), snapshot.nbytes, snapshot.save_ms
            )
        )
        while self.snapshot_bytes_used > self.snapshot_bytes:
            self._snapshots.popitem(last=False)
            self.stats.dropped += 1
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
                del self._snapshots[key]

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
