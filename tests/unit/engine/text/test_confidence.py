"""The confidence cut: keep, cut after a whole first word, or drop an unsure start."""

from __future__ import annotations

from ghostfim.engine.text.confidence import Confidence, first_word_end, judge

RULE = Confidence(0.3)


def test_first_word_end_needs_a_character_after_it() -> None:
    assert first_word_end("sqrt") is None  # may still go on
    assert first_word_end("sqrt(") == 4
    assert first_word_end("  foo.bar") == 5
    assert first_word_end("))") is None
    assert first_word_end(")) ") == 2
    assert first_word_end("") is None


def test_sure_tokens_are_kept() -> None:
    assert judge("sq", "rt", 0.9, RULE) == "keep"


def test_an_unsure_token_after_a_whole_word_cuts() -> None:
    assert judge("compare", "]", 0.1, RULE) == "cut"
    assert judge("group(", "1", 0.1, RULE) == "cut"


def test_an_unsure_first_word_drops_unless_explicit() -> None:
    assert judge("", "eq", 0.1, RULE) == "drop"
    assert judge("f", "oo", 0.1, RULE) == "drop"  # the unsure token continues the first word
    assert judge("f", "oo", 0.1, Confidence(0.3, drop_unsure_start=False)) == "keep"
