"""What a prefill costs on this machine, measured, so a keystroke can be given a token budget.

A decode of n tokens costs about `fixed + per_token * n` milliseconds: the fixed part is reading
the weights once (a one-token decode, ~45 ms for the 0.5B model on 2 CPU cores, a few ms on a
GPU), the per-token part the extra matrix rows (~5 ms a token on the CPU, ~0.02 ms on a GPU).
The model is calibrated when the model loads and refitted from every real prefill afterwards.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field

from ghostfim.engine import env

# `GHOSTFIM_PREFILL_COST="FIXED+PER_TOKEN"` (milliseconds, e.g. "3+0.02" for a GPU) pins the
# cost model: calibration and measurements no longer move it. That is how the GPU policy
# (whole-suffix keystroke prompts, full-width windows) is rehearsed and tested on a CPU.
FORCED_COST_ENV = "GHOSTFIM_PREFILL_COST"


@dataclass
class PrefillCostModel:
    fixed_ms: float = 45.0
    per_token_ms: float = 5.0
    history: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=96))
    forced: bool = False  # pinned: observe() changes nothing

    @classmethod
    def from_env(cls) -> PrefillCostModel:
        """The default model, or the one GHOSTFIM_PREFILL_COST pins (ValueError if malformed)."""
        raw = env.pinned_prefill_cost()
        if not raw:
            return cls()
        return cls.pinned(raw)

    @classmethod
    def pinned(cls, spec: str) -> PrefillCostModel:
        """A cost model fixed at "FIXED+PER_TOKEN" milliseconds."""
        try:
            fixed, per_token = (float(part) for part in spec.split("+"))
        except ValueError:
            raise ValueError(
                f"{FORCED_COST_ENV} must be FIXED+PER_TOKEN in ms (e.g. 3+0.02), got {spec!r}"
            ) from None
        if fixed < 0 or per_token <= 0:
            raise ValueError(f"{FORCED_COST_ENV}: costs must be positive, got {spec!r}")
        return cls(fixed_ms=fixed, per_token_ms=per_token, forced=True)

    def observe(self, n_tokens: int, ms: float) -> None:
        """Record one measured decode of n_tokens and refit."""
        if self.forced or n_tokens <= 0 or ms <= 0:
            return
        self.history.append((n_tokens, ms))
        self._refit()

    def _refit(self) -> None:
        # Fit on the median of each size bucket: a decode that was slow because something else
        # had the CPU for a moment must not set every keystroke's budget.
        buckets: dict[int, list[tuple[int, float]]] = {}
        for n, t in self.history:
            buckets.setdefault(n.bit_length(), []).append((n, t))
        points = [
            (statistics.median(n for n, _ in b), statistics.median(t for _, t in b))
            for b in buckets.values()
        ]
        if len(self.history) < 2:
            return
        n_mean = sum(n for n, _ in points) / len(points)
        t_mean = sum(t for _, t in points) / len(points)
        var = sum((n - n_mean) ** 2 for n, _ in points)
        if var < 1e-9:
            # All observations have one size: keep the slope, move the intercept.
            self.fixed_ms = max(0.0, t_mean - self.per_token_ms * n_mean)
            return
        slope = sum((n - n_mean) * (t - t_mean) for n, t in points) / var
        slope = max(slope, 1e-3)
        self.per_token_ms = slope
        self.fixed_ms = max(0.0, t_mean - slope * n_mean)

    def predict_ms(self, n_tokens: int) -> float:
        return self.fixed_ms + self.per_token_ms * n_tokens if n_tokens > 0 else 0.0

    def tokens_within(self, budget_ms: float) -> int:
        """How many prompt tokens one prefill can decode within budget_ms (at least 1)."""
        return max(1, int((budget_ms - self.fixed_ms) / self.per_token_ms))
