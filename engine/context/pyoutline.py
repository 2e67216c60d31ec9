"""The outline of a Python file, from the standard library's parser (never imported, never run).

A file open in the editor is often broken where the user types. Python's parser then gives up
on all of it, so a file that does not parse is parsed again in parts: top-level chunks (split
at the lines that start a statement at column 0: `def`, `class`, `@`, `import`, an assignment
...), each repaired a few times at the line the parser names (the line becomes `pass`, then
nothing; a block left without a body gets `pass`), and a class whose chunk still fails is
parsed as its header and its body's own chunks. What parses counts: the definitions around a
broken line stay in the index while it is being edited.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import replace

from ghostfim.engine.context.outline import (
    Binding,
    ClassSpan,
    Definition,
    Outline,
    annotated_class,
    clip_line,
    first_doc_line,
    join_stub,
)

REPAIRS = 8  # repairs tried on one chunk: each costs a parse of the chunk
HEADER_LINES = 12  # a class header (`class A(\n  B,\n  C,\n):`) spans at most this many lines
VALUE_CHARS = 80  # a default or a constant longer than this shows as `...`
DECORATOR_CHARS = 60  # longer decorators (routes with many options) are left out of stubs

# Methods a caller uses although their names start with an underscore.
_PUBLIC_DUNDERS = frozenset({"__init__", "__call__"})

# A line that starts a top-level statement of its own: where a broken file is cut into chunks.
_CHUNK_START = re.compile(
    r"(?:async\s+def|def|class|import|from|if|try|with|for|while)\b"
    r"|@"
    r"|[A-Za-z_][\w.]*\s*(?::|=(?!=)|[-+*/|&]=)"
)
_NO_BODY = re.compile(r"expected an indented block after .* on line (\d+)")
# `self.name` in a class's source, and the assignments among them (`self.name = `, `self.name:
# T = `, `self.name += `, `self.a, self.b = `). A scan of the class's lines rather than a walk of
# its tree: walking every expression was most of the index's time, and a line being edited
# that does not parse still says which names it uses.
_SELF_NAME = re.compile(r"(?<![\w.])self\.([A-Za-z_]\w*)")
_SELF_STORE = re.compile(
    r"(?<![\w.])self\.([A-Za-z_]\w*)\s*(?::[^=\n]*)?(?:[-+*/%&|^@]|//|\*\*|<<|>>)?=(?!=)"
)
_TARGET_LIST = re.compile(r"^\s*\(?((?:[\w.]+\s*,\s*)+[\w.]+)\s*\)?\s*=(?!=)")
# Instances with names their class's source does not show.
_OPEN_INSTANCE = re.compile(
    r"setattr\(\s*self\b|vars\(\s*self\s*\)|self\.__dict__|def __getattr(?:ibute)?__\("
)
# A pydantic model that keeps fields it was not declared with (`ConfigDict(extra="allow")`, v1's
# `class Config: extra = Extra.allow`, `class M(BaseModel, extra="allow")`).
_EXTRA_ALLOWED = re.compile(r"""\bextra\s*=\s*(?:["']allow["']|Extra\.allow)""")


def python_outline(text: str, path: str) -> Outline:
    body, broken = parse_tolerant(text)
    definitions: dict[str, Definition] = {}
    bindings: list[Binding] = []
    imports: list[str] = []
    top_imports: list[ast.Import | ast.ImportFrom] = []
    dynamic = False
    lines = text.splitlines()
    for stmt in _module_level(body):
        _define(stmt, path, definitions, lines)
        dynamic = dynamic or _makes_names(stmt)
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            top_imports.append(stmt)
    # Imports anywhere in the file (functions import lazily, `if TYPE_CHECKING:` blocks only
    # for annotations): a name used near the cursor may come from any of them. Module-level
    # ones come first, so they win where two bind one name.
    nested_imports: list[ast.Import | ast.ImportFrom] = []
    classes: list[ClassSpan] = []
    top = {id(s) for s in top_imports}
    for node in _walk(body):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in top:
            nested_imports.append(node)
        elif isinstance(node, ast.ClassDef):
            end = (node.end_lineno or node.lineno) - 1
            bases = tuple(_unparse(b) for b in node.bases)
            classes.append(ClassSpan(node.name, node.lineno - 1, end, bases))
    for node in (*top_imports, *nested_imports):
        _bind(node, bindings, imports)
    return Outline(
        "python",
        definitions=tuple(definitions.values()),
        bindings=tuple(bindings),
        imports=tuple(dict.fromkeys(imports)),
        classes=tuple(classes),
        broken=broken,
        dynamic=dynamic,
    )


def _makes_names(stmt: ast.stmt) -> bool:
    """A module-level statement that binds names the outline does not list: a loop's, an
    unpacking's (`A, B = ...`), a `with ... as`'s, a `:=`'s, or any by `globals()`."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return False
    if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While, ast.AsyncWith)):
        return True
    if isinstance(stmt, ast.Assign) and not all(isinstance(t, ast.Name) for t in stmt.targets):
        return True
    if isinstance(stmt, ast.With) and any(item.optional_vars for item in stmt.items):
        return True
    return any(
        isinstance(node, ast.NamedExpr)
        or (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("globals", "vars")
        )
        for node in ast.walk(stmt)
    )


# --- tolerant parsing ---------------------------------------------------------------------------
def parse_tolerant(text: str) -> tuple[list[ast.stmt], bool]:
    """The module's statements, and whether parts were left out (did not parse)."""
    try:
        return ast.parse(text).body, False
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    return _parse_chunks(text.splitlines(), 0), True


def _parse_chunks(lines: list[str], first: int) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for start, end in _chunks(lines):
        part = lines[start:end]
        stmts = _parse_repairing(part, first + start)
        if stmts is None:
            stmts = _parse_class_parts(part, first + start)
        out.extend(stmts)
    return out


def _chunks(lines: list[str]) -> Iterator[tuple[int, int]]:
    """(start, end) of each top-level chunk: a new one at every line that starts a statement
    at column 0, except a `def` or `class` that follows its decorators."""
    start = 0
    after_decorator = False
    for i, line in enumerate(lines):
        if not line or line[0] in " \t#" or not _CHUNK_START.match(line):
            continue
        if i > start and not after_decorator:
            yield start, i
            start = i
        after_decorator = line.startswith("@")
    if start < len(lines):
        yield start, len(lines)


def _parse_repairing(lines: list[str], first: int) -> list[ast.stmt] | None:
    """The statements of `lines` (numbered from `first`, 0-based), repaired at most REPAIRS
    times where the parser stops; None when it still fails."""
    lines = list(lines)
    for _ in range(REPAIRS + 1):
        try:
            tree = ast.parse("\n".join(lines))
        except SyntaxError as e:
            if not _repair(lines, e):
                return None
            continue
        except (ValueError, RecursionError, MemoryError):
            return None
        ast.increment_lineno(tree, first)
        return tree.body
    return None


def _repair(lines: list[str], error: SyntaxError) -> bool:
    """Change `lines` where `error` says the parser stopped; False when there is nothing left to
    try. Lines are replaced, never removed, so that line numbers stay those of the file."""
    no_body = _NO_BODY.match(error.msg or "")
    if no_body:
        header = int(no_body.group(1)) - 1
        if 0 <= header < len(lines) and not lines[header].rstrip().endswith(" pass"):
            line = lines[header].rstrip()
            # `def f():` becomes `def f(): pass`; a header we cannot extend on its own line
            # (a comment after it, or it spans lines) goes.
            ok = line.endswith(":") and "#" not in line
            lines[header] = line + " pass" if ok else _indent(line) + "pass"
            return True
    bad = (error.lineno or 0) - 1
    if not 0 <= bad < len(lines) or not lines[bad].strip():
        return False
    if lines[bad].strip() == "pass":  # `pass` there did not help (a continuation line)
        lines[bad] = ""
    else:
        lines[bad] = _indent(lines[bad]) + "pass"
    return True


def _parse_class_parts(lines: list[str], first: int) -> list[ast.stmt]:
    """A chunk that is a class (with its decorators) that fails as a whole: its header, with
    the body's chunks that parse. [] when the header does not parse either."""
    found = _class_header(lines)
    if found is None:
        return []
    cls, end = found
    ast.increment_lineno(cls, first)
    body = lines[end:]
    indent = next((_indent(s) for s in body if s.strip()), "")
    dedented = [s[len(indent) :] if s.startswith(indent) else s.lstrip() for s in body]
    stmts = _parse_chunks(dedented, first + end)
    cls.body = stmts or cls.body
    cls.end_lineno = first + len(lines)
    return [cls]


def _class_header(lines: list[str]) -> tuple[ast.ClassDef, int] | None:
    """The class that `lines` start with (after its decorators), parsed with an empty body,
    and the line its body starts at."""
    at = next((i for i, s in enumerate(lines) if not s.startswith("@")), len(lines))
    if at >= len(lines) or not lines[at].startswith("class"):
        return None
    for end in range(at + 1, min(len(lines), at + HEADER_LINES) + 1):
        try:
            body = ast.parse("\n".join([*lines[:end], "    pass"])).body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        if len(body) == 1 and isinstance(body[0], ast.ClassDef):
            return body[0], end
    return None


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


# --- what the statements define and import ----------------------------------------------------
def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements at module level, into `if`, `try` and `with` blocks (`if TYPE_CHECKING:`,
    `try: import x except ImportError:` define names at module level too)."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            yield from _module_level(stmt.body)
            yield from _module_level(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            for part in (stmt.body, *(h.body for h in stmt.handlers), stmt.orelse):
                yield from _module_level(part)
            yield from _module_level(stmt.finalbody)
        elif isinstance(stmt, ast.With):
            yield from _module_level(stmt.body)
        else:
            yield stmt


def _walk(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement, at any depth, never into expressions: a tenth of ast.walk's nodes
    (walking them all was most of the index's time)."""
    stack = list(reversed(body))
    while stack:
        stmt = stack.pop()
        yield stmt
        nested: list[ast.stmt] = []
        for field in ("body", "orelse", "finalbody"):
            part = getattr(stmt, field, None)
            if isinstance(part, list):
                nested += part
        for holder in (*getattr(stmt, "handlers", ()), *getattr(stmt, "cases", ())):
            nested += holder.body
        stack.extend(reversed(nested))


def _bind(node: ast.Import | ast.ImportFrom, bindings: list[Binding], imports: list[str]) -> None:
    line = node.lineno - 1
    if isinstance(node, ast.Import):
        for alias in node.names:
            imports.append(alias.name)
            if alias.asname:
                bindings.append(Binding(alias.asname, alias.name, None, line))
            else:  # `import a.b.c` binds `a`; a.b.c is reached through it
                top = alias.name.split(".")[0]
                bindings.append(Binding(top, top, None, line))
        return
    module = "." * node.level + (node.module or "")
    imports.append(module)
    for alias in node.names:
        if alias.name == "*":
            bindings.append(Binding("*", module, None, line))
        else:
            bindings.append(Binding(alias.asname or alias.name, module, alias.name, line))


def _define(stmt: ast.stmt, path: str, out: dict[str, Definition], lines: list[str]) -> None:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        definition = _definition(stmt, "function", _function_stub(stmt, ""), path)
        returns = annotated_class(_unparse(stmt.returns)) if stmt.returns else ""
        out.setdefault(stmt.name, replace(definition, returns=sys.intern(returns)))
    elif isinstance(stmt, ast.ClassDef):
        definition = _definition(stmt, "class", _class_stub(stmt), path)
        members = _members(stmt)
        source = lines[stmt.lineno - 1 : stmt.end_lineno or stmt.lineno]
        attributes, unbound = _instance_names(source, members)
        out.setdefault(
            stmt.name,
            replace(definition, members=members, attributes=attributes, unbound=unbound),
        )
    else:
        for name, stub in _assigned(stmt, ""):
            out.setdefault(name, Definition(name, "variable", stub, path, stmt.lineno - 1))


def _definition(
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, kind: str, stub: str, path: str
) -> Definition:
    # The line of the `def` or `class` itself: decorators sit above it.
    return Definition(node.name, kind, stub, path, node.lineno - 1)


def _unparse(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except (ValueError, RecursionError):  # a tree our repairs made that unparse refuses
        return "..."


def _decorators(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> list[str]:
    out = []
    for d in node.decorator_list:
        text = _unparse(d)
        if len(text) <= DECORATOR_CHARS:
            out.append(f"@{text}")
    return out


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    returns = f" -> {_unparse(node.returns)}" if node.returns else ""
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    return f"{prefix} {node.name}({_unparse(node.args)}){returns}:"


def _function_stub(
    node: ast.FunctionDef | ast.AsyncFunctionDef, indent: str, with_doc: bool = True
) -> str:
    """`def f(...) -> T:` and its docstring's first line (or ` ...`). A class's methods go
    without it: their signatures are what completions use, and a stub has few lines."""
    lines = [indent + d for d in _decorators(node)]
    doc = first_doc_line(ast.get_docstring(node, clean=True)) if with_doc else ""
    signature = clip_line(indent + _signature(node))
    if doc:
        lines += [signature, f'{indent}    """{doc}"""']
    else:
        lines.append(signature + " ...")
    return "\n".join(lines)


def _class_stub(node: ast.ClassDef) -> str:
    bases = [_unparse(b) for b in node.bases] + [_unparse(k) for k in node.keywords]
    head = [*_decorators(node), f"class {node.name}" + (f"({', '.join(bases)}):" if bases else ":")]
    members: list[str] = []
    doc = first_doc_line(ast.get_docstring(node, clean=True))
    if doc:
        members.append(f'    """{doc}"""')
    for stmt in node.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if _is_public(stmt.name) and not _is_variant(stmt):
                members.extend(_function_stub(stmt, "    ", with_doc=False).split("\n"))
        elif isinstance(stmt, ast.ClassDef):
            if _is_public(stmt.name):
                members.append(f"    class {stmt.name}: ...")
        else:
            members.extend(stub for name, stub in _assigned(stmt, "    ") if _is_public(name))
    lines = head + (members or ["    ..."])
    return join_stub(lines, "    # ...")


def _members(node: ast.ClassDef) -> tuple[str, ...]:
    """Every name the class body binds, in order (engine/context/guide.py reads them)."""
    names: dict[str, None] = {}
    for stmt in _module_level(node.body):  # into `if`, `try` and `with` blocks, as a module's
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[stmt.name] = None
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            names[stmt.target.id] = None
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                for leaf in ast.walk(target):  # `A = B = 1`, `A, B = 1, 2` (an Enum's too)
                    if isinstance(leaf, ast.Name):
                        names[leaf.id] = None
    return tuple(sys.intern(name) for name in names)


def _instance_names(
    source: list[str], members: tuple[str, ...]
) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    """The names a class's source assigns on `self`, and those it reads there that it neither
    assigns nor defines in its body; (None, ()) where its instances have names it does not show.
    Comments and strings count too: a `self.name` they mention errs toward no list at all."""
    assigned: dict[str, None] = {}
    used: dict[str, None] = {}
    for line in source:
        if "extra" in line and _EXTRA_ALLOWED.search(line):
            return None, ()
        if "self" not in line:
            continue
        if _OPEN_INSTANCE.search(line):
            return None, ()
        used.update(dict.fromkeys(_SELF_NAME.findall(line)))
        assigned.update(dict.fromkeys(_SELF_STORE.findall(line)))
        targets = _TARGET_LIST.match(line)
        if targets:
            assigned.update(dict.fromkeys(_SELF_NAME.findall(targets.group(1))))
    own = set(members) | set(assigned)
    intern = sys.intern
    return (
        tuple(intern(n) for n in assigned if n not in members),
        tuple(intern(n) for n in used if n not in own),
    )


def _is_public(name: str) -> bool:
    return not name.startswith("_") or name in _PUBLIC_DUNDERS


def _is_variant(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """An `@overload` or a property's setter/deleter: the stub shows the one definition."""
    for d in node.decorator_list:
        text = _unparse(d)
        if text in ("overload", "typing.overload") or text.endswith((".setter", ".deleter")):
            return True
    return False


def _value(node: ast.expr | None) -> str:
    if node is None:
        return ""
    text = _unparse(node)
    return f" = {text}" if len(text) <= VALUE_CHARS and "\n" not in text else " = ..."


def _assigned(stmt: ast.stmt, indent: str) -> list[tuple[str, str]]:
    """(name, stub) of what an assignment defines: simple names only (`a, b = ...` and
    `x.y = ...` define nothing another file imports by that name)."""
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        name = stmt.target.id
        return [(name, f"{indent}{name}: {_unparse(stmt.annotation)}{_value(stmt.value)}")]
    if isinstance(stmt, ast.Assign):
        value = _value(stmt.value)
        return [(t.id, f"{indent}{t.id}{value}") for t in stmt.targets if isinstance(t, ast.Name)]
    return []
