"""A document's import statements, as its own text: a candidate context for bench/context_layout.py
(`imports`, `imports+snip`), measured and not adopted by the server (docs/benchmarks.md).

A keystroke's prompt on a CPU holds only the last hundred or so tokens before the cursor
(engine/local/plan.py), which rarely reach the file's head, so the model does not see which
names the file imports. The statements are short, change seldom (a block before the prefix
must not change with every keystroke) and are the file's own code.

A line scan, not a parser: the document is being edited and may not parse. Python: the
top-level `import` / `from ... import` statements (with their parenthesised or backslashed
continuation lines) and those inside a top-level `if TYPE_CHECKING:` block, dedented;
`from __future__` ones say nothing about names and are left out. JavaScript/TypeScript: the
top-level `import` statements, over as many lines as they take.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

MAX_STATEMENT_LINES = 40  # an import statement longer than this is not one (an unclosed paren)

_PY_IMPORT = re.compile(r"(?:from\s+[\w.]+\s+import\b|import\s+[\w.])")
_PY_TYPE_CHECKING = re.compile(r"if\s+(?:typing\.)?TYPE_CHECKING\s*:\s*(?:#.*)?$")
_JS_IMPORT = re.compile(r"import\b(?!\s*\()")  # not a dynamic import(...)
_JS_END = re.compile(r"""(?:\bfrom\s*['"][^'"]*['"]|^import\s*['"][^'"]*['"])\s*;?\s*$""")
_WORD = re.compile(r"[A-Za-z_$][\w$]*")


@dataclass(frozen=True)
class ImportStatement:
    line: int  # 0-based, of its first line in the document
    text: str  # as written (an `if TYPE_CHECKING:` one dedented), no trailing newline

    def binds(self) -> frozenset[str]:
        """The words of the statement: a superset of the names it binds (cheap, and enough
        to tell whether the code near the cursor uses any of them)."""
        return frozenset(_WORD.findall(self.text))


def import_statements(text: str, language: str) -> list[ImportStatement]:
    """The document's import statements in file order."""
    lines = text.split("\n")
    if language == "python":
        return _python(lines)
    if language in ("javascript", "typescript", "javascriptreact", "typescriptreact"):
        return _javascript(lines)
    return []


def _python(lines: Sequence[str]) -> list[ImportStatement]:
    out: list[ImportStatement] = []
    i = 0
    in_type_checking = False
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        indented = line[:1] in (" ", "\t")
        if not indented and stripped:
            in_type_checking = bool(_PY_TYPE_CHECKING.match(stripped))
        if (not indented or in_type_checking) and _PY_IMPORT.match(stripped):
            end = _python_end(lines, i)
            body = [ln.strip() if in_type_checking and indented else ln for ln in lines[i:end]]
            if not stripped.startswith("from __future__"):
                out.append(ImportStatement(i, "\n".join(body).rstrip()))
            i = end
            continue
        i += 1
    return out


def _python_end(lines: Sequence[str], start: int) -> int:
    """The line after the statement that starts at `start` (continuations followed)."""
    depth = 0
    i = start
    while i < len(lines) and i - start < MAX_STATEMENT_LINES:
        code = lines[i].split("#", 1)[0]
        depth += code.count("(") - code.count(")")
        i += 1
        if depth <= 0 and not code.rstrip().endswith("\\"):
            return i
    return start + 1  # unclosed: take the first line alone


def _javascript(lines: Sequence[str]) -> list[ImportStatement]:
    out: list[ImportStatement] = []
    i = 0
    while i < len(lines):
        if _JS_IMPORT.match(lines[i]):
            end = i
            while end < len(lines) and end - i < MAX_STATEMENT_LINES:
                if _JS_END.search(lines[end].strip()) or lines[end].rstrip().endswith(";"):
                    break
                end += 1
            if end - i >= MAX_STATEMENT_LINES or end >= len(lines):
                end = i  # unfinished: the first line alone
            out.append(ImportStatement(i, "\n".join(lines[i : end + 1]).rstrip()))
            i = end + 1
            continue
        i += 1
    return out


def imports_above(
    text: str, language: str, cursor_line: int, lines_above: int, used: frozenset[str]
) -> tuple[ImportStatement, ...]:
    """The statements of `text` that end more than `lines_above` lines above `cursor_line`
    (the nearer ones are in the prompt's own window), those binding a word of `used` (the
    code near the cursor) first, each group in file order: the order a budget keeps them."""
    far = [
        s
        for s in import_statements(text, language)
        if s.line + s.text.count("\n") < cursor_line - lines_above
    ]
    return tuple(sorted(far, key=lambda s: not (s.binds() & used)))


def fit_imports(
    statements: Sequence[ImportStatement], budget_tokens: int, count_tokens: Callable[[str], int]
) -> list[ImportStatement]:
    """The statements that fit `budget_tokens`, taken in the order given (imports_above's:
    the used ones first), each that still fits; returned in file order."""
    kept: list[ImportStatement] = []
    left = budget_tokens
    for statement in statements:
        n = count_tokens(statement.text + "\n")
        if n <= left:
            kept.append(statement)
            left -= n
    return sorted(kept, key=lambda s: s.line)
