"""Names used in one file, to the definitions other files of the workspace hold.

Python: `from pkg.mod import A` and `from .mod import A` (relative to the importing file's
package), `import pkg.mod as m` then `m.A`, `import pkg.mod` then `pkg.mod.A`, `from pkg import
mod` then `mod.A`, star imports; a name a module only re-exports (`from .impl import A` in a
package's `__init__.py`, the common case in modern packages) is followed to where it is
defined. An absolute module is looked up by the trailing components of each file's path (so
`src/` layouts, namespace packages and folders above the project all resolve), except a
one-name module or one of the standard library's (`types`, `concurrent.futures`), which only
the file whose package chain names it so may be; where several files match, the one whose
package chain names it, in the importer's root, nearest the importer, wins.

JavaScript/TypeScript: relative specifiers (`./mod`, `../mod.js`, which TypeScript's ES modules
use for `mod.ts`, `./dir` for its index), named, default and namespace imports, `require`,
`export { A as B }`, `export ... from` and `export * from`. Bare specifiers (packages, tsconfig
path aliases) are not resolved.

Not thread-safe: the index calls it under its lock.
"""

from __future__ import annotations

import builtins
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from ghostfim.engine.context.files import JS_SUFFIXES, Root
from ghostfim.engine.context.outline import Binding, ClassSpan, Definition, Outline

MAX_HOPS = 8  # re-exports followed from a name to its definition (cycles end here too)
# Bases that give a class no names `Class.` goes on with beyond its own (an Enum's members are
# its own names; Protocol's and ABC's methods are the class's). Any other base the workspace
# does not hold may bring names the index cannot see: such a class has no known member list.
_NEUTRAL_BASES = frozenset(
    f"{module}{name}"
    for module in ("", "enum.", "abc.", "typing.", "typing_extensions.")
    for name in ("object", "Enum", "IntEnum", "StrEnum", "Flag", "IntFlag", "ABC", "Protocol")
) | frozenset({"Generic", "typing.Generic", "str", "int", "float", "bytes", "Exception"})

# An instance's names beyond its class's: only these bases add none the source does not show
# (an Enum member has `.value`, a str subclass `.upper`: their classes give no instance list).
_INSTANCE_NEUTRAL_BASES = frozenset(
    f"{module}{name}"
    for module in ("", "abc.", "typing.", "typing_extensions.")
    for name in ("object", "ABC", "Protocol", "Generic")
)
# What every instance has (`self.__class__`): Python's own, never the workspace's; and
# JavaScript's Object.prototype.
_OBJECT_NAMES = frozenset(dir(object))
_JS_OBJECT_NAMES = frozenset(
    {"constructor", "hasOwnProperty", "isPrototypeOf", "propertyIsEnumerable", "toLocaleString",
     "toString", "valueOf"}
)  # fmt: skip

# Bases from outside the workspace whose names are known here, by their import (or a builtin's
# name). A pydantic model's fields are its class's annotated names; these are BaseModel's own
# (v2's, and the v1 names it keeps). An exception's are Python's own.
_PYDANTIC_MODEL_NAMES = frozenset(
    {"model_config", "model_fields", "model_computed_fields", "model_extra", "model_fields_set",
     "model_construct", "model_copy", "model_dump", "model_dump_json", "model_json_schema",
     "model_parametrized_name", "model_post_init", "model_rebuild", "model_validate",
     "model_validate_json", "model_validate_strings",
     "dict", "json", "parse_obj", "parse_raw", "parse_file", "from_orm", "construct", "copy",
     "schema", "schema_json", "validate", "update_forward_refs",
     "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__",
     "__pydantic_fields__", "__fields__", "__fields_set__", "__private_attributes__",
     "__class_vars__", "__copy__", "__deepcopy__", "__iter__", "__get_pydantic_core_schema__",
     "__get_pydantic_json_schema__", "__pydantic_init_subclass__"}
) | _OBJECT_NAMES  # fmt: skip
_LIBRARY_BASES = {
    "pydantic.BaseModel": _PYDANTIC_MODEL_NAMES,
    "pydantic.main.BaseModel": _PYDANTIC_MODEL_NAMES,
    "pydantic.RootModel": _PYDANTIC_MODEL_NAMES | {"root"},
    "pydantic.root_model.RootModel": _PYDANTIC_MODEL_NAMES | {"root"},
}
_EXCEPTIONS = {
    name: frozenset(dir(kind))
    for name, kind in vars(builtins).items()
    if isinstance(kind, type) and issubclass(kind, BaseException)
}

