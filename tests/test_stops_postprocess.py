"""Stop rules (newline policy, indentation) and suggestion clean-up."""

from __future__ import annotations

from engine.postprocess import clean_suggestion, drop_overlap_with_rest_of_line
from engine.stops import StopPolicy, wants_multiline


def policy(before: str, after: str = "", suffix: str = "", mode: str = "auto") -> StopPolicy:
    return StopPolicy.for_cursor(mode, before, after, suffix or after)  # type: ignore[arg-type]


def test_multiline_auto_block_after_opener_or_on_empty_line_single_line_elsewhere() -> None:
    assert wants_multiline("auto", "def f(x):", "")
    assert wants_multiline("auto", "    ", "")
    assert not wants_multiline("auto", "    x = ", "")
    assert not wants_multiline("auto", "    print(", ")")  # middle of a line
    assert wants_multiline("always", "x = ", "y")
    assert not wants_multiline("never", "def f():", "")


def test_single_line_stops_at_the_first_newline_after_content() -> None:
    p = policy("    x = ")
    assert not p.check("compute(").stop
    d = p.check("compute(a)\n    y")
    assert d.stop and "compute(a)\n    y"[: d.keep] == "compute(a)"


def test_single_line_suggestion_may_start_on_the_next_line() -> None:
    p = policy("    x = 1", mode="never")
    assert not p.check("\n    y = 2").stop
    d = p.check("\n    y = 2\n")
    assert d.stop and "\n    y = 2\n"[: d.keep] == "\n    y = 2"


def test_block_stops_when_a_line_is_indented_less_than_the_block() -> None:
    p = policy("def f(x):")
    text = "\n    a = x\n    return a\ndef g():\n"
    d = p.check(text)
    assert d.stop and d.reason == "indent"
    assert text[: d.keep] == "\n    a = x\n    return a"


def test_block_keeps_its_closing_brace_then_stops() -> None:
    p = policy("if (x) {")
    text = "\n    y();\n}\nelse {\n"
    d = p.check(text)
    assert d.stop and text[: d.keep] == "\n    y();\n}"


def test_stops_before_repeating_the_next_line_of_the_suffix() -> None:
    suffix = "\n    return total\n"
    p = StopPolicy.for_cursor("auto", "    ", "", suffix)
    text = "total += x\n    return total\n"
    d = p.check(text)
    assert d.stop and d.reason == "suffix" and text[: d.keep] == "total += x"


def test_cursor_inside_leading_whitespace_uses_cursor_column() -> None:
    p = StopPolicy.for_cursor("auto", "  ", "", "")
    text = "x = 1\n  y = 2\nz = 3\n"
    d = p.check(text)
    assert d.stop and text[: d.keep] == "x = 1\n  y = 2"


def test_overlap_with_auto_inserted_closing_brackets_is_dropped() -> None:
    assert drop_overlap_with_rest_of_line("a, b)", ")") == "a, b"
    assert drop_overlap_with_rest_of_line('name"]', '"]') == "name"
    assert drop_overlap_with_rest_of_line("x", "x = 1") == "x"  # a coincidence, kept
    assert drop_overlap_with_rest_of_line("total = 0", "") == "total = 0"


def test_clean_suggestion_trims_and_empties_blank() -> None:
    assert clean_suggestion("x = 1   \n   \n", "") == "x = 1"
    assert clean_suggestion("   \n  ", "") == ""
