"""engine/context/definitions.py: which names near the cursor count, which definitions a
request gets from a real index over tmp_path, and the block's budget and order."""

from __future__ import annotations

from pathlib import Path

from ghostfim.engine.context.definitions import (
    ContextEntry,
    DefinitionBlock,
    SnippetEntry,
    fit_block,
    names_near,
    select_definitions,
)
from ghostfim.engine.context.index import WorkspaceIndex

MODELS = '''\
class Base:
    """The base of every store."""

    def get(self, key: str) -> bytes: ...


def connect(url: str, *, timeout: float = 5.0) -> "Client":
    """Open a client."""


def unused(x: int) -> int: ...
'''
APP = """\
from pkg.models import Base, connect, unused


class Store(Base):
    def open(self):
        client = connect(self.url)
        # unused( is named only in this comment
        return client

    def put(self, key):
        return
"""


def workspace(tmp_path: Path) -> WorkspaceIndex:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "models.py").write_text(MODELS)
    (tmp_path / "pkg" / "app.py").write_text(APP)
    index = WorkspaceIndex()
    index.start([tmp_path])
    assert index.wait(20)
    return index


def test_names_near_the_cursor_skip_its_own_line_and_comments() -> None:
    text = "a = first()\nb = second.call()\nc = typing_now(\n# third()\nd = fourth()\n"
    assert names_near(text, 2) == ["b", "second.call", "a", "first", "d", "fourth"]


def test_a_request_gets_the_imported_definitions_it_uses_and_its_class_bases(
    tmp_path: Path,
) -> None:
    index = workspace(tmp_path)
    try:
        app = str(tmp_path / "pkg" / "app.py")
        line = APP.split("\n").index("        return")
        picked = select_definitions(index, app, APP, line, lambda p: Path(p).name)
        names = [entry.name for _, entry in picked]
        assert names[0] == "Base"  # the class bases first
        assert "connect" in names
        assert "unused" not in names  # imported, but used only in a comment
        base = picked[0][1]
        assert base.file == "models.py" and "def get(self, key: str) -> bytes" in base.stub
    finally:
        index.stop()


def entry(name: str, file: str, line: int, words: int) -> ContextEntry:
    return ContextEntry(name, file, "\n".join(["x"] * words), line)


def test_the_block_keeps_the_most_wanted_that_fit_and_lists_them_by_file_and_line() -> None:
    picked = [entry("near", "b.py", 9, 3), entry("big", "a.py", 1, 50), entry("far", "a.py", 5, 3)]
    count = len  # a character a token: the arithmetic stays visible
    block = DefinitionBlock("python", tuple(picked)).fit(60, count)
    assert block.names == ("far", "near")  # "big" did not fit; a.py before b.py
    assert sum(count(block.entry_text(e)) for e in block.entries) <= 60
    assert block.prompt_text().startswith("# a.py:\n#   x\n")
    assert block.prompt_text().endswith("\n\n")
    # fit_block is the same selection for (definition, entry) pairs
    assert fit_block("python", [(None, e) for e in picked], 60, count).names == block.names  # type: ignore[misc]


def test_comment_marks_follow_the_documents_language() -> None:
    block = DefinitionBlock("typescript", (ContextEntry("f", "m.ts", "export function f(): void"),))
    assert block.prompt_text() == "// m.ts:\n//   export function f(): void\n\n"
    assert not DefinitionBlock("python", ())


def test_snippets_fit_first_and_read_as_code_after_the_definitions() -> None:
    near = SnippetEntry("pkg/client.py", 9, "handle = connect(url)\nhandle.send(data)")
    far = SnippetEntry("pkg/other.py", 0, "y = 2\n" * 30)
    defs = (ContextEntry("connect", "pkg/net.py", "def connect(url): ..."),)
    count = len
    block = DefinitionBlock("python", defs, snippets=(near, far))
    assert bool(DefinitionBlock("python", (), snippets=(near,)))
    # A budget for one snippet and nothing more: the snippet wins over the definition.
    only = block.fit(count(block.snippet_text(near)) + 5, count)
    assert only.snippets == (near,) and only.entries == ()
    # `far` (180 characters) does not fit whole: its first lines do, before the definition.
    cut = block.fit(150, count)
    assert cut.snippets[0] == near and cut.entries == ()
    assert far.text.startswith(cut.snippets[1].text) and cut.snippets[1].text.count("\n") >= 3
    assert sum(count(cut.snippet_text(s)) for s in cut.snippets) <= 150
    both = DefinitionBlock("python", defs, snippets=(near,)).fit(150, count)
    assert both.labels == ("connect", "pkg/client.py:10")
    assert both.prompt_text() == (
        "# pkg/net.py:\n#   def connect(url): ...\n\n"
        "# pkg/client.py:10\nhandle = connect(url)\nhandle.send(data)\n\n"
    )
    # Remote backends' repository-level files: the stubs' files, then one per snippet.
    assert both.files() == [
        ("pkg/net.py", "def connect(url): ..."),
        ("pkg/client.py", "handle = connect(url)\nhandle.send(data)"),
    ]
