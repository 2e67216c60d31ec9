"""engine/context/index.py: the workspace index built in its thread from small workspaces in
tmp_path: which files it reads, what it keeps, how it follows updates, its caps, and the names
one file imports resolved to other files' definitions."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ghostfim.engine.context import index as index_module
from ghostfim.engine.context.files import Limits
from ghostfim.engine.context.index import INDEX_NICE, WorkspaceIndex

WAIT_S = 20.0


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture
def index() -> Iterator[WorkspaceIndex]:
    idx = WorkspaceIndex()
    yield idx
    idx.stop()


def built(idx: WorkspaceIndex, *roots: Path) -> WorkspaceIndex:
    idx.start(list(roots))
    assert idx.wait(WAIT_S), "the index thread did not finish"
    return idx


def rels(idx: WorkspaceIndex, root: Path) -> set[str]:
    real = os.path.realpath(root)
    return {p[len(real) + 1 :] for p in idx._files}


def names(defs: list[object]) -> list[str]:
    return [getattr(d, "name", "") for d in defs]


def test_the_thread_builds_the_index_and_status_says_ready(
    tmp_path: Path, index: WorkspaceIndex
) -> None:
    assert index.status().state == "off"
    write(tmp_path, {"a.py": "def f(): ...\nclass C: ...\n", "b.ts": "export const x = 1;\n"})
    built(index, tmp_path)
    status = index.status()
    assert (status.state, status.files, status.definitions) == ("ready", 2, 3)
    assert status.index_ms is not None and status.bytes > 0
    assert index.usage().bytes == status.bytes
    assert index._thread is not None and index._thread.daemon
    index.stop()
    assert index.status().state == "off" and index.status().files == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice: Linux")
def test_the_index_thread_yields_the_cores_to_the_model(
    tmp_path: Path, index: WorkspaceIndex
) -> None:
    """The model's threads (what a keystroke waits for) come first: the index thread runs at
    a lower priority than the process, which keeps its own."""
    write(tmp_path, {"a.py": "def f(): ...\n"})
    built(index, tmp_path)
    assert index._thread is not None and index._thread.native_id is not None
    process = os.getpriority(os.PRIO_PROCESS, 0)
    assert os.getpriority(os.PRIO_PROCESS, index._thread.native_id) >= max(INDEX_NICE, process)
    assert os.getpriority(os.PRIO_PROCESS, 0) == process


def test_a_hold_keeps_the_index_waiting_until_it_is_let_go(
    tmp_path: Path, index: WorkspaceIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a model loads (and times its prefill) the index reads no file; let go, it
    builds; and a hold that lasts past HOLD_MAX_S is not waited for any longer."""
    write(tmp_path, {"a.py": "def f(): ...\n", "b.py": "def g(): ...\n"})
    index.hold(True)
    index.start([tmp_path])
    assert not index.wait(0.5)
    assert (index.status().state, index.status().files) == ("indexing", 0)
    index.hold(False)
    assert index.wait(WAIT_S)
    assert (index.status().state, index.status().files) == ("ready", 2)

    monkeypatch.setattr(index_module, "HOLD_MAX_S", 0.3)
    index.hold(True)
    index.start([tmp_path])  # a hold outlives a restart, and ends at its time
    assert index.wait(WAIT_S)
    assert (index.status().state, index.status().files) == ("ready", 2)
    index.hold(True)  # asked again while held: no new start, so it is long over
    write(tmp_path, {"c.py": "def h(): ...\n"})
    index.rescan()
    assert index.wait(WAIT_S) and index.status().files == 3


def test_stop_wakes_a_held_index(tmp_path: Path, index: WorkspaceIndex) -> None:
    write(tmp_path, {"a.py": "def f(): ...\n"})
    index.hold(True)
    index.start([tmp_path])
    thread = index._thread
    assert thread is not None
    index.stop()
    assert not thread.is_alive()  # woken, not left behind by stop()'s join timeout
    assert index._thread is None and index.status().state == "off"


