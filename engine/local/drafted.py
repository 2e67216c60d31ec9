"""Two models, one ghost text: a small draft model writes the suggestion first, a bigger target
model checks it (speculative decoding) and corrects it.

On a keystroke the draft's suggestion streams as the small model's does alone, so ghost text
appears at its speed. Then the target takes the same request with the draft's tokens as its
proposal (ModelSession.complete(proposal=...)): one batched decode checks them all, the longest
prefix it agrees with is kept, and it goes on by itself from its own next token. What it writes
streams on: the text the user sees grows the same as long as the models agree, and is replaced
from the first disagreement on when they do not. The final suggestion is the target's own, so
greedy output with a draft is the target's (up to near ties between two logits, which batched
and one-token decodes may break differently).

The draft proposes at most k tokens (`DraftLength`): k doubles while the target keeps every
one, and falls towards what it kept when it does not, so a draft that disagrees early costs a
few of its own decodes, not a whole suggestion's (measured: at the start of a block the 0.5B
and the 1.5B part after a token or two; docs/benchmarks.md).

Each model keeps its own KV slots, keystroke windows and per-document snapshots (both get the
same request, so a keystroke costs each a token or two of prefill). The RAM for snapshots
(`kvSnapshotMb`) is the server's, not each model's: it is split between the two by what a token
of each one's KV cells takes, so that both keep the windows of about the same documents. A
cancel stops whichever is running at its next decode boundary. Both models must share one
tokenizer (the Qwen2.5-Coder sizes do): a draft whose vocabulary differs is refused when it
loads.
"""

from __future__ import annotations

import time
from dataclasses import replace

from ghostfim.engine.backend import (
    NEVER_CANCELLED,
    CancelToken,
    Completion,
    CompletionRequest,
    DraftInfo,
    KvStatus,
    ModelInfo,
    OnText,
)
from ghostfim.engine.config import Budgets, BudgetsInEffect
from ghostfim.engine.local.session import ModelSession
from ghostfim.engine.memory import CacheUsage, merged

# Token ids whose texts must agree for two vocabularies to be taken for one tokenizer.
VOCABULARY_PROBES = (0, 1, 100, 1000, 10_000, 50_000, 100_000, 151_643, 151_659, 151_660)


class VocabularyMismatch(ValueError):
    """The draft does not share the target's tokenizer."""


def check_same_vocabulary(target: ModelSession, draft: ModelSession) -> None:
    t, d = target.model, draft.model
    if t.n_vocab != d.n_vocab:
        raise VocabularyMismatch(
            f"draft {draft.info.name} has {d.n_vocab} tokens, target {target.info.name} "
            f"{t.n_vocab}: speculative decoding needs one tokenizer"
        )
    for token in VOCABULARY_PROBES:
        if token < t.n_vocab and t.token_piece(token) != d.token_piece(token):
            raise VocabularyMismatch(
                f"draft {draft.info.name} and target {target.info.name} spell token {token} "
                "differently: speculative decoding needs one tokenizer"
            )


class DraftLength:
    """How many tokens the draft proposes (k), from how many the target kept before."""

    def __init__(self, start: int = 8, least: int = 2, most: int = 64) -> None:
        self.k = float(start)
        self.least, self.most = least, most

    def next(self, max_tokens: int) -> int:
        return max(1, min(max_tokens, round(self.k)))

    def observed(self, proposed: int, kept: int) -> None:
        """A proposal of `proposed` tokens of which the target kept `kept` (its own first
        pick included): all kept, propose twice as many; else move halfway to what was kept
        and one more."""
        if proposed <= 0:
            return
        if kept >= proposed:
            self.k = min(self.most, self.k * 2)
        else:
            self.k = max(self.least, (self.k + kept + 1) / 2)


