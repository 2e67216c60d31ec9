"""What kind of place the cursor is at: the unit the acceptance statistics are kept by.

Users take suggestions at some places and almost never at others (mid-line with code after
the cursor, say). A place is the document's language, where on its line the cursor is (at the
end, before closing brackets only, or mid-line) and what kind of character it follows. It is
coarse on purpose: a few dozen kinds a language, so that a user's own accepts and refusals fill
each kind quickly enough to learn from (engine/service/filter.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

LinePosition = Literal["end", "closers", "mid"]

_CLOSERS = frozenset(")]}>\"'`;,: \t")
_OPENERS = frozenset("([{,")
_OPERATORS = frozenset("=+-*/%<>!&|^~?")
_QUOTES = frozenset("'\"`")


@dataclass(frozen=True)
class Place:
    language: str  # the editor's language id ("" when it did not say)
    position: LinePosition
    after: str  # what the cursor follows: indent, word, space, dot, open, operator, ...

    @property
    def key(self) -> str:
        """The place as one string (how the statistics file keys it)."""
        return f"{self.language or '?'}|{self.position}|{self.after}"

    @property
    def where(self) -> str:
        """The place without its language."""
        return f"{self.position}|{self.after}"


def line_position(rest_of_line: str) -> LinePosition:
    """End of line, only closing brackets (and such) after the cursor, or mid-line."""
    rest = rest_of_line.strip()
    if not rest:
        return "end"
    return "closers" if all(c in _CLOSERS for c in rest) else "mid"


def after_kind(line_before: str) -> str:
    """The kind of text the cursor follows on its line."""
    if not line_before.strip():
        return "indent"  # the line's start, or only its indentation
    last = line_before[-1]
    if last.isalnum() or last == "_":
        return "word"
    if last in " \t":
        return "space"
    if last == ".":
        return "dot"
    if last in _OPENERS:
        return "open"
    if last in _OPERATORS:
        return "operator"
    if last == ":":
        return "colon"
    if last in _QUOTES:
        return "quote"
    return "other"


def place_of(language: str, prefix: str, suffix: str) -> Place:
    line_before = prefix[prefix.rfind("\n") + 1 :]
    nl = suffix.find("\n")
    rest = suffix if nl < 0 else suffix[:nl]
    return Place(language, line_position(rest), after_kind(line_before))