def test_gitignore_venvs_node_modules_build_output_and_hidden_dirs_are_skipped(
    tmp_path: Path, index: WorkspaceIndex
) -> None:
    write(
        tmp_path,
        {
            ".gitignore": "generated/\n*.gen.py\n!keep.gen.py\n",
            ".git/info/exclude": "local_only.py\n",
            "src/pkg/__init__.py": "",
            "src/pkg/mod.py": "A = 1\n",
            "src/pkg/out.gen.py": "",
            "src/pkg/keep.gen.py": "",
            "src/pkg/sub/.gitignore": "secret.py\n",
            "src/pkg/sub/secret.py": "",
            "src/pkg/sub/open.py": "",
            "secret.py": "",  # the nested .gitignore applies below its own folder only
            "local_only.py": "",
            "generated/x.py": "",
            ".venv/lib/x.py": "",
            "env2/pyvenv.cfg": "home = /usr\n",
            "env2/lib/x.py": "",
            "node_modules/lib/index.js": "",
            "web/node_modules/lib/index.js": "",
            "build/lib/pkg/mod.py": "",
            "dist/bundle.js": "",
            "src/pkg/__pycache__/mod.py": "",
            "app.egg-info/x.py": "",
            "web/app.min.js": "",
            "web/chunk-4XQ2.js": "export const a=1;" + "let b=2;" * 200 + "\n",  # a bundle
            "web/app.ts": "export const a = 1;\n",
            "notes.txt": "",
        },
    )
    built(index, tmp_path)
    assert rels(index, tmp_path) == {
        "src/pkg/__init__.py",
        "src/pkg/mod.py",
        "src/pkg/keep.gen.py",
        "src/pkg/sub/open.py",
        "secret.py",
        "web/app.ts",
    }
    # A document the walk would not read is not taken from the editor either.
    index.update_document(tmp_path / "generated" / "y.py", "def y(): ...\n")
    index.update_document(tmp_path / "node_modules" / "z.js", "export const z = 1;\n")
    index.update_document(tmp_path / "src" / "pkg" / "notes.md", "# notes\n")
    index.update_document(tmp_path / "src" / "pkg" / "typed.py", "def typed(): ...\n")
    assert index.wait(WAIT_S)
    assert rels(index, tmp_path) - {"src/pkg/typed.py"} == {
        "src/pkg/__init__.py",
        "src/pkg/mod.py",
        "src/pkg/keep.gen.py",
        "src/pkg/sub/open.py",
        "secret.py",
        "web/app.ts",
    }
    assert "src/pkg/typed.py" in rels(index, tmp_path)  # a new file, not on disk yet


def test_stop_ends_a_build_under_way_and_a_document_outside_the_roots_is_ignored(
    tmp_path: Path,
) -> None:
    write(
        tmp_path / "root", {f"d{i}/m{j}.py": "def f(): ...\n" for i in range(30) for j in range(10)}
    )
    index = WorkspaceIndex()
    index.start([tmp_path / "root"])
    thread = index._thread
    index.stop()
    assert thread is not None and not thread.is_alive()
    assert index.status() == index.status().__class__("off", 0, 0, 0, None)
    built(index, tmp_path / "root")
    assert index.status().files == 300
    index.update_document(tmp_path / "elsewhere.py", "def other(): ...\n")
    assert index.wait(WAIT_S) and index.status().files == 300
    index.stop()


