"""Clean-up of a finished suggestion before it is shown. Each rule is one small function.

Every rule takes the suggestion and the cursor's surroundings
(ghostfim.engine.text.cursor.CursorContext) and returns the suggestion, shortened or emptied; none
ever adds or rewrites text, so a rule can only remove what is wrong and the suggestion that
survives is always a prefix-preserving cut of what the model wrote (the first line may lose
indentation the editor already shows). The rules run in the order of RULES; `clean_suggestion`
applies them.

The setting `postprocess` (default on) switches them off, for the quality benchmark's
comparison. Off, a suggestion is only made well-formed (`well_formed`: no trailing blank
lines, nothing for a suggestion that is only whitespace), much as the editor is shown while
a suggestion streams. The stop rules of engine/text/stops.py (one line or a block, the block's
indentation scope, a line repeating the next line of code) are part of decoding and stay on:
they decide where generation ends, as llama-server's own stops do for llama.vim.

Checked on 99,537 infill spans cut from real code (Python, C/C++, JS/TS, none of it ours; the
cursor after the indentation, inside call brackets with the closer after it, and after block
openers): the rules change a correct suggestion in 19 of them (0.02%: identical rows of a
table, unrolled loops, brackets inside a JS regex or comment).
tests/unit/engine/text/test_postprocess.py keeps that property on samples in five languages.

Seen from the peers (their code read, none copied): llama.vim drops a suggestion that repeats
the rest of the line or the next lines and trims indentation on a blank line; Tabby cuts a
suggestion at the block's scope by indentation, drops one duplicating the suffix, and widens the
replace range over auto-closed brackets; Continue drops a first line rewriting the line above.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ghostfim.engine.text.cursor import (
    CONTEXT_LINES,
    CursorContext,
    indent_of,
    repeats_typed_indent,
)

Rule = Callable[[str, CursorContext], str]

# A first line this short repeating the line above is not taken as a repeat (as Continue).
MIN_REPEAT_CHARS = 4
# Lines above and below the cursor's line read for brackets opened or closed there (a call
# whose arguments are on lines of their own, the blocks around the cursor): all the context has.
BALANCE_LINES = CONTEXT_LINES

_OPENERS = {"(": ")", "[": "]", "{": "}"}
_CLOSERS = {v: k for k, v in _OPENERS.items()}
_QUOTES = ("'", '"', "`")
# What a suggestion may end with that the rest of the line then starts with again by mistake:
# closers, quotes and separators, never the characters of a doubled operator (`==`, `::`, `||`).
_REPEATABLE = frozenset(")]}'\"`;, ")
_OPERATOR_CHARS = frozenset("=<>!&|+-*/%^~:.?")
_SPECIAL = re.compile(r"[()\[\]{}'\"`\\\n]")


# --- before asking ----------------------------------------------------------------------------
# --- whitespace ------------------------------------------------------------------------------
def strip_trailing_whitespace(text: str, ctx: CursorContext | None = None) -> str:
    """No trailing spaces on the suggestion's lines, no trailing blank lines: invisible in a
    ghost text, they are noise in the file once accepted. The last line keeps the spaces
    before code that follows the cursor (`return` + ` ` before `x` must not become `returnx`)."""
    lines = [line.rstrip() for line in text.split("\n")[:-1]] + [text.split("\n")[-1]]
    return trim_end("\n".join(lines), ctx.rest_of_line if ctx else "")


def trim_end(text: str, rest_of_line: str = "") -> str:
    """The suggestion without trailing whitespace, except spaces that separate its last word
    from code right after the cursor."""
    trimmed = text.rstrip()
    tail = text[len(trimmed) :]
    if not rest_of_line[:1].strip() or "\n" in tail:
        return trimmed
    return text


def empty_if_blank(text: str, ctx: CursorContext | None = None) -> str:
    """A suggestion of only whitespace shows nothing and would insert invisible text."""
    return text if text.strip() else ""


# --- indentation -----------------------------------------------------------------------------
def drop_indent_already_typed(text: str, ctx: CursorContext) -> str:
    """On a line of indentation, remove from the first line the indentation the model re-typed.

    The editor put the cursor after the indentation (`def f(x):` then Enter gives four spaces);
    a model that writes `    return x` there would indent the line twice. The model may still
    write the rest of the indentation (cursor at column 0, or in the middle of the indentation):
    only indentation that would be deeper than any block at the cursor, while the model's alone
    would not, is taken as re-typed (ghostfim.engine.text.cursor.repeats_typed_indent).
    """
    typed = ctx.line_before
    if not typed or not ctx.cursor_in_indentation:
        return text
    first, sep, rest = text.partition("\n")
    emitted = indent_of(first)
    if not first.strip() or not emitted or set(emitted) != set(typed):
        return text  # a first line that is empty, or another style (the style rule's case)
    if not repeats_typed_indent(typed, emitted, ctx.widest_plausible_indent()):
        return text
    return first[min(len(typed), len(emitted)) :] + sep + rest


def cut_at_indent_style_clash(text: str, ctx: CursorContext) -> str:
    """Cut at the first line indented with spaces in a tab-indented file, or with tabs in a
    space-indented one.

    The model's text is never rewritten: turning spaces into tabs would guess a tab width, and
    a line in the other style is the sign of a model copying code from elsewhere, so the
    suggestion ends before it (and is dropped if that is its first line). Files that mix both,
    or say too little, are left alone (ghostfim.engine.text.cursor.indent_style).
    """
    style = ctx.indent_style
    if style is None:
        return text
    lines = text.split("\n")
    for j, line in enumerate(lines):
        if j == 0 and not ctx.cursor_in_indentation:
            continue
        full = ctx.line_before + line if j == 0 else line
        if not full.strip():
            continue
        indent = indent_of(full)
        clash = indent.startswith("  ") if style == "tabs" else "\t" in indent
        if clash:
            return "\n".join(lines[:j])
    return text


# --- the rest of the line --------------------------------------------------------------------
def _scan(
    text: str,
    stack: list[tuple[str, bool]],
    own: bool,
    events: list[int] | None,
    closers: list[str] | None = None,
    own_closes: list[int] | None = None,
) -> int:
    """Walk `text` pushing and popping brackets and quotes on `stack` (entries: the character
    and whether it was opened by the suggestion); returns how many closers matched nothing.

    With `events`, records the index of every character that closes something opened before
    the suggestion; with `closers`, every closer that finds nothing open; with `own_closes`,
    the index of every character that closes something the suggestion opened. Strings are
    honoured (brackets inside them do not count, a backslash escapes); a `'` right after a
    letter or digit is an apostrophe (`don't`), not a quote.
    """
    unmatched = 0
    escaped_at = -1  # the index of a character a backslash escapes
    for match in _SPECIAL.finditer(text):  # only brackets, quotes, backslashes, line ends
        i, ch = match.start(), match.group()
        if i == escaped_at:
            continue
        top = stack[-1][0] if stack else ""
        if top in _QUOTES:  # inside a string
            if ch == "\\":
                escaped_at = i + 1
            elif ch == top:
                _, opened_by_suggestion = stack.pop()
                if events is not None and not opened_by_suggestion:
                    events.append(i)
                if own_closes is not None and opened_by_suggestion:
                    own_closes.append(i)
            elif ch == "\n" and top != "`":
                stack.pop()  # strings end with their line: a stray quote, not a string
                unmatched += 1
            continue
        if ch in _QUOTES:
            if ch == "'" and i > 0 and text[i - 1].isalnum():
                continue
            stack.append((ch, own))
        elif ch in _OPENERS:
            stack.append((ch, own))
        elif ch in _CLOSERS:
            if top == _CLOSERS[ch]:
                _, opened_by_suggestion = stack.pop()
                if events is not None and not opened_by_suggestion:
                    events.append(i)
                if own_closes is not None and opened_by_suggestion:
                    own_closes.append(i)
            else:
                unmatched += 1
                if closers is not None and not stack:
                    closers.append(ch)
    return unmatched


def open_before_line(ctx: CursorContext) -> list[tuple[str, bool]]:
    """The brackets still open where the cursor line starts (a call or literal that spans
    lines), from the lines above; comment lines are skipped."""
    stack: list[tuple[str, bool]] = []
    lines = [line for line in ctx.lines_above[-BALANCE_LINES:] if not _is_comment(line)]
    _scan("\n".join(lines) + "\n", stack, False, None)
    return stack


def closed_below(ctx: CursorContext) -> list[str]:
    """The closers of the lines below the cursor's line that close something opened before
    them (a call whose `)` stands on a line of its own), in order; comments skipped."""
    lines = [line for line in ctx.lines_below[:BALANCE_LINES] if not _is_comment(line)]
    closers: list[str] = []
    _scan("\n".join(lines), [], False, None, closers)
    return closers


def _is_comment(line: str) -> bool:
    return line.lstrip().startswith(("#", "//", "/*", "*", "--"))


def imbalance(
    line_before: str,
    middle: str,
    rest_of_line: str,
    opened: list[tuple[str, bool]] | None = None,
    closers_below: list[str] | None = None,
) -> int:
    """How badly the line `line_before + middle + rest_of_line` pairs its brackets and quotes:
    closers without an opener, strings left open at the line's end, and brackets left open
    or closed twice once the code around is counted: `opened` is what the lines above left
    open, `closers_below` what the lines below close (closed_below). Compared between versions
    of one line: what they share counts the same in all."""
    stack = list(opened or [])
    unmatched = _scan(line_before + middle + rest_of_line + "\n", stack, False, None)
    for closer in closers_below or []:
        if stack and stack[-1][0] == _CLOSERS[closer]:
            stack.pop()
        else:
            unmatched += 1
    return unmatched + len(stack)


def cut_before_closer_the_line_has(text: str, ctx: CursorContext) -> str:
    """Do not double a closing bracket or quote that is already after the cursor.

    Typing `foo(` makes the editor insert `)` after the cursor; a model that writes `a, b)`
    would leave `foo(a, b))`. The suggestion may be cut just before any character that closes a
    bracket or quote opened before the cursor; of those cuts (and no cut), the one that leaves
    the line most balanced wins, the longest on a tie. So `x > 0) {` after `if (` with `)` after
    the cursor becomes `x > 0`; `foo(a, b)` inside `bar(` with `)` after it is kept whole (its
    own brackets need their closer); `a), g(b` in `f(` + `)` is kept (the line balances).
    """
    rest = ctx.rest_of_line
    if not rest.strip():
        return text
    if not any(c in _CLOSERS or c in _QUOTES for c in text):
        return text  # nothing in the suggestion can close what is open
    opened = open_before_line(ctx)
    stack = list(opened)
    _scan(ctx.line_before, stack, False, None)
    if not stack:
        return text
    events: list[int] = []
    _scan(text, stack, True, events)
    if not events:
        return text
    below = closed_below(ctx)
    best, best_cost = text, imbalance(ctx.line_before, text, rest, opened, below)
    for i in reversed(events):  # longest first: a later cut only wins if strictly better
        cost = imbalance(ctx.line_before, text[:i], rest, opened, below)
        if cost < best_cost:
            best, best_cost = text[:i], cost
    return best


def drop_overlap_with_rest_of_line(text: str, rest_of_line: str | CursorContext) -> str:
    """Remove the end of the suggestion that the rest of the line already starts with.

    The whole rest repeated (`x = 1;` before `;`), or a run of closers and separators that
    begins it (`a, b;` before `;)`): cut, but never a closer of a bracket or quote the
    suggestion itself opened (`foo(a, b)` before `)` inside `bar(`: its `)` is its own; the
    closers of brackets opened before the cursor are cut_before_closer_the_line_has's). Never
    a partial word (`x` before `x = 1` is a coincidence) nor a partial operator (`=` before
    `= 1` may be the first half of `==`).
    """
    ctx: CursorContext | None = None
    if isinstance(rest_of_line, CursorContext):
        ctx, rest = rest_of_line, rest_of_line.rest_of_line.strip()
    else:
        rest = rest_of_line.strip()
    if not rest or "\n" in text.rstrip():
        return text
    stripped = text.rstrip()
    before = ctx.line_before if ctx else ""
    for n in range(min(len(rest), len(stripped)), 0, -1):
        overlap = rest[:n]
        if not stripped.endswith(overlap):
            continue
        if n < len(rest) and not all(c in _REPEATABLE for c in overlap):
            continue
        kept = stripped[:-n]
        if not _closes_what_it_opened(before, kept, overlap):
            return kept
    return text


def _closes_what_it_opened(line_before: str, kept: str, overlap: str) -> bool:
    """Whether `overlap`, after `line_before + kept`, closes a bracket or quote that `kept`
    opened (then it is the suggestion's own closer, not a repeat of the rest of the line).
    Inside a string (a format string, a regex) brackets are not counted: taken as its own."""
    stack: list[tuple[str, bool]] = []
    _scan(line_before, stack, False, None)
    if stack and stack[-1][0] in _QUOTES and any(c in "()[]{}" for c in overlap):
        return True
    _scan(kept, stack, True, None)
    closed: list[int] = []
    _scan(overlap, stack, False, None, own_closes=closed)
    return bool(closed)


def drop_if_rest_of_line_has_it(text: str, ctx: CursorContext) -> str:
    """A one-line suggestion that the rest of the line already starts with adds nothing: the
    model re-typed the code after the cursor (llama.vim drops it when it is the whole rest).

    Only whole tokens: `s` before `sert` may be the second `s` of `assert`, and `=` before
    `= 1` the second `=` of `===`; neither is a repeat.
    """
    shown = text.strip()
    rest = ctx.rest_of_line.strip()
    if not shown or "\n" in shown or not rest.startswith(shown):
        return text
    if all(c in _OPERATOR_CHARS for c in shown):
        return text
    after = rest[len(shown) : len(shown) + 1]
    if after and (after.isalnum() or after == "_") and (shown[-1].isalnum() or shown[-1] == "_"):
        return text
    return ""


# --- the lines around ------------------------------------------------------------------------
def _numbered_visible(text: str, ctx: CursorContext) -> list[tuple[int, str]]:
    """The suggestion's non-blank lines as they will stand in the file (the first one with the
    text before the cursor), with their index in the suggestion, right-stripped."""
    out = []
    for j, line in enumerate(text.split("\n")):
        full = ctx.line_before + line if j == 0 else line
        if line.strip():
            out.append((j, full.rstrip()))
    return out


def cut_lines_repeating_suffix(text: str, ctx: CursorContext) -> str:
    """Cut the suggestion's last lines when they repeat the first lines after the cursor.

    The model wrote what it should and went on re-typing the code below. Lines compare with
    their indentation, blank lines skipped; the very last line may match only the start of its
    counterpart (generation ran out of tokens in the middle of it). The whole suggestion
    repeating the code below is dropped; a single partial line alone is not evidence enough.
    """
    if ctx.mid_line:
        return text
    below = [line.rstrip() for line in ctx.lines_below if line.strip()]
    lines = _numbered_visible(text, ctx)
    if not below or not lines:
        return text
    for start in range(len(lines)):
        tail = lines[start:]
        if len(tail) > len(below):
            continue
        exact = all(line == below[k] for k, (_, line) in enumerate(tail[:-1]))
        last, target = tail[-1][1], below[len(tail) - 1]
        partial = bool(last.strip()) and target.startswith(last) and (start > 0 or len(tail) > 1)
        if exact and (last == target or partial):
            j = tail[0][0]
            return "" if j == 0 else "\n".join(text.split("\n")[:j]).rstrip()
    return text


def cut_repeated_line(text: str, ctx: CursorContext) -> str:
    """Cut at the first line that is the same as the line before it (models loop)."""
    lines = _numbered_visible(text, ctx)
    previous = ctx.line_before.rstrip() if ctx.line_before.strip() else None
    for j, line in lines:
        if j > 0 and line == previous:
            return "\n".join(text.split("\n")[:j]).rstrip()
        previous = line
    return text


def drop_repeat_of_lines_above(text: str, ctx: CursorContext) -> str:
    """Drop a suggestion whose first line re-types the line just above the cursor, or whose
    lines are all the lines just above, in order (models love to repeat the previous line).
    Compared with indentation: `}` closing an outer block is not the `}` above it."""
    above = [line.rstrip() for line in ctx.lines_above if line.strip()]
    numbered = _numbered_visible(text, ctx)
    if not numbered or len(numbered[0][1].strip()) <= MIN_REPEAT_CHARS:
        return text  # `}`, `end`, `i++;`: short lines repeat legitimately (or harmlessly)
    if numbered[0][0] > 0 and ctx.line_before.strip():
        above.append((ctx.line_before + ctx.rest_of_line).rstrip())  # the cursor line, above
    lines = [line for _, line in numbered]
    if not above:
        return text
    if lines[0] == above[-1] or lines == above[-len(lines) :]:
        return ""
    return text


RULES: tuple[Rule, ...] = (
    strip_trailing_whitespace,
    drop_indent_already_typed,
    cut_at_indent_style_clash,
    cut_before_closer_the_line_has,
    drop_overlap_with_rest_of_line,
    drop_if_rest_of_line_has_it,
    cut_lines_repeating_suffix,
    cut_repeated_line,
    drop_repeat_of_lines_above,
)


def well_formed(text: str, ctx: CursorContext) -> str:
    """The minimum every suggestion gets, post-processing on or off: no trailing blank lines
    or spaces (bar those before code after the cursor), nothing if only whitespace."""
    return empty_if_blank(trim_end(text, ctx.rest_of_line))


def clean_suggestion(text: str, ctx: CursorContext, enabled: bool = True) -> str:
    """The suggestion to show."""
    if enabled:
        for rule in RULES:
            text = rule(text, ctx)
            if not text:
                return ""
    return well_formed(text, ctx)
