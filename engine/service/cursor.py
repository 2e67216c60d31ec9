"""The cursor's state: what the engine knows of a document at a request, built here from the
document's text and an offset, so that every front end (the LSP server, the command line, the
benchmarks) hands the engine the same thing.

The engine never sees a whole document: windows of text either side of the cursor (at most
PREFIX_WINDOW_CHARS and SUFFIX_WINDOW_CHARS), with line ends normalised, and the raw text just
around the cursor, which an edit elsewhere must leave intact for a running suggestion to stay
valid.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ghostfim.engine.tuning import PREFIX_WINDOW_CHARS, SUFFIX_WINDOW_CHARS

CONSISTENCY_CHARS = 64  # text either side of a job's cursor that must survive an edit


@dataclass(frozen=True)
class CursorState:
    doc_id: str
    version: int
    position: Any  # echoed back in ghost_text events (the LSP position)
    prefix: str  # text before the cursor, at most PREFIX_WINDOW_CHARS
    suffix: str  # text after the cursor, at most SUFFIX_WINDOW_CHARS
    cursor_line: int
    offset: int  # absolute character offset of the cursor in the document
    doc_length: int
    edge_before: str = ""  # raw document text just before / after the cursor (line ends as
    edge_after: str = ""  # the document has them): an edit elsewhere must leave these intact
    language: str = ""  # the editor's language id (acceptance statistics are kept by it)

    @property
    def rest_of_line(self) -> str:
        nl = self.suffix.find("\n")
        return self.suffix if nl < 0 else self.suffix[:nl]


_SURROGATE = re.compile("[\ud800-\udfff]")


def _encodable(text: str) -> str:
    """text with lone surrogates replaced by U+FFFD (a Python str holds no paired ones)."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub("\ufffd", text)


def cursor_state(
    uri: str,
    version: int,
    position: object,
    text: str,
    offset: int,
    line: int,
    language: str = "",
) -> CursorState:
    """What the engine needs of a cursor: windows of text either side, never the whole file."""
    prefix = text[max(0, offset - PREFIX_WINDOW_CHARS) : offset]
    suffix = text[offset : offset + SUFFIX_WINDOW_CHARS]
    # JSON can carry lone surrogates (\\ud800) and editors send them for broken files; the
    # tokenizer needs encodable text. One character for one keeps every offset valid.
    prefix, suffix = _encodable(prefix), _encodable(suffix)
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
        language=language,
    )