class DraftedSession:
    """A CompletionBackend made of a target ModelSession and a draft one."""

    def __init__(self, target: ModelSession, draft: ModelSession) -> None:
        check_same_vocabulary(target, draft)
        self.target = target
        self.draft = draft
        self.proposed = 0  # draft tokens proposed, and kept by the target
        self.accepted = 0
        self.length = DraftLength()
        self._share_snapshots(target.budgets.effective.snapshot_bytes)

    def _share_snapshots(self, snapshot_bytes: int) -> None:
        """Split the server's snapshot RAM in proportion to each model's KV bytes a token."""
        per_target, per_draft = self.target.kv_bytes_per_token, self.draft.kv_bytes_per_token
        draft_share = snapshot_bytes * per_draft // max(1, per_target + per_draft)
        self.draft.set_snapshot_limit(draft_share)
        self.target.set_snapshot_limit(snapshot_bytes - draft_share)

    @property
    def info(self) -> ModelInfo:
        t, d = self.target.info, self.draft.info
        draft = DraftInfo(d.preset or d.name, d.path, d.memory_bytes, self.proposed, self.accepted)
        # "medium+small": what the status bar names (both are presets, or the files' names)
        both = f"{t.preset or t.name}+{d.preset or d.name}"
        return replace(
            t, name=both, preset=both if t.preset and d.preset else t.preset, draft=draft
        )

    @property
    def decode_steps(self) -> int:
        return self.target.decode_steps + self.draft.decode_steps

    @property
    def prefill_chunks(self) -> int:
        return self.target.prefill_chunks + self.draft.prefill_chunks

    def complete(
        self,
        request: CompletionRequest,
        cancel: CancelToken | None = None,
        on_text: OnText | None = None,
    ) -> Completion:
        cancel = cancel or NEVER_CANCELLED
        if request.max_tokens <= 0:  # prefill only (warm-up, the wide window): both models
            self.draft.complete(request, cancel)
            return self.target.complete(request, cancel)
        started = time.perf_counter()
        k = self.length.next(request.max_tokens)
        # The ghost text seen first: the draft's k tokens.
        drafted = self.draft.complete(replace(request, max_tokens=k), cancel, on_text)
        draft_ms = (time.perf_counter() - started) * 1000
        if drafted.cancelled:
            return drafted
        checked = self.target.complete(request, cancel, on_text, proposal=drafted.token_ids)
        t = checked.timings
        t.draft_ms = draft_ms
        if drafted.timings.ttft_ms and drafted.text:
            t.ttft_ms = drafted.timings.ttft_ms  # the first text the user saw was the draft's
        self.proposed += t.draft_tokens
        self.accepted += t.draft_accepted
        self.length.observed(t.draft_tokens, t.draft_accepted)
        return replace(checked, draft_text=drafted.text)

    def expected_prefill_ms(self, n_tokens: int) -> float | None:
        target, draft = (s.expected_prefill_ms(n_tokens) for s in (self.target, self.draft))
        return None if target is None or draft is None else target + draft

    def set_budgets(self, budgets: Budgets) -> BudgetsInEffect:
        self.draft.set_budgets(budgets)
        in_effect = self.target.set_budgets(budgets)
        self._share_snapshots(in_effect.effective.snapshot_bytes)
        return in_effect

    def forget_document(self, doc_id: str) -> None:
        self.draft.forget_document(doc_id)
        self.target.forget_document(doc_id)

    def kv_status(self) -> KvStatus | None:
        """Both models' snapshots: together they keep within the server's limit."""
        t, d = self.target.slots.status(), self.draft.slots.status()
        return KvStatus(
            snapshots=t.snapshots + d.snapshots,
            snapshot_bytes=t.snapshot_bytes + d.snapshot_bytes,
            snapshot_limit_bytes=t.snapshot_limit_bytes + d.snapshot_limit_bytes,
            saved=t.saved + d.saved,
            restored=t.restored + d.restored,
            dropped=t.dropped + d.dropped,
            last_save_ms=t.last_save_ms,
            last_restore_ms=t.last_restore_ms,
            recent=t.recent,  # the target's: the draft's events are the same documents'
        )

    def caches(self) -> tuple[CacheUsage, ...]:
        """Each cache of the two models summed (the snapshots' limits add up to the server's)."""
        return merged((*self.target.caches(), *self.draft.caches()))

    def close(self) -> None:
        try:
            self.draft.close()
        finally:
            self.target.close()
