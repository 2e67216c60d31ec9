"""engine/local/speed.py: the prefill cost model, fitted from measured decodes or pinned."""

from __future__ import annotations

import pytest

from ghostfim.engine.local.plan import Windows
from ghostfim.engine.local.speed import FORCED_COST_ENV, PrefillCostModel, QuietCost
from ghostfim.engine.tuning import QUIET_MAX_LOWERINGS


def test_prefill_cost_model_fits_fixed_and_per_token_cost() -> None:
    m = PrefillCostModel()
    for n in (1, 4, 16, 64, 1, 4, 16, 64):
        m.observe(n, 40 + 5 * n)
    assert abs(m.fixed_ms - 40) < 1 and abs(m.per_token_ms - 5) < 0.1
    assert m.tokens_within(80) == 8
    assert m.tokens_within(10) == 1  # at least one
    assert m.predict_ms(10) == pytest.approx(90, abs=2) and m.predict_ms(0) == 0.0


def test_one_slow_decode_does_not_set_every_budget() -> None:
    m = PrefillCostModel()
    for _ in range(5):
        for n in (1, 64):
            m.observe(n, 40 + 5 * n)
    m.observe(64, 5000)  # something else had the CPU for a moment
    assert abs(m.per_token_ms - 5) < 0.2  # the median of the bucket


def test_observations_of_one_size_move_only_the_intercept() -> None:
    m = PrefillCostModel(fixed_ms=45.0, per_token_ms=5.0)
    for _ in range(4):
        m.observe(8, 100.0)
    assert m.per_token_ms == 5.0 and m.fixed_ms == pytest.approx(60.0)


def test_a_pinned_cost_never_moves(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FORCED_COST_ENV, "3+0.02")
    m = PrefillCostModel.from_env()
    assert m.forced and (m.fixed_ms, m.per_token_ms) == (3.0, 0.02)
    m.observe(64, 1000.0)
    assert (m.fixed_ms, m.per_token_ms) == (3.0, 0.02)
    monkeypatch.delenv(FORCED_COST_ENV)
    assert not PrefillCostModel.from_env().forced
    for bad in ("fast", "1+2+3", "-1+2", "3+0"):
        with pytest.raises(ValueError, match=FORCED_COST_ENV):
            PrefillCostModel.pinned(bad)
    monkeypatch.setenv(FORCED_COST_ENV, "nonsense")
    with pytest.raises(ValueError):
        PrefillCostModel.from_env()


def test_the_quiet_cost_only_moves_down_and_only_for_a_clear_gain() -> None:
    """Calibrated while an editor started beside it (twice this CPU's 27 + 3.9 ms a token):
    the start window was half what the machine affords. A clearly faster real prefill widens
    it; slower ones, small gains and short chunks change nothing."""
    quiet = QuietCost(fixed_ms=54.0, per_token_ms=7.8)
    slow_start = Windows.sized(quiet.as_model(), 512).start_tokens
    assert not quiet.observe(64, 54 + 64 * 9.0)  # slower: a loaded moment
    assert not quiet.observe(64, 0.9 * (54 + 64 * 7.8))  # 10% faster: not worth a cold prompt
    assert not quiet.observe(8, 27 + 8 * 3.9)  # too short to tell per-token from fixed
    assert (quiet.fixed_ms, quiet.per_token_ms, quiet.lowered) == (54.0, 7.8, 0)
    assert quiet.observe(64, 27 + 64 * 3.9)  # the machine at its quiet speed
    assert quiet.fixed_ms == pytest.approx(27.0) and quiet.per_token_ms == pytest.approx(3.9)
    assert Windows.sized(quiet.as_model(), 512).start_tokens >= 2 * slow_start
    assert quiet.predict_ms(100) == pytest.approx(27 + 390)


def test_the_quiet_cost_is_lowered_a_few_times_at_most() -> None:
    quiet = QuietCost(fixed_ms=10.0, per_token_ms=100.0)
    per_token = 100.0
    lowered = 0
    for _ in range(10):
        per_token /= 2
        lowered += quiet.observe(64, 10 + 64 * per_token)
    assert lowered == quiet.lowered == QUIET_MAX_LOWERINGS
    assert quiet.per_token_ms < 100.0 / 2 ** (QUIET_MAX_LOWERINGS - 1)  # then no lower
