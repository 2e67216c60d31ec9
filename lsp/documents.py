"""Documents as the engine needs them: positions to offsets, and the cursor's context.

LSP lines end at \\n, \\r\\n or \\r only (not at form feeds or U+2028, which Python's
splitlines also splits at), and `character` counts UTF-16 code units unless the client and
server agreed on UTF-8 or UTF-32. Line starts are indexed once per document version.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

from cachetools import LRUCache

from engine.service import (
    CONSISTENCY_CHARS,
    PREFIX_WINDOW_CHARS,
    SUFFIX_WINDOW_CHARS,
    CursorState,
)

_EOL = re.compile(r"\r\n|\r|\n")


class PositionError(ValueError):
    """A position that is not in the document."""


@dataclass(frozen=True)
class LineIndex:
    starts: tuple[int, ...]  # offset of each line's first character
    length: int

    @classmethod
    def of(cls, text: str) -> LineIndex:
        starts = [0]
        starts.extend(m.end() for m in _EOL.finditer(text))
        return cls(tuple(starts), len(text))

    def line_end(self, text: str, line: int) -> int:
        """Offset of the end of a line's content (before its line break)."""
        end = self.starts[line + 1] if line + 1 < len(self.starts) else self.length
        while end > self.starts[line] and text[end - 1] in "\r\n":
            end -= 1
        return end

    def line_of(self, offset: int) -> int:
        return bisect_right(self.starts, offset) - 1


def _units_to_chars(line: str, units: int, encoding: str) -> int:
    """Characters in `line` covered by `units` code units of the encoding (clamped to the line)."""
    if encoding == "utf-32":
        return min(units, len(line))
    count = 0
    for i, ch in enumerate(line):
        width = (
            (2 if ord(ch) > 0xFFFF else 1)
            if encoding == "utf-16"
            else len(ch.encode("utf-8", "surrogatepass"))
        )
        if count + width > units:
            return i
        count += width
    return len(line)


class DocumentIndex:
    """Line indexes for documents, cached per (uri, version)."""

    def __init__(self) -> None:
        self._cache: LRUCache[tuple[str, int | None, int], LineIndex] = LRUCache(maxsize=16)

    def index(self, uri: str, version: int | None, text: str) -> LineIndex:
        key = (uri, version, len(text))
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = LineIndex.of(text)
        return found

    def offset_at(
        self, uri: str, version: int | None, text: str, line: int, character: int, encoding: str
    ) -> int:
        """The character offset of an LSP position; a column past the line's end clamps to it."""
        idx = self.index(uri, version, text)
        if line < 0 or character < 0:
            raise PositionError(f"negative position {line}:{character}")
        if line >= len(idx.starts):
            if line == len(idx.starts) and character == 0:
                return idx.length  # just past the last line
            raise PositionError(
                f"line {line} is past the end of the document ({len(idx.starts)} lines)"
            )
        start, end = idx.starts[line], idx.line_end(text, line)
        return start + _units_to_chars(text[start:end], character, encoding)


def cursor_state(
    uri: str, version: int, position: object, text: str, offset: int, line: int
) -> CursorState:
    """What the engine needs of a cursor: windows of text either side, never the whole file."""
    prefix = text[max(0, offset - PREFIX_WINDOW_CHARS) : offset]
    suffix = text[offset : offset + SUFFIX_WINDOW_CHARS]
    # The engine counts lines by \\n; normalise other line ends in the windows it sees.
    if "\r" in prefix:
        prefix = prefix.replace("\r\n", "\n").replace("\r", "\n")
    if "\r" in suffix:
        suffix = suffix.replace("\r\n", "\n").replace("\r", "\n")
    return CursorState(
        doc_id=uri,
        version=version,
        position=position,
        prefix=prefix,
        suffix=suffix,
        cursor_line=line,
        offset=offset,
        doc_length=len(text),
        edge_before=text[max(0, offset - CONSISTENCY_CHARS) : offset],
        edge_after=text[offset : offset + CONSISTENCY_CHARS],
    )
