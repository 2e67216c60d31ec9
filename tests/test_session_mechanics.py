"""KV-cache mechanics on a tiny random-weight model the test suite writes itself."""

from __future__ import annotations

from dataclasses import replace

from ghostfim.engine.backend import CancelToken, CompletionRequest
from ghostfim.engine.local.kvslots import SLOT_FULL
from ghostfim.engine.local.session import ModelSession
from ghostfim.engine.local.speed import PrefillCostModel


def test_reuses_longest_common_prefix_and_tracks_cached_tokens(tiny_session: ModelSession) -> None:
    s = tiny_session
    prompt = s.tokenize("def add(a, b):\n    return a + b\n" * 4)
    _, reused, new, _ = s.prefill(prompt, CancelToken())
    assert (reused, new) == (0, len(prompt)) or reused < len(prompt)
    assert s.slots.tokens(SLOT_FULL) == prompt
    longer = prompt + s.tokenize("def sub(a, b):")
    _, reused, new, _ = s.prefill(longer, CancelToken())
    assert reused == len(prompt) and new == len(longer) - len(prompt)
    edited = prompt[:10] + s.tokenize("#") + prompt[10:]
    _, reused, _, _ = s.prefill(edited, CancelToken())
    assert reused == 10 and s.slots.tokens(SLOT_FULL) == edited


def test_same_prompt_twice_decodes_one_token_for_its_logits(tiny_session: ModelSession) -> None:
    s = tiny_session
    prompt = s.tokenize("for i in range(10):\n    print(i)\n")
    s.prefill(prompt, CancelToken())
    _, reused, new, _ = s.prefill(prompt, CancelToken())
    assert (reused, new) == (len(prompt) - 1, 1)


def test_cancelled_before_start_does_no_work(tiny_session: ModelSession) -> None:
    cancel = CancelToken()
    cancel.cancel()
    chunks = tiny_session.prefill_chunks
    c = tiny_session.complete(
        CompletionRequest(prefix="x = 1\n" * 50, suffix="", doc_id="c"), cancel
    )
    assert c.cancelled and tiny_session.prefill_chunks == chunks


def test_prompt_uses_the_models_fim_tokens(tiny_session: ModelSession) -> None:
    t = tiny_session.template
    assert t.family == "qwen" and t.layout == "psm"
    request = CompletionRequest(prefix="a = 1\nb = ", suffix="\nc = 3\n")
    p = tiny_session.build_prompt(request).prompt
    assert p.tokens[0] == t.pre and p.tokens[-1] == t.mid and t.suf in p.tokens


def test_document_longer_than_the_context_is_truncated_not_a_failure(
    tiny_session: ModelSession,
) -> None:
    huge = "".join(f"value_{i} = {i} * {i}\n" for i in range(5000))
    c = tiny_session.complete(CompletionRequest(prefix=huge, suffix=huge, max_tokens=4))
    assert not c.cancelled
    assert c.timings.prefill_new_tokens + c.timings.prefill_reused_tokens < tiny_session.model.n_ctx


def test_generation_stops_at_max_tokens(tiny_session: ModelSession) -> None:
    c = tiny_session.complete(
        CompletionRequest(prefix="x = ", suffix="", max_tokens=3, multiline="always")
    )
    assert c.timings.decode_tokens <= 3


def test_new_place_starts_narrow_and_moves_to_the_wide_window_prepared_in_background(
    tiny_session: ModelSession,
) -> None:
    s = tiny_session
    saved = (s.keystroke_start_tokens, s.keystroke_wide_tokens, s.cost)
    # A slow machine (frozen, so the tiny model's real speed does not refit it): a keystroke
    # may decode ~20 tokens; the wide window is far more.
    s.keystroke_start_tokens, s.keystroke_wide_tokens = 24, 160
    s.cost = FrozenCost(fixed_ms=40.0, per_token_ms=20.0)
    try:
        prefix = "".join(f"total_{i} = compute(total_{i - 1}, {i})\n" for i in range(1, 40))
        request = CompletionRequest(
            prefix=prefix + "resu", suffix="\n", doc_id="wide", mode="keystroke", max_tokens=2
        )
        first = s.complete(request)
        narrow_slot = s.last_slot
        assert first.widen and first.timings.prefill_new_tokens <= 80
        # The background job prepares the wide window in the other keystroke slot.
        prepared = s.complete(replace(request, background=True, max_tokens=0))
        assert not prepared.widen and s.last_slot != narrow_slot
        assert prepared.timings.prefill_new_tokens > 100
        # The next keystroke finds it in the cache and uses it: only the typed tokens are new.
        typed = s.complete(replace(request, prefix=prefix + "resul"))
        assert not typed.widen and s.last_slot != narrow_slot
        assert typed.timings.prefill_new_tokens <= 3
        assert typed.timings.prefill_reused_tokens > 100
        # Preparing again costs nothing.
        again = s.complete(replace(request, prefix=prefix + "resul", background=True, max_tokens=0))
        assert again.timings.prefill_new_tokens == 0
    finally:
        s.keystroke_start_tokens, s.keystroke_wide_tokens, s.cost = saved


class FrozenCost(PrefillCostModel):
    def observe(self, n_tokens: int, ms: float) -> None:
        pass
