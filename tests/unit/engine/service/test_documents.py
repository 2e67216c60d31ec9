"""engine/service/documents.py and cursor.py: the cursor state and the record kept per document."""

from __future__ import annotations

from ghostfim.engine.service.acceptance import AcceptanceLog
from ghostfim.engine.service.cursor import CursorState, cursor_state
from ghostfim.engine.service.documents import DocumentRecord
from ghostfim.engine.service.screen import Screen
from tests.support.fakes import NoEvents


def test_the_rest_of_the_line_is_what_follows_the_cursor_on_its_line() -> None:
    state = CursorState("d", 1, None, "x = f(", "a, b)\ny = 2\n", 0, 6, 18)
    assert state.rest_of_line == "a, b)"
    assert CursorState("d", 1, None, "x", "", 0, 1, 1).rest_of_line == ""
    assert CursorState("d", 1, None, "x", "tail", 0, 1, 5).rest_of_line == "tail"


async def test_a_new_request_supersedes_the_older_ones() -> None:
    record = DocumentRecord(Screen(AcceptanceLog(), NoEvents()))
    held = record.newer
    record.next_request(3)
    assert record.latest == 3 and held.is_set()  # whoever waited on the old one wakes
    assert not record.newer.is_set()  # a fresh event for the new request
    record.next_request(4)
    assert record.latest == 4


def test_cursor_state_windows_and_normalises_line_ends() -> None:
    text = "x = 1\r\ny = "
    state = cursor_state("u", 3, None, text, len(text), 1)
    assert state.prefix == "x = 1\ny = " and state.suffix == ""
    assert state.edge_before.endswith("\r\ny = ")
    assert (state.doc_id, state.version, state.offset, state.doc_length) == ("u", 3, 11, 11)
    lone = cursor_state("u", 1, None, "s = '\udfff'\n", 5, 0, "python")
    assert "\udfff" not in lone.prefix + lone.suffix and lone.language == "python"
    assert lone.offset == 5  # one character for one: every offset stays valid
