"""The text around the cursor, as the stop rules and the post-processing rules read it.

One immutable object built once per request from the prompt's prefix and suffix, so that each
rule reads named fields (the line before the cursor, the rest of the line, the lines above and
below) instead of re-splitting strings, and so that tests can state a cursor position plainly:
`CursorContext.around("def f(x):\\n    ", "\\n    return y\\n")`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise
from typing import Literal

IndentStyle = Literal["tabs", "spaces"]

# Lines either side of the cursor that the rules look at: enough to see the enclosing block and
# the file's indentation style, few enough that building the context costs microseconds.
CONTEXT_LINES = 64

# A line that ends with one of these opens a block: a block suggestion is likely wanted after it,
# and the block's lines are indented deeper than it (`def f(x):`, `if (x) {`, `foo(`, `=> `).
_OPENER_ENDINGS = (":", "{", "(", "[", "=>", "->", "\\")
# ... and so does a line whose last word is one of these (Lua `then`/`do`/`else`/`repeat`,
# shell `then`/`do`/`else`, Ruby `do`, Lua `function f(a)` below).
_OPENER_WORDS = frozenset({"then", "do", "else", "repeat", "begin"})
_LUA_FUNCTION = re.compile(r"\bfunction\b[^{]*\)$")
_RUBY_BLOCK = re.compile(r"\bdo\s*\|[^|]*\|$")
# A line that starts with one of these closes a block (kept as the block's last line).
_CLOSER_CHARS = ("}", ")", "]")
_CLOSER_WORDS = frozenset({"end", "fi", "done", "esac", "until"})
_FIRST_WORD = re.compile(r"[A-Za-z_]+")


def indent_of(line: str) -> str:
    """The line's leading whitespace (spaces and tabs)."""
    return line[: len(line) - len(line.lstrip(" \t"))]


def indent_width(line: str) -> int:
    """Leading whitespace in characters. A tab counts once: widths are only ever compared
    within one file, and a file that mixes tabs and spaces for indentation is caught by the
    indentation-style rule rather than guessed at here."""
    return len(indent_of(line))


def opens_block(line: str) -> bool:
    """Whether a line ends by opening a block whose lines will be indented deeper.

    Python `def f(x):`, C/JS/Go `{`, an open call or literal `foo(` / `[`, JS `=>`, Lua
    `then`/`do`/`function f(a)`, shell `then`/`do`, Ruby `do |x|`, a `\\` continuation.
    """
    s = line.rstrip()
    if not s.strip():
        return False
    if s.endswith(_OPENER_ENDINGS):
        return True
    words = s.split()
    if words[-1] in _OPENER_WORDS:
        return True
    return bool(_LUA_FUNCTION.search(s) or _RUBY_BLOCK.search(s))


def closes_block(line: str) -> bool:
    """Whether a line starts by closing a block: `}`, `)`, `]`, `end`, `fi`, `done`, ...

    Words must be whole (`endpoint = 1` closes nothing).
    """
    s = line.strip()
    if s.startswith(_CLOSER_CHARS):
        return True
    m = _FIRST_WORD.match(s)
    return m is not None and m.group(0) in _CLOSER_WORDS


def reopens_block(line: str) -> bool:
    """A line that closes a block and opens the next one: `} else {`, `} catch (e) {`,
    `else`/`elseif ... then` in Lua, `else:`/`elif x:`/`except E:` in Python."""
    s = line.strip()
    m = _FIRST_WORD.match(s)
    word = m.group(0) if m else ""
    branch = word in {"else", "elif", "elseif", "except", "catch", "finally", "case", "when"}
    return opens_block(s) and (closes_block(s) or branch)


