"""engine/context/pyoutline.py and jsoutline.py: what a file's outline holds, from sources that
parse and from sources being edited."""

from __future__ import annotations

from ghostfim.engine.context.jsoutline import js_outline
from ghostfim.engine.context.outline import STUB_LINES, Binding
from ghostfim.engine.context.pyoutline import python_outline

PYTHON = '''"""A module."""
from __future__ import annotations

import os.path
import numpy as np
from .base import Base, helper as h
from . import sibling
from ..pkg.mod import *
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .types import T

LIMIT: int = 10


@dataclass
class Model(Base, metaclass=Meta):
    """A model.

    More about it."""

    x: int = 0
    _private: str = ""

    def __init__(self, a: int) -> None:
        self.a = a

    @property
    def size(self) -> int:
        """The size."""
        return 1

    @size.setter
    def size(self, value: int) -> None: ...

    async def run(self, *args: str) -> None: ...

    def _hidden(self) -> None: ...


async def fetch(url: str, *, timeout: float = 1.0) -> bytes:
    """Fetch it.

    Long description."""
    import json as j

    return b""
'''


def test_python_definitions_are_stubs_with_the_first_docstring_line() -> None:
    outline = python_outline(PYTHON, "/w/pkg/m.py")
    by_name = {d.name: d for d in outline.definitions}
    assert list(by_name) == ["LIMIT", "Model", "fetch"]
    assert by_name["LIMIT"].stub == "LIMIT: int = 10" and by_name["LIMIT"].kind == "variable"
    assert by_name["fetch"].stub == (
        'async def fetch(url: str, *, timeout: float=1.0) -> bytes:\n    """Fetch it."""'
    )
    model = by_name["Model"]
    assert model.kind == "class" and model.line == 17 and model.path == "/w/pkg/m.py"
    assert model.stub.split("\n") == [
        "@dataclass",
        "class Model(Base, metaclass=Meta):",
        '    """A model."""',
        "    x: int = 0",
        "    def __init__(self, a: int) -> None: ...",
        "    @property",
        "    def size(self) -> int: ...",  # a method's docstring costs a line: left out
        "    async def run(self, *args: str) -> None: ...",
    ]
    assert not outline.broken


def test_python_imports_bind_names_top_level_first() -> None:
    outline = python_outline(PYTHON, "/w/pkg/m.py")
    assert outline.bindings[:8] == (
        Binding("annotations", "__future__", "annotations", 1),
        Binding("os", "os", None, 3),
        Binding("np", "numpy", None, 4),
        Binding("Base", ".base", "Base", 5),
        Binding("h", ".base", "helper", 5),
        Binding("sibling", ".", "sibling", 6),
        Binding("*", "..pkg.mod", None, 7),
        Binding("TYPE_CHECKING", "typing", "TYPE_CHECKING", 8),
    )
    # `if TYPE_CHECKING:` at module level, then the import inside a function
    assert outline.bindings[8:] == (Binding("T", ".types", "T", 11), Binding("j", "json", None, 45))
    assert outline.imports[:3] == ("__future__", "os.path", "numpy")
    [model] = outline.classes
    assert (model.name, model.start, model.bases) == ("Model", 17, ("Base",))


BROKEN = """import os
from .base import Base


def before(a: int) -> int:
    return a


def being_typed(a,
    b = os.


class Service(Base):
    def start(self) -> None:
        self.x = self.
        return None

    def stop(self, force: bool) -> None:
        pass

    def not_yet(self):


def after() -> str:
    return ""
"""


def test_a_broken_python_file_keeps_the_definitions_around_the_broken_lines() -> None:
    outline = python_outline(BROKEN, "/w/m.py")
    assert outline.broken
    by_name = {d.name: d for d in outline.definitions}
    assert list(by_name) == ["before", "Service", "after"]
    assert by_name["after"].line == 23 and by_name["before"].line == 4
    # The class with a broken line in one method and a method without a body yet: its
    # header, bases and the other methods stay.
    assert by_name["Service"].stub.split("\n") == [
        "class Service(Base):",
        "    def start(self) -> None: ...",
        "    def stop(self, force: bool) -> None: ...",
        "    def not_yet(self): ...",
    ]
    service = next(c for c in outline.classes if c.name == "Service")
    assert (service.start, service.bases) == (12, ("Base",))
    assert service.end >= 20  # its span reaches its last method: the cursor there is in it
    assert [b.local for b in outline.bindings] == ["os", "Base"]