_JS_TO_TS = {
    ".js": (".ts", ".tsx", ".d.ts"),
    ".jsx": (".tsx",),
    ".mjs": (".mts",),
    ".cjs": (".cts",),
}
_NAME = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*")


@dataclass(frozen=True, slots=True)
class IndexedFile:
    path: str  # absolute, under its root's real path: the index's key
    rel: str  # relative to the root, "/"-separated
    root: Root
    module: str  # Python: dotted, as its package chain names it; JS/TS: rel without suffix
    outline: Outline
    by_name: Mapping[str, Definition]  # its definitions ("default": JS's default export)
    size: int  # source bytes
    mtime_ns: int  # 0: the editor's text, not the disk's
    nbytes: int  # what the index keeps for it

    @property
    def python(self) -> bool:
        return self.outline.language == "python"

    @property
    def package(self) -> bool:
        """A Python package's `__init__`: its submodules are names in it too."""
        return os.path.basename(self.path).startswith("__init__.")


Found = Definition | IndexedFile | None  # a name is a definition, a module, or unknown


def python_module_keys(rel: str) -> list[str]:
    """The dotted names a Python file may be imported by: every tail of its path that is made
    of identifiers (`src/pkg/mod.py`: `mod`, `pkg.mod`, `src.pkg.mod`)."""
    parts = rel.rsplit(".", 1)[0].split("/")
    if parts[-1] == "__init__":
        parts.pop()
    keys: list[str] = []
    for i in range(len(parts) - 1, -1, -1):
        if not parts[i].isidentifier():
            break
        keys.append(".".join(parts[i:]))
    return keys


def _join(module: str, name: str) -> str:
    return module + name if module.endswith(".") else f"{module}.{name}"


