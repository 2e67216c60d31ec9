"""engine/local/speed.py: the prefill cost model, fitted from measured decodes or pinned."""

from __future__ import annotations

import pytest

from ghostfim.engine.local.speed import FORCED_COST_ENV, PrefillCostModel


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
