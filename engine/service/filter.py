"""Which suggestions are worth reading: the confidence filter and the rules before the model.

Setting `filter`:
- "off": every suggestion as the model wrote it (the behaviour before the filter existed).
- "fixed": each suggestion is cut where the model stops being sure (engine/text/confidence.py)
  at the calibrated threshold CALIBRATED_MIN_PROB, and dropped when even its first word is
  unsure; automatic requests at places where users almost never accept are not sent to the
  model at all (`refuse_before_model`).
- "adaptive" (the default): as "fixed", but the threshold of each kind of place (language ×
  where the cursor is, engine/text/place.py) moves with this user's own accepts and refusals
  there: many refusals raise it (the place shows less), accepts lower it. The move is bounded
  (MAX_SHIFT, in log-odds) and the evidence decays, per outcome and with time, so a threshold
  returns to the calibrated one when the user's behaviour changes.

Explicit requests (the user asked) are never suppressed: they may be cut, after their first
word. The calibration is bench/calibrate_filter.py on the accepting-user benchmark; its data
and choice are docs/filter-calibration.jsonl and docs/benchmarks.md.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from ghostfim.engine.config import FilterMode
from ghostfim.engine.service.acceptance import Outcome
from ghostfim.engine.service.localstats import Record
from ghostfim.engine.text.confidence import Confidence
from ghostfim.engine.text.place import Place

# Chosen by bench/calibrate_filter.py (docs/filter-calibration.jsonl): the most keystrokes saved
# for a Tab-only user while a user who also takes words loses at most 5% of their characters.
CALIBRATED_MIN_PROB = 0.3
# The share of read suggestions users took on the calibration data at that threshold: the
# prior each place starts from, worth PRIOR_WEIGHT outcomes.
CALIBRATED_ACCEPT_RATE = 0.3
PRIOR_WEIGHT = 8.0
MAX_SHIFT = 1.5  # how far a place's threshold may move, in log-odds (0.3 -> 0.08..0.66)
SHIFT_GAIN = 0.8  # log-odds of threshold per log-odds of accept rate away from the prior
PER_OUTCOME_DECAY = 0.97  # each new outcome at a place weighs the older ones this much less
HALF_LIFE_S = 3 * 24 * 3600.0  # and they halve in weight every three days
MIN_PROB, MAX_PROB = 0.02, 0.95


@dataclass
class _Evidence:
    accepted: float = 0.0
    refused: float = 0.0
    at: float = 0.0  # when it was last updated (seconds)

    def decayed(self, now: float) -> _Evidence:
        age = max(0.0, now - self.at)
        k = 0.5 ** (age / HALF_LIFE_S)
        return _Evidence(self.accepted * k, self.refused * k, now)


@dataclass
class ConfidenceFilter:
    mode: FilterMode = "adaptive"
    _places: dict[str, _Evidence] = field(default_factory=dict)

    # --- what a request gets --------------------------------------------------------------------
    def confidence_for(
        self, place: Place, explicit: bool, now: float | None = None
    ) -> Confidence | None:
        """The cut rule for a request at `place` (None: filter off)."""
        if self.mode == "off":
            return None
        return Confidence(self.threshold(place, now), drop_unsure_start=not explicit)

    def threshold(self, place: Place, now: float | None = None) -> float:
        if self.mode != "adaptive":
            return CALIBRATED_MIN_PROB
        evidence = self._places.get(place.key)
        if evidence is None:
            return CALIBRATED_MIN_PROB
        e = evidence.decayed(time.time() if now is None else now)
        rate = (e.accepted + PRIOR_WEIGHT * CALIBRATED_ACCEPT_RATE) / (
            e.accepted + e.refused + PRIOR_WEIGHT
        )
        shift = SHIFT_GAIN * (_logit(CALIBRATED_ACCEPT_RATE) - _logit(rate))
        shift = max(-MAX_SHIFT, min(MAX_SHIFT, shift))
        return max(MIN_PROB, min(MAX_PROB, _sigmoid(_logit(CALIBRATED_MIN_PROB) + shift)))

    def refuse_before_model(self, place: Place, explicit: bool) -> str | None:
        """Why an automatic request is answered empty without asking the model (None: ask).

        Measured on the calibration data (docs/benchmarks.md, "Where users take
        suggestions"): none of the kinds of place was refused often enough, with the cut in
        place, to skip the model there outright; the adaptive threshold shows less where this
        user refuses. The rule stays here, where a measured one belongs."""
        del place, explicit
        return None

    # --- what the user did ----------------------------------------------------------------------
    def learn(self, outcome: Outcome, now: float | None = None) -> None:
        """An accept or refusal at a place moves that place's threshold."""
        if outcome.explicit:
            return  # the user asked: says nothing about automatic suggestions there
        self._add(outcome.place.key, outcome.kind != "refused", time.time() if now is None else now)

    def start_from(self, records: Iterable[Record]) -> None:
        """The user's earlier sessions (the local statistics file), oldest first."""
        for r in records:
            if not r.explicit:
                self._add(r.place_key, r.kind != "refused", r.time)

    def _add(self, key: str, taken: bool, now: float) -> None:
        e = self._places.get(key)
        e = _Evidence(at=now) if e is None else e.decayed(now)
        e.accepted *= PER_OUTCOME_DECAY
        e.refused *= PER_OUTCOME_DECAY
        if taken:
            e.accepted += 1.0
        else:
            e.refused += 1.0
        self._places[key] = e


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))
