"""The confidence cut: a suggestion grows while it is worth reading, and no further."""

from __future__ import annotations

from ghostfim.engine.text.confidence import Confidence, ConfidenceCut, first_word_end

RULE = Confidence(refusal_cost=4.0, sharpness=0.35)


def run(pieces: list[tuple[str, float]], rule: Confidence = RULE) -> str | None:
    """The suggestion the rule leaves of these tokens (None: dropped)."""
    cut, text = ConfidenceCut(rule), ""
    for piece, prob in pieces:
        verdict = cut.judge(text, piece, prob)
        if verdict == "drop":
            return None
        if verdict == "cut":
            return text
        text += piece
    return cut.final(text) or None


def test_first_word_end_needs_a_character_after_it() -> None:
    assert first_word_end("sqrt") is None  # may still go on
    assert first_word_end("sqrt(") == 4
    assert first_word_end("  foo.bar") == 5
    assert first_word_end("))") is None
    assert first_word_end(")) ") == 2
    assert first_word_end("") is None


def test_sure_text_is_kept_whole() -> None:
    assert run([("math", 0.95), (".sqrt", 0.9), ("(x", 0.9), (")", 0.95)]) == "math.sqrt(x)"


def test_it_ends_where_the_model_stops_being_sure() -> None:
    pieces = [("for", 0.99), (" f", 0.95), (" in", 0.99), (" fields", 0.9), (" if", 0.05)]
    assert run(pieces) == "for f in fields"


def test_what_is_never_worth_showing_is_dropped() -> None:
    assert run([("x", 0.1), (")", 0.1)]) is None
    assert run([("a", 0.99)]) is None  # one character: the accept key saves nothing


def test_an_explicit_request_keeps_its_first_word() -> None:
    explicit = Confidence(4.0, 0.35, drop_unsure_start=False)
    assert run([("compare", 0.05), ("]", 0.05)], explicit) == "compare"


def test_a_first_word_floor_drops_an_unsure_start() -> None:
    floor = Confidence(4.0, 0.35, first_word_min_prob=0.5)
    assert run([("eq", 0.4), ("uals", 0.99), ("(", 0.99)], floor) is None
    assert run([("eq", 0.9), ("uals", 0.99), ("(a", 0.99), (")", 0.99)], floor) == "equals(a)"


def test_a_next_line_offered_at_the_end_of_a_line_is_dropped() -> None:
    rule = Confidence(4.0, 0.35, drop_line_break_start=True)
    assert run([("\n    return", 0.99), (" x", 0.99)], rule) is None
    assert run([("\n    return", 0.99), (" x", 0.99)]) == "\n    return x"
