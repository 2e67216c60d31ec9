"""tests/support/clientdoc.py: the client's own position arithmetic (so that a mismatch in the
reliability, soak and fuzz tests means the server)."""

from __future__ import annotations

from tests.support.clientdoc import ClientDoc, units


def test_client_model_positions() -> None:
    doc = ClientDoc("u", "a😀b\r\nx\ry\u2028z", "utf-16")
    assert doc.position(3) == {"line": 0, "character": 4}
    assert doc.position(5) == {"line": 1, "character": 0}
    assert doc.position(6) == {"line": 1, "character": 1}
    assert doc.snap(4) == 3  # between \r and \n
    assert doc.position(len(doc.text)) == {"line": 2, "character": 3}
    assert ClientDoc("u", "a😀b", "utf-8").position(2) == {"line": 0, "character": 5}
    assert doc.line_count() == 3


def test_offsets_clamp_like_the_lsp_reference_library() -> None:
    doc = ClientDoc("u", "ab\r\ncd", "utf-16")
    assert doc.clamped_offset(0, 99) == 2  # past the line's end: its end
    assert doc.clamped_offset(9, 0) == len(doc.text)  # past the last line: the end
    assert doc.clamped_offset(-1, 5) == 0
    assert doc.clamped_offset(1, 1) == 5
    assert ClientDoc("u", "😀x", "utf-16").clamped_offset(0, 1) == 0  # inside a pair
    assert units("😀", "utf-16") == 2 and units("😀", "utf-8") == 4 and units("😀", "utf-32") == 1


def test_an_edit_returns_the_change_with_positions_before_it() -> None:
    doc = ClientDoc("u", "one\ntwo", "utf-16")
    change = doc.replace(4, 7, "2")
    assert change == {
        "range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 3}},
        "text": "2",
    }
    assert doc.text == "one\n2"
