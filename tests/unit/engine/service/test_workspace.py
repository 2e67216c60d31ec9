"""engine/service/workspace.py: the index fed from the editor's events, and the block each
request gets, sticky per document so that keystrokes keep their KV cache."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ghostfim.engine.context.definitions import DefinitionBlock
from ghostfim.engine.service.cursor import CursorState, cursor_state
from ghostfim.engine.service.workspace import DOCUMENT_UPDATE_S, WorkspaceContext
from tests.support.fakes import FIXED_DEBOUNCE, FakeBackend, serving

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


def started(
    tmp_path: Path, clock: Clock | None = None, first_block_fits: bool = False
) -> tuple[WorkspaceContext, str]:
    (tmp_path / "net.py").write_text(NET)
    (tmp_path / "app.py").write_text(APP)
    ws = WorkspaceContext(clock=clock or Clock(), first_block_fits=lambda: first_block_fits)
    ws.set_enabled(True)
    ws.set_roots([tmp_path.as_uri()])
    assert ws.index.wait(20)
    uri = (tmp_path / "app.py").as_uri()
    ws.opened(uri, APP)
    assert ws.index.wait(20)
    return ws, uri


def warmed(ws: WorkspaceContext, uri: str) -> DefinitionBlock:
    """The document's first keystroke, then the warm-up that gives keystrokes its block."""
    ws.block_for(at(uri, APP, 5, 4), full=False)
    first = ws.switch_due(uri)
    assert first is not None
    ws.switched(uri, first)
    return first


def typed_close(ws: WorkspaceContext, uri: str, clock: Clock) -> str:
    """The user finished a line that calls close(): the editor's text reaches the index."""
    text = APP.replace("    \n", "    close(h)\n    \n")
    clock.now += DOCUMENT_UPDATE_S
    ws.edited(uri, text)
    assert ws.index.wait(20)
    return text


def test_a_request_gets_the_definitions_of_the_names_used_near_it(tmp_path: Path) -> None:
    ws, uri = started(tmp_path)
    try:
        assert ws.status().state == "ready" and ws.status().files == 2
        block = ws.block_for(at(uri, APP, 5, 4), full=True)
        assert block is not None and block.names == ("connect",)
        assert block.entries[0].file == "net.py"
        assert ws.last_block is block
    finally:
        ws.stop()


def test_where_the_block_does_not_fit_a_first_prompt_keystrokes_wait_for_its_warm_up(
    tmp_path: Path,
) -> None:
    """Where the block would add more than a keystroke block's prefill to the first ghost
    text's wait, keystrokes take it once a warm-up at a lull has prefilled it."""
    ws, uri = started(tmp_path)
    try:
        assert ws.block_for(at(uri, APP, 5, 4), full=False) is None
        due = ws.switch_due(uri)
        assert due is not None and due.names == ("connect",)
        assert ws.block_for(at(uri, APP, 5, 4), full=False) is None  # not prefilled yet
        ws.switched(uri, due)
        assert ws.block_for(at(uri, APP, 5, 4), full=False) is due
        assert ws.switch_due(uri) is None
    finally:
        ws.stop()


def test_where_the_blocks_prefill_fits_the_first_prompt_takes_it(
    tmp_path: Path,
) -> None:
    """The document's first prompt is cold anyway; with the block, the suggestion read at the
    dwell after a file opens has it, and no keystroke waits for a lull to get it."""
    ws, uri = started(tmp_path, first_block_fits=True)
    try:
        first = ws.block_for(at(uri, APP, 5, 4), full=False)
        assert first is not None and first.names == ("connect",)
        assert ws.switch_due(uri) is None  # nothing left for a warm-up to switch to
        assert ws.block_for(at(uri, APP, 5, 4), full=True) is first
    finally:
        ws.stop()


def test_keystrokes_keep_the_block_and_a_pause_changes_it_only_for_new_names(
    tmp_path: Path,
) -> None:
    clock = Clock()
    ws, uri = started(tmp_path, clock)
    try:
        first = warmed(ws, uri)
        text = typed_close(ws, uri, clock)
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


# Another module that calls connect() and close() as the user is about to.
CLIENT = """\
from net import connect, close


def fetch(url):
    handle = connect(url)
    data = read_all(handle, chunk_size=4096)
    close(handle)
    return data
"""
FETCHING = "from net import connect, close\n\n\ndef download(url):\n    handle = connect(url)\n    "


