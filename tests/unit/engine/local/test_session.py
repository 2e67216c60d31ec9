"""engine/local/session.py: the mechanism (prefill with LCP reuse, chunks, cancels; decode;
finish), the FIM template from the model's own vocabulary, and the plan carried out, on tiny
random-weight models the test suite writes itself (mechanics only, no quality)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from ghostfim.engine.backend import Cancelled, CancelToken, CompletionRequest
from ghostfim.engine.config import DEFAULT_BUDGETS, Budgets
from ghostfim.engine.context.ring import ContextChunk, ExtraContext
from ghostfim.engine.local import native
from ghostfim.engine.local.kvslots import SLOT_FULL
from ghostfim.engine.local.loading import open_model_file
from ghostfim.engine.local.plan import Windows
from ghostfim.engine.local.session import DevicePolicy, ModelSession, template_of
from ghostfim.engine.local.speed import FORCED_COST_ENV, PrefillCostModel
from ghostfim.engine.prompt.fim import detect_template
from harness.gguf_factory import make_tiny_gguf
from tests.support.sessions import full_plan, prefill, set_cost

GPU_LIKE = "3+0.02"  # ms per decode call + ms per token: a 1.5B model on an H200


# --- prefill: the longest common prefix, chunks, cancels ------------------------------------------
def test_reuses_longest_common_prefix_and_tracks_cached_tokens(tiny_session: ModelSession) -> None:
    s = tiny_session
    prompt = s.tokenize("def add(a, b):\n    return a + b\n" * 4)
    reused, new = prefill(s, prompt)
    assert (reused, new) == (0, len(prompt)) or reused < len(prompt)
    assert s.slots.tokens(SLOT_FULL) == prompt
    longer = prompt + s.tokenize("def sub(a, b):")
    reused, new = prefill(s, longer)
    assert reused == len(prompt) and new == len(longer) - len(prompt)
    edited = prompt[:10] + s.tokenize("#") + prompt[10:]
    reused, _ = prefill(s, edited)
    assert reused == 10 and s.slots.tokens(SLOT_FULL) == edited


def test_same_prompt_twice_decodes_one_token_for_its_logits(tiny_session: ModelSession) -> None:
    s = tiny_session
    prompt = s.tokenize("for i in range(10):\n    print(i)\n")
    prefill(s, prompt)
    assert prefill(s, prompt) == (len(prompt) - 1, 1)


def test_cancelled_before_start_does_no_work(tiny_session: ModelSession) -> None:
    cancel = CancelToken()
    cancel.cancel()
    chunks = tiny_session.prefill_chunks
    c = tiny_session.complete(
        CompletionRequest(prefix="x = 1\n" * 50, suffix="", doc_id="c"), cancel
    )
    assert c.cancelled and c.stop_reason == "cancelled" and tiny_session.prefill_chunks == chunks


def test_a_prompt_that_does_not_fit_is_refused(tiny_session: ModelSession) -> None:
    too_long = [1] * tiny_session.slots.cells_per_slot
    with pytest.raises(native.DecodeError, match="does not fit"):
        prefill(tiny_session, too_long)


def test_cancel_stops_between_decode_calls_without_the_abort_callback(tiny_gguf: Path) -> None:
    session = open_model_file(tiny_gguf, calibrate=False)
    try:
        session.model.set_abort(None)  # what a CUDA build gets: nothing stops a decode inside
        session.policy = DevicePolicy(n_batch=session.model.n_batch, abort_callback=False)
        tokens = session.tokenize("".join(f"item_{i} = compute({i})\n" for i in range(100)))
        chunk = 32
        assert len(tokens) > 8 * chunk

        # The cancel arrives while the third chunk decodes (as the next keystroke would).
        cancel, done = CancelToken(), 0
        observe = session.cost.observe

        def observe_then_cancel(n_tokens: int, ms: float) -> None:
            nonlocal done
            observe(n_tokens, ms)
            done += 1
            if done == 3:
                cancel.cancel()

        session.cost.observe = observe_then_cancel  # type: ignore[method-assign]
        chunks = session.prefill_chunks
        with pytest.raises(Cancelled):
            prefill(session, tokens, cancel, chunk_tokens=chunk)
        session.cost.observe = observe  # type: ignore[method-assign]
        assert session.prefill_chunks - chunks == 3  # stopped at the next boundary
        held = session.slots.tokens(SLOT_FULL)
        assert held == tokens[: 3 * chunk]  # whole chunks kept, nothing half-written
        reused, new = prefill(session, tokens, chunk_tokens=chunk)
        assert reused == 3 * chunk and new == len(tokens) - 3 * chunk  # and reused after
    finally:
        session.close()


def test_chunks_end_at_the_stable_boundary(tiny_session: ModelSession) -> None:
    s = tiny_session
    s.slots.clear()
    s.model.kv_clear()
    tokens = s.tokenize("".join(f"v{i} = {i}\n" for i in range(12)))
    stable = 7
    plan = full_plan(s, tokens, stable=stable, chunk_tokens=5)
    chunks = s.prefill_chunks
    s.prefill(plan, CancelToken())
    # 0..5, 5..7 (the boundary), then chunks of 5 after it: never one across it.
    expected = 2 + -(-(len(tokens) - 1 - stable) // 5)
    assert s.prefill_chunks - chunks == expected


# --- the request, end to end ----------------------------------------------------------------------
def test_prompt_uses_the_models_fim_tokens(tiny_session: ModelSession) -> None:
    t = tiny_session.template
    assert t.family == "qwen" and t.layout == "psm"
    assert tiny_session.info.family == "qwen" and tiny_session.info.memory_bytes > 0
    request = CompletionRequest(prefix="a = 1\nb = ", suffix="\nc = 3\n")
    p = tiny_session.plan(request).prompt
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
    assert c.timings.total_ms >= c.timings.ttft_ms > 0


def test_generation_gives_up_where_the_models_chance_of_the_text_falls_below(
    tiny_session: ModelSession,
) -> None:
    request = CompletionRequest(prefix="q = ", suffix="", max_tokens=6, multiline="always")
    whole = tiny_session.complete(request)
    assert whole.timings.decode_tokens >= 3 and whole.stop_reason != "unsure"
    p = whole.token_probs
    assert p[1] < 0.999
    # Under the product of the first two tokens' probabilities: it stops after the second.
    given_up = tiny_session.complete(replace(request, give_up_below=p[0] * p[1] * 1.0001))
    assert given_up.stop_reason == "unsure"
    assert given_up.timings.decode_tokens == 2
    assert given_up.token_ids == whole.token_ids[:2]


def test_max_tokens_zero_only_prefills(tiny_session: ModelSession) -> None:
    request = CompletionRequest(prefix="y = 2\nz = ", suffix="", doc_id="p", max_tokens=0)
    first = tiny_session.complete(request)
    assert first.stop_reason == "prefill_only" and first.text == "" and first.raw_text == ""
    again = tiny_session.complete(request)  # already prepared: nothing decoded at all
    assert again.stop_reason == "prefill_only" and again.timings.prefill_new_tokens == 0


def test_streamed_text_grows_to_the_raw_text(tiny_session: ModelSession) -> None:
    seen: list[str] = []
    c = tiny_session.complete(
        CompletionRequest(prefix="q = ", suffix="", max_tokens=6, multiline="always"),
        on_text=lambda text, _: seen.append(text),
    )
    assert all(b.startswith(a) for a, b in itertools.pairwise(seen))
    if seen:
        assert c.raw_text.startswith(seen[-1]) or seen[-1].startswith(c.raw_text)


def test_new_place_starts_narrow_and_moves_to_the_wide_window_prepared_in_background(
    tiny_session: ModelSession,
) -> None:
    s = tiny_session
    saved = (s.planner.windows, s.cost)
    # A slow machine (frozen, so the tiny model's real speed does not refit it): a keystroke
    # may decode ~2 tokens; the wide window is far more.
    s.planner.windows = Windows(24, 160)
    set_cost(s, FrozenCost(fixed_ms=40.0, per_token_ms=20.0))
    try:
        prefix = "".join(f"total_{i} = compute(total_{i - 1}, {i})\n" for i in range(1, 40))
        request = CompletionRequest(
            prefix=prefix + "resu", suffix="\n", doc_id="wide", mode="keystroke", max_tokens=2
        )
        first = s.complete(request)
        assert s.last_plan is not None
        narrow_slot = s.last_plan.slot.slot
        assert first.widen and first.timings.prefill_new_tokens <= 80
        # The background job prepares the wide window in the other keystroke slot.
        prepared = s.complete(replace(request, background=True, max_tokens=0))
        assert not prepared.widen and s.last_plan.slot.slot != narrow_slot
        assert prepared.timings.prefill_new_tokens > 100
        # The next keystroke finds it in the cache and uses it: only the typed tokens are new.
        typed = s.complete(replace(request, prefix=prefix + "resul"))
        assert not typed.widen and s.last_plan.slot.slot != narrow_slot
        assert typed.timings.prefill_new_tokens <= 3
        assert typed.timings.prefill_reused_tokens > 100
        # Preparing again costs nothing.
        again = s.complete(replace(request, prefix=prefix + "resul", background=True, max_tokens=0))
        assert again.timings.prefill_new_tokens == 0
    finally:
        s.planner.windows = saved[0]
        set_cost(s, saved[1])


class FrozenCost(PrefillCostModel):
    def observe(self, n_tokens: int, ms: float) -> None:
        pass


# --- budgets --------------------------------------------------------------------------------------
def test_budgets_are_clamped_to_a_slot_and_changed_in_place(tiny_gguf: Path) -> None:
    session = open_model_file(tiny_gguf, n_ctx=3 * 1024, calibrate=False)
    try:
        room = session.slots.prompt_room
        in_effect = session.set_budgets(Budgets(16384, 256, 80.0, 64))
        assert session.budgets == in_effect
        assert [c.budget for c in in_effect.clamps] == ["prefix_tokens", "suffix_tokens"]
        assert in_effect.effective.prefix_tokens < 16384 and str(room) in in_effect.clamps[0].reason
        assert session.builder.prefix_budget == in_effect.effective.prefix_tokens
        assert session.slots.snapshot_bytes == 64 * 1024 * 1024
        fits = session.set_budgets(Budgets(200, 100, 50.0, 8))
        assert fits.clamps == () and fits.effective == Budgets(200, 100, 50.0, 8)
        assert session.planner.keystroke_prefill_ms == 50.0
        assert session.planner.windows.wide_tokens <= 200
    finally:
        session.close()


# --- the GPU policy, without a GPU ----------------------------------------------------------------
@pytest.fixture
def gpu_like(tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelSession]:
    """A pinned prefill cost as fast as an H200's (GHOSTFIM_PREFILL_COST) on the tiny model."""
    monkeypatch.setenv(FORCED_COST_ENV, GPU_LIKE)
    session = open_model_file(tiny_gguf)
    yield session
    session.close()


