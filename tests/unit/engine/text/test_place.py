"""The kinds of place the acceptance statistics are kept by."""

from __future__ import annotations

import pytest

from ghostfim.engine.text.place import after_kind, line_position, place_of


@pytest.mark.parametrize(
    ("rest", "expected"),
    [("", "end"), ("   ", "end"), (")", "closers"), ("]):", "closers"), ("x)", "mid")],
)
def test_line_position(rest: str, expected: str) -> None:
    assert line_position(rest) == expected


@pytest.mark.parametrize(
    ("before", "expected"),
    [
        ("", "indent"),
        ("    ", "indent"),
        ("    return", "word"),
        ("x = ", "space"),
        ("math.", "dot"),
        ("f(", "open"),
        ("a +", "operator"),
        ("def f():", "colon"),
        ('s = "', "quote"),
        ("x #", "other"),
    ],
)
def test_after_kind(before: str, expected: str) -> None:
    assert after_kind(before) == expected


def test_place_of_reads_the_cursor_line_only() -> None:
    place = place_of("python", "import os\n    return math.", ")\nnext line")
    assert (place.position, place.after) == ("closers", "dot")
    assert place.key == "python|closers|dot"
    assert place_of("", "x", "").key == "?|end|word"
