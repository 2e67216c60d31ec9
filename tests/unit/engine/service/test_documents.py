"""engine/service/documents.py: the cursor state and the record kept per document."""

from __future__ import annotations

from ghostfim.engine.service.documents import CursorState, DocumentRecord


def test_the_rest_of_the_line_is_what_follows_the_cursor_on_its_line() -> None:
    state = CursorState("d", 1, None, "x = f(", "a, b)\ny = 2\n", 0, 6, 18)
    assert state.rest_of_line == "a, b)"
    assert CursorState("d", 1, None, "x", "", 0, 1, 1).rest_of_line == ""
    assert CursorState("d", 1, None, "x", "tail", 0, 1, 5).rest_of_line == "tail"


async def test_a_new_request_supersedes_the_older_ones() -> None:
    record = DocumentRecord()
    held = record.newer
    record.next_request(3)
    assert record.latest == 3 and held.is_set()  # whoever waited on the old one wakes
    assert not record.newer.is_set()  # a fresh event for the new request
    record.next_request(4)
    assert record.latest == 4
