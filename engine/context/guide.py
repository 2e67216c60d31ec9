"""The names a suggestion may write after a dot, from the workspace index: member-guided
decoding.

A small model that has not seen a package guesses its names: after `proto_utils.ToProto.` it
writes a plausible method that the class does not have. Where the index knows every name the
thing before the dot has (a workspace module, or a workspace class whose bases the index holds
too: engine/context/resolve.py `members`), the decoder takes only tokens that spell one of them
(monitor-guided decoding, Agrawal et al. 2023; JetBrains' full-line completion checks its
names the same way). The model still chooses which name, and its probability of the chosen
token goes to the confidence filter as it is: a name the model did not expect is shown only if
the filter would show it anyway.

`self.` in a method goes on with the names of an instance of the class around it (found by the
lines' indentation above the cursor; a top-level class the index holds): its class's, those its
methods assign on `self`, its bases'. `cls.` in a class method, with the class's names. `this.`
in JavaScript/TypeScript likewise (the index finds the class by the cursor's line). Not where
`self.`, `cls.` or `this.` starts the statement: that may assign a name no line has yet.

A Python name local to the function around the cursor goes on with an instance's names where
the function's text shows its class: a parameter annotated with it (`req: Request`,
`Optional[Request]`, `Request | None`), or every assignment to it made by that class's
constructor, by a workspace function whose return annotation names it, or annotated with it
(`task = Task(...)`, `task = make_task()`, `task: Task = pop()`). Any other binding of the name
there (a `for`, a `with ... as`, an unpacking, another value, `isinstance(task, ...)`, which
may narrow it to a subclass) leaves it unguided; so does a local whose class is not one the
index holds (engine/context/resolve.py).

Nothing is constrained where the list may be incomplete (engine/context/resolve.py says None),
where what was typed after the dot starts no name on it (the user knows a name the index does
not), in comments (`#`, `//` anywhere on the line), in docstrings, and after an odd number of
quotes on the line (in a string). A whole name may not go on into a longer one the list lacks
(`config` into `config_response`), and a dot after a known name goes on into its names even
where one token holds both (`.res`). No `__dunder__` is offered unless `__` is typed.

Pure text: the session (engine/local/session.py) turns the names into the tokens that may come
next (engine/local/vocab.py `spelling`).
"""

from __future__ import annotations

import io
import keyword
import re
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property

from ghostfim.engine.context.outline import annotated_class

TAIL_CHARS = 256  # of the text before the cursor: the line a chain ends on
# The most of a function's text read for its locals' classes: it is tokenized once a request,
# at its first name or dot, on the keystroke path (~1 ms a thousand characters on this CPU, so
# 8 ms at most); a longer function's locals are not guided.
FUNCTION_CHARS = 8_000
# The dotted name the text ends with (`a`, `a.`, `a.b.pa`), not after a call, an index or
# another dot.
_TAIL = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?:\.\w*)*$")

# A method's header, up to its first parameter (which may be on the next line).
_METHOD = re.compile(r"(?:async\s+)?def\s+\w+\s*\(\s*(\w+)")
_CLASS = re.compile(r"class\s+(\w+)")
_OPENING, _CLOSING = "([{", ")]}"
_AUGMENTED = frozenset({"+=", "-=", "*=", "/=", "//=", "%=", "**=", "@=", "&=", "|=", "^=",
                        ">>=", "<<="})  # fmt: skip
_NARROWING = frozenset({"isinstance", "issubclass", "hasattr", "getattr", "setattr", "type",
                        "cast"})  # fmt: skip
_BINDING_KEYWORDS = frozenset({"as", "del", "global", "nonlocal", "def", "class"})
_SKIPPED = frozenset({tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT,
                      tokenize.ENDMARKER})  # fmt: skip

# `dotted` -> its names; `Class()`: an instance's, `this()`: one of the class at the cursor
# (engine/context/resolve.py `members`).
Members = Callable[[str], "frozenset[str] | None"]


