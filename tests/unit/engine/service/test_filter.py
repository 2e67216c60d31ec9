"""The confidence filter: off, fixed and adaptive thresholds, and how places learn."""

from __future__ import annotations

from ghostfim.engine.service.acceptance import AcceptanceLog, Outcome
from ghostfim.engine.service.filter import CALIBRATED, ConfidenceFilter
from ghostfim.engine.service.localstats import Record
from ghostfim.engine.text.place import Place
from ghostfim.engine.tuning import GIVE_UP_BELOW, HALF_LIFE_S, READ_MS

HERE = Place("python", "end", "space")
THERE = Place("python", "end", "dot")


def outcome(kind: str, place: Place = HERE, explicit: bool = False) -> Outcome:
    return Outcome(kind, place, 5 if kind != "refused" else 0, 10, 60.0, explicit)  # type: ignore[arg-type]


def test_off_gives_no_rule_and_fixed_the_calibrated_one() -> None:
    assert ConfidenceFilter("off").confidence_for(HERE, explicit=False) is None
    fixed = ConfidenceFilter("fixed")
    for _ in range(50):
        fixed.learn(outcome("refused"), now=0.0)
    rule = fixed.confidence_for(HERE, explicit=False, now=0.0)
    assert rule is not None and rule.refusal_cost == CALIBRATED.refusal_cost
    assert rule.drop_unsure_start and rule.drop_line_break_start  # the end of a line


def test_explicit_requests_are_answered_whole() -> None:
    assert ConfidenceFilter("adaptive").confidence_for(HERE, explicit=True) is None
    assert ConfidenceFilter("adaptive").give_up_below(explicit=True) == 0.0


def test_only_the_filter_gives_up_on_unsure_text() -> None:
    assert ConfidenceFilter("off").give_up_below(explicit=False) == 0.0  # today's behaviour
    assert ConfidenceFilter("fixed").give_up_below(explicit=False) == GIVE_UP_BELOW
    assert ConfidenceFilter("adaptive").give_up_below(explicit=False) == GIVE_UP_BELOW


def test_refusals_raise_a_place_threshold_and_leave_others_alone() -> None:
    f = ConfidenceFilter("adaptive")
    for _ in range(40):
        f.learn(outcome("refused"), now=100.0)
    raised = f.refusal_cost(HERE, now=100.0)
    assert raised > 2 * CALIBRATED.refusal_cost  # the place shows less
    assert raised <= CALIBRATED.refusal_cost * 7.5  # bounded
    assert f.refusal_cost(THERE, now=100.0) == CALIBRATED.refusal_cost


def test_accepts_bring_it_back_and_below() -> None:
    f = ConfidenceFilter("adaptive")
    for _ in range(40):
        f.learn(outcome("refused"), now=0.0)
    for _ in range(60):
        f.learn(outcome("accepted"), now=0.0)
    assert f.refusal_cost(HERE, now=0.0) < CALIBRATED.refusal_cost  # shows more where users take


def test_the_shift_decays_with_time() -> None:
    f = ConfidenceFilter("adaptive")
    for _ in range(40):
        f.learn(outcome("refused"), now=0.0)
    soon = f.refusal_cost(HERE, now=60.0)
    later = f.refusal_cost(HERE, now=10 * HALF_LIFE_S)
    assert soon > later and abs(later - CALIBRATED.refusal_cost) < 0.05


def test_explicit_outcomes_teach_nothing() -> None:
    f = ConfidenceFilter("adaptive")
    for _ in range(40):
        f.learn(outcome("refused", explicit=True), now=0.0)
    assert f.refusal_cost(HERE, now=0.0) == CALIBRATED.refusal_cost


def test_starts_from_earlier_sessions() -> None:
    f = ConfidenceFilter("adaptive")
    f.start_from(
        Record(0.0, "python", "end", "space", "refused", 0, 9, 50.0, False) for _ in range(40)
    )
    assert f.refusal_cost(HERE, now=1.0) > CALIBRATED.refusal_cost


def test_a_client_that_never_reports_accepts_moves_no_threshold() -> None:
    """Until the client sends an accept signal, `adaptive` is `fixed`: its refusals may be
    accepts it did not report. The first signal hands the held refusals on."""
    place = Place("python", "end", "word")
    confidence = ConfidenceFilter("adaptive")
    log = AcceptanceLog(listeners=[confidence.learn])
    for i in range(20):
        log.show("a", f"x{i}", place, now=float(i), ttgt_ms=1.0, explicit=False, origin=object())
        log.left("a", now=i + READ_MS / 1000)
    assert confidence.shift(place) == 0.0  # as `fixed`
    log.accepted("g-from-the-client")
    assert confidence.shift(place) > 0.5  # the refusals count now: the place shows less
