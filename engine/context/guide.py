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
methods assign on `self`, its bases'. `this.` in JavaScript/TypeScript likewise (the index finds
the class by the cursor's line). Not where `self.` or `this.` starts the statement: that may
assign a name no line has yet.

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

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

TAIL_CHARS = 256  # of the text before the cursor: the line a chain ends on
# The dotted name the text ends with (`a`, `a.`, `a.b.pa`), not after a call, an index or
# another dot.
_TAIL = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?:\.\w*)*$")

# A method's header, up to its first parameter (which may be on the next line).
_METHOD = re.compile(r"(?:async\s+)?def\s+\w+\s*\(\s*(\w+)")
_CLASS = re.compile(r"class\s+(\w+)")

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
            after_dot = self._names(partial)
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
        if head not in ("self", "this"):
            return ".".join(chain)
        if len(chain) > 1 or starts_statement:
            return None
        if head == "this":
            return "this()"
        return None if self._class_around is None else f"{self._class_around}()"

    @cached_property
    def _class_around(self) -> str | None:
        return enclosing_class(self._text)

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


def enclosing_class(before: str) -> str | None:
    """The top-level class whose method (its first parameter `self`) holds the last line of
    `before`, by the indentation of the lines above it; None for anything else (a function, a
    nested class, a static method)."""
    end = before.rfind("\n")
    current = before[end + 1 :]
    indent = len(current) - len(current.lstrip())
    in_method = False
    while end > 0:
        start = before.rfind("\n", 0, end) + 1
        line, at = before[start:end], start
        end = start - 1
        code = line.lstrip()
        width = len(line) - len(code)
        if not code or code.startswith(("#", ")", "]", "}")) or width >= indent:
            continue  # blank, a comment, a closing bracket, or inside the block we are in
        indent = width
        if not in_method:
            if code.startswith(("def ", "async ")):
                method = _METHOD.match(before, at + width)
                if method is None or method.group(1) != "self":
                    return None
                in_method = True
            continue
        if code.startswith(("def ", "async ")):
            return None  # a function inside a function
        if code.startswith("class "):
            found = _CLASS.match(code)
            return found.group(1) if found and width == 0 else None
    return None


def _in_string(line: str) -> bool:
    return line.count('"') % 2 == 1 or line.count("'") % 2 == 1