@dataclass(frozen=True)
class Next:
    """What the next token may be, by the names the index knows.

    `names`: the rests of the names that start with what is written after the dot (the token
    goes on spelling one of them). `ends`: the name written may end here: a token that starts
    with a byte no name has, except a dot; a dot goes on into one of `after_dot` (the names of
    what is written, None: unknown, any). `open`: a bare name (`mod`, no dot yet): any token
    may follow, a dot only into `after_dot`."""

    names: tuple[str, ...] = ()
    ends: bool = False
    after_dot: tuple[str, ...] | None = None
    open: bool = False


class MemberGuide:
    """For one request: the text before the cursor and a lookup of `dotted`'s names."""

    def __init__(self, members: Members, before: str) -> None:
        self._members = members
        self._text = before
        self._before = before[-TAIL_CHARS:]
        # In a docstring (an odd number of triple quotes before the cursor): prose, unguided.
        self._prose = (before.count('"""') + before.count("'''")) % 2 == 1
        self._known: dict[str, tuple[str, ...] | None] = {}
        self._classes: dict[str, str | None] = {}

    def after(self, generated: str) -> Next | None:
        """What may follow `before + generated` (None: anything)."""
        text = self._before + generated
        line = text[text.rfind("\n") + 1 :]
        if self._prose or "#" in line or "//" in line or _in_string(line):
            return None
        found = _TAIL.search(line)
        if found is None:
            return None
        *chain, partial = found.group(0).split(".")
        if not chain:  # a bare name: only a dot after it is guided
            dotted = self._dotted([partial], starts_statement=True)
            after_dot = None if dotted is None else self._names(dotted)
            if after_dot is None:
                return None
            return Next(ends=True, after_dot=_offered(after_dot, ""), open=True)
        dotted = self._dotted(chain, starts_statement=not line[: found.start()].strip())
        names = None if dotted is None else self._names(dotted)
        if dotted is None or names is None:
            return None
        rests = tuple(n[len(partial) :] for n in _offered(names, partial) if n.startswith(partial))
        whole = partial in names
        if not whole and not rests:
            return None  # the user knows a name the index does not
        after_dot = self._names(f"{dotted}.{partial}") if whole else None
        if after_dot is not None:
            after_dot = _offered(after_dot, "")
        return Next(tuple(r for r in rests if r), whole, after_dot)

    def _dotted(self, chain: list[str], starts_statement: bool) -> str | None:
        """What the names of `chain` (`a.b` of `a.b.`) are looked up as: `a.b`; for `self`
        in a method of Class, `Class()`; `this()` for `this` (the index knows the class at
        the cursor). None for `a..b`, for `self.x.` (what x holds is not known), and where
        `self.`/`this.` starts the statement (it may assign a name no line has yet)."""
        if not all(chain):
            return None
        head = chain[0]
        if head not in ("self", "cls", "this"):
            local = self._local(head)
            if local is None:
                return ".".join(chain)
            return f"{local}()" if local and len(chain) == 1 else None
        if len(chain) > 1 or starts_statement:
            return None
        if head == "this":
            return "this()"
        around = self._class_around(head)
        return None if around is None else (f"{around}()" if head == "self" else around)

    def _class_around(self, first: str) -> str | None:
        """`enclosing_class` for `self` or `cls`, once a request: `after` asks at every token."""
        if first not in self._classes:
            self._classes[first] = enclosing_class(self._text, first)
        return self._classes[first]

    def _local(self, name: str) -> str | None:
        """The class of the local `name` ("" where it is local but its class is not shown);
        None where the function around the cursor does not bind it (a module, a global)."""
        return self._locals.get(name)

    @cached_property
    def _locals(self) -> dict[str, str]:
        return local_classes(self._text)

    def _names(self, dotted: str) -> tuple[str, ...] | None:
        if dotted not in self._known:
            found = self._members(dotted)
            self._known[dotted] = None if found is None else tuple(sorted(found))
        return self._known[dotted]


def _offered(names: tuple[str, ...], partial: str) -> tuple[str, ...]:
    """The names to spell after `partial`: no `__dunder__` unless the text asks for one (it
    starts with `__`). A model that wants a private name it guesses (`self._frames`) writes `_`
    first, which `__init__` would take on into a name it did not mean."""
    if partial.startswith("__"):
        return names
    plain = tuple(n for n in names if not (n.startswith("__") and n.endswith("__")))
    return plain or names


