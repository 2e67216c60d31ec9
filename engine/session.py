"""The resident model: the one owner of the llama.cpp context and its KV cache.

Everything else asks `ModelSession.complete`. Its phases read top to bottom:

    build_prompt  -> the FIM prompt, its suffix sized to this request's prefill budget
    prefill       -> reuse the longest common prefix with what the KV cache holds, decode the
                     rest in chunks with a cancellation check between chunks (and llama.cpp's
                     abort callback inside a chunk on the CPU); its last logits give token one
    decode_n_tokens -> greedy decode one token at a time until a stop rule fires

Not thread-safe by design: the LSP server runs it on a single worker thread, the CLI directly.
A `CancelToken` may be set from any thread; work stops within one prefill chunk (on the CPU
within milliseconds) or one decode step.
"""

from __future__ import annotations

import codecs
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import llama_cpp
import numpy as np

from ghostfim.engine import native
from ghostfim.engine.context import ExtraContext, ExtraContextBuilder
from ghostfim.engine.cursor import CursorContext
from ghostfim.engine.fim import FimTemplate, detect_template
from ghostfim.engine.postprocess import clean_suggestion
from ghostfim.engine.prompt import Prompt, PromptBuilder, PromptParts, common_prefix_len
from ghostfim.engine.speed import PrefillCostModel
from ghostfim.engine.stops import Multiline, StopPolicy
from ghostfim.engine.timings import Timings
from ghostfim.engine.vocab import VocabIndex

log = logging.getLogger("ghostfim.session")

# KV slots (llama.cpp sequences sharing one pool of cells): full prompts (the pause refresh,
# explicit invocations) keep their own slot, so a refresh never evicts the prompt the next
# keystroke extends, and vice versa. Keystroke prompts have two slots: the one typing extends,
# and one where a wider window is prepared in the background (see KEYSTROKE_START_MS).
SLOT_FULL = 0
KEYSTROKE_SLOTS = (1, 2)
N_SLOTS = 3
# Cells each slot keeps free beyond its prompt: what is generated after it, and some slack.
GENERATION_ROOM = 256 + 64
# A keystroke prompt's prefix window is what a cold prefill decodes in about this long, so the
# first keystroke at a new place shows ghost text soon (on a GPU: the whole prefix budget) ...
KEYSTROKE_START_MS = 500.0
# ... and once the user is typing there, a background job prepares a window this much wider
# (in the other keystroke slot), which keystrokes move to as soon as it is ready.
KEYSTROKE_WIDE_MS = 1500.0
MIN_START_TOKENS = 24
MIN_USEFUL_REUSE = 8  # cached tokens a prompt must share with a slot to be written into it
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

PromptMode = Literal["keystroke", "full"]
OnText = Callable[[str], None]


class Cancelled(Exception):
    """The request's CancelToken was set; the KV cache holds only fully decoded tokens."""