class Resolver:
    def __init__(self, files: Mapping[str, IndexedFile], modules: Mapping[str, list[str]]):
        self.files = files
        self.modules = modules  # Python: dotted name -> files that name may mean

    # --- queries -------------------------------------------------------------------------------
    def definitions_for(self, file: IndexedFile, names: Iterable[str]) -> list[Definition]:
        out: dict[tuple[str, int], Definition] = {}
        for name in names:
            found = self.name(file, name)
            if found is not None:
                out.setdefault((found.path, found.line), found)
        return list(out.values())

    def class_bases(self, file: IndexedFile, line: int) -> list[Definition]:
        spans = [c for c in file.outline.classes if c.start <= line <= c.end]
        if not spans:
            return []
        innermost = min(spans, key=lambda c: c.end - c.start)
        names = [m.group(0) for b in innermost.bases if (m := _NAME.match(b))]
        out: dict[tuple[str, int], Definition] = {}
        for name in names:
            found = self.name(file, name) or file.by_name.get(name)  # a class of the same file
            if found is not None and found.kind in ("class", "interface"):
                out.setdefault((found.path, found.line), found)
        return list(out.values())

    def name(self, file: IndexedFile, dotted: str) -> Definition | None:
        """What `dotted` (`A`, `m.A`, `pkg.mod.A`) names through the imports of `file`; the
        first definition on the way (`Model.objects` is `Model`)."""
        head, *rest = dotted.split(".")
        for start, names in self._starts(file, head, rest):
            found = self._attributes(start, names)
            if found is not None:
                return found
        for star in self._bindings(file.outline, "*"):
            target = self.module(file, star.module)
            if target is not None:
                found = self._attributes(target, [head, *rest])
                if found is not None:
                    return found
        return None

    def _starts(
        self, file: IndexedFile, head: str, rest: list[str]
    ) -> Iterator[tuple[Definition | IndexedFile, list[str]]]:
        """Where `head.rest` may start in `file`, by each import that binds `head`: the module
        or definition it reaches, and the names of `rest` still to follow from there."""
        for binding in self._bindings(file.outline, head):
            if binding.name is None and file.python:
                # A module: `import pkg` then `pkg.mod.A`: the longest prefixes that are modules
                # of the workspace first (namespace packages have no file of their own).
                for k in range(len(rest), -1, -1):
                    target = self.python_module(file, ".".join([binding.module, *rest[:k]]))
                    if target is not None:
                        yield target, rest[k:]
                continue
            resolved = self.binding(file, binding, 0)
            if resolved is not None:
                yield resolved, rest

    def members(
        self, file: IndexedFile, dotted: str, line: int | None = None
    ) -> frozenset[str] | None:
        """Every name `dotted.` may go on with in `file`. Python: a workspace module's
        definitions, imported names and submodules; a workspace class's own names and its
        bases'; `Class()`: an instance of a class, its class's names and those its methods
        assign on `self`, its bases' too (pydantic's BaseModel's and a builtin exception's
        among them); `f()`: an instance of the class a workspace function's return annotation
        names. JavaScript/TypeScript: `this()` only, an instance of the top-level class
        around `line` (its fields, methods, constructor parameter properties and what it
        assigns on `this`, its workspace bases' too). None where the list may be incomplete (a
        star import, a module `__getattr__`, a base from outside the workspace that
        `_LIBRARY_BASES` does not know, a name read on `self` or `this` that nothing
        assigns) or `dotted` names nothing the index holds."""
        if not file.python:
            around = None if dotted != "this()" or line is None else self._class_at(file, line)
            return None if around is None else self._instance_members(around, _JS_OBJECT_NAMES)
        if dotted.endswith("()"):
            found = self._target(file, dotted[:-2])
            if isinstance(found, Definition) and found.kind == "function" and found.returns:
                found = self._returned(found)  # `x = make()`, `make() -> Task`: a Task
            if not isinstance(found, Definition) or found.kind != "class":
                return None
            return self._instance_members(found, _OBJECT_NAMES)
        target = self._target(file, dotted)
        if isinstance(target, Definition):
            return self._class_members(target, 0) if target.kind == "class" else None
        return None if target is None else self._module_members(target)

    def _target(self, file: IndexedFile, dotted: str) -> Found:
        """The module or definition `dotted` names in `file` (None: a name of something else,
        such as a class's attribute, or unknown)."""
        head, *rest = dotted.split(".")
        if not self._bindings(file.outline, head):
            found = file.by_name.get(head)
            return self._walk(found, rest) if found is not None else None
        for start, names in self._starts(file, head, rest):
            return self._walk(start, names)
        return None

    def _walk(self, start: Definition | IndexedFile, names: Sequence[str]) -> Found:
        """What all of `names` reach from `start` (None: an attribute of a definition, whose
        type is not known here)."""
        found, taken = self._descend(start, names)
        return found if taken == len(names) else None

    def _module_members(self, module: IndexedFile) -> frozenset[str] | None:
        stub = self.files.get(os.path.splitext(module.path)[0] + ".pyi")
        if stub is not None and stub is not module:  # a stub lists what its module makes
            module = stub
        outline = module.outline
        if outline.dynamic or "__getattr__" in module.by_name or self._bindings(outline, "*"):
            return None
        names = set(module.by_name) | {b.local for b in outline.bindings}
        if module.package:
            folder = os.path.dirname(module.path) + os.sep
            for path in self.files:
                if path.startswith(folder):
                    first = path[len(folder) :].split(os.sep, 1)
                    name = first[0].split(".", 1)[0] if len(first) == 1 else first[0]
                    if name.isidentifier() and name != "__init__":
                        names.add(name)
        return frozenset(names)

    def _class_members(self, definition: Definition, depth: int) -> frozenset[str] | None:
        file = self.files.get(definition.path)
        if file is None or depth > MAX_HOPS:
            return None
        span = self._span(file, definition)
        if span is None:  # its bases are not known
            return None
        names = set(definition.members)
        for base in span.bases:
            written = base.split("[", 1)[0].strip()  # Generic[T] is Generic
            if written in _NEUTRAL_BASES:
                continue
            found = self._target(file, written)
            if found is None and (library := self._library_base(file, written)) is not None:
                names |= library
                continue
            if not isinstance(found, Definition) or found.kind != "class":
                return None
            inherited = self._class_members(found, depth + 1)
            if inherited is None:
                return None
            names |= inherited
        return frozenset(names)

    def _instance_members(
        self, definition: Definition, every_object_has: frozenset[str]
    ) -> frozenset[str] | None:
        """An instance's names; None where a name that its class or a base reads on `self`
        (`this`) is assigned nowhere in their sources (a mixin's, or assigned where the index
        cannot see)."""
        found = self._instance_names(definition, 0)
        if found is None:
            return None
        names = frozenset(found[0]) | every_object_has
        return names if names.issuperset(found[1]) else None

    def _instance_names(
        self, definition: Definition, depth: int
    ) -> tuple[set[str], set[str]] | None:
        """The names a class and its bases give an instance, and the ones they read on `self`
        without giving them (a base may read what a subclass assigns)."""
        file = self.files.get(definition.path)
        if file is None or depth > MAX_HOPS or definition.attributes is None:
            return None
        span = self._span(file, definition)
        if span is None:
            return None
        # A Python class's own names are its instances' too; a JS class's `members` are static.
        names = set(definition.attributes) | (set(definition.members) if file.python else set())
        reads = set(definition.unbound)
        for base in span.bases:
            written = re.split(r"[\[<]", base, maxsplit=1)[0].strip()  # Generic[T], Base<T>
            if written in _INSTANCE_NEUTRAL_BASES:
                continue
            found = self._target(file, written) or file.by_name.get(written)
            if isinstance(found, Definition) and found.kind == "interface":
                continue  # `implements I`: the class declares what I names itself
            if found is None and (library := self._library_base(file, written)) is not None:
                names |= library
                continue
            if not isinstance(found, Definition) or found.kind != "class":
                return None
            inherited = self._instance_names(found, depth + 1)
            if inherited is None:
                return None
            names |= inherited[0]
            reads |= inherited[1]
        return names, reads

    def _returned(self, function: Definition) -> Found:
        """The class a workspace function's return annotation names, in its own file."""
        file = self.files.get(function.path)
        if file is None:
            return None
        return self._target(file, function.returns)

    def _library_base(self, file: IndexedFile, written: str) -> frozenset[str] | None:
        """The names a base from outside the workspace gives, where they are known here
        (`_LIBRARY_BASES` by the module it is imported from; a builtin exception)."""
        if not file.python:
            return None
        head, _, rest = written.partition(".")
        bindings = self._bindings(file.outline, head)
        if not bindings:
            return _EXCEPTIONS.get(written)
        imported = bindings[-1]
        full = imported.module if imported.name is None else _join(imported.module, imported.name)
        return _LIBRARY_BASES.get(f"{full}.{rest}" if rest else full)

    @staticmethod
    def _class_at(file: IndexedFile, line: int) -> Definition | None:
        """The top-level class whose lines hold `line` (as the index last read the file)."""
        spans = [c for c in file.outline.classes if c.start < line <= c.end]
        if not spans:
            return None
        innermost = min(spans, key=lambda c: c.end - c.start)
        found = file.by_name.get(innermost.name)
        if found is None or found.kind != "class" or found.line != innermost.start:
            return None  # a nested or anonymous class
        return found

    @staticmethod
    def _span(file: IndexedFile, definition: Definition) -> ClassSpan | None:
        """The span (with the bases) of a class `file` defines."""
        return next(
            (
                c
                for c in file.outline.classes
                if (c.name, c.start) == (definition.name, definition.line)
            ),
            None,
        )

    # --- modules -------------------------------------------------------------------------------
    def module(self, importer: IndexedFile, spec: str) -> IndexedFile | None:
        if importer.python:
            return self.python_module(importer, spec)
        return self.js_module(importer, spec)

    def python_module(self, importer: IndexedFile, module: str) -> IndexedFile | None:
        if module.startswith("."):
            level = len(module) - len(module.lstrip("."))
            base = os.path.dirname(importer.path)
            for _ in range(level - 1):
                base = os.path.dirname(base)
            rest = module[level:]
            return self._python_file_at(os.path.join(base, *rest.split(".")) if rest else base)
        candidates = self.modules.get(module)
        if not candidates:
            return None
        found = self.files[min(candidates, key=lambda p: self._preference(p, module, importer))]
        head = module.split(".", 1)[0]
        if found.module != module and (head == module or head in sys.stdlib_module_names):
            # By its path's tail alone, `import types` would be some package's types.py and
            # `import concurrent.futures` a vendored copy's: a top-level name, or the standard
            # library's, is only the file whose package chain names it so.
            return None
        return found

    def _preference(self, path: str, module: str, importer: IndexedFile) -> tuple[object, ...]:
        file = self.files[path]
        shared = os.path.commonpath([path, importer.path])
        return (
            file.module != module,
            file.root != importer.root,
            -len(shared),
            path.endswith(".pyi"),  # the source (with docstrings) before a stub
            len(path),
            path,
        )

    def _python_file_at(self, base: str) -> IndexedFile | None:
        for candidate in (
            base + ".py",
            os.path.join(base, "__init__.py"),
            base + ".pyi",
            os.path.join(base, "__init__.pyi"),
        ):
            if candidate in self.files:
                return self.files[candidate]
        return None

    def js_module(self, importer: IndexedFile, spec: str) -> IndexedFile | None:
        if not spec.startswith("."):
            return None
        base = os.path.normpath(os.path.join(os.path.dirname(importer.path), spec))
        stem, suffix = os.path.splitext(base)
        candidates = [base, *(stem + s for s in _JS_TO_TS.get(suffix, ()))]
        candidates += [base + s for s in (*JS_SUFFIXES, ".d.ts")]
        candidates += [os.path.join(base, "index" + s) for s in JS_SUFFIXES]
        return next((self.files[c] for c in candidates if c in self.files), None)

    # --- names in a module ---------------------------------------------------------------------
    def binding(self, file: IndexedFile, binding: Binding, hops: int) -> Found:
        target = self.module(file, binding.module)
        if binding.name is None:
            return target
        if target is not None:
            found = self.lookup(target, binding.name, hops + 1)
            if found is not None:
                return found
        if file.python:  # `from pkg import mod`, pkg a namespace package (no __init__ to read)
            return self.python_module(file, _join(binding.module, binding.name))
        return None

    def lookup(self, module: IndexedFile, name: str, hops: int) -> Found:
        """`name` in `module`: its definition, what it imports under that name (a re-export), a
        submodule of a package, or what a star import brings."""
        if hops > MAX_HOPS:
            return None
        found = module.by_name.get(name)
        if found is not None:
            return found
        for alias, local in module.outline.aliases:  # export { local as name }
            if alias == name and local != name:
                return self.lookup(module, local, hops + 1)
        for binding in self._bindings(module.outline, name):
            resolved = self.binding(module, binding, hops)
            if resolved is not None:
                return resolved
        if module.python and module.package:
            submodule = self._python_file_at(os.path.join(os.path.dirname(module.path), name))
            if submodule is not None:
                return submodule
        for star in self._bindings(module.outline, "*"):
            target = self.module(module, star.module)
            if target is not None and target is not module:
                resolved = self.lookup(target, name, hops + 1)
                if isinstance(resolved, Definition):
                    return resolved
        return None

    def _attributes(
        self, start: Definition | IndexedFile, names: Sequence[str]
    ) -> Definition | None:
        """The definition `a.b.c` names from `start` (the first met on the way); None when it
        names a module or nothing."""
        found, _ = self._descend(start, names)
        return found if isinstance(found, Definition) else None

    def _descend(self, start: Definition | IndexedFile, names: Sequence[str]) -> tuple[Found, int]:
        """Follow `names` from `start` through modules: what that reaches, and how many of
        the names it took (it stops at the first definition, or at nothing)."""
        current: Found = start
        for taken, name in enumerate(names):
            if not isinstance(current, IndexedFile):
                return current, taken
            current = self.lookup(current, name, 0)
        return current, len(names)

    @staticmethod
    def _bindings(outline: Outline, local: str) -> list[Binding]:
        return [b for b in outline.bindings if b.local == local]