def test_symlinks_are_not_followed_out_of_the_workspace(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    write(root, {"own.py": "def own(): ...\n"})
    write(outside, {"stolen.py": "def stolen(): ...\n", "dir/deep.py": "def deep(): ...\n"})
    (root / "linked_dir").symlink_to(outside / "dir")
    (root / "linked.py").symlink_to(outside / "stolen.py")
    index = WorkspaceIndex()
    try:
        built(index, root)
        assert rels(index, root) == {"own.py"}
        # Nor when an editor names them: a document or a change under a link is not taken.
        index.update_document(root / "linked_dir" / "deep.py", "def typed(): ...\n")
        index.file_changed(root / "linked.py")
        index.file_changed(outside / "stolen.py")
        assert index.wait(WAIT_S)
        assert rels(index, root) == {"own.py"}
    finally:
        index.stop()


def test_a_root_opened_through_a_symlink_is_indexed_under_its_real_path(tmp_path: Path) -> None:
    real = tmp_path / "real"
    write(real, {"pkg/__init__.py": "", "pkg/mod.py": "def f(): ...\n"})
    (tmp_path / "alias").symlink_to(real)
    index = WorkspaceIndex()
    try:
        built(index, tmp_path / "alias")
        file = index.file(tmp_path / "alias" / "pkg" / "mod.py")
        assert file is not None and file.path == str(real / "pkg" / "mod.py")
        assert file.module == "pkg.mod"
    finally:
        index.stop()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_named_like_a_source_file_is_never_read(
    tmp_path: Path, index: WorkspaceIndex
) -> None:
    write(tmp_path, {"a.py": "A = 1\n"})
    os.mkfifo(tmp_path / "trap.py")  # a read would block for ever
    built(index, tmp_path)
    index.file_changed(tmp_path / "trap.py")
    assert index.wait(WAIT_S)
    assert rels(index, tmp_path) == {"a.py"}


def test_caps_on_files_and_bytes_leave_the_index_capped(tmp_path: Path) -> None:
    write(tmp_path, {f"m{i}.py": f"def f{i}(): ...\n" for i in range(5)})
    write(tmp_path, {"big.py": "x = 1\n" * 200})  # 1,200 bytes: over the per-file cap
    index = WorkspaceIndex(Limits(files=3, file_bytes=1000))
    try:
        built(index, tmp_path)
        status = index.status()
        assert (status.state, status.files) == ("capped", 3)
        assert rels(index, tmp_path) == {"m0.py", "m1.py", "m2.py"}  # in name order
    finally:
        index.stop()
    index = WorkspaceIndex(Limits(file_bytes=1000))
    try:
        built(index, tmp_path)
        assert index.status().state == "ready" and "big.py" not in rels(index, tmp_path)
    finally:
        index.stop()
    index = WorkspaceIndex(Limits(total_bytes=40, file_bytes=1000))  # 15-16 bytes a file
    try:
        built(index, tmp_path)
        assert index.status().state == "capped" and index.status().files == 2
    finally:
        index.stop()
    index = WorkspaceIndex(Limits(memory_bytes=3000, file_bytes=1000))
    try:
        built(index, tmp_path)
        status = index.status()
        assert status.state == "capped" and 0 < status.files < 6 and status.bytes <= 3000
    finally:
        index.stop()


def test_documents_changes_and_deletions_update_the_index(
    tmp_path: Path, index: WorkspaceIndex
) -> None:
    write(tmp_path, {"a.py": "def one(): ...\n", "pkg/b.py": "B = 1\n", "pkg/c.py": "C = 1\n"})
    built(index, tmp_path)
    a = tmp_path / "a.py"

    def defs(path: Path) -> list[str]:
        file = index.file(path)
        return [] if file is None else [d.name for d in file.outline.definitions]

    # The editor's text, broken where the user types (the broken line is left out).
    index.update_document(a, "def one(): ...\ndef two(x):\n    return x.\ndef three(): ...\n")
    assert index.wait(WAIT_S) and defs(a) == ["one", "two", "three"]
    file = index.file(a)
    assert file is not None and file.outline.broken
    # Documents queued while the thread is busy are coalesced: the newest text is what counts.
    index.update_document(a, "def four(): ...\n")
    index.update_document(a, "def five(): ...\n")
    assert index.wait(WAIT_S) and defs(a) == ["five"]
    # A rescan keeps the editor's text, not the disk's.
    index.rescan()
    assert index.wait(WAIT_S) and defs(a) == ["five"]
    # Closed: the caller says the file changed, and the disk's text is back.
    index.file_changed(a)
    assert index.wait(WAIT_S) and defs(a) == ["one"]
    # A new file on disk, a deleted one, a deleted folder.
    write(tmp_path, {"new.py": "def new(): ...\n"})
    index.file_changed(tmp_path / "new.py")
    index.file_deleted(a)
    assert index.wait(WAIT_S) and defs(tmp_path / "new.py") == ["new"] and not defs(a)
    index.file_deleted(tmp_path / "pkg")
    assert index.wait(WAIT_S)
    assert rels(index, tmp_path) == {"new.py"}
    assert index.status().definitions == 1


def test_a_rescan_reads_what_changed_on_disk_and_drops_what_went(tmp_path: Path) -> None:
    write(tmp_path, {"a.py": "def one(): ...\n", "b.py": "B = 1\n", "d.py": "D = 1\n"})
    index = WorkspaceIndex(Limits(file_bytes=1000))
    built(index, tmp_path)
    (tmp_path / "b.py").unlink()
    write(tmp_path, {"a.py": "def one_more_name(): ...\n", "c.py": "C = 1\n"})
    write(tmp_path, {"d.py": "D = 1\n" * 200})  # grown past the cap on a file's size
    index.rescan()
    assert index.wait(WAIT_S)
    assert rels(index, tmp_path) == {"a.py", "c.py"}
    file = index.file(tmp_path / "a.py")
    assert file is not None and [d.name for d in file.outline.definitions] == ["one_more_name"]
    index.stop()


def test_a_changed_gitignore_rescans_with_its_new_rules(
    tmp_path: Path, index: WorkspaceIndex
) -> None:
    write(tmp_path, {"a.py": "", "gen/b.py": ""})
    built(index, tmp_path)
    assert rels(index, tmp_path) == {"a.py", "gen/b.py"}
    write(tmp_path, {".gitignore": "gen/\n"})
    index.file_changed(tmp_path / ".gitignore")
    assert index.wait(WAIT_S) and rels(index, tmp_path) == {"a.py"}


def test_a_restart_indexes_the_new_roots_only(tmp_path: Path, index: WorkspaceIndex) -> None:
    write(tmp_path / "one", {"a.py": ""})
    write(tmp_path / "two", {"b.py": "", "c.py": ""})
    built(index, tmp_path / "one")
    built(index, tmp_path / "two")
    assert rels(index, tmp_path / "two") == {"b.py", "c.py"}


PACKAGE = {
    "src/shop/__init__.py": '"""Shop."""\nfrom .models import Item\n\n__all__ = ["Item"]\n',
    "src/shop/models.py": (
        "from shop.base import Base\n\n"
        "class Item(Base):\n"
        '    """An item for sale."""\n'
        "    name: str\n"
        "    price: float = 0.0\n\n"
        "    def total(self, count: int) -> float: ...\n"
    ),
    "src/shop/base.py": "class Base:\n    def save(self) -> None: ...\n",
    "src/shop/util/__init__.py": "",
    "src/shop/util/money.py": 'def cents(value: float) -> int:\n    """In cents."""\n',
    "src/shop/cart.py": (
        "from __future__ import annotations\n"
        "import shop.util.money\n"
        "import shop.util.money as money_mod\n"
        "from . import base\n"
        "from .util import money\n"
        "from shop import Item\n"
        "from shop.models import Item as Thing\n"
        "from os import path\n\n"
        "class Cart(Thing, base.Base):\n"
        "    def add(self, item: Item) -> None:\n"
        "        pass\n"
    ),
}


def test_python_names_resolve_across_modules(tmp_path: Path, index: WorkspaceIndex) -> None:
    write(tmp_path, PACKAGE)
    built(index, tmp_path)
    cart = tmp_path / "src/shop/cart.py"
    file = index.file(cart)
    assert file is not None and file.module == "shop.cart"  # src/ layout
    # `shop.Item` is re-exported by the package: followed to where it is defined.
    [item] = index.definitions_for(cart, ["Item"])
    assert item.path == str(tmp_path / "src/shop/models.py") and item.line == 2
    assert item.stub.startswith('class Item(Base):\n    """An item for sale."""\n    name: str')
    found = index.definitions_for(
        cart,
        [
            "Thing",
            "money.cents",
            "money_mod.cents",
            "shop.util.money.cents",
            "base.Base",
            "path",  # the standard library's: not the workspace's
            "Undefined",
            "Item",  # one definition once
        ],
    )
    assert names(found) == ["Item", "cents", "Base"]
    [cents] = [d for d in found if d.name == "cents"]
    assert cents.stub == 'def cents(value: float) -> int:\n    """In cents."""'
    # The bases of the class around a line: imported under another name, through a module.
    assert names(index.class_bases(cart, 11)) == ["Item", "Base"]
    assert index.class_bases(cart, 0) == []
    assert dict(index.imports_of(cart)) == {
        "__future__": None,
        "shop.util.money": str(tmp_path / "src/shop/util/money.py"),
        ".": str(tmp_path / "src/shop/__init__.py"),
        ".util": str(tmp_path / "src/shop/util/__init__.py"),
        "shop": str(tmp_path / "src/shop/__init__.py"),
        "shop.models": str(tmp_path / "src/shop/models.py"),
        "os": None,
    }


def test_star_imports_and_namespace_packages_resolve(tmp_path: Path, index: WorkspaceIndex) -> None:
    write(
        tmp_path,
        {
            # a namespace package (no __init__.py) holding a regular one
            "corp/tools/__init__.py": "from .impl import *\n",
            "corp/tools/impl.py": "def run(x: int) -> int: ...\n",
            "app.py": "import corp.tools\nfrom corp.tools import impl\nfrom corp.tools import *\n",
        },
    )
    built(index, tmp_path)
    app = tmp_path / "app.py"
    assert names(index.definitions_for(app, ["corp.tools.run"])) == ["run"]
    assert names(index.definitions_for(app, ["impl.run"])) == ["run"]
    assert names(index.definitions_for(app, ["run"])) == ["run"]  # through the star import


def test_a_cycle_of_re_exports_ends(tmp_path: Path, index: WorkspaceIndex) -> None:
    write(
        tmp_path,
        {
            "a.py": "from b import X\n",
            "b.py": "from a import X\n",
            "c.py": "from a import X\n",
            "d.ts": 'export * from "./e";\n',
            "e.ts": 'export * from "./d";\n',
            "f.ts": 'import { Y } from "./d";\n',
        },
    )
    built(index, tmp_path)
    assert index.definitions_for(tmp_path / "c.py", ["X"]) == []
    assert index.definitions_for(tmp_path / "f.ts", ["Y"]) == []


def test_typescript_and_javascript_names_resolve_across_modules(
    tmp_path: Path, index: WorkspaceIndex
) -> None:
    write(
        tmp_path,
        {
            "src/shapes/circle.ts": (
                "/** A circle. */\n"
                "export class Circle extends Shape {\n"
                "  radius: number = 1;\n"
                "  area(): number { return 0; }\n"
                "}\n"
            ),
            "src/shapes/shape.ts": "export abstract class Shape { abstract area(): number; }\n",
            "src/shapes/index.ts": (
                'export { Circle } from "./circle.js";\nexport * from "./shape";\n'
            ),
            "src/util.js": "function helper(a, b) { return a; }\nexport default helper;\n",
            "src/config.ts": "const config = { debug: true };\nexport { config as settings };\n",
            "src/app.ts": (
                'import { Circle, Shape } from "./shapes";\n'
                'import * as shapes from "./shapes/index";\n'
                'import helper from "./util.js";\n'
                'import { settings } from "./config";\n'
                'const legacy = require("./util");\n'
                'import { thing } from "some-package";\n'
                "class Ring extends Circle {\n"
                "  inner = 0;\n"
                "}\n"
            ),
        },
    )
    built(index, tmp_path)
    app = tmp_path / "src/app.ts"
    found = index.definitions_for(app, ["Circle", "shapes.Shape", "helper", "settings", "thing"])
    assert names(found) == ["Circle", "Shape", "helper", "config"]
    assert found[0].stub.startswith("/** A circle. */\nexport class Circle extends Shape {")
    assert found[0].path == str(tmp_path / "src/shapes/circle.ts")
    assert names(index.class_bases(app, 7)) == ["Circle"]
    file = index.file(app)
    assert file is not None and file.module == "src/app"
    imports = dict(index.imports_of(app))
    assert imports["./shapes"] == str(tmp_path / "src/shapes/index.ts")
    assert imports["./util.js"] == str(tmp_path / "src/util.js")
    assert imports["./util"] == str(tmp_path / "src/util.js")
    assert imports["some-package"] is None


MEMBERS = {
    "pkg/__init__.py": "from .proto import ToProto\n",
    "pkg/proto.py": (
        "import enum\n"
        "from .base import Converter\n"
        "LIMIT = 3\n"
        "class ToProto(Converter):\n"
        "    FORMAT: str = 'x'\n"
        "    def task(self): ...\n"
        "    @classmethod\n"
        "    def _private_helper(cls): ...\n"
        "class State(str, enum.Enum):\n"
        "    READY = 'ready'\n"
        "    DONE, FAILED = 'done', 'failed'\n"
        "class Model(BaseModel):\n"
        "    name: str\n"
    ),
    "pkg/base.py": (
        "import sys\n"
        "class Converter:\n"
        "    def agent_card(self): ...\n"
        "    if sys.version_info >= (3, 12):\n"
        "        def later(self): ...\n"
    ),
    "pkg/unpack.py": "A, B = 1, 2\n",
    "pkg/loop.py": "for _name in ('X',):\n    pass\n",
    "pkg/sub/__init__.py": "",
    "pkg/tool.py": "def run(): ...\n",
    "pkg/gen_pb2.py": "_globals = globals()\nDESCRIPTOR = object()\n",
    "pkg/gen_pb2.pyi": "class Message: ...\nDESCRIPTOR: object\n",
    "pkg/lazy.py": "def __getattr__(name): ...\n",
    "pkg/dyn.py": "_g = globals()\n_g['Made'] = 1\n",
    "pkg/star.py": "from .tool import *\n",
    "app.py": (
        "import pkg\n"
        "from pkg import proto, gen_pb2, lazy, dyn, star, unpack, loop\n"
        "from pkg.proto import ToProto as TP, State, Model\n"
    ),
}


def test_members_are_every_name_a_module_or_class_of_the_workspace_has(
    tmp_path: Path, index: WorkspaceIndex
) -> None:
    write(tmp_path, MEMBERS)
    built(index, tmp_path)
    app = tmp_path / "app.py"
    # A module: its definitions, the names it imports; a package's submodules too.
    assert index.members(app, "proto") == {
        "enum",
        "Converter",
        "LIMIT",
        "ToProto",
        "State",
        "Model",
    }
    assert index.members(app, "pkg") == {
        "ToProto", "proto", "base", "sub", "tool", "gen_pb2", "lazy", "dyn", "star", "unpack",
        "loop",
    }  # fmt: skip
    # A class: its own names (private ones too, and all of them where its stub is cut) and
    # those of its bases that the workspace holds; an Enum's members through `str, enum.Enum`.
    expected = {"FORMAT", "task", "_private_helper", "agent_card", "later"}
    assert index.members(app, "TP") == expected
    assert index.members(app, "proto.ToProto") == expected
    assert index.members(app, "pkg.proto.ToProto") == expected
    assert index.members(app, "State") == {"READY", "DONE", "FAILED"}
    # A module's stub lists what the module makes at run time.
    assert index.members(app, "gen_pb2") == {"Message", "DESCRIPTOR"}


def test_no_member_list_where_it_may_be_incomplete_or_names_nothing_known(
    tmp_path: Path, index: WorkspaceIndex
) -> None:
    write(tmp_path, MEMBERS)
    built(index, tmp_path)
    app = tmp_path / "app.py"
    for dotted in (
        "Model",  # a base neither the workspace nor ghostfim knows (BaseModel, not imported)
        "lazy",  # a module __getattr__
        "dyn",  # globals() at the top level
        "unpack",  # names the outline does not list: `A, B = ...`
        "loop",  # ... a loop's
        "star",  # a star import from anywhere
        "proto.LIMIT",  # a variable: its type is not known
        "TP.task",  # a method's attributes
        "os",  # not the workspace's
        "unknown",
    ):
        assert index.members(app, dotted) is None, dotted
    assert index.members(tmp_path / "elsewhere.py", "pkg") is None


def test_a_standard_or_one_name_module_is_not_a_workspace_file_by_its_path_tail(
    tmp_path: Path, index: WorkspaceIndex
) -> None:
    write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/types.py": "class Frame: ...\n",
            "pkg/concurrent/futures.py": "class Pool: ...\n",
            "pkg/helpers.py": "def run(): ...\n",
            "app.py": (
                "import types\nimport concurrent.futures\nimport helpers\n"
                "import pkg.types as t\nfrom pkg import helpers as h\n"
            ),
        },
    )
    built(index, tmp_path)
    app = tmp_path / "app.py"
    for dotted in ("types", "concurrent.futures", "helpers"):
        assert index.members(app, dotted) is None, dotted
    assert index.members(app, "t") == {"Frame"}
    assert index.members(app, "h") == {"run"}


