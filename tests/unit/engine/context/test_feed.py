"""engine/context/feed.py: what feeds the ring from editor events, with its own state per
document (the line last edited or completed at, when it last gave a chunk)."""

from __future__ import annotations

import pytest

from ghostfim.engine.context import feed as feed_module
from ghostfim.engine.context.feed import ContextFeed
from tests.unit.engine.context.helpers import code

OTHER = "def helper(values):\n" + code("h", 12) + "    return values\n"


def fresh_feed() -> ContextFeed:
    feed = ContextFeed()
    feed.ring.update_interval_s = 0.0
    feed.set_workspace_roots(["file:///p"])
    return feed


def test_an_opened_document_gives_its_top_named_relative_to_the_workspace() -> None:
    feed = fresh_feed()
    feed.opened("file:///p/pkg/util.py", OTHER)
    [chunk] = feed.ring.pending
    assert chunk.filename == "pkg/util.py" and chunk.text.startswith("def helper(values):")
    extra = feed.for_prompt("file:///p/main.py", True, None)
    assert extra is not None and extra.project == "p" and extra.filename == "main.py"
    assert [c.filename for c in extra.chunks] == ["pkg/util.py"] and extra.budget is None
    assert feed.status().chunks == 1


def test_extra_context_is_off_or_empty_unless_asked_and_held() -> None:
    feed = fresh_feed()
    assert feed.for_prompt("file:///p/main.py", True, None) is None  # nothing held
    feed.opened("file:///p/util.py", OTHER)
    assert feed.for_prompt("file:///p/main.py", False, None) is None  # switched off
    assert feed.for_prompt("file:///p/main.py", True, 0) is None  # a budget of nothing
    assert feed.for_prompt("file:///p/main.py", True, 300).budget == 300  # type: ignore[union-attr]


def test_leaving_an_open_document_gives_the_chunk_around_its_last_cursor() -> None:
    feed = fresh_feed()
    text = code("b", 60)
    feed.opened("file:///p/b.py", text)
    feed.ring.pending.clear()
    feed.cursor_moved("file:///p/b.py", 40)
    assert feed.ring.pending == []  # staying in one document picks nothing
    feed.cursor_moved("file:///p/main.py", 3, ("file:///p/b.py", text, 40))
    [chunk] = feed.ring.pending
    assert chunk.filename == "b.py" and "b_40 " in chunk.text and "b_0 " not in chunk.text
    feed.closed("file:///p/b.py")  # closed: its chunk goes, and leaving it gives none
    assert feed.ring.pending == []
    feed.cursor_moved("file:///p/main.py", 3, ("file:///p/b.py", text, 40))
    assert feed.ring.pending == []
    feed.cursor_moved("file:///p/main.py", 4, ("file:///p/main.py", "x", 3))  # not another
    assert feed.ring.pending == []


def test_edits_give_a_chunk_at_most_once_an_interval_and_a_save_always(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [1000.0]
    monkeypatch.setattr(feed_module.time, "monotonic", lambda: now[0])
    feed = fresh_feed()
    uri = "file:///p/pkg/util.py"
    feed.opened(uri, OTHER)
    feed.ring.pending.clear()
    feed.edited(uri, OTHER + code("z", 20), 16)
    assert feed.ring.pending == []  # util.py gave its chunk at open, just now
    feed.saved(uri, OTHER + code("z", 20))
    assert len(feed.ring.pending) == 1 and "z_" in feed.ring.pending[0].text  # at the edit
    feed.ring.pending.clear()
    now[0] += feed_module.CHANGE_PICK_S + 1
    feed.edited(uri, OTHER + code("y", 20), 16)
    assert len(feed.ring.pending) == 1 and "y_" in feed.ring.pending[0].text


def test_text_from_the_client_is_named_by_its_document_or_a_snippet() -> None:
    feed = fresh_feed()
    assert feed.client_text(code("yank", 8)) == 1
    assert feed.client_text(code("sel", 8), "file:///p/sel.py") == 1
    assert [c.filename for c in feed.ring.pending] == ["snippet", "sel.py"]
