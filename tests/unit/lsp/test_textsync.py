"""lsp/textsync.py: document sync by the LSP rules (not pygls' splitlines), out-of-range edits
clamped as vscode-languageserver-textdocument does, the strict offset of a request."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from lsprotocol import types

from ghostfim.lsp.documents import LineIndex, PositionError, chars_to_units
from ghostfim.lsp.textsync import SyncedDocument, document_key, encoding_name
from tests.support.clientdoc import ClientDoc, digest, snippet


def _range(change: dict[str, Any]) -> types.Range:
    s, e = change["range"]["start"], change["range"]["end"]
    return types.Range(types.Position(**s), types.Position(**e))


def test_synced_document_follows_lsp_line_ends_not_splitlines() -> None:
    """The pygls trap: its incremental sync splits lines at \\x0c, U+2028 and friends."""
    text = "a\x0cb\u2028c\x85d\ne"
    for encoding in ("utf-16", "utf-8"):
        doc = SyncedDocument("file:///t", text, 1, "python", encoding)
        client = ClientDoc("file:///t", text, encoding)
        change = client.replace(6, 6, "X")  # line 0 ends at the \n: "a\x0cb\u2028c\x85d"
        assert change["range"]["start"] == {
            "line": 0,
            "character": chars_to_units(text[:6], encoding),
        }
        doc.apply(types.TextDocumentContentChangePartial(range=_range(change), text="X"))
        assert doc.source == client.text == "a\x0cb\u2028c\x85Xd\ne"
        assert doc.lines == ("a\x0cb\u2028c\x85Xd\n", "e")


def test_synced_document_random_edits_match_the_client() -> None:
    rng = random.Random(11)
    for encoding in ("utf-16", "utf-8"):
        client = ClientDoc("file:///r", snippet(rng, 40), encoding)
        doc = SyncedDocument("file:///r", client.text, 1, "python", encoding)
        for _ in range(2000):
            a = client.snap(rng.randint(0, len(client.text)))
            b = client.snap(min(len(client.text), a + rng.randint(0, 12)))
            change = client.replace(a, b, snippet(rng, rng.randint(0, 3)))
            partial = types.TextDocumentContentChangePartial(
                range=_range(change), text=change["text"]
            )
            assert doc.apply(partial) is None
            assert doc.source == client.text
            assert np.array_equal(doc.index.starts, LineIndex.of(doc.source).starts)


def test_out_of_range_edits_clamp_like_the_lsp_reference() -> None:
    """vscode-languageserver-textdocument: a line past the end is the end of the text, a
    column past the end of its line is the line's end, a reversed range is swapped."""
    doc = SyncedDocument("file:///c", "ab\r\ncd", 1, None, "utf-16")

    def edit(sl: int, sc: int, el: int, ec: int, new: str) -> str | None:
        r = types.Range(types.Position(sl, sc), types.Position(el, ec))
        return doc.apply(types.TextDocumentContentChangePartial(range=r, text=new))

    assert edit(0, 99, 0, 99, "!") is None  # past the line's end: legal, the end of line 0
    assert doc.source == "ab!\r\ncd"
    assert edit(9, 0, 9, 5, "?") is not None  # past the end of the document: appended
    assert doc.source == "ab!\r\ncd?"
    assert edit(1, 1, 0, 1, "") is not None  # reversed: swapped
    assert doc.source == "ad?"


def test_a_whole_document_change_replaces_the_text_and_its_index() -> None:
    doc = SyncedDocument("file:///w", "one\ntwo\n", 1, "python", "utf-16")
    assert doc.apply(types.TextDocumentContentChangeWholeDocument(text="x\r\ny")) is None
    assert doc.source == "x\r\ny" and doc.index.line_count == 2


def test_a_request_position_must_be_in_the_document() -> None:
    doc = SyncedDocument("file:///p", "def f():\n    pass\n", 1, "python", "utf-16")
    assert doc.offset_at(1, 4) == len("def f():\n    ")
    assert doc.offset_at(0, 10_000) == len("def f():")  # a long column clamps to the line
    assert doc.offset_at(2, 0) == len(doc.source)  # the end of the file
    for line, character in ((4, 0), (3, 1), (-1, 0), (0, -5)):
        with pytest.raises(PositionError):
            doc.offset_at(line, character)
    # An edit's position is clamped instead (and what was wrong is said).
    end, problem = doc.clamped_offset(types.Position(9, 0))
    assert end == len(doc.source) and problem is not None and "past the end" in problem
    assert doc.clamped_offset(types.Position(1, 4)) == (len("def f():\n    "), None)
    assert doc.position_at(len("def f():\n    ")) == types.Position(1, 4)


def test_the_digest_and_the_names() -> None:
    text = "x = '😀'\n"
    doc = SyncedDocument("file:///a%20b.py", text, 7, "python", "utf-8")
    d = doc.digest()
    assert d == {
        "uri": "file:///a%20b.py",
        "version": 7,
        "length": len(text),
        "utf16Length": len(text) + 1,
        "lineCount": 2,
        "sha256": digest(text),
    }
    assert document_key("file:///a%20b.py") == "file:///a b.py"
    assert encoding_name(types.PositionEncodingKind.Utf8) == "utf-8"
    assert encoding_name("utf-32") == "utf-32"
    assert encoding_name(None) == "utf-16" and encoding_name("latin-1") == "utf-16"
    never_opened = SyncedDocument("file:///x", "", None, None, "utf-16")
    assert never_opened.source == ""  # never the file on disk