def test_fast_prefill_takes_the_gpu_policy(gpu_like: ModelSession) -> None:
    s = gpu_like
    assert s.cost.forced and s.cost.per_token_ms == 0.02  # calibration did not move it
    assert s.model.n_batch == 128  # as on a GPU
    windows = s.planner.windows
    assert windows.start_tokens == windows.wide_tokens == s.budgets.effective.prefix_tokens
    assert s.budgets.effective.prefix_tokens == DEFAULT_BUDGETS.prefix_tokens


def test_keystroke_prompts_are_whole_suffix_fim_prompts(gpu_like: ModelSession) -> None:
    s = gpu_like
    t = s.template
    suffix = "".join(f"\ndef after_{i}(x):\n    return x + {i}\n" for i in range(12))
    prefix = "".join(f"value_{i} = {i}\n" for i in range(40)) + "total = "
    for typed in ("", "v", "va"):
        request = CompletionRequest(
            prefix + typed, suffix, doc_id="g", mode="keystroke", max_tokens=4
        )
        plan = s.plan(request)
        prompt = plan.prompt
        assert prompt.suffix_units_used == prompt.suffix_units_total > 10  # the whole suffix
        assert prompt.tokens[0] == t.pre and prompt.tokens[-1] == t.mid and t.suf in prompt.tokens
        assert not prompt.narrow
        done = s.complete(request)
        assert not done.suffix_cut and not done.widen  # no pause refresh, no widening needed