def test_no_member_list_from_an_index_a_cap_left_files_out_of(tmp_path: Path) -> None:
    write(tmp_path, MEMBERS)
    index = WorkspaceIndex(Limits(files=12))  # of 13: one of pkg's modules is missing
    try:
        built(index, tmp_path)
        app = index.file(tmp_path / "app.py")
        assert index.status().state == "capped" and app is not None
        assert index._resolver.members(app, "pkg")  # a list, but one without that module
        assert index.members(tmp_path / "app.py", "pkg") is None
    finally:
        index.stop()


INSTANCES = {
    "shapes/base.py": (
        "import abc\n"
        "class Shape(abc.ABC):\n"
        "    sides = 0\n"
        "    def __init__(self, name):\n"
        "        self.name = name\n"
        "        self.cache: dict = {}\n"
        "    def describe(self):\n"
        "        # a base may read what its subclasses assign\n"
        "        return f'{self.name}: {self.area()} ({self.unit})'\n"
        "class Mixin:\n"
        "    def log(self):\n"
        "        print(self.logger)  # assigned by whatever mixes it in\n"
    ),
    "shapes/square.py": (
        "from typing import Generic, TypeVar\n"
        "from .base import Shape, Mixin\n"
        "from pydantic import BaseModel\n"
        "import pydantic\n"
        "from httpx import Client\n"
        "T = TypeVar('T')\n"
        "class Square(Shape, Generic[T]):\n"
        "    def __init__(self, side):\n"
        "        super().__init__('square')\n"
        "        self.side, self.unit = side, 'cm'\n"
        "        self.count += 1\n"
        "    def area(self):\n"
        "        return self.side ** 2\n"
        "class Logged(Square, Mixin):\n"
        "    def __init__(self):\n"
        "        self.logger = None\n"
        "class Halfway(Mixin):\n"
        "    pass\n"
        "class Settings(BaseModel):\n"
        "    port: int = 80\n"
        "    def show(self):\n"
        "        return self.model_dump()\n"
        "class Loose(pydantic.BaseModel):\n"
        "    model_config = pydantic.ConfigDict(extra='allow')\n"
        "class Remote(Client):\n"
        "    pass\n"
        "def make() -> 'Optional[Square]': ...\n"
        "async def fetch(key) -> Square: ...\n"
        "def loose(): ...\n"
        "class Failure(ValueError):\n"
        "    def __init__(self, code):\n"
        "        self.code = code\n"
        "class Free:\n"
        "    def __init__(self, **kw):\n"
        "        for k, v in kw.items():\n"
        "            setattr(self, k, v)\n"
        "class Color(str):\n"
        "    def loud(self):\n"
        "        return self.upper()\n"
    ),
}


