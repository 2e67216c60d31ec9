"""The resident model: the one owner of the llama.cpp context and its KV cache.

Everything else asks `ModelSession.complete`, whose phases read top to bottom:

    plan            -> the prompt's parts, tokenized (engine/prompt/builder.py), then the
                       pure plan: which prompt, in which KV slot, in chunks of what size
                       (engine/local/plan.py; it reads the slots and changes nothing)
    prefill         -> reuse the longest common prefix with what the slot holds (prepare_slot:
                       the cells change here, kvslots.py keeps the books; a document's
                       snapshot is restored first when it holds more), decode the rest in chunks
                       with a cancellation check between chunks (and llama.cpp's abort callback
                       inside a chunk on the CPU); its last logits give token one
    decode          -> greedy decode one token at a time until a stop rule fires, or a draft
                       model's proposal checked in one batch first (engine/local/decode.py:
                       decode_n_tokens, speculative_decode); each token's probability goes with
                       the text, for the confidence rule that decides what of it is shown
                       (engine/text/confidence.py)
    finish          -> clean-up rules, and what the service needs to know (engine/text/finish.py)

Loading, calibration and the GPU/CPU policy are engine/local/loading.py.

Not thread-safe by design: the LSP server runs it on a single worker thread, the CLI too. A
`CancelToken` may be set from any thread; work stops within one prefill chunk (on the CPU
within milliseconds) or one decode step.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import llama_cpp
import numpy as np

from ghostfim.engine.backend import (
    NEVER_CANCELLED,
    Cancelled,
    CancelToken,
    Completion,
    CompletionRequest,
    KvStatus,
    ModelInfo,
    OnText,
)
from ghostfim.engine.config import DEFAULT_BUDGETS, Budgets, BudgetsInEffect
from ghostfim.engine.context.extra import ExtraContextBuilder
from ghostfim.engine.context.guide import MemberGuide, Next
from ghostfim.engine.local import native
from ghostfim.engine.local.decode import (
    Decoded,
    DecodeOptions,
    decode_n_tokens,
    past_heal,
    speculative_decode,
)
from ghostfim.engine.local.kvslots import KvSlots, SlotPlan
from ghostfim.engine.local.parts import prompt_parts
from ghostfim.engine.local.plan import Planner, PromptPlan, Windows
from ghostfim.engine.local.speed import PrefillCostModel
from ghostfim.engine.local.vocab import VocabIndex
from ghostfim.engine.memory import CacheUsage
from ghostfim.engine.prompt.builder import PromptBuilder, fit_budgets
from ghostfim.engine.prompt.definitions import DefinitionTokens
from ghostfim.engine.prompt.fim import FimTemplate, detect_template
from ghostfim.engine.text.finish import finish, stop_policy, streaming
from ghostfim.engine.timings import Timings

log = logging.getLogger("ghostfim.session")


@dataclass(frozen=True)
class DevicePolicy:
    """What differs between a GPU and a CPU, decided once when the model loads.

    CUDA ignores llama.cpp's abort callback, so on a GPU a cancel is seen only between
    `llama_decode` calls: batches are smaller, and the callback is not installed at all."""

    n_batch: int
    abort_callback: bool


class ModelSession:
    """One loaded model, one context, its KV slots, and the plan for each request."""

    def __init__(
        self,
        model: native.NativeModel,
        info: ModelInfo,
        *,
        budgets: Budgets = DEFAULT_BUDGETS,
        policy: DevicePolicy | None = None,
        cost: PrefillCostModel | None = None,
    ) -> None:
        self.model = model
        # What the prompt builders tokenize with: llama.cpp's own, no special tokens parsed.
        self.tokenize = functools.partial(model.tokenize, add_special=False, parse_special=False)
        self.template: FimTemplate = template_of(model)
        self.info = ModelInfo(
            info.name,
            info.path,
            info.preset,
            info.device,
            info.n_gpu_layers,
            self.template.family,
            model.n_ctx,
            model.size_bytes(),
        )
        self.slots = KvSlots(model.n_ctx, budgets.snapshot_bytes)
        self.extra = ExtraContextBuilder(self.tokenize, self.template)  # other files' chunks
        self.definitions = DefinitionTokens(
            self.tokenize, self.template.context_style
        )  # the workspace's definitions
        # The vocabulary as Python data (each token's bytes, the end tokens, token healing's
        # index): the decode loop looks tokens up instead of calling llama.cpp per token.
        self.vocab = VocabIndex(model.n_vocab, model.token_piece, model.is_eog)
        self.end_tokens = self.vocab.ends | self.template.stop_tokens
        self.cost = cost or PrefillCostModel.from_env()
        self.policy = policy or DevicePolicy(model.n_batch, abort_callback=True)
        self.cost_at_load: tuple[float, float] | None = None  # (fixed, per token), calibrated
        self.decode_steps = 0  # one-token decodes run (counted so tests can see work stop)
        self.prefill_chunks = 0
        self.last_plan: PromptPlan | None = None  # what the last request did (tests, traces)
        self._active: CancelToken = NEVER_CANCELLED
        self._abortable = False  # whether a cancel may interrupt the decode in progress
        self._prefill_progress = (0, 0)  # (reused, decoded so far) of the prefill in progress
        self._abort_cb = llama_cpp.ggml_abort_callback(self._should_abort)
        if self.policy.abort_callback:
            model.set_abort(self._abort_cb)
        self._lock = threading.Lock()
        self.set_budgets(budgets)

    # --- lifecycle ------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            self.model.set_abort(None)
            self.model.close()
            self.slots.clear()
            self.slots.drop_snapshots()

    def _should_abort(self, _data: object) -> bool:
        return self._abortable and self._active.cancelled

    def set_budgets(self, budgets: Budgets) -> BudgetsInEffect:
        """The budgets, clamped to what a slot holds (engine/prompt/builder.py fit_budgets).
        New budgets rebuild the prompt builder (its sticky windows are per budget); the KV
        slots keep what they hold, and the snapshots what fits the new limit."""
        in_effect = fit_budgets(budgets, self.slots.prompt_room)
        b = in_effect.effective
        self.slots.set_snapshot_limit(b.snapshot_bytes)
        self.builder = PromptBuilder(
            self.tokenize,
            self.template,
            piece=self.vocab.pieces.__getitem__,
            prefix_tokens=b.prefix_tokens,
            suffix_tokens=b.suffix_tokens,
        )
        self.budgets = in_effect
        self.planner = Planner(
            self.slots,
            self.cost,
            Windows.sized(self.cost, b.prefix_tokens),
            b.keystroke_prefill_ms,
            self.model.n_batch,
            b.prefix_tokens,
            b.suffix_tokens,
        )
        return in_effect

    def set_snapshot_limit(self, snapshot_bytes: int) -> None:
        """The RAM for this model's KV snapshots, when it is a share of the server's
        (engine/local/drafted.py splits `kvSnapshotMb` between the draft and the target)."""
        self.slots.set_snapshot_limit(snapshot_bytes)

    @property
    def kv_bytes_per_token(self) -> int:
        return self.model.kv_bytes_per_token()

    def resize_windows(self) -> None:
        """The cost model changed (calibration): the keystroke windows follow it."""
        self.planner.windows = Windows.sized(self.cost, self.builder.prefix_budget)

    def expected_prefill_ms(self, n_tokens: int) -> float | None:
        """A cold prefill of n_tokens at the speed measured when the model loaded."""
        if self.cost_at_load is None:
            return None
        fixed, per_token = self.cost_at_load
        return fixed + per_token * n_tokens

    # --- the request ------------------------------------------------------------------------
    def complete(
        self,
        request: CompletionRequest,
        cancel: CancelToken | None = None,
        on_text: OnText | None = None,
        proposal: Sequence[int] = (),
    ) -> Completion:
        """Generate the suggestion for one cursor state (max_tokens=0: prefill only).

        `proposal`: a draft model's tokens for the same state (engine/local/drafted.py). They
        are checked in one batched decode; the longest prefix this model agrees with is kept,
        and it goes on by itself from its own next token. The text is this model's own."""
        cancel = cancel or NEVER_CANCELLED
        with self._lock:
            self._active = cancel
            try:
                return self._complete(request, cancel, on_text, proposal)
            finally:
                self._active = NEVER_CANCELLED

    def _complete(
        self,
        request: CompletionRequest,
        cancel: CancelToken,
        on_text: OnText | None,
        proposal: Sequence[int],
    ) -> Completion:
        timings = Timings()
        start = time.perf_counter()
        plan = self.last_plan = self.plan(request)
        prompt = plan.prompt
        timings.prompt_ms = (time.perf_counter() - start) * 1000
        timings.suffix_tokens = prompt.suffix_tokens
        timings.extra_tokens = prompt.extra_tokens
        timings.definition_tokens = prompt.definition_tokens
        ctx, policy = stop_policy(request)

        def done(decoded: Decoded) -> Completion:
            timings.total_ms = (time.perf_counter() - start) * 1000
            log.debug(
                "%s slot %d%s%s: %d prompt tokens, %d reused, %d new, %d generated, %s, %.1f ms",
                request.mode,
                plan.slot.slot,
                " narrow" if prompt.narrow else "",
                " restored" if plan.slot.restore is not None else "",
                len(prompt.tokens),
                timings.prefill_reused_tokens,
                timings.prefill_new_tokens,
                timings.decode_tokens,
                decoded.reason,
                timings.total_ms,
            )
            fitted = self.definitions.last if prompt.definition_tokens else None
            if fitted is not None:
                log.debug(
                    "definitions: %d tokens: %s",
                    prompt.definition_tokens,
                    ", ".join(f"{e.file}:{e.name}" for e in fitted.entries),
                )
            completion = finish(
                request,
                ctx,
                decoded.text,
                decoded.reason,
                timings,
                suffix_cut=plan.suffix_cut,
                widen=prompt.narrow,
                token_probs=tuple(decoded.probs),
                token_ends=tuple(decoded.ends),
                token_ids=tuple(decoded.ids),
            )
            if fitted is not None:
                completion.definitions = fitted.labels
            return completion

        if not prompt.tokens:  # an empty document with a model that has no BOS or FIM tokens
            return done(Decoded(reason="empty_prompt"))
        if request.max_tokens <= 0 and plan.new_tokens <= 1:
            return done(Decoded(reason="prefill_only"))  # already prepared: nothing to decode
        guide = MemberGuide(request.members, request.prefix) if request.members else None
        try:
            first_token, first_prob, reused, new, prefill_ms = self.prefill(
                plan, cancel, doc_id=request.doc_id, guided=guide.after("") if guide else None
            )
        except Cancelled:
            # What was decoded before the cancel stays in the cache: count it.
            timings.prefill_reused_tokens, timings.prefill_new_tokens = self._prefill_progress
            timings.prefill_ms = (time.perf_counter() - start) * 1000 - timings.prompt_ms
            return done(Decoded(reason="cancelled"))
        timings.prefill_reused_tokens, timings.prefill_new_tokens = reused, new
        timings.prefill_ms = prefill_ms
        timings.ttft_ms = (time.perf_counter() - start) * 1000
        if request.max_tokens <= 0:
            return done(Decoded(reason="prefill_only"))

        decode_start = time.perf_counter()
        options = DecodeOptions(
            request.max_tokens, policy, prompt.heal, request.give_up_below, guide
        )
        stream = streaming(on_text, request, ctx)
        first = (first_token, first_prob)
        if proposal:
            draft = proposal[: min(request.max_tokens, self.model.n_batch)]
            decoded = speculative_decode(
                self, plan.slot.slot, first, draft, options, cancel, stream
            )
        else:
            decoded = decode_n_tokens(self, plan.slot.slot, first, options, cancel, stream)
        timings.draft_tokens, timings.draft_accepted = decoded.draft_tokens, decoded.draft_kept
        timings.decode_tokens = decoded.generated
        timings.decode_ms = (time.perf_counter() - decode_start) * 1000
        return done(decoded)

    # --- phase 1: plan ----------------------------------------------------------------------
    def plan(self, request: CompletionRequest) -> PromptPlan:
        """The prompt's parts for each window the plan chooses among, tokenized here
        (engine/prompt/builder.py; a full prompt's context from other files too), then the
        pure plan: which prompt, in which slot (engine/local/plan.py)."""
        parts = prompt_parts(self.builder, self.extra, self.planner, request, self.definitions)
        return self.planner.plan(request, parts)

    # --- phase 2: prefill -------------------------------------------------------------------
    def prefill(
        self,
        plan: PromptPlan,
        cancel: CancelToken,
        *,
        doc_id: str = "",
        guided: Next | None = None,
    ) -> tuple[int, float, int, int, float]:
        """Make the plan's slot hold its prompt; returns (first token, its probability,
        reused, new, ms). The first token is one the member guide lets be, where `guided`
        (engine/context/guide.py).

        Tokens before `plan.stable` are the text before the cursor, which the next keystroke
        will share: a cancel stops them at a chunk boundary and keeps what is done. The rest
        is thrown away by the next keystroke anyway, so a cancel aborts it at once (llama.cpp's
        abort callback).
        """
        start = time.perf_counter()
        tokens, seq, stable = plan.prompt.tokens, plan.slot.slot, plan.stable
        if not self.slots.fits(len(tokens)):
            raise native.DecodeError(f"prompt of {len(tokens)} tokens does not fit n_ctx")
        keep = min(plan.slot.reuse(tokens), len(tokens) - 1)  # the last one gives the logits
        self._prefill_progress = (keep, 0)
        prepare_slot(self.slots, self.model, plan.slot, doc_id, keep)
        if stable:  # an interactive keystroke (background and full prompts have none)
            self.slots.typed_into(plan.slot.slot, stable)
        todo = tokens[keep:]
        offset = 0
        pick: tuple[int, float] | None = None
        while offset < len(todo):
            if cancel.cancelled:
                raise Cancelled()
            position = keep + offset
            # Chunks end at the stable boundary so the two kinds never share a chunk.
            end = min(len(todo), offset + plan.chunk_tokens)
            if position < stable < keep + end:
                end = stable - keep
            chunk = todo[offset:end]
            offset = end
            self._abortable = position >= stable
            t = time.perf_counter()
            try:
                last = offset >= len(todo)  # its logits give the first token
                pick = self._decode(
                    seq, chunk, position, pick=last, heal=plan.prompt.heal, guided=guided
                )
            except native.DecodeAborted:
                raise Cancelled() from None
            finally:
                self._abortable = True
            self.cost.observe(len(chunk), (time.perf_counter() - t) * 1000)
            self.prefill_chunks += 1
            self._prefill_progress = (keep, offset)
        assert pick is not None  # the last chunk picked (there is one: keep < len(tokens))
        return *pick, keep, len(todo), (time.perf_counter() - start) * 1000

    # --- phase 3: decode --------------------------------------------------------------------
    def decode_one_token(
        self, slot: int, token: int, heal: bytes = b"", guided: Next | None = None
    ) -> tuple[int, float]:
        """Append `token` to the slot's KV cache; the greedy next token and its probability."""
        position = self.slots.length(slot)
        pick = self._decode(slot, [token], position, pick=True, heal=heal, guided=guided)
        self.decode_steps += 1
        assert pick is not None
        return pick

    def _decode(
        self,
        slot: int,
        tokens: list[int],
        position: int,
        *,
        pick: bool,
        heal: bytes = b"",
        guided: Next | None = None,
    ) -> tuple[int, float] | None:
        """The one call into llama_decode (prefill chunks and generated tokens alike):
        `tokens` go into the slot's cells from `position`, and the slot records them; with
        `pick`, the greedy next token and the model's probability of it (among the tokens
        that agree with the text still to be healed, and that `guided` lets be). An
        abort (native.DecodeAborted) drops the half-written cells before it goes up."""
        try:
            self.model.decode(tokens, position, want_logits=pick, seq=slot)
        except native.DecodeAborted:
            self.model.kv_remove_from(position, slot)  # never recorded in the slots' books
            raise
        self.slots.append(slot, tokens)
        if not pick:
            return None
        return self.model.argmax_last_with_prob(self._allowed(heal, guided))

    def _allowed(self, heal: bytes, guided: Next | None = None) -> np.ndarray | None:
        """Tokens that agree with the text still to be healed and, where the member guide
        knows the names (engine/context/guide.py), go on with one of them (None: any)."""
        if guided is None or (guided.open and heal):
            return self.vocab.candidates(heal) if heal else None
        if guided.open:
            return self.vocab.after_name(guided.after_dot, bare=True)
        parts = [self.vocab.spelling(heal + name.encode() for name in guided.names)]
        if guided.ends:
            # A healed word and a dot are never one token (BPE pieces start at punctuation).
            ends = self.vocab.spelling([heal]) if heal else self.vocab.after_name(guided.after_dot)
            parts.append(ends)
        return np.concatenate(parts)

    # What decoding (engine/local/decode.py) asks of the session: its KV cells change here.
    def piece(self, token: int) -> bytes:
        return self.vocab.pieces[token]

    def fits(self, slot: int, more: int) -> bool:
        return self.slots.fits(self.slots.length(slot) + more)

    def decode_proposal(
        self,
        slot: int,
        proposal: Sequence[int],
        heal: bytes,
        last_guided: Next | None = None,
    ) -> tuple[int, list[tuple[int, float]]]:
        """Decode a draft's proposal after the prompt in one batch, with the logits of every
        position: where it starts, and this model's own pick after each proposed token
        (within what token healing still allows there; after the last, what `last_guided` lets
        be too). No picks when it does not fit."""
        start = self.slots.length(slot)
        if not self.slots.fits(start + len(proposal) + 1):
            return start, []
        try:
            self.model.decode(proposal, start, want_logits=True, seq=slot, all_logits=True)
        except native.DecodeAborted:
            self.model.kv_remove_from(start, slot)
            raise
        self.slots.append(slot, list(proposal))
        self.decode_steps += 1
        picks = []
        for i, token in enumerate(proposal):
            heal, _ = past_heal(heal, self.vocab.pieces[token])
            guided = last_guided if i == len(proposal) - 1 else None
            picks.append(self.model.argmax_at(i, self._allowed(heal, guided)))
        return start, picks

    def drop_from(self, slot: int, position: int) -> None:
        """Drop a slot's cells from `position` on (a proposal's that this model did not take)."""
        drop_cells(self.slots, self.model, slot, position)

    def forget_document(self, doc_id: str) -> None:
        """A closed document's KV snapshots and prompt windows go (on the model thread)."""
        with self._lock:
            self.slots.forget(doc_id)
            self.builder.forget(doc_id)

    def caches(self) -> tuple[CacheUsage, ...]:
        """What this model keeps beyond its weights and KV cells, against each limit
        (engine/memory.py); read from the event loop, so only sizes kept as they change."""
        return (
            *self.builder.caches(),
            *self.extra.caches(),
            *self.definitions.caches(),
            self.slots.usage(),
        )

    def kv_status(self) -> KvStatus | None:
        return self.slots.status()