# --- extra context, carried out -------------------------------------------------------------------
@pytest.fixture(scope="module")
def roomy_session(tiny_gguf: Path) -> Iterator[ModelSession]:
    """The tiny model with room in its full-prompt slot for extra context."""
    session = open_model_file(tiny_gguf, n_ctx=3 * 2048)
    yield session
    session.close()


OTHER = (
    "def helper(values):\n"
    + "".join(f"    h_{i} = compute_h({i}, {i * 7})\n" for i in range(12))
    + "    return values\n"
)
CURRENT = "import os\n\n\ndef main():\n    total = helper([1, 2])\n    "


def request(
    mode: str = "full", extra: ExtraContext | None = None, **kw: object
) -> CompletionRequest:
    return CompletionRequest(
        prefix=CURRENT,
        suffix="\n    print(total)\n",
        doc_id="file:///p/main.py",
        mode=mode,  # type: ignore[arg-type]
        extra_context=extra,
        **kw,  # type: ignore[arg-type]
    )


def test_full_prompt_has_the_other_file_before_the_prefix(roomy_session: ModelSession) -> None:
    s = roomy_session
    t = s.template
    assert t.file_sep >= 0 and t.repo >= 0
    chunk = ContextChunk("util.py", OTHER, "file:///p/util.py")
    extra = ExtraContext((chunk,), "main.py", "p", budget=400)
    plain = s.plan(request()).prompt
    prompt = s.plan(request(extra=extra)).prompt
    expected_head = [
        t.repo,
        *s.tokenize("p\n"),
        t.file_sep,
        *s.tokenize("util.py\n" + OTHER),
        t.file_sep,
        *s.tokenize("main.py\n"),
    ]
    assert prompt.tokens[: len(expected_head)] == expected_head
    assert prompt.tokens[len(expected_head) :] == plain.tokens  # then the usual FIM prompt
    assert prompt.extra_tokens == len(expected_head) <= 400
    assert prompt.stable_tokens == plain.stable_tokens + len(expected_head)
    # A budget too small for the chunk: no extra context at all.
    small = s.plan(request(extra=ExtraContext((chunk,), "main.py", "p", budget=20)))
    assert small.prompt.tokens == plain.tokens and small.prompt.extra_tokens == 0


