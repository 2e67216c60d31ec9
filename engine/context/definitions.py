"""Which definitions of the workspace a request gets, and how they read in a prompt.

A line of a user's project calls what its other modules define; the model sees one file and
guesses those names and their arguments. The workspace index (engine/context/index.py) knows
them: here the names used near the cursor that the file imports are looked up there, with the
bases of the class the cursor is in, and the stubs (signature, docstring head; a class's fields
and method signatures) become a block of text before the prompt's prefix.

Stability is what keeps a keystroke cheap: the block sits before the whole prefix, so a block
that changes costs the prefill of everything after it. So the names come from the lines around
the cursor *but not the cursor's own line* (typing a name changes nothing until the line is left),
and the block lists its definitions in a fixed order (by file, then line), not by nearness.
When the budget cannot hold them all, the ones used nearest the cursor stay.

Snippets (engine/context/snippets.py: the workspace's code most like the lines before the
cursor) go in the same block, after the definitions, as code: on the small Instruct model they
are what helps most (docs/benchmarks.md), so a budget keeps them first.

Styles (chosen per model family by measurement: engine/prompt/fim.py `context_style`,
bench/context_layout.py):
- "comment": the stubs as comments of the current file's language, under a line naming their
  file, at the top of the prefix. On the Instruct models ghostfim fetches this helps where the
  repository-level layout hurts (issue 31's table: 0.235 vs 0.111 of the line right).
- "repo": the model's repository-level layout, `<|file_sep|>path\\nstub` per file before the
  prefix (the layout Qwen documents for its base models).
- "off": no definitions.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from ghostfim.engine.context.outline import Definition
from ghostfim.engine.context.snippets import hide_secret_literals

ContextStyle = Literal["comment", "repo", "off"]

# Lines around the cursor whose names count: before it (what the user just wrote and calls)
# and after it (the rest of the function).
LINES_BEFORE = 40
LINES_AFTER = 10
MAX_DEFINITIONS = 24  # looked up per request at most (the budget usually stops earlier)
MIN_SNIPPET_LINES = 4  # a snippet cut to fit a budget keeps at least this many lines

_NAME = re.compile(r"(?<![\w$.])[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*")
_COMMENT = {"python": "#", "ruby": "#", "shellscript": "#", "r": "#", "perl": "#"}


class DefinitionSource(Protocol):
    """What the selection asks of the workspace index."""

    def definitions_for(self, path: str, names: Sequence[str]) -> list[Definition]: ...
    def class_bases(self, path: str, line: int) -> list[Definition]: ...


@dataclass(frozen=True)
class ContextEntry:
    """One definition as the prompt shows it."""

    name: str
    file: str  # relative to its workspace root, "/"-separated
    stub: str  # in the defining file's language, no trailing newline
    line: int = 0  # where it is defined (0-based): the block's order within a file


@dataclass(frozen=True)
class SnippetEntry:
    """Lines of another file (or a far part of this one) like the code before the cursor
    (engine/context/snippets.py): how the project writes what the user is writing."""

    file: str  # relative to its workspace root, "/"-separated
    line: int  # the first line's number (0-based)
    text: str  # the lines as they are in the file, no trailing newline

    @property
    def label(self) -> str:
        return f"{self.file}:{self.line + 1}"


@dataclass(frozen=True)
class DefinitionBlock:
    """The workspace context a request gets, in the order the prompt lists it: definitions
    (stubs of the names used near the cursor) and snippets (similar code)."""

    language: str  # the current document's language: the comment syntax of the block
    entries: tuple[ContextEntry, ...]  # as selected: the most wanted first, until fitted
    budget: int | None = None  # tokens; None: the backend's "auto" (its prefill speed)
    snippets: tuple[SnippetEntry, ...] = ()  # the most similar first

    def __bool__(self) -> bool:
        return bool(self.entries or self.snippets)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.entries)

    @property
    def labels(self) -> tuple[str, ...]:
        """What the status and the trace show: the definitions' names, the snippets' places."""
        return (*self.names, *(s.label for s in self.snippets))

    def files(self) -> list[tuple[str, str]]:
        """(file, its entries' stubs joined) in block order, then (file, snippet) per snippet:
        one repository-level file each."""
        return self._stub_files() + [(s.file, s.text) for s in self.snippets]

    def _stub_files(self) -> list[tuple[str, str]]:
        out: dict[str, list[str]] = {}
        for e in self.entries:
            out.setdefault(e.file, []).append(e.stub)
        return [(f, "\n\n".join(stubs)) for f, stubs in out.items()]

    def fit(self, budget_tokens: int, count_tokens: Callable[[str], int]) -> DefinitionBlock:
        """What fits `budget_tokens`: the snippets first (they measured as the context the
        models here use most: docs/benchmarks.md), then the definitions, the most wanted
        first, each that still fits; definitions listed by file, then line."""
        left = budget_tokens
        snippets: list[SnippetEntry] = []
        for snippet in self.snippets:
            cut = self._fitted_snippet(snippet, left, count_tokens)
            if cut is not None:
                snippets.append(cut)
                left -= count_tokens(self.snippet_text(cut))
        kept: list[ContextEntry] = []
        for entry in self.entries:
            n = count_tokens(self.entry_text(entry))
            if n <= left:
                kept.append(entry)
                left -= n
        kept.sort(key=lambda e: (e.file, e.line))
        return DefinitionBlock(self.language, tuple(kept), budget_tokens, tuple(snippets))

    def prompt_text(self) -> str:
        """The block as text of the document's language, ending with a blank line: the
        definitions as comments under a line naming their file, then the snippets as code
        under a comment naming theirs (both layouts chosen by measurement:
        bench/context_layout.py)."""
        mark = comment_mark(self.language)
        lines: list[str] = []
        for file, text in self._stub_files():
            lines.append(f"{mark} {file}:")
            lines.extend(f"{mark}   {line}" if line else mark for line in text.splitlines())
        out = "\n".join(lines) + "\n\n" if lines else ""
        return out + "".join(self.snippet_text(s) for s in self.snippets)

    def _fitted_snippet(
        self, snippet: SnippetEntry, budget: int, count_tokens: Callable[[str], int]
    ) -> SnippetEntry | None:
        """The snippet, or its first lines (MIN_SNIPPET_LINES at least) when the whole does not
        fit `budget`: a keystroke's small budget still shows how the code starts."""
        if count_tokens(self.snippet_text(snippet)) <= budget:
            return snippet
        lines = snippet.text.split("\n")
        for n in range(len(lines) - 1, MIN_SNIPPET_LINES - 1, -1):
            cut = replace(snippet, text="\n".join(lines[:n]))
            if count_tokens(self.snippet_text(cut)) <= budget:
                return cut
        return None

    def snippet_text(self, snippet: SnippetEntry) -> str:
        """One snippet's share of prompt_text: a comment naming its place, its lines."""
        return f"{comment_mark(self.language)} {snippet.label}\n{snippet.text}\n\n"

    def entry_text(self, entry: ContextEntry) -> str:
        """One entry's share of prompt_text (for fitting a budget)."""
        mark = comment_mark(self.language)
        body = "\n".join(f"{mark}   {line}" if line else mark for line in entry.stub.splitlines())
        return f"{mark} {entry.file}:\n{body}\n"


def comment_mark(language: str) -> str:
    return _COMMENT.get(language, "//")


def names_near(text: str, line: int) -> list[str]:
    """Dotted names used on the lines around `line` (0-based), not on it: those before it from
    the nearest up, then those after it; each once."""
    lines = text.split("\n")
    before = lines[max(0, line - LINES_BEFORE) : min(line, len(lines))]
    after = lines[line + 1 : line + 1 + LINES_AFTER]
    seen: dict[str, None] = {}
    for source in (*reversed(before), *after):
        for match in _NAME.finditer(_code_of(source)):
            seen.setdefault(match.group(0), None)
    return list(seen)


def _code_of(line: str) -> str:
    """The code of a line whose names count: not a comment (names there are not calls), not
    an import (every imported name would count, used or not)."""
    s = line.lstrip()
    if s.startswith(("#", "//", "*", "/*", "import ", "from ", "export * from", "} from ")):
        return ""
    return line


def select_definitions(
    source: DefinitionSource,
    path: str,
    text: str,
    line: int,
    relative: Callable[[str], str],
    text_line: int | None = None,
) -> list[tuple[Definition, ContextEntry]]:
    """The definitions for a request at `line` (0-based, of the document) of the file at `path`
    whose editor text around the cursor is `text`, the cursor on its line `text_line` (the
    same as `line` when `text` is the whole document): the class bases first, then the names
    nearest the cursor first (none defined in the file itself). `relative`: a definition's
    path as the prompt names it."""
    names = names_near(text, line if text_line is None else text_line)
    found: dict[tuple[str, int], Definition] = {}
    own = os.path.realpath(path)
    for d in [*source.class_bases(path, line), *source.definitions_for(path, names)]:
        if d.path != own:
            found.setdefault((d.path, d.line), d)
        if len(found) >= MAX_DEFINITIONS:
            break
    return [
        (d, ContextEntry(d.name, relative(d.path), hide_secret_literals(d.stub), d.line))
        for d in found.values()
    ]


def fit_block(
    language: str,
    picked: Sequence[tuple[Definition, ContextEntry]],
    budget_tokens: int,
    count_tokens: Callable[[str], int],
) -> DefinitionBlock:
    """The block of the picked definitions that fits `budget_tokens` (taken in the order given,
    each that still fits), listed in a fixed order: by file, then line."""
    entries = tuple(entry for _, entry in picked)
    return DefinitionBlock(language, entries).fit(budget_tokens, count_tokens)
