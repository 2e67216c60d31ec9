"""Which suggestions are worth reading: the confidence filter and the rules before the model.

Setting `filter`:
- "off": every suggestion as the model wrote it (the behaviour before the filter existed).
- "fixed": what is shown of each suggestion grows only while it is worth reading and ends
  where the model stops being sure (engine/text/confidence.py), with the calibrated numbers
  CALIBRATED, judged again from wherever the user has typed to (the rest is generated and
  kept: engine/service/suggestions.py), until the model's own chance of the whole text falls
  below GIVE_UP_BELOW, where generating it stops (the text after that point is almost never
  shown, and not generating it is the filter's CPU saving); a suggestion never worth showing
  is not shown; a next line offered at the end of a line is not shown.
- "adaptive" (the default): as "fixed", but the cost of a refusal at each kind of place
  (language × where the cursor is, engine/text/place.py) moves with this user's own accepts
  and refusals there: many refusals raise it (the place shows less, and shorter), accepts lower
  it. The move is bounded (MAX_SHIFT) and the evidence decays, per outcome and with time, so a
  place returns to the calibrated cost when the user's behaviour changes.

Rules before the model (`refuse_before_model`) answer an automatic request empty with no model
work at all. Explicit requests (the user asked) are never suppressed, nor cut. The calibration
is bench/calibrate_filter.py on the accepting-user benchmark; its data and choice are
bench/results/filter-calibration.jsonl and docs/history.md ("The calibration").
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
from ghostfim.engine.tuning import (
    CALIBRATED_ACCEPT_RATE,
    CALIBRATED_FIRST_WORD_MIN_PROB,
    CALIBRATED_REFUSAL_COST,
    CALIBRATED_SHARPNESS,
    GIVE_UP_BELOW,
    HALF_LIFE_S,
    MAX_SHIFT,
    PER_OUTCOME_DECAY,
    PRIOR_WEIGHT,
    SHIFT_GAIN,
)

# Chosen by bench/calibrate_filter.py (bench/results/filter-calibration.jsonl): the most
# keystrokes saved for a Tab-only user while a user who also takes words keeps 95% of theirs.
CALIBRATED = Confidence(
    refusal_cost=CALIBRATED_REFUSAL_COST,
    sharpness=CALIBRATED_SHARPNESS,
    first_word_min_prob=CALIBRATED_FIRST_WORD_MIN_PROB,
)


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
        """The cut rule for a request at `place` (None: none). An explicit request, which
        the user asked for and waits for, is answered whole: a cut there left half an
        expression (`sqrt(variance(values` without its closing brackets)."""
        if self.mode == "off" or explicit:
            return None
        return Confidence(
            refusal_cost=self.refusal_cost(place, now),
            sharpness=CALIBRATED.sharpness,
            first_word_min_prob=CALIBRATED.first_word_min_prob,
            drop_unsure_start=not explicit,
            drop_line_break_start=not explicit
            and place.position == "end"
            and place.after != "indent",
        )

    def give_up_below(self, explicit: bool) -> float:
        """Where generating a suggestion stops being worth it (0: never): the rest is text
        the rule would show only to a user who typed through tokens the model doubted.
        Explicit requests are answered whole, as the model writes them."""
        return 0.0 if self.mode == "off" or explicit else GIVE_UP_BELOW

    def refusal_cost(self, place: Place, now: float | None = None) -> float:
        """What a refusal costs at `place` now: the calibrated cost, raised where this user
        refuses more than users did in the calibration, lowered where they take more."""
        return CALIBRATED.refusal_cost * math.exp(self.shift(place, now))

    def shift(self, place: Place, now: float | None = None) -> float:
        """How far the place's refusal cost moved from the calibrated one, in log units."""
        if self.mode != "adaptive":
            return 0.0
        evidence = self._places.get(place.key)
        if evidence is None:
            return 0.0
        e = evidence.decayed(time.time() if now is None else now)
        rate = (e.accepted + PRIOR_WEIGHT * CALIBRATED_ACCEPT_RATE) / (
            e.accepted + e.refused + PRIOR_WEIGHT
        )
        shift = SHIFT_GAIN * (_logit(CALIBRATED_ACCEPT_RATE) - _logit(rate))
        return max(-MAX_SHIFT, min(MAX_SHIFT, shift))

    def refuse_before_model(self, rest_of_line: str, max_rest_of_line: int) -> str | None:
        """Why an automatic request is answered empty without asking the model (None: ask).
        Explicit requests never come here.

        Only the rest-of-line rule: the kinds of place were measured on the calibration data
        (docs/history.md, "Where users take suggestions"), and none was refused often
        enough, with the cut in place, to skip the model there outright; the adaptive refusal
        cost shows less where this user refuses."""
        if too_much_after_cursor(rest_of_line, max_rest_of_line):
            return "rest of line"
        return None

    # --- what the user did ----------------------------------------------------------------------
    def learn(self, outcome: Outcome, now: float | None = None) -> None:
        """An accept or refusal at a place moves that place's refusal cost."""
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


def too_much_after_cursor(rest_of_line: str, limit: int) -> bool:
    """No automatic suggestion when more than `limit` characters follow the cursor on its line
    (setting `maxRestOfLine`, default 8): llama.vim's `max_line_suffix` rule, same default.

    The user is editing inside existing code there, and a suggestion would be inserted in the
    middle of it. Like llama.vim, whitespace before that code counts (the cursor in the
    indentation of `    return x` has 12 characters after it); unlike it, trailing whitespace
    does not (it is invisible, and a line of only whitespace is an empty line to both).
    Explicit requests are always answered.
    """
    return len(rest_of_line.rstrip()) > limit