def test_keystroke_prompts_ignore_extra_context(roomy_session: ModelSession) -> None:
    s = roomy_session
    extra = ExtraContext((ContextChunk("util.py", OTHER, "file:///p/util.py"),), "main.py")
    with_extra = s.plan(request("keystroke", extra)).prompt
    without = s.plan(request("keystroke")).prompt
    assert with_extra.tokens == without.tokens and with_extra.extra_tokens == 0


def test_extra_context_stays_cached_across_requests(roomy_session: ModelSession) -> None:
    s = roomy_session
    a = ContextChunk("util.py", OTHER, "file:///p/util.py")
    extra = ExtraContext((a,), "main.py", "p", budget=800)
    first = s.complete(request(extra=extra, max_tokens=2))
    assert first.timings.extra_tokens > 0
    again = s.complete(request(extra=extra, max_tokens=2))
    assert again.timings.prefill_reused_tokens >= first.timings.extra_tokens
    # A chunk appended to the ring: what was before it is still served from the cache.
    b = ContextChunk("more.py", "".join(f"    m_{i} = {i}\n" for i in range(6)), "file:///m")
    grown = s.complete(
        request(extra=ExtraContext((a, b), "main.py", "p", budget=800), max_tokens=2)
    )
    assert grown.timings.extra_tokens > first.timings.extra_tokens
    assert grown.timings.prefill_reused_tokens >= len(s.extra.chunk_tokens(a))


