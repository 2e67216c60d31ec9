"""The plan for one request: which prompt, in which KV slot, prefilled in chunks of what size.

Pure policy: a function of the prompt parts (engine/prompt/builder.py: tokenized by the session
before it asks, one per prefix window), what the KV slots hold (engine/local/kvslots.py, read
only) and the measured cost of a prefill on this machine (engine/local/speed.py). No llama.cpp,
no tokenizer here; `ModelSession` carries the plan out.

Keystroke windows. Where a keystroke slot (or a snapshot of this document) holds the wide
window, a keystroke costs its typed tokens. At a new place the wide window costs seconds on a
CPU, so the keystroke takes the narrow start window (about KEYSTROKE_START_MS cold) and says
`widen`: a background job (engine/service/followups.py) prepares the wide one in the other
keystroke slot, and keystrokes move to it once it is ready. While that is only partly done (or
a snapshot holds an older, shorter part of it), a warm narrow window answers sooner than
finishing the wide one would. Background requests take the wide window (that is how it gets
prepared), except the switch to a new workspace block (`start_window`): it prepares the start
window behind the block, which a short lull on a CPU can finish, and the widen follows. With
the model alone, the wide window's first lines are no better than the start window's, and the
block's are (bench/results/context-layout-keystroke-128.json, its -384 twin). On a GPU both
windows are the whole prefix budget.

Keystroke layout. The quality-first prompt puts the suffix after the edit point, so a keystroke
re-decodes all the suffix it keeps. On a GPU the keystroke budget covers it. On a CPU it does
not, and a suffix cut after a few lines is worse than none (measured: first-line exact match
0.34 with 4 lines, 0.37 with none, 0.45 with all). So a CPU keystroke continues the prefix as
plain code (the cheapest prompt, as good as no suffix), and the pause refresh, in its own KV
slot, brings the whole suffix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ghostfim.engine.backend import CompletionRequest
from ghostfim.engine.local.kvslots import KvSlots, SlotPlan, common_prefix_len
from ghostfim.engine.local.speed import PrefillCostModel
from ghostfim.engine.prompt.builder import Prompt, PromptParts
from ghostfim.engine.tuning import (
    BACKGROUND_CHUNK_MS,
    FULL_CHUNK_MS,
    KEYSTROKE_START_MS,
    KEYSTROKE_WIDE_MS,
    MIN_CHUNK_TOKENS,
    MIN_START_TOKENS,
    MIN_WIDE_TOKENS,
    PREFILL_CHUNK_MS,
    PREFIX_SLACK,
)


@dataclass(frozen=True)
class Windows:
    """The keystroke prefix windows, in tokens (equal on a GPU: no narrow start)."""

    start_tokens: int
    wide_tokens: int

    @classmethod
    def sized(cls, cost: PrefillCostModel, prefix_tokens: int) -> Windows:
        wide = cost.tokens_within(KEYSTROKE_WIDE_MS) // 64 * 64
        wide_tokens = min(prefix_tokens, max(MIN_WIDE_TOKENS, wide))
        start = cost.tokens_within(KEYSTROKE_START_MS) // 8 * 8
        return cls(min(wide_tokens, max(MIN_START_TOKENS, start)), wide_tokens)

    @property
    def has_narrow(self) -> bool:
        return self.start_tokens < self.wide_tokens


@dataclass(frozen=True)
class PromptPlan:
    """What `ModelSession.prefill` carries out."""

    prompt: Prompt
    slot: SlotPlan
    chunk_tokens: int  # tokens a prefill decodes between cancellation checks
    # Tokens before this are the text before the cursor, which the next keystroke shares: a
    # cancel lets their chunk finish (so typing fast over a cold prompt still warms the
    # cache). 0: abort anywhere (background work, and full prompts: the keystrokes that cancel
    # them use their own slots).
    stable: int

    @property
    def new_tokens(self) -> int:
        return len(self.prompt.tokens) - self.slot.reuse(self.prompt.tokens)

    @property
    def suffix_cut(self) -> bool:
        """The prompt held less suffix than a full prompt would (a pause refresh can help)."""
        return self.prompt.suffix_units_used < self.prompt.suffix_units_total


@dataclass
class Planner:
    """Chooses among a request's prompt parts, one per prefix window (`windows_for`), which
    the session tokenizes first (engine/prompt/builder.py)."""

    slots: KvSlots  # read only: planning changes nothing
    cost: PrefillCostModel
    windows: Windows
    keystroke_prefill_ms: float
    max_chunk_tokens: int  # the context's n_batch
    prefix_budget: int  # of a full prompt
    suffix_budget: int

    def windows_for(self, request: CompletionRequest) -> tuple[int, ...]:
        """The prefix windows (in tokens) whose prompt parts `plan` takes, the widest first:
        a full prompt's budget; a keystroke's wide window, and the narrow start window where
        this device has one (a background job prepares the wide window: that one alone)."""
        if request.mode == "full":
            return (self.prefix_budget,)
        if self._prepares_start(request):
            return (self.windows.start_tokens,)
        if request.background or not self.windows.has_narrow:
            return (self.windows.wide_tokens,)
        return (self.windows.wide_tokens, self.windows.start_tokens)

    def _prepares_start(self, request: CompletionRequest) -> bool:
        """A background job that prepares the narrow start window (the workspace block's
        switch), where this device has one."""
        return request.background and request.start_window and self.windows.has_narrow

    @property
    def extra_room(self) -> int:
        """Tokens a full prompt's slot has left for context from other files."""
        return self.slots.prompt_room - int(self.prefix_budget * PREFIX_SLACK) - self.suffix_budget

    def plan(self, request: CompletionRequest, parts: Sequence[PromptParts]) -> PromptPlan:
        """`parts`: the request's prompt parts for each of `windows_for(request)`, in order."""
        if request.mode == "full":
            prompt, slot = parts[0].prompt(), self.slots.plan_full()
            stable = 0
        else:
            prompt, slot = self._keystroke(parts, request.background)
            if self._prepares_start(request):
                prompt = replace(prompt, narrow=True)
            stable = 0 if request.background else prompt.stable_tokens
        chunk = self.chunk_tokens(request.background, request.mode == "full")
        return PromptPlan(prompt, slot, chunk, stable)

    def chunk_tokens(self, background: bool = False, full: bool = False) -> int:
        """About PREFILL_CHUNK_MS of work, so a cancel waits at most that long (less for
        background work, more for a full prompt that a cancel aborts at once)."""
        if background:
            budget_ms = BACKGROUND_CHUNK_MS
        else:
            budget_ms = FULL_CHUNK_MS if full else PREFILL_CHUNK_MS
        within = self.cost.tokens_within(budget_ms)
        return max(MIN_CHUNK_TOKENS, min(self.max_chunk_tokens, within))

    # --- keystroke prompts ---------------------------------------------------------------------
    def _keystroke(
        self, parts: Sequence[PromptParts], background: bool = False
    ) -> tuple[Prompt, SlotPlan]:
        """The wide window when it is warm, the narrow one when only that is warm, else the
        widest whose new tokens fit a cold start (see the module's docstring)."""
        affordable = self.cost.tokens_within(self.keystroke_prefill_ms)
        wide, wide_slot, wide_new = self._candidate(parts[0], False, background)
        if len(parts) < 2 or wide_new <= affordable:
            return wide, wide_slot  # warm: the usual keystroke
        narrow, narrow_slot, narrow_new = self._candidate(parts[1], True, background)
        if narrow_new <= affordable:
            return narrow, narrow_slot
        if wide_new > self.cost.tokens_within(KEYSTROKE_START_MS):
            return narrow, narrow_slot
        return wide, wide_slot

    def _candidate(
        self, parts: PromptParts, narrow: bool, background: bool
    ) -> tuple[Prompt, SlotPlan, int]:
        """The keystroke prompt of one window, its slot, its new tokens."""
        slot = self._slot_for(parts, background)
        prompt = replace(self._layout(parts, slot.cached), narrow=narrow)
        return prompt, slot, len(prompt.tokens) - slot.reuse(prompt.tokens)

    def _slot_for(self, parts: PromptParts, background: bool = False) -> SlotPlan:
        """Matched on the FIM head (the whole-suffix layout) and on the plain prefix (the CPU
        layout), whichever a slot or snapshot holds more of."""
        heads = [parts.head]
        if parts.plain_head and list(parts.plain_head) != parts.head:
            heads.append(list(parts.plain_head))
        plans = [(self.slots.plan_keystroke(head, background), head) for head in heads]
        return max(plans, key=lambda p: p[0].reuse(p[1]))[0]

    def _layout(self, parts: PromptParts, cached: list[int]) -> Prompt:
        """The whole-suffix FIM prompt when the keystroke can afford it, else the plain prefix
        (a layout with no suffix units, SPM or prefix-only, is always the former)."""
        if not parts.suffix_units:
            return parts.prompt()
        affordable = self.cost.tokens_within(self.keystroke_prefill_ms)
        if self._new_tokens(parts, cached) <= affordable:
            return parts.prompt()
        return parts.plain()

    def _new_tokens(self, parts: PromptParts, cached: list[int]) -> int:
        """Prompt tokens a prefill of the whole-suffix prompt would decode, given the cache."""
        lcp_head = common_prefix_len(cached, parts.head)
        if lcp_head < len(parts.head):  # the usual keystroke: everything after the edit is new
            return len(parts.head) - lcp_head + sum(parts.suffix_unit_tokens) + len(parts.tail)
        tokens = parts.prompt().tokens  # the same state again: exact
        return len(tokens) - common_prefix_len(cached, tokens)