@pytest.fixture
def square(tmp_path: Path, index: WorkspaceIndex) -> Path:
    """INSTANCES indexed: the file most of their classes are in."""
    write(tmp_path, INSTANCES)
    built(index, tmp_path)
    return tmp_path / "shapes/square.py"


def test_an_instance_has_its_class_and_bases_names_and_what_their_methods_assign(
    square: Path, index: WorkspaceIndex
) -> None:
    """`Square()`: what `self.` may go on with in Square's methods."""
    names = index.members(square, "Square()")
    assert names is not None
    own = {"__init__", "area", "side", "unit", "count"}  # `+=`: assigned here too
    inherited = {"sides", "name", "cache", "describe"}
    assert own | inherited <= names
    assert "__class__" in names and "logger" not in names
    # Shape reads `self.area` and `self.unit`, which only Square gives: Shape's own instances
    # have no list, Square's have; a mixin's `self.logger` is given by the class that uses it.
    assert index.members(square.parent / "base.py", "Shape()") is None
    assert index.members(square, "Logged()") == names | {"logger", "log"}
    for dotted in (
        "Halfway()",  # a mixin whose `self.logger` nothing assigns
        "Remote()",  # a base from outside the workspace
        "Loose()",  # a pydantic model that keeps fields it was not declared with
        "Free()",  # setattr(self, ...)
        "Color()",  # str's methods: no list for the instances of a builtin's subclass
        "T()",  # not a class
        "Square",  # the class itself: its class-level names only (below)
    ):
        assert index.members(square, dotted) != names, dotted
        if dotted != "Square":
            assert index.members(square, dotted) is None, dotted
    assert "side" not in (index.members(square, "Square") or set())