def test_a_pause_gets_the_code_written_like_the_lines_before_it(tmp_path: Path) -> None:
    (tmp_path / "client.py").write_text(CLIENT)
    ws, _ = started(tmp_path)
    try:
        uri = (tmp_path / "dl.py").as_uri()
        (tmp_path / "dl.py").write_text(FETCHING)
        ws.opened(uri, FETCHING)
        assert ws.index.wait(20)
        block = ws.block_for(at(uri, FETCHING, 5, 4), full=True)
        assert block is not None
        [client] = [s for s in block.snippets if s.file == "client.py"]
        assert "read_all(handle, chunk_size=4096)" in client.text
        assert "client.py:1" in block.labels
        text = block.prompt_text()
        assert "# client.py:1\nfrom net import connect, close\n" in text  # code, not comments
        assert "#   def connect(url: str) -> int:" in text  # the definitions stay comments
        # The document's own lines around the cursor are in the prompt already: never snippets.
        assert all(s.file != "dl.py" for s in block.snippets)
    finally:
        ws.stop()


def test_keystrokes_switch_to_a_pauses_new_block_only_once_it_is_prefilled(
    tmp_path: Path,
) -> None:
    clock = Clock()
    ws, uri = started(tmp_path, clock)
    try:
        first = warmed(ws, uri)
        assert ws.block_for(at(uri, APP, 5, 4), full=False) is first
        assert ws.switch_due(uri) is None
        text = typed_close(ws, uri, clock)
        paused = ws.block_for(at(uri, text, 6, 4), full=True)
        assert paused is not first and paused is not None
        # Until the warm-up says the keystrokes' cache holds it, keystrokes keep the old one.
        assert ws.switch_due(uri) is paused
        assert ws.block_for(at(uri, text, 6, 5), full=False) is first
        ws.switched(uri, first)  # a stale warm-up (of another block) changes nothing
        assert ws.block_for(at(uri, text, 6, 5), full=False) is first
        ws.switched(uri, paused)
        assert ws.block_for(at(uri, text, 6, 5), full=False) is paused
        assert ws.switch_due(uri) is None
    finally:
        ws.stop()


def test_secret_literals_in_the_workspace_reach_no_prompt(tmp_path: Path) -> None:
    (tmp_path / "settings.py").write_text(
        "class Settings:\n"
        '    api_key: str = "sk-live-0123456789"\n'
        "\n\n"
        "def make_client(url):\n"
        '    token = "tok-0123456789abc"\n'
        "    handle = connect(url)\n"
        "    return handle\n"
    )
    ws, _ = started(tmp_path)
    try:
        uri = (tmp_path / "dl.py").as_uri()
        text = (
            "from settings import Settings\n\n\n"
            "def download(url):\n    s = Settings()\n    handle = connect(url)\n    "
        )
        ws.opened(uri, text)
        assert ws.index.wait(20)
        block = ws.block_for(at(uri, text, 6, 4), full=True)
        assert block is not None and block.snippets and "Settings" in block.names
        prompt = block.prompt_text()
        assert "sk-live-0123456789" not in prompt and "tok-0123456789abc" not in prompt
        assert 'token = "***"' in prompt and "api_key: str = '***'" in prompt
    finally:
        ws.stop()


async def test_the_service_gives_a_first_prompt_the_block_where_it_prefills_in_time() -> None:
    """With the "auto" budget, the keystroke's block is what prefills in
    DEFINITIONS_KEYSTROKE_PREFILL_MS at the measured speed: it fits a first prompt on a GPU
    (0.04 ms a token) and on this CPU (~4 ms a token) alike. A fixed budget of 512 tokens fits
    only where 512 tokens prefill in time (the GPU: ~20 ms; the CPU: ~2 s). A backend of
    unknown speed (a remote server) gets it at the first lull either way."""
    cases = (
        (None, 0.04, True),
        (None, 4.0, True),
        (None, None, False),
        (512, 0.04, True),
        (512, 4.0, False),
        (512, None, False),
    )
    for tokens, per_token_ms, fits in cases:
        config = replace(FIXED_DEBOUNCE, workspace_context_tokens=tokens)
        service, _ = await serving(FakeBackend(prefill_ms_per_token=per_token_ms), config)
        try:
            assert service.workspace.first_block_fits() is fits, (tokens, per_token_ms)
        finally:
            await service.shutdown()


def test_the_member_lookup_is_the_documents_and_only_with_the_context_and_a_workspace(
    tmp_path: Path,
) -> None:
    ws, uri = started(tmp_path)
    try:
        members = ws.members_for(uri, 0)
        assert members is not None
        (tmp_path / "mod.py").write_text("import net\n")
        ws.opened((tmp_path / "mod.py").as_uri(), "import net\n")
        assert ws.index.wait(20)
        lookup = ws.members_for((tmp_path / "mod.py").as_uri(), 0)
        assert lookup is not None and lookup("net") == {"connect", "close"}
        assert members("net") is None  # app.py imports names from net, not the module
        assert ws.members_for("untitled:Untitled-1", 0) is None
        ws.set_enabled(False)
        assert ws.members_for(uri, 0) is None
    finally:
        ws.stop()
    alone = WorkspaceContext()
    alone.set_enabled(True)
    alone.opened(uri, APP)
    try:
        assert alone.members_for(uri, 0) is None  # no workspace folder
    finally:
        alone.stop()
