"""The resident model: the one owner of the llama.cpp context and its KV cache.

Everything else asks `ModelSession.complete`. Its phases read top to bottom:

    build_prompt  -> the FIM prompt, its suffix sized to this request's prefill budget, and the
                     KV slot it goes to (engine/kvslots.py); reads the cache, changes nothing
    prefill       -> reuse the longest common prefix with what the slot holds (restoring a
                     document's snapshot first when it holds more), decode the rest in chunks
                     with a cancellation check between chunks (and llama.cpp's abort callback
                     inside a chunk on the CPU); its last logits give token one
    decode_n_tokens -> greedy decode one token at a time until a stop rule fires
    finish        -> clean-up rules, and what the service needs to know (engine/backend.py)

Not thread-safe by design: the LSP server runs it on a single worker thread, the CLI directly.
A `CancelToken` may be set from any thread; work stops within one prefill chunk (on the CPU
within milliseconds) or one decode step.
"""

from __future__ import annotations

import codecs
import logging
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import llama_cpp
import numpy as np

from ghostfim.engine.backend import (
    NEVER_CANCELLED,
    Cancelled,
    CancelToken,
    Completion,
    CompletionRequest,
    ModelInfo,
    OnText,
    finish,
    stop_policy,
)
from ghostfim.engine.config import DEFAULTS
from ghostfim.engine.context.ring import ExtraContextBuilder
from ghostfim.engine.local import native
from ghostfim.engine.local.kvslots import (
    N_SLOTS,
    SLOT_FULL,
    KvSlots,
    SlotPlan,
)
from ghostfim.engine.local.speed import PrefillCostModel
from ghostfim.engine.local.vocab import VocabIndex
from ghostfim.engine.prompt.builder import Prompt, PromptBuilder, PromptParts, common_prefix_len
from ghostfim.engine.prompt.fim import FimTemplate, detect_template
from ghostfim.engine.text.stops import StopPolicy
from ghostfim.engine.timings import Timings

log = logging.getLogger("ghostfim.session")

# A keystroke prompt's prefix window is what a cold prefill decodes in about this long, so the
# first keystroke at a new place shows ghost text soon (on a GPU: the whole prefix budget) ...
KEYSTROKE_START_MS = 500.0
# ... and once the user is typing there, a background job prepares a window this much wider
# (in the other keystroke slot), which keystrokes move to as soon as it is ready.
KEYSTROKE_WIDE_MS = 1500.0
MIN_START_TOKENS = 24
MIN_WIDE_TOKENS = 128

# A prefill chunk is sized to about this much work: the longest a cancel waits on the CPU for
# the text before the cursor (the rest is aborted at once).
PREFILL_CHUNK_MS = 250.0
# Background prefills (the wide window, the refresh, warm-up) run between keystrokes and are
# aborted by the next one, losing the chunk in progress: small chunks, so that the gaps of
# ~100 ms between keystrokes still move them forward.
BACKGROUND_CHUNK_MS = 100.0
# A full prompt the user waits for (explicit) is aborted anywhere by a cancel, so its chunks can
# be large: on a CPU a 10-token chunk costs ~24 ms a token, a 48-token one ~21.
FULL_CHUNK_MS = 1000.0
MIN_CHUNK_TOKENS = 2
# A prefill faster than this per token is a GPU's (or a pinned cost model's): GPU policy.
FAST_PREFILL_MS_PER_TOKEN = 1.0


@dataclass(frozen=True)
class DevicePolicy:
    """What differs between a GPU and a CPU, decided once when the model loads.

    CUDA ignores llama.cpp's abort callback, so on a GPU a cancel is seen only between
    `llama_decode` calls: batches are smaller, and the callback is not installed at all."""

    n_batch: int
    abort_callback: bool

    @classmethod
    def choose(cls, on_gpu: bool, cost: PrefillCostModel) -> DevicePolicy:
        fast = on_gpu or (cost.forced and cost.per_token_ms < FAST_PREFILL_MS_PER_TOKEN)
        return cls(n_batch=128 if fast else 256, abort_callback=not on_gpu)


@dataclass(frozen=True)
class PromptPlan:
    """A prompt and where it goes: what `build_prompt` decides and `prefill` carries out."""

    prompt: Prompt
    slot: SlotPlan