def test_pydantic_models_exceptions_and_what_a_function_returns_have_known_names(
    square: Path, index: WorkspaceIndex
) -> None:
    settings = index.members(square, "Settings()")
    assert settings is not None
    assert {"port", "show", "model_dump", "model_copy", "__class__"} <= settings
    assert {"model_validate", "port"} <= (index.members(square, "Settings") or set())
    # `x = make()`: what the function's return annotation names.
    assert index.members(square, "make()") == index.members(square, "Square()") is not None
    assert index.members(square, "fetch()") == index.members(square, "Square()")
    assert index.members(square, "loose()") is None
    failure = index.members(square, "Failure()")
    assert failure is not None and {"code", "args", "with_traceback"} <= failure


TS_INSTANCES = {
    "src/base.ts": (
        "export interface Named { label(): string }\n"
        "export class Store {\n"
        "  protected items = new Map<string, number>()\n"
        "  static create(): Store { return new Store() }\n"
        "  size(): number { return this.items.size }\n"
        "  *[Symbol.iterator]() { yield* this.items }\n"
        "  entries() { return this[Symbol.iterator]() }  // a well-known symbol: no new name\n"
        "}\n"
    ),
    "src/cache.ts": (
        "import { Store, Named } from './base'\n"
        "import { EventEmitter } from 'events'\n"
        "export class Cache extends Store implements Named {\n"
        "  #hits = 0\n"
        "  constructor(private readonly limit: number, plain: string) {\n"
        "    super()\n"
        "    this.misses = 0\n"
        "  }\n"
        "  label(): string {\n"
        "    return `${this.limit}`\n"
        "  }\n"
        "}\n"
        "export class Loud extends EventEmitter {\n"
        "  shout() { this.emit('x') }\n"
        "}\n"
        "export class Bag {\n"
        "  [key: string]: unknown\n"
        "}\n"
        "export class Helper {\n"
        "  run() { return this.missing }\n"
        "}\n"
    ),
}


def test_this_in_a_typescript_class_has_its_instance_names(
    tmp_path: Path, index: WorkspaceIndex
) -> None:
    """`this.` at a line inside a class: its fields, methods, constructor parameter
    properties, what it assigns on `this`, its workspace base's (not its static names)."""
    write(tmp_path, TS_INSTANCES)
    built(index, tmp_path)
    cache = tmp_path / "src/cache.ts"
    names = index.members(cache, "this()", 9)
    assert names is not None
    assert {"#hits", "constructor", "limit", "misses", "label", "items", "size"} <= names
    assert "plain" not in names and "create" not in names  # a parameter; a static method
    assert index.members(tmp_path / "src/base.ts", "this()", 4) == (
        {"items", "size", "entries"} | {"constructor", "hasOwnProperty", "isPrototypeOf"}
        | {"propertyIsEnumerable", "toLocaleString", "toString", "valueOf"}
    )  # fmt: skip
    for line, why in (
        (13, "a base from outside the workspace"),
        (16, "an index signature"),
        (19, "this.missing is assigned nowhere"),
        (0, "not in a class"),
    ):
        assert index.members(cache, "this()", line) is None, why
    assert index.members(cache, "this()") is None  # no line: no class
