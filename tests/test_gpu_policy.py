"""The GPU policy, tested without a GPU: a pinned prefill cost (GHOSTFIM_PREFILL_COST, as fast as
an H200's) on the self-made tiny model, and cancels with llama.cpp's abort callback switched off
(CUDA ignores it, so on a GPU only the checks between `llama_decode` calls stop work)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ghostfim.engine.backend import Cancelled, CancelToken, CompletionRequest
from ghostfim.engine.local.kvslots import SLOT_FULL
from ghostfim.engine.local.session import DevicePolicy, ModelSession
from ghostfim.engine.local.speed import FORCED_COST_ENV, PrefillCostModel

GPU_LIKE = "3+0.02"  # ms per decode call + ms per token: a 1.5B model on an H200


def test_the_policy_follows_the_device_and_the_prefill_speed() -> None:
    cpu = DevicePolicy.choose(False, PrefillCostModel())
    assert cpu.n_batch == 256 and cpu.abort_callback
    gpu = DevicePolicy.choose(True, PrefillCostModel())
    assert gpu.n_batch == 128 and not gpu.abort_callback  # CUDA ignores the abort callback
    fast = DevicePolicy.choose(False, PrefillCostModel.pinned(GPU_LIKE))
    assert fast.n_batch == gpu.n_batch and fast.abort_callback  # a CPU can still abort
    with pytest.raises(ValueError, match=FORCED_COST_ENV):
        PrefillCostModel.pinned("fast")


@pytest.fixture
def gpu_like(tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelSession]:
    monkeypatch.setenv(FORCED_COST_ENV, GPU_LIKE)
    session = ModelSession.load(tiny_gguf)
    yield session
    session.close()


def test_fast_prefill_takes_the_gpu_policy(gpu_like: ModelSession) -> None:
    s = gpu_like
    assert s.cost.forced and s.cost.per_token_ms == 0.02  # calibration did not move it
    assert s.model.n_batch == 128  # as on a GPU
    assert s.keystroke_start_tokens == s.keystroke_wide_tokens == s.prefix_tokens


def test_keystroke_prompts_are_whole_suffix_fim_prompts(gpu_like: ModelSession) -> None:
    s = gpu_like
    t = s.template
    suffix = "".join(f"\ndef after_{i}(x):\n    return x + {i}\n" for i in range(12))
    prefix = "".join(f"value_{i} = {i}\n" for i in range(40)) + "total = "
    for typed in ("", "v", "va"):
        request = CompletionRequest(
            prefix + typed, suffix, doc_id="g", mode="keystroke", max_tokens=4
        )
        plan = s.build_prompt(request)
        prompt = plan.prompt
        assert prompt.suffix_units_used == prompt.suffix_units_total > 10  # the whole suffix
        assert prompt.tokens[0] == t.pre and prompt.tokens[-1] == t.mid and t.suf in prompt.tokens
        assert not prompt.narrow
        done = s.complete(request)
        assert not done.suffix_cut and not done.widen  # no pause refresh, no widening needed


def test_cancel_stops_between_decode_calls_without_the_abort_callback(
    tiny_gguf: Path,
) -> None:
    session = ModelSession.load(tiny_gguf, calibrate=False)
    try:
        session.model.set_abort(None)  # what a CUDA build gets: nothing stops a decode inside
        session.policy = DevicePolicy(n_batch=session.model.n_batch, abort_callback=False)
        tokens = session.tokenize("".join(f"item_{i} = compute({i})\n" for i in range(100)))
        chunk = 32
        assert len(tokens) > 8 * chunk

        class CancelAfter(CancelToken):
            """Set once the prefill has looked at it `n` times (once before each chunk)."""

            __slots__ = ("left",)

            def __init__(self, n: int) -> None:
                super().__init__()
                self.left = n

            @property
            def cancelled(self) -> bool:
                self.left -= 1
                return self.left < 0

        chunks = session.prefill_chunks
        with pytest.raises(Cancelled):
            session.prefill(tokens, CancelAfter(3), chunk_tokens=chunk)
        assert session.prefill_chunks - chunks == 3  # stopped at the next boundary
        held = session.slots.tokens(SLOT_FULL)
        assert held == tokens[: 3 * chunk]  # whole chunks kept, nothing half-written
        _, reused, new, _ = session.prefill(tokens, CancelToken(), chunk_tokens=chunk)
        assert reused == 3 * chunk and new == len(tokens) - 3 * chunk  # and reused after
    finally:
        session.close()
