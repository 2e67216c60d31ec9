"""The repository's own promises: every path the docs and the comments name exists.

A file moved in a refactor leaves its old name in a README's copy-paste command or a comment
(a module that was renamed) that sends the next reader nowhere. This reads README.md, docs/*.md,
the editors' READMEs, and the comments and docstrings of every Python file, for names that
start at a top-level folder of the repository (engine/, lsp/, cli/, bench/, tests/, docs/,
editors/, .ci/), and checks each exists: from the repository's root, or from the folder of the
file that names it (editors/nvim/README.md's `lua/ghostfim/init.lua`). A name with no
extension may be a folder or a module (`engine/service/keystroke` for the .py).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOP = ("engine", "lsp", "cli", "bench", "tests", "docs", "editors", ".ci")
NAMED = re.compile(r"(?<![\w./@-])((?:" + "|".join(map(re.escape, TOP)) + r")/[\w./-]*\w)")
PYTHON_FOLDERS = ("engine", "lsp", "cli", "bench", "tests")
QUOTES, APOSTROPHES = '"', "'"


def documents() -> Iterator[tuple[Path, str]]:
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        yield path, path.read_text()
    for path in sorted((ROOT / "editors").glob("*/README.md")):
        yield path, path.read_text()


def comments_of(path: Path) -> str:
    """A Python file's comments and docstrings (code names paths it builds: not checked)."""
    parts = []
    for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        quoted = token.string.lstrip("rbuRBU")[:3]
        docstring = token.type == tokenize.STRING and quoted in (QUOTES * 3, APOSTROPHES * 3)
        if token.type == tokenize.COMMENT or docstring:
            parts.append(token.string)
    return "\n".join(parts)


def sources() -> Iterator[tuple[Path, str]]:
    yield from documents()
    for folder in PYTHON_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield path, comments_of(path)


def exists(name: str, near: Path) -> bool:
    for base in (ROOT, near.parent):
        candidate = base / name
        if candidate.exists() or candidate.with_name(candidate.name + ".py").exists():
            return True
    return False


def test_every_path_named_in_the_docs_and_comments_exists() -> None:
    missing = sorted(
        {
            f"{path.relative_to(ROOT)}: {name}"
            for path, text in sources()
            for name in (m.group(1).rstrip(".") for m in NAMED.finditer(text))
            if not exists(name, path)
        }
    )
    assert not missing, "\n".join(missing)


# --- imports: one direction, no cycles -----------------------------------------------------
# folder -> the module prefix it is imported as (engine/, lsp/ and cli/ install as ghostfim.*)
PACKAGES = {
    "engine": "ghostfim.engine",
    "lsp": "ghostfim.lsp",
    "cli": "ghostfim.cli",
    "bench": "bench",
    "harness": "harness",
    "tests": "tests",
}


def module_files() -> dict[str, Path]:
    """Every module of the repository by its import name (packages' __init__ as the package)."""
    found: dict[str, Path] = {}
    for folder, prefix in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((prefix, *parts))] = path
    return found


def _type_checking_only(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"


def imports_of(path: Path, modules: dict[str, Path]) -> set[str]:
    """The repository's modules `path` imports when it runs: at the top or inside functions,
    not under `if TYPE_CHECKING:` (never at run time)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if _type_checking_only(node):
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return {name for name in found if name in modules and modules[name] != path}


def import_graph() -> dict[str, set[str]]:
    modules = module_files()
    return {name: imports_of(path, modules) for name, path in modules.items()}


def test_the_cli_imports_nothing_from_lsp() -> None:
    graph = import_graph()
    wrong = {(a, b) for a, deps in graph.items() for b in deps}
    assert not {(a, b) for a, b in wrong if a.startswith("ghostfim.cli") and ".lsp" in b}


def test_bench_and_tests_depend_in_one_direction() -> None:
    """bench/ never imports tests/; tests/support/ never imports bench/ (both use harness/)."""
    edges = {(a, b) for a, deps in import_graph().items() for b in deps}
    assert not {(a, b) for a, b in edges if a.startswith("bench") and b.startswith("tests")}
    assert not {(a, b) for a, b in edges if a.startswith("tests.support") and b.startswith("bench")}
    assert not {
        (a, b) for a, b in edges if a.startswith("harness") and not b.startswith("ghostfim")
    }


def test_no_import_cycles() -> None:
    graph = import_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def strongly_connect(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for dep in sorted(graph[node]):
            if dep not in index:
                strongly_connect(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            strongly_connect(node)
    assert not cycles, cycles