class ModelSession:
    """One loaded model, one context, its KV slots and the tokens they hold."""

    def __init__(
        self,
        model: native.NativeModel,
        info: ModelInfo,
        *,
        prefix_tokens: int = DEFAULTS.prefix_tokens,
        suffix_tokens: int = DEFAULTS.suffix_tokens,
        keystroke_prefill_ms: float = DEFAULTS.keystroke_prefill_ms,
        snapshot_bytes: int = DEFAULTS.snapshot_bytes,
        chunk_tokens: int | None = None,
        policy: DevicePolicy | None = None,
        cost: PrefillCostModel | None = None,
    ) -> None:
        self.model = model
        self.info = info
        self.template: FimTemplate = _template_of(model)
        self.slots = KvSlots(model, model.n_ctx, snapshot_bytes)
        self.extra = ExtraContextBuilder(self.tokenize, self.template)  # other files' chunks
        self._vocab: VocabIndex | None = None  # built on first use (token healing)
        self.chunk_tokens = min(chunk_tokens or model.n_batch, model.n_batch)
        self.cost = cost or PrefillCostModel.from_env()
        self.policy = policy or DevicePolicy(model.n_batch, abort_callback=True)
        self.calibrated_ms_per_token: float | None = None  # prefill speed measured at load
        self._cost_at_load: tuple[float, float] | None = None  # (fixed, per token) then
        self.decode_steps = 0  # one-token decodes run (counted so tests can see work stop)
        self.prefill_chunks = 0
        self.last_slot = SLOT_FULL  # the slot the last prefill wrote (tests, traces)
        self._active: CancelToken = NEVER_CANCELLED
        self._abortable = False  # whether a cancel may interrupt the decode in progress
        self._prefill_progress = (0, 0)  # (reused, decoded so far) of the prefill in progress
        self._abort_cb = llama_cpp.ggml_abort_callback(self._should_abort)
        self._lock = threading.Lock()
        self.set_budgets(prefix_tokens, suffix_tokens, keystroke_prefill_ms)

    # --- lifecycle --------------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        path: Path,
        *,
        name: str | None = None,
        preset: str | None = None,
        n_gpu_layers: int = -1,
        n_ctx: int = 4096 * N_SLOTS,
        calibrate: bool = True,
        on_progress: native.Progress | None = None,
        prefix_tokens: int = DEFAULTS.prefix_tokens,
        suffix_tokens: int = DEFAULTS.suffix_tokens,
        keystroke_prefill_ms: float = DEFAULTS.keystroke_prefill_ms,
        snapshot_bytes: int = DEFAULTS.snapshot_bytes,
    ) -> ModelSession:
        """Load a GGUF file; n_gpu_layers=-1 offloads every layer when a CUDA GPU is usable."""
        from ghostfim.engine.setup.device import cuda_gpu_name, has_usable_cuda_gpu

        if n_gpu_layers < 0:
            n_gpu_layers = 999 if has_usable_cuda_gpu() else 0
        on_gpu = n_gpu_layers > 0 and native.supports_gpu_offload()
        cost = PrefillCostModel.from_env()
        policy = DevicePolicy.choose(on_gpu, cost)
        model = native.load(
            path,
            n_ctx=n_ctx,
            n_batch=policy.n_batch,
            n_gpu_layers=n_gpu_layers if on_gpu else 0,
            n_seq=N_SLOTS,
            progress=on_progress,
        )
        try:
            device = f"cuda ({cuda_gpu_name() or 'GPU'})" if on_gpu else "cpu"
            layers = min(n_gpu_layers, model.n_layer + 1) if on_gpu else 0
            info = ModelInfo(
                name=name or path.stem,
                path=str(path),
                preset=preset,
                device=device,
                n_gpu_layers=layers,
                family="",
                n_ctx=model.n_ctx,
            )
            session = cls(
                model,
                info,
                prefix_tokens=prefix_tokens,
                suffix_tokens=suffix_tokens,
                keystroke_prefill_ms=keystroke_prefill_ms,
                snapshot_bytes=snapshot_bytes,
                policy=policy,
                cost=cost,
            )
            session.info = replace(info, family=session.template.family)
            if policy.abort_callback:
                session.model.set_abort(session._abort_cb)
            if calibrate:
                session.calibrate()
                session._healing_candidates(b"_")  # index the vocabulary now, not on a keystroke
        except BaseException:
            model.close()  # a failure after the load must not keep the weights
            raise
        return session

    def close(self) -> None:
        with self._lock:
            self.model.set_abort(None)
            self.model.close()
            self.slots.clear()
            self.slots.drop_snapshots()

    def _should_abort(self, _data: object) -> bool:
        return self._abortable and self._active.cancelled

    def tokenize(self, text: str) -> list[int]:
        return self.model.tokenize(text, add_special=False, parse_special=False)

    def set_budgets(
        self,
        prefix_tokens: int,
        suffix_tokens: int,
        keystroke_prefill_ms: float,
        snapshot_bytes: int | None = None,
    ) -> None:
        """Prompt budgets, clamped to what a slot holds. Changing them rebuilds the prompt
        builder (its sticky windows are per budget); the KV slots keep what they hold, and
        the snapshots what fits the new limit."""
        if snapshot_bytes is not None:
            self.slots.set_snapshot_limit(snapshot_bytes)
        room = self.slots.prompt_room
        prefix_tokens = max(16, min(prefix_tokens, int(room * 0.7 / 1.25)))
        suffix_tokens = max(0, min(suffix_tokens, room - int(prefix_tokens * 1.25)))
        self.prefix_tokens = prefix_tokens
        self.keystroke_prefill_ms = keystroke_prefill_ms
        self.builder = PromptBuilder(
            self.tokenize,
            self.template,
            piece=self.model.token_piece,
            prefix_tokens=prefix_tokens,
            suffix_tokens=suffix_tokens,
        )
        self._size_windows()

    def calibrate(self) -> None:
        """Measure one-token and many-token decodes so keystroke budgets start out right."""
        token = self.tokenize("\n")[0]
        sizes = (1, 1, min(64, self.chunk_tokens), 1, min(64, self.chunk_tokens))
        for i, n in enumerate(sizes):
            self.model.kv_clear()
            start = time.perf_counter()
            self.model.decode([token] * n, 0, want_logits=True)
            if i > 0:  # the very first decode pays one-time allocations
                self.cost.observe(n, (time.perf_counter() - start) * 1000)
        self.model.kv_clear()
        self.slots.clear()
        self.calibrated_ms_per_token = self.cost.per_token_ms
        self._cost_at_load = (self.cost.fixed_ms, self.cost.per_token_ms)
        self._size_windows()
        log.info(
            "prefill cost: %.1f ms + %.2f ms/token; keystroke windows %d/%d tokens",
            self.cost.fixed_ms,
            self.cost.per_token_ms,
            self.keystroke_start_tokens,
            self.keystroke_wide_tokens,
        )

    def _size_windows(self) -> None:
        """Keystroke windows (see KEYSTROKE_START_MS): the whole prefix budget when the
        machine prefills it quickly (a GPU), narrower on a CPU."""
        wide = self.cost.tokens_within(KEYSTROKE_WIDE_MS) // 64 * 64
        self.keystroke_wide_tokens = min(self.prefix_tokens, max(MIN_WIDE_TOKENS, wide))
        start = self.cost.tokens_within(KEYSTROKE_START_MS) // 8 * 8
        self.keystroke_start_tokens = min(self.keystroke_wide_tokens, max(MIN_START_TOKENS, start))

    def expected_prefill_ms(self, n_tokens: int) -> float | None:
        """A cold prefill of n_tokens at the speed measured when the model loaded."""
        if self._cost_at_load is None:
            return None
        fixed, per_token = self._cost_at_load
        return fixed + per_token * n_tokens

    # --- the request ------------------------------------------------------------------------
    def complete(
        self,
        request: CompletionRequest,
        cancel: CancelToken | None = None,
        on_text: OnText | None = None,
    ) -> Completion:
        """Generate the suggestion for one cursor state (max_tokens=0: prefill only)."""
        cancel = cancel or NEVER_CANCELLED
        with self._lock:
            self._active = cancel
            try:
                return self._complete(request, cancel, on_text)
            finally:
                self._active = NEVER_CANCELLED

    def _complete(
        self, request: CompletionRequest, cancel: CancelToken, on_text: OnText | None
    ) -> Completion:
        timings = Timings()
        start = time.perf_counter()
        plan = self.build_prompt(request)
        prompt = plan.prompt
        timings.prompt_ms = (time.perf_counter() - start) * 1000
        timings.suffix_tokens = prompt.suffix_tokens
        timings.extra_tokens = prompt.extra_tokens
        ctx, policy = stop_policy(request)

        def done(raw: str, reason: str) -> Completion:
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
                reason,
                timings.total_ms,
            )
            return finish(
                request,
                ctx,
                raw,
                reason,
                timings,
                suffix_cut=prompt.suffix_units_used < prompt.suffix_units_total,
                widen=prompt.narrow,
            )

        if not prompt.tokens:  # an empty document with a model that has no BOS or FIM tokens
            return done("", "empty_prompt")
        if request.max_tokens <= 0 and plan.slot.reuse(prompt.tokens) >= len(prompt.tokens) - 1:
            return done("", "prefill_only")  # already prepared: nothing to decode
        # Background work (refresh, prefetch, warm-up) may be aborted anywhere, and so may a
        # full prompt: the keystrokes that cancel it use their own slots, so finishing its
        # chunk would not help them.
        full = request.mode == "full"
        try:
            first, reused, new, prefill_ms = self.prefill(
                prompt.tokens,
                cancel,
                slot=plan.slot,
                stable=0 if request.background or full else prompt.stable_tokens,
                heal=prompt.heal,
                chunk_tokens=self.prefill_chunk_tokens(request.background, full),
                doc_id=request.doc_id,
            )
        except Cancelled:
            # What was decoded before the cancel stays in the cache: count it.
            timings.prefill_reused_tokens, timings.prefill_new_tokens = self._prefill_progress
            timings.prefill_ms = (time.perf_counter() - start) * 1000 - timings.prompt_ms
            return done("", "cancelled")
        timings.prefill_reused_tokens, timings.prefill_new_tokens = reused, new
        timings.prefill_ms = prefill_ms
        timings.ttft_ms = (time.perf_counter() - start) * 1000
        if request.max_tokens <= 0:
            return done("", "prefill_only")

        decode_start = time.perf_counter()
        raw, n_generated, reason = self.decode_n_tokens(
            plan.slot.slot, first, request.max_tokens, policy, cancel, on_text, heal=prompt.heal
        )
        timings.decode_tokens = n_generated
        timings.decode_ms = (time.perf_counter() - decode_start) * 1000
        return done(raw, reason)

    # --- phase 1: the prompt and its slot (reads the cache, changes nothing) ---------------
    def build_prompt(self, request: CompletionRequest) -> PromptPlan:
        if request.mode == "full":
            parts = self.builder.parts(
                request.doc_id, request.prefix, request.suffix, request.line, self.prefix_tokens
            )
            # --- context from other files, before the FIM prefix (engine/context.py) ---
            room = (
                self.slots.prompt_room - int(self.prefix_tokens * 1.25) - self.builder.suffix_budget
            )
            parts, n_extra = self.extra.apply(parts, request.extra_context, self.cost, room)
            prompt = replace(self.builder.assemble(parts), extra_tokens=n_extra)
            return PromptPlan(prompt, self.slots.plan_full())
        return self._keystroke_prompt(request)

    def _keystroke_prompt(self, request: CompletionRequest) -> PromptPlan:
        """The keystroke window to use now: the wide one when it is warm, the narrow one
        when only that is warm, else the widest whose new tokens fit a cold start.

        Where a keystroke slot (or a snapshot of this document) holds the wide window, a
        keystroke costs its typed tokens. At a new place the wide window costs seconds on a
        CPU, so the keystroke takes the start window (about KEYSTROKE_START_MS cold) and
        reports `widen`, and a background job prepares the wide one in the other slot; while
        that is only partly done (or a snapshot holds an older, shorter part of it), a warm
        narrow window answers sooner than finishing the wide one would. Background requests
        always take the wide window: that is how it gets prepared.
        """
        wide, wide_new = self._keystroke_candidate(request, self.keystroke_wide_tokens)
        has_narrow = self.keystroke_start_tokens < self.keystroke_wide_tokens
        if request.background or not has_narrow:
            return wide
        if wide_new <= self.cost.tokens_within(self.keystroke_prefill_ms):
            return wide  # warm: the usual keystroke, one prompt built
        narrow, narrow_new = self._keystroke_candidate(request, self.keystroke_start_tokens)
        if narrow_new <= self.cost.tokens_within(self.keystroke_prefill_ms):
            return narrow
        return narrow if wide_new > self.cost.tokens_within(KEYSTROKE_START_MS) else wide

    def _keystroke_candidate(
        self, request: CompletionRequest, budget: int
    ) -> tuple[PromptPlan, int]:
        """The keystroke prompt with a prefix window of `budget` tokens, and its new tokens."""
        parts = self.builder.parts(
            request.doc_id, request.prefix, request.suffix, request.line, budget
        )
        slot = self._keystroke_slot(parts)
        prompt = self._keystroke_layout(parts, slot.cached)
        new = len(prompt.tokens) - slot.reuse(prompt.tokens)
        narrow = budget < self.keystroke_wide_tokens
        return PromptPlan(replace(prompt, narrow=narrow), slot), new

    def _keystroke_slot(self, parts: PromptParts) -> SlotPlan:
        """Where a keystroke prompt goes: matched on its FIM head (the whole-suffix layout)
        and on its plain prefix (the CPU layout), whichever a slot or snapshot holds more of."""
        heads = [parts.head]
        if parts.plain_head and list(parts.plain_head) != parts.head:
            heads.append(list(parts.plain_head))
        plans = [(self.slots.plan_keystroke(head), head) for head in heads]
        return max(plans, key=lambda p: p[0].reuse(p[1]))[0]

    def _keystroke_layout(self, parts: PromptParts, cached: list[int]) -> Prompt:
        if not parts.suffix_units:
            return self.builder.assemble(parts)
        if self.template.layout == "psm" and not self._whole_suffix_affordable(parts, cached):
            return self.builder.plain(parts)
        return self.builder.assemble(parts)

    def _whole_suffix_affordable(self, parts: PromptParts, cached: list[int]) -> bool:
        """Whether a keystroke can re-decode the whole suffix within its prefill budget.

        This is the cost of the quality-first layout: the suffix sits after the edit point, so
        a keystroke re-decodes all the suffix it keeps. On a GPU the budget covers it. On a CPU
        it does not, and a suffix cut after a few lines is worse than none (measured: first-line
        exact match 0.34 with 4 lines, 0.37 with none, 0.45 with all). So a CPU keystroke
        continues the prefix as plain code (the cheapest prompt, as good as no suffix) and the
        pause refresh, in its own KV slot, brings the whole suffix.
        """
        allowed = self.cost.tokens_within(self.keystroke_prefill_ms)
        return self._new_tokens(parts, len(parts.suffix_units), cached) <= allowed

    def _new_tokens(self, parts: PromptParts, n_units: int, cached: list[int]) -> int:
        """Prompt tokens a prefill with n_units of suffix would decode, given the cache."""
        lcp_head = common_prefix_len(cached, parts.head)
        if lcp_head < len(parts.head):  # the usual keystroke: everything after the edit is new
            return (
                len(parts.head)
                - lcp_head
                + sum(parts.suffix_unit_tokens[:n_units])
                + len(parts.tail)
            )
        tokens = self.builder.assemble(parts, n_units).tokens  # the same state again: exact
        return len(tokens) - common_prefix_len(cached, tokens)

    # --- phase 2: prefill -------------------------------------------------------------------
    def prefill_chunk_tokens(self, background: bool = False, full: bool = False) -> int:
        """Chunk size: about PREFILL_CHUNK_MS of work, so a cancel waits at most that long
        (less for background work, more for a full prompt that a cancel aborts at once)."""
        if background:
            budget_ms = BACKGROUND_CHUNK_MS
        else:
            budget_ms = FULL_CHUNK_MS if full else PREFILL_CHUNK_MS
        within = self.cost.tokens_within(budget_ms)
        return max(MIN_CHUNK_TOKENS, min(self.chunk_tokens, within))

    def prefill(
        self,
        tokens: list[int],
        cancel: CancelToken,
        *,
        slot: SlotPlan | None = None,
        stable: int = 0,
        heal: bytes = b"",
        chunk_tokens: int | None = None,
        doc_id: str = "",
    ) -> tuple[int, int, int, float]:
        """Make the slot hold `tokens` (the full-prompt slot when none is planned); returns
        (first token, reused, new, ms).

        Tokens before `stable` are the text before the cursor, which the next keystroke will
        share: a cancel stops them at a chunk boundary and keeps what is done (so typing fast
        over a cold prompt still warms the cache). The rest is thrown away by the next
        keystroke anyway, so a cancel aborts it at once (llama.cpp's abort callback).
        """
        start = time.perf_counter()
        plan = slot or self.slots.plan_full()
        seq = self.last_slot = plan.slot
        if not self.slots.fits(len(tokens)):
            raise native.DecodeError(f"prompt of {len(tokens)} tokens does not fit n_ctx")
        keep = min(plan.reuse(tokens), len(tokens) - 1)  # the last one gives the logits
        self._prefill_progress = (keep, 0)
        self.slots.prepare(plan, doc_id, keep)
        cached = self.slots.tokens(seq)
        todo = tokens[keep:]
        chunk_size = chunk_tokens or self.prefill_chunk_tokens()
        offset = 0
        while offset < len(todo):
            if cancel.cancelled:
                raise Cancelled()
            position = keep + offset
            # Chunks end at the stable boundary so the two kinds never share a chunk.
            end = min(len(todo), offset + chunk_size)
            if position < stable < keep + end:
                end = stable - keep
            chunk = todo[offset:end]
            offset = end
            self._abortable = position >= stable
            t = time.perf_counter()
            try:
                self.model.decode(chunk, len(cached), want_logits=offset >= len(todo), seq=seq)
            except native.DecodeAborted:
                self.model.kv_remove_from(len(cached), seq)  # drop half-written cells
                raise Cancelled() from None
            finally:
                self._abortable = True
            self.cost.observe(len(chunk), (time.perf_counter() - t) * 1000)
            cached.extend(chunk)
            self.prefill_chunks += 1
            self._prefill_progress = (keep, offset)
        first = self.model.argmax_last(self._healing_candidates(heal))
        return first, keep, len(todo), (time.perf_counter() - start) * 1000

    # --- phase 3: decode --------------------------------------------------------------------
    def decode_one_token(self, slot: int, token: int, heal: bytes = b"") -> int:
        """Append `token` to the slot's KV cache and return the greedy next token."""
        cached = self.slots.tokens(slot)
        self.model.decode([token], len(cached), want_logits=True, seq=slot)
        cached.append(token)
        self.decode_steps += 1
        return self.model.argmax_last(self._healing_candidates(heal))

    def _healing_candidates(self, heal: bytes) -> np.ndarray | None:
        """Tokens that agree with the text still to be healed (None: any token)."""
        if not heal:
            return None
        if self._vocab is None:
            self._vocab = VocabIndex(self.model.n_vocab, self.model.token_piece)
        return self._vocab.candidates(heal)

    def decode_n_tokens(
        self,
        slot: int,
        first: int,
        max_tokens: int,
        policy: StopPolicy,
        cancel: CancelToken,
        on_text: OnText | None,
        heal: bytes = b"",
    ) -> tuple[str, int, str]:
        """Greedy decode from `first`; returns (text, tokens generated, stop reason).

        With `heal`, the first tokens re-create that text (the prompt's last token, taken out)
        and only what follows it is the suggestion.
        """
        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        text = ""
        token = first
        generated = 0
        stop_ids = self.template.stop_tokens
        cached = self.slots.tokens(slot)
        while True:
            if token in stop_ids or self.model.is_eog(token):
                return text, generated, "eog"
            generated += 1
            piece = self.model.token_piece(token)
            if heal:
                done = min(len(heal), len(piece))
                piece, heal = piece[done:], heal[done:]
            text += utf8.decode(piece)
            decision = policy.check(text)
            if decision.stop:
                return (
                    text[: decision.keep] if decision.keep >= 0 else text,
                    generated,
                    decision.reason,
                )
            if on_text is not None:
                on_text(text)
            if generated >= max_tokens:
                return text, generated, "max_tokens"
            if cancel.cancelled:
                return text, generated, "cancelled"
            if not self.slots.fits(len(cached) + 1):
                return text, generated, "context_full"
            try:
                token = self.decode_one_token(slot, token, heal)
            except native.DecodeAborted:
                self.model.kv_remove_from(len(cached), slot)
                return text, generated, "cancelled"

    def forget_document(self, doc_id: str) -> None:
        """A closed document's KV snapshots go (called on the model thread)."""
        with self._lock:
            self.slots.forget(doc_id)

    def kv_status(self) -> dict[str, object] | None:
        return self.slots.status()


def _template_of(model: native.NativeModel) -> FimTemplate:
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
