"""The outline of a JavaScript or TypeScript file, from tree-sitter's grammars (PyPI's
tree-sitter, tree-sitter-javascript and tree-sitter-typescript wheels; nothing is run).

tree-sitter recovers from syntax errors by itself: a file being edited parses into a tree with
ERROR nodes around the broken part, and the declarations outside them (and those an ERROR node
holds whole) are read as usual.

What is read: the top-level declarations (functions, classes with their fields and method
signatures, `const`/`let`/`var`, TypeScript's interfaces, type aliases and enums), whether each
is exported, ES imports (`import ... from`), `require` at top level and re-exports (`export
... from`). CommonJS exports (`module.exports = ...`) are not: ES modules are what TypeScript
sources and packages that ship theirs use.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from dataclasses import replace

import tree_sitter
import tree_sitter_javascript
import tree_sitter_typescript

from ghostfim.engine.context.outline import (
    STUB_LINES,
    Binding,
    ClassSpan,
    Definition,
    Outline,
    clip_line,
    first_doc_line,
    join_stub,
)

SHORT_DECLARATION_LINES = 8  # a `const` this short shows whole (a small object, a schema)
SHORT_VALUE_CHARS = 40  # a field's initial value this short shows (`count = 0`, `new Map()`)

_LANGUAGES = {
    "javascript": tree_sitter_javascript.language,
    "typescript": tree_sitter_typescript.language_typescript,
    "tsx": tree_sitter_typescript.language_tsx,
}
_FUNCTIONS = frozenset({"function_declaration", "generator_function_declaration"})
_SIGNATURES = frozenset({"function_signature"})
_CLASSES = frozenset({"class_declaration", "abstract_class_declaration", "class"})
_VARIABLES = frozenset({"lexical_declaration", "variable_declaration"})
_TYPES = {
    "interface_declaration": "interface",
    "type_alias_declaration": "type",
    "enum_declaration": "enum",
}
_FUNCTION_VALUES = frozenset({"arrow_function", "function_expression", "function"})
_CHUNK_START = re.compile(
    rb"(?:(?:export|import|function|async|class|abstract|const|let|var|interface|type|enum"
    rb"|declare|namespace)\b|@|/\*\*)"
)

# `this.name` in a class's source, and the assignments among them; an instance whose names the
# source does not show (`Object.assign(this, ...)`, `this[key]`). As engine/context/pyoutline.py
# does for `self.`: a scan of the class's text.
_THIS_NAME = re.compile(r"(?<![\w$.])this\.(#?[A-Za-z_$][\w$]*)")
_THIS_STORE = re.compile(
    r"(?<![\w$.])this\.(#?[A-Za-z_$][\w$]*)\s*(?:[-+*/%&|^]|\*\*|<<|>>>?|\?\?|&&|\|\|)?=(?![=>])"
)
_MEMBER_NAME = re.compile(r"#?[A-Za-z_$][\w$]*")
_OPEN_THIS = re.compile(
    r"Object\.(?:assign|defineProperty|defineProperties)\(\s*this\b|(?<![\w$.])this\[(?!Symbol\.)"
)

# Parsers are not thread-safe: each thread that parses (the index's, a test's) has its own.
_local = threading.local()


def _parser(grammar: str) -> tree_sitter.Parser:
    parsers: dict[str, tree_sitter.Parser] = getattr(_local, "parsers", {})
    _local.parsers = parsers
    if grammar not in parsers:
        parsers[grammar] = tree_sitter.Parser(tree_sitter.Language(_LANGUAGES[grammar]()))
    return parsers[grammar]


def grammar_for(path: str) -> str:
    """The grammar for a file by its name: TSX for .tsx, TypeScript for .ts/.mts/.cts, else
    JavaScript (whose grammar reads JSX too)."""
    if path.endswith(".tsx"):
        return "tsx"
    if path.endswith((".ts", ".mts", ".cts")):
        return "typescript"
    return "javascript"


def parse_tree(source: bytes, path: str) -> tree_sitter.Tree:
    """The syntax tree of a whole JS/TS file (its grammar by its name)."""
    parser = _parser(grammar_for(path))
    parser.included_ranges = []  # the whole text (a chunk's range may be left from before)
    return parser.parse(source)


def js_outline(text: str, path: str) -> Outline:
    grammar = grammar_for(path)
    source = text.encode("utf-8", "surrogatepass")
    tree = parse_tree(source, path)
    parser = _parser(grammar)
    reader = _Reader(source, path)
    broken = tree.root_node.has_error
    if not broken:
        reader.read(tree.root_node.children)
    else:
        # tree-sitter's recovery may swallow what follows a broken line (an unclosed
        # parameter list, an `if (` without its end): each top-level chunk is parsed on its
        # own, in place (positions stay the file's).
        try:
            for chunk in _chunks(source):
                parser.included_ranges = [chunk]
                reader.read(parser.parse(source).root_node.children)
        finally:
            parser.included_ranges = []
    return Outline(
        "javascript" if grammar == "javascript" else "typescript",
        definitions=tuple(reader.definitions.values()),
        bindings=tuple(reader.bindings),
        imports=tuple(dict.fromkeys(reader.imports)),
        classes=tuple(reader.classes),
        aliases=tuple(reader.aliases),
        broken=broken,
    )


def _chunks(source: bytes) -> Iterator[tree_sitter.Range]:
    """The ranges of a file's top-level statements: a new one at each line that starts a
    declaration, an import or an export at column 0, unless a doc comment or a decorator just
    before it belongs to it."""
    lines = source.split(b"\n")
    starts: list[tuple[int, int]] = []  # (row, byte)
    offset = 0
    attached = False  # the line before is a decorator or ends a comment: this one goes with it
    for row, line in enumerate(lines):
        if _CHUNK_START.match(line) and not attached:
            starts.append((row, offset))
        if line.strip():
            attached = line.startswith(b"@") or line.rstrip().endswith(b"*/")
        offset += len(line) + 1
    if not starts or starts[0][0] != 0:
        starts.insert(0, (0, 0))
    end_point = (len(lines) - 1, len(lines[-1]))
    for (row, start), following in zip(starts, [*starts[1:], None], strict=True):
        if following is None:
            yield tree_sitter.Range((row, 0), end_point, start, len(source))
        else:
            yield tree_sitter.Range((row, 0), (following[0], 0), start, following[1])


def _text(node: tree_sitter.Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", "replace")


def _collapse(text: str) -> str:
    """A signature that spans lines, on one line."""
    text = re.sub(r"\s+", " ", text).strip()
    return text.replace("( ", "(").replace(", )", ")").replace(",)", ")").replace(" )", ")")


def _string_value(node: tree_sitter.Node | None) -> str:
    """The text of a string literal node, without its quotes."""
    return _text(node)[1:-1] if node is not None and node.type == "string" else ""


class _Reader:
    def __init__(self, source: bytes, path: str) -> None:
        self.source = source
        self.path = path
        self.definitions: dict[str, Definition] = {}
        self.bindings: list[Binding] = []
        self.imports: list[str] = []
        self.classes: list[ClassSpan] = []
        self.aliases: list[tuple[str, str]] = []

    def slice(self, start: tree_sitter.Node, end: tree_sitter.Node | None) -> str:
        """The source from `start`'s start to `end`'s start (to `start`'s end when None)."""
        stop = start.end_byte if end is None else end.start_byte
        return self.source[start.start_byte : stop].decode("utf-8", "replace")

    def read(self, nodes: list[tree_sitter.Node]) -> None:
        for node in nodes:
            kind = node.type
            if kind == "import_statement":
                self.read_import(node)
            elif kind == "export_statement":
                self.read_export(node)
            elif kind == "ambient_declaration":  # `declare function f(): void;`
                for inner in node.named_children:
                    self.declare(inner, node, exported=False, default=False)
            elif kind == "ERROR":
                self.read(node.children)
            else:
                self.declare(node, node, exported=False, default=False)

    # --- imports -------------------------------------------------------------------------------
    def bind(self, local: str, module: str, name: str | None, node: tree_sitter.Node) -> None:
        if local and module:
            self.bindings.append(Binding(local, module, name, node.start_point.row))

    def read_import(self, node: tree_sitter.Node) -> None:
        module = _string_value(node.child_by_field_name("source"))
        for clause in node.named_children:
            if clause.type == "import_require_clause":  # TS: `import x = require("y")`
                module = _string_value(clause.child_by_field_name("source"))
                name = next((c for c in clause.named_children if c.type == "identifier"), None)
                self.bind(_text(name), module, None, node)
            elif clause.type == "import_clause":
                self.read_import_clause(clause, module, node)
        if module:
            self.imports.append(module)

    def read_import_clause(
        self, clause: tree_sitter.Node, module: str, node: tree_sitter.Node
    ) -> None:
        for part in clause.named_children:
            if part.type == "identifier":  # import D from "m"
                self.bind(_text(part), module, "default", node)
            elif part.type == "namespace_import":  # import * as ns from "m"
                for local in part.named_children:
                    self.bind(_text(local), module, None, node)
            elif part.type == "named_imports":
                for spec in part.named_children:
                    if spec.type != "import_specifier":
                        continue
                    name = _text(spec.child_by_field_name("name"))
                    alias = _text(spec.child_by_field_name("alias"))
                    self.bind(alias or name, module, name, node)

    def read_require(self, declarator: tree_sitter.Node) -> bool:
        """`const x = require("m")` and `const {a, b: c} = require("m")`; False when the
        declarator is not a `require`."""
        value = declarator.child_by_field_name("value")
        if value is None or value.type != "call_expression":
            return False
        if _text(value.child_by_field_name("function")) != "require":
            return False
        arguments = value.child_by_field_name("arguments")
        module = _string_value(arguments.named_children[0]) if arguments else ""
        if not module or arguments is None or len(arguments.named_children) != 1:
            return False
        self.imports.append(module)
        target = declarator.child_by_field_name("name")
        if target is None:
            return True
        if target.type == "identifier":
            self.bind(_text(target), module, None, declarator)
        elif target.type == "object_pattern":
            for part in target.named_children:
                if part.type == "shorthand_property_identifier_pattern":
                    self.bind(_text(part), module, _text(part), declarator)
                elif part.type == "pair_pattern":
                    key = _text(part.child_by_field_name("key"))
                    local = _text(part.child_by_field_name("value"))
                    self.bind(local, module, key, declarator)
        return True

    # --- exports -------------------------------------------------------------------------------
    def read_export(self, node: tree_sitter.Node) -> None:
        default = any(c.type == "default" for c in node.children)
        declaration = node.child_by_field_name("declaration")
        source = _string_value(node.child_by_field_name("source"))
        if declaration is not None:
            if declaration.type == "ambient_declaration":  # export declare const x: T;
                for inner in declaration.named_children:
                    self.declare(inner, node, exported=True, default=default)
            else:
                self.declare(declaration, node, exported=True, default=default)
            return
        value = node.child_by_field_name("value")
        if value is not None:  # export default <expression>
            if value.type == "identifier":
                self.aliases.append(("default", _text(value)))
            else:
                self.declare(value, node, exported=True, default=True)
            return
        if source:
            self.imports.append(source)
        for part in node.named_children:
            if part.type == "export_clause":
                for spec in part.named_children:
                    name = _text(spec.child_by_field_name("name"))
                    alias = _text(spec.child_by_field_name("alias")) or name
                    if source:  # export { A as B } from "m": B is m's A
                        self.bind(alias, source, name, node)
                    else:
                        self.aliases.append((alias, name))
            elif part.type == "namespace_export":  # export * as ns from "m"
                for local in part.named_children:
                    self.bind(_text(local), source, None, node)
        if source and not any(
            p.type in ("export_clause", "namespace_export") for p in node.named_children
        ):
            self.bind("*", source, None, node)  # export * from "m"

    # --- declarations --------------------------------------------------------------------------
    def declare(
        self, node: tree_sitter.Node, outer: tree_sitter.Node, *, exported: bool, default: bool
    ) -> None:
        """Record a declaration; `outer` is the statement it starts (its `export` keyword, its
        doc comment before it)."""
        kind = node.type
        doc = self.doc_comment(outer)
        if kind in _FUNCTIONS or kind in _SIGNATURES or kind == "function_expression":
            body = node.child_by_field_name("body")
            head = _collapse(self.slice(outer, body)).rstrip(";")
            stub = head + (" { ... }" if body is not None else ";")
            self.add(node, "function", doc + clip_line(stub), exported, default)
        elif kind in _CLASSES:
            self.add(node, "class", doc + self.class_stub(node, outer), exported, default)
            self.add_class_span(node)
            name = _text(node.child_by_field_name("name")) or ("default" if default else "")
            held = self.definitions.get(name)
            if held is not None and held.line == node.start_point.row:
                statics, attributes, unbound = self.class_names(node)
                self.definitions[name] = replace(
                    held, members=statics, attributes=attributes, unbound=unbound
                )
        elif kind in _TYPES:
            self.add(node, _TYPES[kind], doc + self.whole_stub(node, outer), exported, default)
        elif kind in _VARIABLES:
            for declarator in node.named_children:
                if declarator.type == "variable_declarator" and not self.read_require(declarator):
                    self.declare_variable(declarator, node, outer, doc, exported)

    def add(
        self, node: tree_sitter.Node, kind: str, stub: str, exported: bool, default: bool
    ) -> None:
        name = _text(node.child_by_field_name("name")) or ("default" if default else "")
        if not name:
            return
        line = node.start_point.row
        definition = Definition(name, kind, stub, self.path, line, exported, default)
        # `export function f(a: string): void;` overloads, then the implementation: one stub
        if name not in self.definitions or not self.definitions[name].exported:
            self.definitions[name] = definition

    def declare_variable(
        self,
        declarator: tree_sitter.Node,
        declaration: tree_sitter.Node,
        outer: tree_sitter.Node,
        doc: str,
        exported: bool,
    ) -> None:
        target = declarator.child_by_field_name("name")
        if target is None or target.type != "identifier":
            return
        value = declarator.child_by_field_name("value")
        keyword = _text(declaration.children[0]) if declaration.children else "const"
        prefix = ("export " if exported else "") + keyword + " "
        whole = self.slice(declarator, None)
        if whole.count("\n") < SHORT_DECLARATION_LINES:
            lines = (prefix + whole).split("\n")
            stub = join_stub(lines[:STUB_LINES], "  // ...") + ("" if whole.endswith(";") else ";")
        elif value is not None and value.type in _FUNCTION_VALUES:
            body = value.child_by_field_name("body")
            stub = clip_line(prefix + _collapse(self.slice(declarator, body)) + " { ... };")
        else:
            annotation = _text(declarator.child_by_field_name("type"))
            stub = f"{prefix}{_text(target)}{annotation} = ...;"
        kind = "function" if value is not None and value.type in _FUNCTION_VALUES else "variable"
        self.add(declarator, kind, doc + stub, exported, default=False)

    def class_stub(self, node: tree_sitter.Node, outer: tree_sitter.Node) -> str:
        body = node.child_by_field_name("body")
        head = _collapse(self.slice(outer, body)) + " {"
        members: list[str] = []
        for member in body.named_children if body is not None else []:
            text = self.member(member)
            if text:
                members.append("  " + text)
        return join_stub([head, *members], "  // ...", tail=("}",))

    def class_names(
        self, node: tree_sitter.Node
    ) -> tuple[tuple[str, ...], tuple[str, ...] | None, tuple[str, ...]]:
        """A class's static names (what `Class.` has), its instances' names (None where the
        source does not show them all: an index signature, `Object.assign(this, ...)`), and
        the names it reads on `this` but neither declares nor assigns."""
        body = node.child_by_field_name("body")
        statics: dict[str, None] = {}
        instance: dict[str, None] = {}
        for member in body.named_children if body is not None else []:
            if member.type == "index_signature":
                return (), None, ()
            name = _text(member.child_by_field_name("name"))
            if not _MEMBER_NAME.fullmatch(name):  # a comment, `[Symbol.iterator]`, `"quoted"`
                continue
            if any(c.type == "static" for c in member.children):
                statics[name] = None
                continue
            instance[name] = None
            if name == "constructor":  # `constructor(private readonly store: Store)`
                for parameter in _parameter_properties(member):
                    instance[parameter] = None
        source = self.slice(node, None)
        if _OPEN_THIS.search(source):
            return tuple(statics), None, ()
        instance.update(dict.fromkeys(_THIS_STORE.findall(source)))
        unbound = [n for n in dict.fromkeys(_THIS_NAME.findall(source)) if n not in instance]
        return tuple(statics), tuple(instance), tuple(unbound)

    def member(self, member: tree_sitter.Node) -> str:
        """A class member as one line of the stub ("" for private ones and comments)."""
        kind = member.type
        if kind == "comment" or self.is_private(member):
            return ""
        if kind in ("public_field_definition", "field_definition"):
            value = member.child_by_field_name("value")
            initial = _text(value)
            if value is not None and len(initial) <= SHORT_VALUE_CHARS and "\n" not in initial:
                # `count = 0` says the type the declaration does not (`count;` would not)
                return _collapse(_text(member)).rstrip("; ") + ";"
            return _collapse(self.slice(member, value)).rstrip("=; ") + ";"
        if kind == "method_definition":
            body = member.child_by_field_name("body")
            return _collapse(self.slice(member, body)) + ";"
        if kind in ("method_signature", "abstract_method_signature", "index_signature"):
            return _collapse(_text(member)).rstrip(";") + ";"
        return ""

    def is_private(self, member: tree_sitter.Node) -> bool:
        for child in member.children:
            if child.type == "private_property_identifier":
                return True
            if child.type == "accessibility_modifier" and _text(child) == "private":
                return True
        return False

    def whole_stub(self, node: tree_sitter.Node, outer: tree_sitter.Node) -> str:
        """An interface, type alias or enum: its text, cut (with its last line kept) when long."""
        lines = self.slice(outer, None).split("\n")
        if len(lines) <= STUB_LINES:
            return join_stub(lines, "  // ...")
        return join_stub(lines[:-1], "  // ...", tail=(lines[-1],))

    def doc_comment(self, outer: tree_sitter.Node) -> str:
        """`/** first line */` of the JSDoc just above `outer` ("" if none), and a newline."""
        before = outer.prev_sibling
        if before is None or before.type != "comment":
            return ""
        if before.end_point.row < outer.start_point.row - 1:
            return ""
        text = _text(before)
        if not text.startswith("/**"):
            return ""
        lines = [re.sub(r"^\s*\*?\s?", "", s) for s in text[3:].removesuffix("*/").split("\n")]
        doc = first_doc_line("\n".join(s for s in lines if not s.lstrip().startswith("@")))
        return f"/** {doc} */\n" if doc else ""

    def add_class_span(self, node: tree_sitter.Node) -> None:
        bases: list[str] = []
        for heritage in node.named_children:
            if heritage.type != "class_heritage":
                continue
            for clause in heritage.named_children:
                if clause.type == "extends_clause":
                    bases += [_text(v) for v in clause.children_by_field_name("value")]
                elif clause.type == "implements_clause":
                    bases += [_type_name(t) for t in clause.named_children]
                else:  # JavaScript: `extends <expression>`
                    bases.append(_text(clause))
        name = _text(node.child_by_field_name("name"))
        self.classes.append(
            ClassSpan(name, node.start_point.row, node.end_point.row, tuple(b for b in bases if b))
        )


def _parameter_properties(constructor: tree_sitter.Node) -> Iterator[str]:
    """The names of a TypeScript constructor's parameter properties (`private x: X`, `readonly
    y`): fields of every instance."""
    parameters = constructor.child_by_field_name("parameters")
    for parameter in parameters.named_children if parameters is not None else []:
        kinds = {c.type for c in parameter.children}
        if kinds & {"accessibility_modifier", "readonly", "override_modifier"}:
            name = next((c for c in parameter.children if c.type == "identifier"), None)
            if name is not None:
                yield _text(name)


def _type_name(node: tree_sitter.Node) -> str:
    """A type as a name to look up: `I<T>` is `I`."""
    if node.type == "generic_type":
        return _text(node.child_by_field_name("name"))
    return _text(node)
