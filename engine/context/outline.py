"""What the workspace index keeps of one source file: its outline.

An outline is what another file's completion may need to know about this one, without its
bodies: the top-level definitions as short stubs in the file's own language (a signature and the
first line of its docstring or JSDoc; a class with its fields and method signatures), the names
the file imports and from where, and the span and bases of each class. The parsers
(engine/context/pyoutline.py, jsoutline.py) build outlines; engine/context/index.py keeps them
and resolves names across files.

Lines are 0-based, as everywhere else in the engine (LSP's positions).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field

from ghostfim.engine.memory import str_bytes

# A stub is what one definition costs the prompt: a few lines, never a whole class.
STUB_LINES = 24  # a class with more fields and methods ends with a line saying so
STUB_CHARS = 2000  # ... and characters (one signature of 500 parameters stays bounded)
LINE_CHARS = 200  # one line of a stub (a default value or a type that never ends is cut)

# What CPython allocates for a small object: a slotted frozen dataclass of 4-7 fields is 64-88
# bytes. An estimate: the index reports bytes, it does not audit them (on the bench corpus it
# says 18 MB where tracemalloc sees 13.5: shared strings are counted at each use).
OBJECT_BYTES = 80


@dataclass(frozen=True, slots=True)
class Definition:
    """One top-level definition of a file."""

    name: str
    kind: str  # "function", "class", "variable", "interface", "type", "enum"
    stub: str  # in the file's language; no trailing newline
    path: str  # the file, absolute
    line: int  # where it starts (its first decorator or doc comment not included)
    exported: bool = True  # JS/TS: `export`ed; Python: every top-level name is importable
    default: bool = False  # JS/TS: the module's `export default`
    # A class's own names (methods, nested classes, assigned and annotated names, the private
    # ones too), all of them even where the stub is cut: what `Class.` may go on with (JS/TS:
    # its static ones).
    members: tuple[str, ...] = ()
    # A class's instance names beyond `members`: Python's what its methods assign on `self`;
    # JS/TS's fields, methods, constructor parameter properties and what it assigns on `this`.
    # None: its instances get names the source does not show (`setattr(self, ...)`,
    # `self.__dict__`, a `__getattr__`, an index signature, `Object.assign(this, ...)`).
    # `unbound`: the names it reads on `self`/`this` that it gives nowhere (a base, or a
    # mixin's user, must). What `self.` and `this.` go on with: engine/context/resolve.py.
    attributes: tuple[str, ...] | None = ()
    unbound: tuple[str, ...] = ()
    # A Python function's: the class its return annotation names (`annotated_class`), "" for
    # none: what `x = f()` holds, for the names `x.` goes on with.
    returns: str = ""


@dataclass(frozen=True, slots=True)
class Binding:
    """A name an import statement binds in the file.

    `from pkg.mod import A as B`: local "B", module "pkg.mod", name "A". `import pkg.mod as m`:
    local "m", module "pkg.mod", name None (the binding is the module). `import pkg.mod`: local
    "pkg", module "pkg", name None (Python binds the top package). A star import (`from m import
    *`, `export * from './m'`) has local "*". Python's relative modules keep their dots (".mod",
    "..", "."); JS/TS modules are the specifier as written ("./mod", "@scope/pkg").
    JS/TS `import D from './d'` binds name "default"."""

    local: str
    module: str
    name: str | None
    line: int

    def __post_init__(self) -> None:
        # The same modules and names come back in file after file (`typing`, `Optional`,
        # `__future__`): one string each, shared. With slots, this took the bench corpus's
        # index from 15.6 to 13.5 MB (tracemalloc).
        object.__setattr__(self, "local", sys.intern(self.local))
        object.__setattr__(self, "module", sys.intern(self.module))
        if self.name is not None:
            object.__setattr__(self, "name", sys.intern(self.name))


@dataclass(frozen=True, slots=True)
class ClassSpan:
    """A class (at any depth) and the lines it covers, with its bases as written."""

    name: str
    start: int
    end: int  # its last line
    bases: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Outline:
    language: str  # "python", "javascript", "typescript"
    definitions: tuple[Definition, ...] = ()
    bindings: tuple[Binding, ...] = ()
    imports: tuple[str, ...] = ()  # every module the file imports, as written, in file order
    classes: tuple[ClassSpan, ...] = ()
    # JS/TS `export { local as name }` without a source: name -> the local it exports
    aliases: tuple[tuple[str, str], ...] = ()
    broken: bool = False  # parts of the file did not parse (being edited): what did is here
    # Python: the module binds names its definitions and imports do not list (`globals()` at
    # its top level, as protobuf's generated modules do; a loop, `A, B = ...`): a member list
    # of it would be incomplete (engine/context/resolve.py `members`).
    dynamic: bool = False
    nbytes: int = field(default=0, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "nbytes", _outline_bytes(self))


def _outline_bytes(o: Outline) -> int:
    total = OBJECT_BYTES + sys.getsizeof(o.definitions) + sys.getsizeof(o.bindings)
    for d in o.definitions:
        # the path string is shared with the index's key: counted once, by the index
        total += OBJECT_BYTES + str_bytes(d.name) + str_bytes(d.stub) + str_bytes(d.returns)
        for names in (d.members, d.attributes, d.unbound):
            if names:  # the names' strings are interned, shared with the stubs' words
                total += sys.getsizeof(names)
    for b in o.bindings:
        total += OBJECT_BYTES + str_bytes(b.local) + str_bytes(b.module)
    for c in o.classes:
        total += OBJECT_BYTES + str_bytes(c.name) + sum(str_bytes(s) for s in c.bases)
    total += sum(str_bytes(m) for m in o.imports)
    total += sum(OBJECT_BYTES + str_bytes(a) + str_bytes(b) for a, b in o.aliases)
    return total


def clip_line(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 3] + "..."


def join_stub(lines: list[str], more: str, tail: tuple[str, ...] = ()) -> str:
    """A stub's lines, at most STUB_LINES and STUB_CHARS in all; `more` (in the file's
    language: a comment) stands for what is left out, before `tail` (a closing brace)."""
    out: list[str] = []
    size = sum(len(t) + 1 for t in tail)
    for i, line in enumerate(lines):
        line = clip_line(line)
        if i >= STUB_LINES or size + len(line) + 1 > STUB_CHARS:
            out.append(more)
            break
        out.append(line)
        size += len(line) + 1
    return "\n".join([*out, *tail])


def first_doc_line(doc: str | None) -> str:
    """The first line of a docstring or doc comment that says something ("" if none)."""
    if not doc:
        return ""
    for line in doc.strip().splitlines():
        s = line.strip()
        if s:
            return clip_line(s)
    return ""


_OPTIONAL = re.compile(r"(?:typing\.)?Optional\[(.+)\]")
_CLASS_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def annotated_class(annotation: str) -> str:
    """The class a Python annotation names, `None` aside (`A`, `m.A`, `Optional[A]`, `A | None`,
    `"A"`, `Box[int]` is a Box); "" for anything else (a union of two, a callable)."""
    written = annotation.strip().strip("\"'").strip()
    optional = _OPTIONAL.fullmatch(written)
    if optional is not None:
        written = optional.group(1)
    kinds = [k.strip().strip("\"'") for k in top_level_split(written, "|")]
    kinds = [k for k in kinds if k != "None"]
    if len(kinds) != 1:
        return ""
    written = kinds[0].split("[", 1)[0].strip()
    return written if _CLASS_NAME.fullmatch(written) else ""


def top_level_split(text: str, separator: str) -> list[str]:
    """`text` split at each `separator` outside brackets."""
    parts: list[str] = []
    depth = last = 0
    for at, char in enumerate(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == separator and depth == 0:
            parts.append(text[last:at])
            last = at + 1
    return [*parts, text[last:]]