@dataclass(frozen=True)
class CursorContext:
    """The cursor's surroundings. `lines_above` ends with the line just above the cursor line;
    `lines_below` starts with the line just below it (both at most CONTEXT_LINES long)."""

    line_before: str  # the cursor line up to the cursor
    rest_of_line: str  # the cursor line from the cursor to its end (no line break)
    lines_above: tuple[str, ...] = ()
    lines_below: tuple[str, ...] = ()

    @classmethod
    def around(cls, prefix: str, suffix: str) -> CursorContext:
        start = prefix.rfind("\n") + 1
        above = prefix[: start - 1].rsplit("\n", CONTEXT_LINES)[-CONTEXT_LINES:] if start else []
        after = suffix.split("\n", CONTEXT_LINES + 1)
        return cls(
            line_before=prefix[start:],
            rest_of_line=after[0],
            lines_above=tuple(above),
            lines_below=tuple(after[1 : CONTEXT_LINES + 1]),
        )

    # --- derived facts, each computed once (cached_property works on a frozen dataclass: it
    # writes the instance's __dict__, not through __setattr__) ------------------------------
    @property
    def cursor_in_indentation(self) -> bool:
        """Nothing but whitespace before the cursor on its line (an empty line, or the cursor
        inside or at the end of the line's indentation)."""
        return not self.line_before.strip()

    @property
    def mid_line(self) -> bool:
        """Code follows the cursor on its line."""
        return bool(self.rest_of_line.strip())

    @cached_property
    def line_above(self) -> str:
        """The nearest non-blank line above the cursor line ('' if none)."""
        return next((line for line in reversed(self.lines_above) if line.strip()), "")

    @cached_property
    def line_below(self) -> str:
        """The nearest non-blank line below the cursor line ('' if none)."""
        return next((line for line in self.lines_below if line.strip()), "")

    @cached_property
    def indent_style(self) -> IndentStyle | None:
        """The file's indentation style from the lines around the cursor, or None when they
        do not say clearly (too few indented lines, or a mix)."""
        return indent_style(self.lines_above + self.lines_below)

    @cached_property
    def indent_unit(self) -> int:
        """Width of one indentation level: 1 in a tab-indented file, else the most common step
        between consecutive indented lines, the cursor's empty line included (4 when nothing
        says otherwise)."""
        if self.indent_style == "tabs":
            return 1
        widths = [indent_width(line) for line in self.lines_above if line.strip()]
        if self.line_before and self.cursor_in_indentation:
            # The indentation the editor gave the cursor's line (the cursor may be inside it).
            widths.append(len(self.line_before) + indent_width(self.rest_of_line))
        widths += [indent_width(line) for line in self.lines_below if line.strip()]
        steps = Counter(b - a for a, b in pairwise(widths) if b > a)
        return steps.most_common(1)[0][0] if steps else 4

    def widest_plausible_indent(self) -> int:
        """The deepest indentation a new line at the cursor can sensibly have: one level below
        a block-opening line above, else the line above's own, or the next line's if deeper."""
        above = self.line_above
        width = indent_width(above) + (self.indent_unit if opens_block(above) else 0)
        return max(width, indent_width(self.line_below))


def repeats_typed_indent(typed: str, emitted: str, widest: int) -> bool:
    """On a line of indentation `typed`, the model's first line starts with `emitted`: did it
    re-type the indentation that is already there? Yes when the two together are deeper than any
    block at the cursor (`widest`) while what the model wrote alone is not: it wrote the line's
    indentation from column 0. A model that writes the remaining indentation (the cursor in the
    middle of the indentation, or at column 0 on an empty line) stays within `widest`."""
    own = len(emitted)
    return bool(own) and widest >= 0 and len(typed) + own > widest >= own


def indent_style(lines: tuple[str, ...] | list[str]) -> IndentStyle | None:
    """`tabs` or `spaces` when the indented lines agree at least 4 to 1 (and there are 2 or
    more), else None. A single leading space does not count: it is alignment (the ` * ` of a
    C block comment), not indentation."""
    tabs = spaces = 0
    for line in lines:
        if not line.strip():
            continue
        if line.startswith("\t"):
            tabs += 1
        elif line.startswith("  "):
            spaces += 1
    if tabs + spaces < 2:
        return None
    if tabs >= 4 * spaces:
        return "tabs"
    if spaces >= 4 * tabs:
        return "spaces"
    return None
