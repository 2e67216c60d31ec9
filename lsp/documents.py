"""Documents as the protocol sends them: LSP positions to string offsets, and line indexes.

LSP lines end at \\n, \\r\\n or \\r only (not at form feeds or U+2028, which Python's
splitlines also splits at), and `character` counts UTF-16 code units unless the client and
server agreed on UTF-8 or UTF-32. A document's line starts are indexed once when it is opened
and then updated around each edit (`LineIndex.replaced`), so a keystroke in a 20 MB file costs
the edit, not a rescan of the file.
"""

from __future__ import annotations

import re

import numpy as np

_EOL = re.compile(r"\r\n|\r|\n")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")  # two UTF-16 code units each
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
# Below this many characters a regex scan finds line breaks faster than numpy's set-up.
_NUMPY_SCAN_CHARS = 1 << 16


class PositionError(ValueError):
    """A position that is not in the document."""


def _eol_ends(text: str, lo: int, hi: int) -> np.ndarray:
    """Offsets just after each LSP line break found scanning text[lo:hi] from lo.

    A caller chooses lo and hi so that no \\r\\n straddles either end (hi is a line start or the
    end of the text; a scan from the \\n of a \\r\\n still ends that line at the same offset).
    """
    if hi - lo < _NUMPY_SCAN_CHARS:
        return np.fromiter((m.end() for m in _EOL.finditer(text, lo, hi)), dtype=np.int64)
    # Large spans (opening a big file): one vectorised pass over the code points.
    part = text[lo:hi]
    if part.isascii():
        codes = np.frombuffer(part.encode("ascii"), dtype=np.uint8)
    else:
        codes = np.frombuffer(part.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    newline = np.flatnonzero(codes == 10)
    cr = np.flatnonzero(codes == 13)
    if cr.size:
        # A \r ends a line by itself unless a \n follows (then the \n ends it).
        follower = np.minimum(cr + 1, codes.size - 1)
        alone = (cr + 1 >= codes.size) | (codes[follower] != 10)
        ends = np.union1d(newline, cr[alone])
    else:
        ends = newline
    return ends.astype(np.int64) + (lo + 1)


class LineIndex:
    """Where each LSP line starts (code-point offsets), for one version of a text."""

    __slots__ = ("length", "starts")

    def __init__(self, starts: np.ndarray, length: int) -> None:
        self.starts = starts  # int64, starts[0] == 0, strictly increasing
        self.length = length

    @classmethod
    def of(cls, text: str) -> LineIndex:
        starts = np.concatenate((np.zeros(1, dtype=np.int64), _eol_ends(text, 0, len(text))))
        return cls(starts, len(text))

    @property
    def line_count(self) -> int:
        return int(self.starts.size)

    def line_start(self, line: int) -> int:
        return int(self.starts[line])

    def line_end(self, text: str, line: int) -> int:
        """Offset of the end of a line's content (before its line break)."""
        end = int(self.starts[line + 1]) if line + 1 < self.starts.size else self.length
        start = int(self.starts[line])
        while end > start and text[end - 1] in "\r\n":
            end -= 1
        return end

    def line_of(self, offset: int) -> int:
        return int(np.searchsorted(self.starts, offset, side="right")) - 1

    def replaced(self, new_text: str, start: int, end: int, inserted: int) -> LineIndex:
        """The index of new_text, which is this text with [start, end) replaced by `inserted`
        characters. Only the lines around the edit are scanned again.

        Line starts before `start` cannot change (the character after each of their line
        breaks is untouched). Old starts at end + 3 or later belong to line breaks that began
        at end + 1 or later, whose characters and predecessors are untouched: they shift. The
        span between is scanned from start - 1, so that a \\r just before the edit can pair with
        a \\n the edit brings (or lose the one it removes).
        """
        delta = inserted - (end - start)
        starts = self.starts
        kept = starts[: int(np.searchsorted(starts, start, side="left"))]
        if kept.size == 0:
            kept = np.zeros(1, dtype=np.int64)
        first_stable = int(np.searchsorted(starts, end + 3, side="left"))
        tail = starts[first_stable:] + delta
        hi = int(tail[0]) if tail.size else len(new_text)
        middle = _eol_ends(new_text, max(0, start - 1), hi)
        if tail.size:
            middle = middle[middle < hi]  # the line break ending at hi is tail[0]
        return LineIndex(np.concatenate((kept, middle, tail)), len(new_text))


def units_to_chars(line: str, units: int, encoding: str) -> int:
    """Characters of `line` covered by `units` code units of the encoding.

    Clamped to the line; a position inside a character (half a surrogate pair, the middle of
    a UTF-8 sequence) rounds down to the character's start. Only non-ASCII characters are
    visited, so a long line of code costs a regex scan, not a Python loop over it.
    """
    if units <= 0:
        return 0
    if encoding == "utf-32" or line.isascii():
        return min(units, len(line))
    extra = 0  # code units beyond one per character, before the current character
    pattern = _ASTRAL if encoding == "utf-16" else _NON_ASCII
    # Each character takes at least one unit: none at index >= units can be reached.
    for m in pattern.finditer(line, 0, units):
        index = m.start()
        width = 2 if encoding == "utf-16" else len(m.group().encode("utf-8", "surrogatepass"))
        if index + extra + width > units:
            return min(index, units - extra)
        extra += width - 1
    return min(units - extra, len(line))


def chars_to_units(text: str, encoding: str) -> int:
    """Code units of `text` in the encoding (the inverse measure of units_to_chars)."""
    if encoding == "utf-32" or text.isascii():
        return len(text)
    if encoding == "utf-16":
        return len(text) + len(_ASTRAL.findall(text))
    return len(text.encode("utf-8", "surrogatepass"))


def locate(
    index: LineIndex, text: str, line: int, character: int, encoding: str
) -> tuple[int, str | None]:
    """The character offset of an LSP position, and what is wrong with it (None: nothing).

    The one position-to-offset conversion. A column past the end of its line is legal LSP and
    means the end of the line. Anything else outside the document (a negative line or column, a
    line past the end: the line just past the last one is accepted at column 0, the end of the
    document) is clamped to the nearest offset, as vscode-languageserver-textdocument does, and
    named: a request treats that as an error, an edit applies it clamped and says so.
    """
    if line < 0:
        return 0, f"line {line} is negative"
    if line >= index.line_count:
        if line == index.line_count and character == 0:
            return index.length, None
        return index.length, (
            f"line {line} is past the end of the document ({index.line_count} lines)"
        )
    start, end = index.line_start(line), index.line_end(text, line)
    if character < 0:
        return start, f"character {character} is negative"
    return start + units_to_chars(text[start:end], character, encoding), None