# --- the FIM template, from the model's own vocabulary --------------------------------------------
EXPECTED = {
    "qwen": ("qwen", "psm"),
    "starcoder": ("starcoder", "psm"),
    "deepseek": ("deepseek", "psm"),
    "codellama": ("codellama", "psm"),
    "codestral": ("codestral", "spm"),
    "codegemma": ("codegemma", "psm"),
    "none": ("prefix-only", "prefix"),
}


@pytest.mark.parametrize("style", sorted(EXPECTED))
def test_template_detected_from_vocabulary(style: str, tmp_path: Path) -> None:
    path = make_tiny_gguf(tmp_path / f"{style}.gguf", fim_style=style)
    model = native.load(path, n_ctx=256)
    try:
        t = template_of(model)
        assert (t.family, t.layout) == EXPECTED[style]
        if t.layout != "prefix":
            assert model.token_text(t.pre).strip("▁ ") in {
                "<|fim_prefix|>",
                "<fim_prefix>",
                "<｜fim▁begin｜>",
                "<PRE>",
                "[PREFIX]",
            }
            assert t.pre in t.stop_tokens and t.suf in t.stop_tokens
        if style in ("deepseek", "codellama", "codestral", "codegemma"):
            assert t.bos >= 0, "these families expect a BOS token"
    finally:
        model.close()


def test_codestral_found_by_text_when_llama_cpp_does_not_name_it(tmp_path: Path) -> None:
    path = make_tiny_gguf(tmp_path / "c.gguf", fim_style="codestral", fim_ids_in_metadata=False)
    model = native.load(path, n_ctx=256)
    try:
        assert native.special_token_ids(model)["fim_pre"] == -1
        assert template_of(model).family == "codestral"
    finally:
        model.close()


def test_no_fim_tokens_means_prefix_only() -> None:
    t = detect_template(
        {"fim_pre": -1, "fim_suf": -1, "fim_mid": -1, "eos": 2}, lambda i: "", add_bos=False
    )
    assert t.layout == "prefix" and not t.uses_suffix and 2 in t.stop_tokens


def test_after_a_dot_the_member_guide_spells_only_the_names_it_knows(
    tiny_session: ModelSession,
) -> None:
    names = frozenset({"alpha_beta", "gamma_delta_epsilon"})
    asked: list[str] = []

    def members(dotted: str) -> frozenset[str] | None:
        asked.append(dotted)
        return names if dotted == "mod" else None

    def spells_a_name(text: str) -> bool:
        return any(
            name.startswith(text)
            or (text.startswith(name) and not (text[len(name)].isalnum() or text[len(name)] == "_"))
            for name in names
        )

    for typed in ("", "gam"):
        request = CompletionRequest(
            prefix=f"import mod\n\nvalue = mod.{typed}",
            suffix="",
            max_tokens=12,
            postprocess=False,
            multiline="never",
        )
        free = tiny_session.complete(request)
        guided = tiny_session.complete(replace(request, members=members))
        assert guided.raw_text and spells_a_name(typed + guided.raw_text), guided.raw_text
        assert not spells_a_name(typed + free.raw_text), free.raw_text  # random weights
    assert asked == ["mod", "mod"]  # one lookup per request and chain