class CancelToken:
    """A flag the engine polls between chunks/steps (and llama.cpp between graph nodes)."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


NEVER_CANCELLED = CancelToken()


@dataclass(frozen=True)
class CompletionRequest:
    prefix: str  # document text before the cursor
    suffix: str  # document text after the cursor
    doc_id: str = ""  # keeps the prefix window sticky per document
    cursor_line: int | None = None  # 0-based; counted from prefix when None
    mode: PromptMode = "full"  # "keystroke": suffix within the prefill budget
    max_tokens: int = 64
    multiline: Multiline = "auto"
    background: bool = False  # droppable work: a cancel may abort any part of the prefill
    postprocess: bool = True  # the clean-up rules of engine/postprocess.py (off: benchmark)
    # Chunks of other files for a full prompt (engine/context.py); keystroke prompts ignore it.
    extra_context: ExtraContext | None = None


@dataclass
class Completion:
    text: str  # cleaned suggestion (what an editor shows)
    raw_text: str  # what the model generated, cut by the stop rules
    timings: Timings
    stop_reason: str
    cancelled: bool = False
    mode: PromptMode = "full"
    # The keystroke prompt used the narrow start window: a background prefill of the wide
    # window (the same request, background=True, max_tokens=0) makes the next keystrokes better.
    widen: bool = False


@dataclass(frozen=True)
class ModelInfo:
    name: str
    path: str
    preset: str | None
    device: str  # "cpu" or "cuda (<gpu name>)"
    n_gpu_layers: int
    family: str  # FIM template family
    n_ctx: int

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "path": self.path,
            "preset": self.preset,
            "device": self.device,
            "n_gpu_layers": self.n_gpu_layers,
            "fim": self.family,
            "n_ctx": self.n_ctx,
        }


class ModelSession:
    """One loaded model, one context, one KV cache (sequence 0) and the tokens it holds."""

    def __init__(
        self,
        model: native.NativeModel,
        info: ModelInfo,
        *,
        prefix_tokens: int = 768,
        suffix_tokens: int = 256,
        keystroke_prefill_ms: float = 80.0,
        chunk_tokens: int | None = None,
    ) -> None:
        self.model = model
        self.info = info
        self.template: FimTemplate = _template_of(model)
        room = model.n_ctx // N_SLOTS - GENERATION_ROOM
        prefix_tokens = max(16, min(prefix_tokens, int(room * 0.7 / 1.25)))
        suffix_tokens = max(0, min(suffix_tokens, room - int(prefix_tokens * 1.25)))
        self.builder = PromptBuilder(
            self.tokenize,
            self.template,
            piece=model.token_piece,
            prefix_tokens=prefix_tokens,
            suffix_tokens=suffix_tokens,
        )
        self.extra = ExtraContextBuilder(self.tokenize, self.template)  # other files' chunks
        self._vocab: VocabIndex | None = None  # built on first use (token healing)
        self.keystroke_prefill_ms = keystroke_prefill_ms
        self.chunk_tokens = min(chunk_tokens or model.n_batch, model.n_batch)
        self.cost = PrefillCostModel.from_env()
        self._slots: list[list[int]] = [[] for _ in range(N_SLOTS)]  # tokens each slot holds
        self._slot = KEYSTROKE_SLOTS[0]
        self._slot_used = [0] * N_SLOTS  # when each slot last prefilled (LRU eviction)
        self._uses = 0
        self.prefix_tokens = prefix_tokens
        # Keystroke windows (see KEYSTROKE_START_MS): equal, and the whole budget, until
        # calibration says the machine cannot prefill that much at once.
        self.keystroke_start_tokens = prefix_tokens
        self.keystroke_wide_tokens = prefix_tokens
        self.calibrated_ms_per_token: float | None = None  # prefill speed measured at load
        self.decode_steps = 0  # one-token decodes run (counted so tests can see work stop)
        self.prefill_chunks = 0
        self._active: CancelToken = NEVER_CANCELLED
        self._abortable = False  # whether a cancel may interrupt the decode in progress
        self._prefill_progress = (0, 0)  # (reused, decoded so far) of the prefill in progress
        self._abort_cb = llama_cpp.ggml_abort_callback(self._should_abort)
        self._lock = threading.Lock()

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
        **session_options: float,
    ) -> ModelSession:
        """Load a GGUF file; n_gpu_layers=-1 offloads every layer when a CUDA GPU is usable."""
        from ghostfim.engine.device import cuda_gpu_name, has_usable_cuda_gpu

        if n_gpu_layers < 0:
            n_gpu_layers = 999 if has_usable_cuda_gpu() else 0
        on_gpu = n_gpu_layers > 0 and native.supports_gpu_offload()
        model = native.load(
            path,
            n_ctx=n_ctx,
            n_batch=128 if on_gpu else 256,
            n_gpu_layers=n_gpu_layers if on_gpu else 0,
            n_seq=N_SLOTS,
        )
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
        session = cls(model, info, **session_options)  # type: ignore[arg-type]
        session.info = replace(info, family=session.template.family)
        session.model.set_abort(session._abort_cb)
        if calibrate:
            session.calibrate()
            session._healing_candidates(b"_")  # index the vocabulary now, not on a keystroke
        return session

    def close(self) -> None:
        with self._lock:
            self.model.set_abort(None)
            self.model.close()
            self._slots = [[] for _ in range(N_SLOTS)]

    def _should_abort(self, _data: object) -> bool:
        return self._abortable and self._active.cancelled

    def full_suffix_tokens(self, suffix: str) -> int:
        """Suffix tokens a full prompt would hold (0 for templates without a suffix)."""
        if not self.template.uses_suffix:
            return 0
        _, counts = self.builder.suffix_units(suffix)
        return max(0, sum(counts) - 2)  # whole-string tokenization may merge a little

    def tokenize(self, text: str) -> list[int]:
        return self.model.tokenize(text, add_special=False, parse_special=False)

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
        self._slots = [[] for _ in range(N_SLOTS)]
        self.calibrated_ms_per_token = self.cost.per_token_ms
        wide = self.cost.tokens_within(KEYSTROKE_WIDE_MS) // 64 * 64
        self.keystroke_wide_tokens = min(self.prefix_tokens, max(MIN_WIDE_TOKENS, wide))
        start = self.cost.tokens_within(KEYSTROKE_START_MS) // 8 * 8
        self.keystroke_start_tokens = min(self.keystroke_wide_tokens, max(MIN_START_TOKENS, start))
        log.info(
            "prefill cost: %.1f ms + %.2f ms/token; keystroke windows %d/%d tokens",
            self.cost.fixed_ms,
            self.cost.per_token_ms,
            self.keystroke_start_tokens,
            self.keystroke_wide_tokens,
        )

    @property
    def cached(self) -> list[int]:
        """The tokens the current slot's KV cells hold, in order."""
        return self._slots[self._slot]

    def use_slot(self, slot: int) -> None:
        self._slot = slot

    def _best_keystroke_slot(self, tokens: list[int]) -> int:
        """The keystroke slot whose cache shares most of `tokens`; when neither shares a
        useful part (a BOS token is no reason to evict), the one used longest ago: the other
        holds what the user is typing into."""

        def shared(slot: int) -> int:
            n = common_prefix_len(self._slots[slot], tokens)
            return n if n >= MIN_USEFUL_REUSE else 0

        return max(KEYSTROKE_SLOTS, key=lambda s: (shared(s), -self._slot_used[s]))

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
        prompt = self.build_prompt(request)
        timings.prompt_ms = (time.perf_counter() - start) * 1000
        timings.suffix_tokens = prompt.suffix_tokens
        timings.extra_tokens = prompt.extra_tokens

        def finish(text: str, raw: str, reason: str) -> Completion:
            timings.total_ms = (time.perf_counter() - start) * 1000
            log.debug(
                "%s slot %d%s: %d prompt tokens, %d reused, %d new, %d generated, %s, %.1f ms",
                request.mode,
                self._slot,
                " narrow" if prompt.narrow else "",
                len(prompt.tokens),
                timings.prefill_reused_tokens,
                timings.prefill_new_tokens,
                timings.decode_tokens,
                reason,
                timings.total_ms,
            )
            return Completion(
                text,
                raw,
                timings,
                reason,
                cancelled=reason == "cancelled",
                mode=request.mode,
                widen=prompt.narrow,
            )

        if not prompt.tokens:  # an empty document with a model that has no BOS or FIM tokens
            return finish("", "", "empty_prompt")
        if (
            request.max_tokens <= 0
            and common_prefix_len(self.cached, prompt.tokens) >= len(prompt.tokens) - 1
        ):
            return finish("", "", "prefill_only")  # already prepared: nothing to decode
        try:
            # Background work (refresh, prefetch, warm-up) may be aborted anywhere, and so may
            # a full prompt: the keystrokes that cancel it use their own slots, so finishing
            # its chunk would not help them.
            full = request.mode == "full"
            stable = 0 if request.background or full else prompt.stable_tokens
            first, reused, new, prefill_ms = self.prefill(
                prompt.tokens,
                cancel,
                stable=stable,
                heal=prompt.heal,
                chunk_tokens=self.prefill_chunk_tokens(request.background, full),
            )
        except Cancelled:
            # What was decoded before the cancel stays in the cache: count it.
            timings.prefill_reused_tokens, timings.prefill_new_tokens = self._prefill_progress
            timings.prefill_ms = (time.perf_counter() - start) * 1000 - timings.prompt_ms
            return finish("", "", "cancelled")
        timings.prefill_reused_tokens, timings.prefill_new_tokens = reused, new
        timings.prefill_ms = prefill_ms
        timings.ttft_ms = (time.perf_counter() - start) * 1000
        if request.max_tokens <= 0:
            return finish("", "", "prefill_only")

        ctx = CursorContext.around(request.prefix, request.suffix)
        policy = StopPolicy.for_context(request.multiline, ctx)
        decode_start = time.perf_counter()
        raw, n_generated, reason = self.decode_n_tokens(
            first, request.max_tokens, policy, cancel, on_text, heal=prompt.heal
        )
        timings.decode_tokens = n_generated
        timings.decode_ms = (time.perf_counter() - decode_start) * 1000
        return finish(clean_suggestion(raw, ctx, request.postprocess), raw, reason)

    # --- phase 1: the prompt ----------------------------------------------------------------
    def build_prompt(self, request: CompletionRequest) -> Prompt:
        cursor_line = request.cursor_line
        if cursor_line is None:
            cursor_line = request.prefix.count("\n")
        if request.mode == "full":
            self.use_slot(SLOT_FULL)
            parts = self.builder.parts(
                request.doc_id, request.prefix, request.suffix, cursor_line, self.prefix_tokens
            )
            # --- context from other files, before the FIM prefix (engine/context.py) ---
            room = (
                self.model.n_ctx // N_SLOTS
                - GENERATION_ROOM
                - int(self.prefix_tokens * 1.25)
                - self.builder.suffix_budget
            )
            parts, n_extra = self.extra.apply(parts, request.extra_context, self.cost, room)
            return replace(self.builder.assemble(parts), extra_tokens=n_extra)
            # --- end of context from other files ---
        return self._keystroke_prompt(request, cursor_line)

    def _keystroke_prompt(self, request: CompletionRequest, cursor_line: int) -> Prompt:
        """The widest keystroke window that is affordable now.

        Where the KV cache (either keystroke slot) holds the wide window, a keystroke costs its
        typed tokens; at a new place the wide window costs seconds on a CPU, so the keystroke
        takes the start window (about KEYSTROKE_START_MS cold) and reports `widen`, and a
        background job prepares the wide one in the other slot. Background requests always
        take the wide window: that is how it gets prepared.
        """
        allowance = self.cost.tokens_within(KEYSTROKE_START_MS)
        budgets = [self.keystroke_wide_tokens]
        if not request.background and self.keystroke_start_tokens < self.keystroke_wide_tokens:
            budgets.append(self.keystroke_start_tokens)
        for budget in budgets:
            parts = self.builder.parts(
                request.doc_id, request.prefix, request.suffix, cursor_line, budget
            )
            self.use_slot(self._best_keystroke_slot(list(parts.plain_head) or parts.head))
            prompt = self._keystroke_layout(parts)
            new = len(prompt.tokens) - common_prefix_len(self.cached, prompt.tokens)
            if budget == budgets[-1] or new <= allowance:
                return replace(prompt, narrow=budget < self.keystroke_wide_tokens)
        raise AssertionError("unreachable: the last budget always returns")

    def _keystroke_layout(self, parts: PromptParts) -> Prompt:
        if not parts.suffix_units:
            return self.builder.assemble(parts)
        if self.template.layout == "psm" and not self._whole_suffix_affordable(parts):
            return self.builder.plain(parts)
        return self.builder.assemble(parts)

    def _whole_suffix_affordable(self, parts: PromptParts) -> bool:
        """Whether a keystroke can re-decode the whole suffix within its prefill budget.

        This is the cost of the quality-first layout: the suffix sits after the edit point, so
        a keystroke re-decodes all the suffix it keeps. On a GPU the budget covers it. On a CPU
        it does not, and a suffix cut after a few lines is worse than none (measured: first-line
        exact match 0.34 with 4 lines, 0.37 with none, 0.45 with all). So a CPU keystroke
        continues the prefix as plain code (the cheapest prompt, as good as no suffix) and the
        pause refresh, in its own KV slot, brings the whole suffix.
        """
        allowed = self.cost.tokens_within(self.keystroke_prefill_ms)
        return self._new_tokens(parts, len(parts.suffix_units)) <= allowed

    def _new_tokens(self, parts: PromptParts, n_units: int) -> int:
        """Prompt tokens a prefill with n_units of suffix would decode, given the cache."""
        lcp_head = common_prefix_len(self.cached, parts.head)
        if lcp_head < len(parts.head):  # the usual keystroke: everything after the edit is new
            return (
                len(parts.head)
                - lcp_head
                + sum(parts.suffix_unit_tokens[:n_units])
                + len(parts.tail)
            )
        tokens = self.builder.assemble(parts, n_units).tokens  # the same state again: exact
        return len(tokens) - common_prefix_len(self.cached, tokens)

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
        stable: int = 0,
        heal: bytes = b"",
        chunk_tokens: int | None = None,
    ) -> tuple[int, int, int, float]:
        """Make the KV cache hold `tokens`; returns (first token, reused, new, ms).

        Tokens before `stable` are the text before the cursor, which the next keystroke will
        share: a cancel stops them at a chunk boundary and keeps what is done (so typing fast
        over a cold prompt still warms the cache). The rest is thrown away by the next
        keystroke anyway, so a cancel aborts it at once (llama.cpp's abort callback).
        """
        start = time.perf_counter()
        keep = common_prefix_len(self.cached, tokens)
        if keep >= len(tokens):
            keep = len(tokens) - 1  # the last prompt token must be decoded for its logits
        self._prefill_progress = (keep, 0)
        if keep < len(self.cached):
            self.model.kv_remove_from(keep, self._slot)
            del self.cached[keep:]
        todo = tokens[keep:]
        self._uses += 1
        self._slot_used[self._slot] = self._uses
        if len(tokens) + 1 >= self.model.n_ctx // N_SLOTS:
            raise native.DecodeError(f"prompt of {len(tokens)} tokens does not fit n_ctx")
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
                self.model.decode(
                    chunk, len(self.cached), want_logits=offset >= len(todo), seq=self._slot
                )
            except native.DecodeAborted:
                self.model.kv_remove_from(len(self.cached), self._slot)  # drop half-written cells
                raise Cancelled() from None
            finally:
                self._abortable = True
            self.cost.observe(len(chunk), (time.perf_counter() - t) * 1000)
            self.cached.extend(chunk)
            self.prefill_chunks += 1
            self._prefill_progress = (keep, offset)
        first = self.model.argmax_last(self._healing_candidates(heal))
        return first, keep, len(todo), (time.perf_counter() - start) * 1000

    # --- phase 3: decode --------------------------------------------------------------------
    def decode_one_token(self, token: int, heal: bytes = b"") -> int:
        """Append `token` to the KV cache and return the greedy next token."""
        self.model.decode([token], len(self.cached), want_logits=True, seq=self._slot)
        self.cached.append(token)
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
            if len(self.cached) + 2 >= self.model.n_ctx // N_SLOTS:
                return text, generated, "context_full"
            try:
                token = self.decode_one_token(token, heal)
            except native.DecodeAborted:
                self.model.kv_remove_from(len(self.cached), self._slot)
                return text, generated, "cancelled"


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
