"""lsp/documents.py: LSP line ends, position units, the one position-to-offset function
(`locate`), and the cursor state the engine gets, checked against independent references."""

from __future__ import annotations

import random
import re

import numpy as np

from ghostfim.lsp.documents import LineIndex, chars_to_units, locate, units_to_chars

TEXT = "a😀b = 1\r\nx\ry\n\u2028z\x0cw\n"


def offset(
    text: str, line: int, character: int, encoding: str = "utf-16"
) -> tuple[int, str | None]:
    return locate(LineIndex.of(text), text, line, character, encoding)


def test_line_index_update_equals_a_full_rescan() -> None:
    rng = random.Random(7)
    alphabet = ["a", "\r", "\n", "\r\n", "😀", "中", "\x0b", "\x0c", "\x85", "\u2028", "\x00"]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        index = LineIndex.of(text)
        for _ in range(6):
            a = rng.randint(0, len(text))
            b = rng.randint(a, len(text))
            new = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
            text = text[:a] + new + text[b:]
            index = index.replaced(text, a, b, len(new))
            assert np.array_equal(index.starts, LineIndex.of(text).starts), (text, a, b, new)
    # A big text goes through the vectorised scan: same answer as the regex.
    big = "".join(rng.choice(alphabet) for _ in range(300_000))
    expected = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", big)]
    assert LineIndex.of(big).starts.tolist() == expected


def test_position_units_for_astral_and_multibyte_characters() -> None:
    rng = random.Random(3)
    chars = ["a", "😀", "中", "é", "\ud800", "𝔘"]
    for encoding in ("utf-16", "utf-8", "utf-32"):
        for _ in range(3000):
            line = "".join(rng.choice(chars) for _ in range(rng.randint(0, 10)))
            n = rng.randint(0, 45)
            want = max(k for k in range(len(line) + 1) if chars_to_units(line[:k], encoding) <= n)
            assert units_to_chars(line, n, encoding) == want, (line, n, encoding)
    assert units_to_chars("a😀b", 3, "utf-16") == 2 and units_to_chars("a😀b", 2, "utf-16") == 1
    assert units_to_chars("a😀b", 5, "utf-8") == 2 and units_to_chars("a😀b", 4, "utf-8") == 1


def test_utf16_positions_count_surrogate_pairs() -> None:
    # 'a', then the emoji (2 UTF-16 units, 4 UTF-8 bytes, 1 UTF-32 unit), then 'b'
    assert offset(TEXT, 0, 3, "utf-16") == (2, None)
    assert offset(TEXT, 0, 5, "utf-8") == (2, None)
    assert offset(TEXT, 0, 2, "utf-32") == (2, None)


def test_only_lsp_line_ends_split_lines() -> None:
    # lines: "a😀b = 1", "x", "y", "\u2028z\x0cw", ""
    index = LineIndex.of(TEXT)
    assert index.line_count == 5
    assert offset(TEXT, 1, 0) == (TEXT.index("x"), None)
    assert offset(TEXT, 2, 0) == (TEXT.index("y"), None)
    assert offset(TEXT, 3, 2) == (TEXT.index("\x0c"), None)
    assert index.line_end(TEXT, 0) == TEXT.index("\r") and index.line_of(TEXT.index("y")) == 2


def test_out_of_range_positions_are_clamped_and_named() -> None:
    assert offset(TEXT, 1, 99) == (TEXT.index("x") + 1, None)  # past the line's end: legal
    assert offset(TEXT, 4, 0) == (len(TEXT), None)  # the line just past the last, column 0
    end, problem = offset(TEXT, 9, 0)
    assert end == len(TEXT) and problem is not None and "past the end" in problem
    assert offset(TEXT, 5, 1)[1] is not None  # just past the last line, but not column 0
    start, problem = offset(TEXT, -1, 0)
    assert start == 0 and problem is not None and "negative" in problem
    start, problem = offset(TEXT, 1, -3)
    assert start == TEXT.index("x") and problem is not None and "character -3" in problem