def enclosing_class(before: str, first: str = "self") -> str | None:
    """The top-level class whose method (its first parameter `first`: `self`, or `cls` for a
    class method) holds the last line of `before`, by the indentation of the lines above it;
    None for anything else (a function, a nested class, a static method)."""
    blocks = _enclosing_lines(before)
    for at, width, code in blocks:
        if code.startswith(("def ", "async ")):
            method = _METHOD.match(before, at + width)
            if method is None or method.group(1) != first:
                return None
            break
    else:
        return None
    for _, width, code in blocks:
        if code.startswith(("def ", "async ")):
            return None  # a function inside a function
        if code.startswith("class "):
            found = _CLASS.match(code)
            return found.group(1) if found and width == 0 else None
    return None


def _enclosing_lines(before: str, limit: int | None = None) -> Iterator[tuple[int, int, str]]:
    """The lines that open the blocks holding the last line of `before`, innermost first, by
    their indentation: each one's start, indentation and code. Blank lines, comments and
    closing brackets open none; the walk goes back `limit` characters at most."""
    end = before.rfind("\n")
    current = before[end + 1 :]
    indent = len(current) - len(current.lstrip())
    stop = 0 if limit is None else max(0, len(before) - limit)
    while end > stop:
        start = before.rfind("\n", 0, end) + 1
        line = before[start:end]
        end = start - 1
        code = line.lstrip()
        width = len(line) - len(code)
        if not code or code.startswith(("#", ")", "]", "}")) or width >= indent:
            continue  # blank, a comment, a closing bracket, or inside the block we are in
        indent = width
        yield start, width, code


def local_classes(before: str) -> dict[str, str]:
    """The names the function around the last line of `before` binds, each to the class it
    holds there ("" where that is not shown): a parameter's by its annotation; an assigned
    name's where every assignment is annotated with the class or is a call of it (or of a
    function the index finds returns it), all the same one. Any other binding (`for`, `as`, an
    unpacking, `+=`, `:=`, another value) makes it "". The statement the cursor is in is not
    read."""
    header = _function_around(before)
    if header is None or len(before) - header > FUNCTION_CHARS:
        return {}
    found: dict[str, set[str]] = {}
    statements = _statements(before[header : before.rfind("\n") + 1])
    first = next(statements, None)
    if first is None or first[-1].string != ":":
        return {}  # the cursor is in the header
    for name, annotation in _parameters(first):
        found.setdefault(name, set()).add(annotated_class(annotation))
    for statement in statements:
        for name, kind in _bindings(statement):
            found.setdefault(name, set()).add(kind)
    return {name: kinds.pop() if len(kinds) == 1 else "" for name, kinds in found.items()}


Token = tokenize.TokenInfo


def _statements(text: str) -> Iterator[list[Token]]:
    """The logical lines of `text`, their tokens without comments, indents and line breaks;
    not the last one if it is not finished."""
    statement: list[Token] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.NEWLINE:
                if statement:
                    yield statement
                statement = []
            elif token.type not in _SKIPPED:
                statement.append(token)
    except (tokenize.TokenError, SyntaxError):
        return  # an unfinished statement (an open bracket or string), or bad indentation


def _parameters(header: list[Token]) -> Iterator[tuple[str, str]]:
    """Each parameter of a `def` header and its annotation's text ("" for none)."""
    opened = next((i for i, t in enumerate(header) if t.string == "("), len(header))
    depth = 0
    part: list[Token] = []
    for token in header[opened + 1 :]:
        if token.string in _CLOSING:
            if depth == 0:
                break  # the list's end (the return annotation is not a parameter's)
            depth -= 1
        elif token.string in _OPENING:
            depth += 1
        if depth == 0 and token.string == ",":
            if part:
                yield _parameter(part)
            part = []
        else:
            part.append(token)
    if part:
        yield _parameter(part)