def test_a_python_class_that_fails_whole_keeps_its_header_and_the_methods_that_parse() -> None:
    text = (
        "class Broken(Base):\n"
        '    """Doc."""\n'
        "    def good(self) -> int:\n"
        "        return 1\n"
        "    def bad(self:\n"  # an unclosed parenthesis the repairs cannot mend
        "        x = [\n"
        "        y = (\n"
        "    def also_good(self, q: str) -> str:\n"
        "        return q\n"
    )
    outline = python_outline(text, "/w/m.py")
    [cls] = outline.definitions
    assert cls.name == "Broken" and "def good(self) -> int: ..." in cls.stub
    assert "def also_good(self, q: str) -> str: ..." in cls.stub
    assert outline.classes[0].bases == ("Base",)


def test_a_long_class_stub_is_cut_with_a_line_saying_so() -> None:
    text = "class Big:\n" + "".join(f"    def m{i}(self) -> None: ...\n" for i in range(60))
    [cls] = python_outline(text, "/w/m.py").definitions
    lines = cls.stub.split("\n")
    assert len(lines) == STUB_LINES + 1 and lines[-1] == "    # ..."


TYPESCRIPT = """import {A, B as C} from "./mod";
import * as ns from "../x";
import D from "./d";
import type { T1 } from "./types.js";
const E = require("./e");
const {a, b: c} = require("./r");

/**
 * Does f.
 * @param a the a
 */
export function f(
  a: number,
  b: string,
): void { return; }

/** The K. */
export class K extends Base<T> implements I<X>, J {
  x: number = 1;
  table = { alpha: 1, beta: 2, gamma: 3, delta: 4, epsilon: 5 };
  private y?: string;
  #z = 2;
  m(a: number): string { return ""; }
  constructor(public z: number) { super(); }
}

export const g = (a: number) => a + 1;
export default class {}
export interface Foo { a: number; b(): void }
export type Alias = string | number;
function local() {}
export { local as renamed };
export * from "./other";
export { Q, R as S } from "./q";
"""


def test_typescript_exports_with_stubs_and_jsdoc() -> None:
    outline = js_outline(TYPESCRIPT, "/w/src/a.ts")
    assert outline.language == "typescript" and not outline.broken
    by_name = {d.name: d for d in outline.definitions}
    assert by_name["f"].stub == (
        "/** Does f. */\nexport function f(a: number, b: string): void { ... }"
    )
    assert by_name["K"].stub.split("\n") == [
        "/** The K. */",
        "export class K extends Base<T> implements I<X>, J {",
        "  x: number = 1;",  # a short initial value says the type
        "  table;",
        "  m(a: number): string;",
        "  constructor(public z: number);",
        "}",
    ]
    assert by_name["g"].kind == "function" and by_name["g"].stub.startswith("export const g =")
    assert by_name["default"].default and by_name["default"].kind == "class"
    assert by_name["Foo"].kind == "interface" and by_name["Alias"].kind == "type"
    assert not by_name["local"].exported and by_name["f"].exported
    assert outline.aliases == (("renamed", "local"),)
    [k, _anonymous] = outline.classes
    assert (k.name, k.start, k.end, k.bases) == ("K", 17, 24, ("Base", "I", "J"))


def test_javascript_and_typescript_imports() -> None:
    outline = js_outline(TYPESCRIPT, "/w/src/a.ts")
    assert [(b.local, b.module, b.name) for b in outline.bindings] == [
        ("A", "./mod", "A"),
        ("C", "./mod", "B"),
        ("ns", "../x", None),
        ("D", "./d", "default"),
        ("T1", "./types.js", "T1"),
        ("E", "./e", None),
        ("a", "./r", "a"),
        ("c", "./r", "b"),
        ("*", "./other", None),
        ("Q", "./q", "Q"),
        ("S", "./q", "R"),
    ]
    assert outline.imports == (
        "./mod", "../x", "./d", "./types.js", "./e", "./r", "./other", "./q"
    )  # fmt: skip


def test_a_broken_javascript_file_keeps_the_declarations_after_the_broken_lines() -> None:
    # tree-sitter alone folds `After` into the unclosed parameter list, and `Later` into the
    # unclosed `if (`: the chunks parsed on their own keep them, at their lines.
    text = (
        "export function before(a) { return a; }\n"
        "export function typing(a, {\n"
        "\n"
        "/** After. */\n"
        "export class After extends Base { run() {} }\n"
        "function more(a) {\n"
        "  if (a\n"
        "\n"
        "export const Later = 1;\n"
    )
    outline = js_outline(text, "/w/a.js")
    assert outline.broken and outline.language == "javascript"
    by_name = {d.name: d for d in outline.definitions}
    assert {"before", "After", "Later"} <= set(by_name)
    assert by_name["After"].line == 4 and by_name["After"].stub.startswith("/** After. */\n")
    assert by_name["Later"].line == 8
    assert [(c.name, c.start, c.bases) for c in outline.classes] == [("After", 4, ("Base",))]
