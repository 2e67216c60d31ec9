"""engine/service/workspace.py: the index fed from the editor's events, and the block each
request gets, sticky per document so that keystrokes keep their KV cache."""

from __future__ import annotations

from pathlib import Path

from ghostfim.engine.service.cursor import CursorState, cursor_state
from ghostfim.engine.service.workspace import DOCUMENT_UPDATE_S, WorkspaceContext

NET = "def connect(url: str) -> int:\n    ...\n\n\ndef close(handle: int) -> None:\n    ...\n"
APP = "from net import connect, close\n\n\ndef main():\n    h = connect('x')\n    \n"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def at(uri: str, text: str, line: int, column: int) -> CursorState:
    lines = text.split("\n")
    offset = sum(len(x) + 1 for x in lines[:line]) + column
    return cursor_state(uri, 1, None, text, offset, line, "python")


def started(tmp_path: Path, clock: Clock | None = None) -> tuple[WorkspaceContext, str]:
    (tmp_path / "net.py").write_text(NET)
    (tmp_path / "app.py").write_text(APP)
    ws = WorkspaceContext(clock=clock or Clock())
    ws.set_enabled(True)
    ws.set_roots([tmp_path.as_uri()])
    assert ws.index.wait(20)
    uri = (tmp_path / "app.py").as_uri()
    ws.opened(uri, APP)
    assert ws.index.wait(20)
    return ws, uri


def test_a_request_gets_the_definitions_of_the_names_used_near_it(tmp_path: Path) -> None:
    ws, uri = started(tmp_path)
    try:
        assert ws.status().state == "ready" and ws.status().files == 2
        block = ws.block_for(at(uri, APP, 5, 4), full=False)
        assert block is not None and block.names == ("connect",)
        assert block.entries[0].file == "net.py"
        assert ws.last_block is block
    finally:
        ws.stop()


def test_keystrokes_keep_the_block_and_a_pause_changes_it_only_for_new_names(
    tmp_path: Path,
) -> None:
    clock = Clock()
    ws, uri = started(tmp_path, clock)
    try:
        first = ws.block_for(at(uri, APP, 5, 4), full=False)
        # The user finished a line that calls close(): the editor's text reaches the index.
        text = APP.replace("    \n", "    close(h)\n    \n")
        clock.now += DOCUMENT_UPDATE_S
        ws.edited(uri, text)
        assert ws.index.wait(20)
        assert ws.block_for(at(uri, text, 6, 4), full=False) is first  # keystroke: sticky
        paused = ws.block_for(at(uri, text, 6, 4), full=True)  # a pause looks again
        assert paused is not None and set(paused.names) == {"connect", "close"}
        # Back where only connect is used: the names are in the block already, it stays.
        assert ws.block_for(at(uri, APP, 5, 4), full=True) is paused
    finally:
        ws.stop()


def test_typing_reaches_the_index_at_most_every_few_seconds(tmp_path: Path) -> None:
    clock = Clock()
    ws, uri = started(tmp_path, clock)
    sent: list[str] = []
    ws.index.update_document = lambda path, text: sent.append(text)  # type: ignore[method-assign]
    try:
        ws.edited(uri, APP + "a")
        clock.now += 1.0
        ws.edited(uri, APP + "ab")
        assert sent == []  # within DOCUMENT_UPDATE_S of the open
        clock.now += DOCUMENT_UPDATE_S
        ws.edited(uri, APP + "abc")
        assert sent == [APP + "abc"]
        ws.edited(uri, APP + "abcd")
        ws.saved(uri)  # a save sends what is pending at once
        assert sent == [APP + "abc", APP + "abcd"]
    finally:
        ws.stop()


def test_off_stops_the_index_and_requests_get_nothing(tmp_path: Path) -> None:
    ws, uri = started(tmp_path)
    ws.set_enabled(False)
    assert ws.status().state == "off"
    assert ws.block_for(at(uri, APP, 5, 4), full=True) is None
    ws.set_enabled(True)
    assert ws.index.wait(20) and ws.status().files == 2
    ws.stop()


def test_disk_changes_of_an_open_document_do_not_replace_the_editors_text(
    tmp_path: Path,
) -> None:
    ws, uri = started(tmp_path)
    changed: list[str] = []
    ws.index.file_changed = lambda path: changed.append(str(path))  # type: ignore[method-assign]
    try:
        net = (tmp_path / "net.py").as_uri()
        ws.files_changed([(uri, False), (net, False), ("untitled:Untitled-1", False)])
        assert changed == [str(tmp_path / "net.py")]
    finally:
        ws.stop()


def test_a_long_document_counts_the_names_around_the_cursor_not_at_its_start(
    tmp_path: Path,
) -> None:
    ws, uri = started(tmp_path)
    try:
        # 3,000 lines of filler push the document's start out of the cursor's text window.
        long = APP.replace("def main", "".join(f"x{i} = {i}\n" for i in range(3000)) + "def main")
        ws.edited(uri, long)
        line = long.split("\n").index("    h = connect('x')") + 1
        block = ws.block_for(at(uri, long, line, 4), full=True)
        assert block is not None and block.names == ("connect",)
    finally:
        ws.stop()