# --- the KV cells: changed here, recorded in engine/local/kvslots.py -------------------------
class Cells(Protocol):
    """What changes a context's KV cells (native.NativeModel; tests use a fake)."""

    def kv_remove_from(self, pos: int, seq: int = 0) -> None: ...
    def seq_state(self, seq: int) -> bytes: ...
    def restore_seq_state(self, data: bytes, seq: int) -> None: ...


def prepare_slot(slots: KvSlots, cells: Cells, plan: SlotPlan, doc_id: str, keep: int) -> None:
    """Make plan.slot hold plan.cached[:keep]: the window it held is saved first when the plan
    overwrites most of it, plan.restore's snapshot is written into it, the cells from keep on
    are dropped."""
    if slots.save_before(plan, keep):
        save_snapshot(slots, cells, plan.slot)
    if plan.restore is not None:
        started = time.perf_counter()
        cells.restore_seq_state(plan.restore.state, plan.slot)
        slots.restored(plan, (time.perf_counter() - started) * 1000)
    slots.claim(plan.slot, doc_id)
    drop_cells(slots, cells, plan.slot, keep)


def drop_cells(slots: KvSlots, cells: Cells, slot: int, keep: int) -> None:
    """Drop a slot's cells from position keep on."""
    if keep < slots.length(slot):
        cells.kv_remove_from(keep, slot)
        slots.truncate(slot, keep)


def save_snapshot(slots: KvSlots, cells: Cells, slot: int) -> None:
    """Serialize one slot's cells (`llama_state_seq_get_data`: that sequence alone) into the
    slots' snapshot LRU, for when the user comes back to its document."""
    started = time.perf_counter()
    try:
        state = cells.seq_state(slot)
    except Exception as exc:  # a snapshot is an optimisation: never fail the request
        log.warning("could not snapshot slot %d: %s", slot, exc)
        return
    slots.keep_snapshot(slot, state, (time.perf_counter() - started) * 1000)


def template_of(model: native.NativeModel) -> FimTemplate:
    """The FIM template of the model's own vocabulary (engine/prompt/fim.py's table)."""
    ids = native.special_token_ids(model)

    def find_token(text: str) -> int:
        found = model.tokenize(text, add_special=False, parse_special=True)
        return found[0] if len(found) == 1 and model.token_text(found[0]) == text else -1

    return detect_template(
        ids,
        model.token_text,
        model_name=model.meta("general.name") or "",
        architecture=model.meta("general.architecture") or "",
        add_bos=native.adds_bos(model),
        find_token=find_token,
    )