def _parameter(tokens: list[Token]) -> tuple[str, str]:
    names = [t for t in tokens if t.type == tokenize.NAME]
    colon = next((i for i, t in enumerate(tokens) if t.string == ":"), None)
    equals = next((i for i, t in enumerate(tokens) if t.string == "="), len(tokens))
    name = names[0].string if names else ""
    if colon is None or colon > equals or tokens[0].string in ("*", "**"):  # *args: a tuple
        return name, ""
    return name, "".join(t.string for t in tokens[colon + 1 : equals])


def _bindings(statement: list[Token]) -> Iterator[tuple[str, str]]:
    """The names a statement binds in its function, each with the class it then holds ("":
    not shown). Names in brackets are arguments or a comprehension's own, except `:=`."""
    depth = 0
    equals = None
    depths: list[int] = []
    for i, token in enumerate(statement):
        if token.string in _CLOSING:
            depth -= 1
        depths.append(depth)
        if token.string in _OPENING:
            depth += 1
        if token.string == "=" and depth == 0 and equals is None:
            equals = i
    leading = statement[0].string
    if leading in ("import", "from"):
        return  # a module: the index knows the function's imports as it knows the file's
    for i, token in enumerate(statement):
        if token.type != tokenize.NAME or keyword.iskeyword(token.string):
            continue
        if (
            token.string in _NARROWING
            and statement[i + 1 : i + 2]
            and statement[i + 1].string == "("
        ):
            # `isinstance(agent, LlmAgent)`: the name may hold a subclass from here on, and
            # `getattr(agent, "x")` reads what its class does not declare.
            if i + 2 < len(statement) and statement[i + 2].type == tokenize.NAME:
                yield statement[i + 2].string, ""
            continue
        before = statement[i - 1].string if i else ""
        after = statement[i + 1].string if i + 1 < len(statement) else ""
        if before == "." or after in (".", "(", "["):
            continue  # an attribute, a call, an item: not a binding
        if after == ":=":
            yield token.string, ""
        elif depths[i] > 0:
            continue
        elif i == 0 and after == "=":
            yield token.string, _constructed_class(statement[2:])
        elif i == 0 and after == ":":
            end = equals if equals is not None else len(statement)
            yield token.string, annotated_class("".join(t.string for t in statement[2:end]))
        elif (
            (equals is not None and i < equals)
            or after in _AUGMENTED
            or before in _BINDING_KEYWORDS
            or (before == "," and leading in _BINDING_KEYWORDS)
            or (leading in ("for", "async") and _follows(statement, i, "in"))
        ):
            yield token.string, ""


def _follows(statement: list[Token], i: int, word: str) -> bool:
    return any(t.string == word for t in statement[i + 1 :])


def _constructed_class(value: list[Token]) -> str:
    """What is called where a call is the whole of `value` (`Task(...)`, `mod.make(...)`,
    `await fetch(...)`); "" for any other value. The index then asks whether it is a class, or
    a function whose return annotation names one."""
    if value and value[0].string == "await":
        value = value[1:]
    dotted = []
    at = 0
    while at < len(value) and value[at].type == tokenize.NAME:
        dotted.append(value[at].string)
        at += 1
        if at < len(value) and value[at].string == ".":
            at += 1
        else:
            break
    if not dotted or at >= len(value) or value[at].string != "(":
        return ""
    depth = 0
    for end in range(at, len(value)):
        if value[end].string in _OPENING:
            depth += 1
        elif value[end].string in _CLOSING:
            depth -= 1
            if depth == 0:
                return ".".join(dotted) if end == len(value) - 1 else ""
    return ""


def _function_around(before: str) -> int | None:
    """Where the line with the header of the innermost function holding the last line of
    `before` starts (its decorators not included); None past FUNCTION_CHARS."""
    for start, width, code in _enclosing_lines(before, FUNCTION_CHARS):
        if code.startswith(("def ", "async def ")):
            return start
        if code.startswith("class ") or width == 0:
            return None
    return None


def _in_string(line: str) -> bool:
    return line.count('"') % 2 == 1 or line.count("'") % 2 == 1
