"""When to stop generating: the multi-line policy and the block's scope.

These rules are part of decoding, not of post-processing: they are checked after every
generated token, so a suggestion ends as soon as it is complete and no compute is spent on text
that would be cut anyway (a block that runs into the next function, a line that repeats the
suffix). They apply whether or not post-processing (engine/text/postprocess.py, setting
`postprocess`) is on, as llama-server's own stops (`n_indent`, the time limit) apply to
llama.vim: switching post-processing off shows what the clean-up rules add, not what an
unbounded generation looks like.

The multi-line policy (`multiline`):
- `never`: one line. `always`: a block wherever the cursor is.
- `auto`: one line when code follows the cursor on its line; a block on an empty line (or a
  line of indentation) and after a line that opens a block (`def f(x):`, `{`, `then`, `do`,
  `function f(a)`, `(`); one line anywhere else, e.g. at the end of `x = compute(a)`.
- A block is bounded in lines (MAX_BLOCK_LINES) and in tokens (the request's `max_tokens`,
  setting `maxTokens`, 64 by default). llama.vim bounds a suggestion by `n_predict` tokens (128
  to 256) and a time limit, and llama-server ends it at the first line indented less than the
  cursor; 8 lines are what a ghost text can show without covering the code the user reads, and
  64 tokens of a 0.5B-3B model take well under the pause a user leaves.
- One line may start on the next line: a first line that is empty ends nothing (the cursor at
  the end of `x = 1` is completed with the next statement), except in the middle of a line.

The block's scope (StopPolicy): the first line indented less than the block ends it; a closing
line (`}`, `end`) is kept as its last line unless the code below already closes it; a line that
closes and reopens (`} else {`) ends it before; two lines re-typing the code below end it.
Checked on 15,420 block spans cut from real code (Python, C/C++, JS/TS, none of it ours): a
correct block is cut short in 22 (0.14%), all code that repeats the lines below it (unrolled
loops, the same `if (x == NULL) { continue; }` twice).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ghostfim.engine.text.cursor import (
    CursorContext,
    closes_block,
    indent_of,
    indent_width,
    opens_block,
    reopens_block,
    repeats_typed_indent,
)
from ghostfim.engine.tuning import MAX_BLOCK_LINES

Multiline = Literal["auto", "always", "never"]


def wants_multiline(mode: Multiline, line_before_cursor: str, line_after_cursor: str) -> bool:
    """`auto`: a block at an empty line or after a block opener, one line anywhere else.

    In the middle of a line (code after the cursor) `auto` always finishes that line only: a
    block inserted there would push the rest of the line below it.
    """
    if mode == "always":
        return True
    if mode == "never":
        return False
    if line_after_cursor.strip():
        return False
    return not line_before_cursor.strip() or opens_block(line_before_cursor)


@dataclass(frozen=True)
class StopDecision:
    stop: bool
    keep: int = -1  # characters of the text to keep (-1: all)
    reason: str = ""


CONTINUE = StopDecision(False)


@dataclass
class StopPolicy:
    """Decides, on the text generated so far, whether the suggestion is complete.

    The block being completed has a least indentation, `block_indent`: one level deeper than a
    cursor line that opens a block; the cursor line's own when it has code and opens nothing;
    and, on an empty line, the indentation of the suggestion's first line (the model says where
    the block is; the cursor column may be anywhere in the indentation). The first line
    indented less than that ends the suggestion, and is kept only if it closes the block (`}`,
    `end`) and the code below the cursor does not already continue the block.
    """

    multiline: bool
    base_indent: int  # indentation of the cursor line (the cursor column when it is blank)
    opens_block: bool  # the cursor line ends with a block opener
    next_suffix_line: str  # first non-blank line after the cursor line, right-stripped
    max_lines: int = MAX_BLOCK_LINES
    line_before: str = ""  # the cursor line up to the cursor
    widest_indent: int = -1  # deepest plausible indentation at the cursor (-1: unknown)
    mid_line: bool = False  # code follows the cursor on its line
    second_suffix_line: str = ""  # the non-blank line after next_suffix_line ('' if none)
    opener_above: int = -1  # on an empty line: indentation of a block-opening line above it

    @classmethod
    def for_context(
        cls, mode: Multiline, ctx: CursorContext, max_lines: int = MAX_BLOCK_LINES
    ) -> StopPolicy:
        before = ctx.line_before
        blank = not before.strip()
        below = [line for line in ctx.lines_below if line.strip()][:2]
        return cls(
            multiline=wants_multiline(mode, before, ctx.rest_of_line),
            base_indent=len(before) if blank else indent_width(before),
            opens_block=opens_block(before),
            next_suffix_line=ctx.line_below.rstrip(),
            max_lines=max_lines,
            line_before=before,
            widest_indent=ctx.widest_plausible_indent() if blank else -1,
            mid_line=ctx.mid_line,
            second_suffix_line=below[1].rstrip() if len(below) > 1 else "",
            opener_above=indent_width(ctx.line_above)
            if blank and opens_block(ctx.line_above)
            else -1,
        )

    # --- the check, after every token ------------------------------------------------------
    def check(self, text: str) -> StopDecision:
        """Look at the complete lines of `text` (all but the last, which is still growing)."""
        lines = text.split("\n")
        complete = lines[:-1]
        if not complete:
            return CONTINUE
        block_indent = self._initial_block_indent()
        offset = 0  # character offset of the current line's start in text
        for j, line in enumerate(complete):
            end_of_previous = offset - 1 if j > 0 else 0
            full = self.line_before + line if j == 0 else line
            if full.strip() and self._repeats_suffix(j, full, complete[j + 1 :]):
                return StopDecision(True, end_of_previous, "suffix")
            if full.strip() and block_indent is None:
                block_indent = self._block_indent_from_first_line(full)
            elif block_indent is not None and self._leaves_block(j, line, block_indent):
                closing = closes_block(line) and not reopens_block(line)
                if closing and self._may_close(block_indent):
                    return StopDecision(True, offset + len(line), "block_end")
                return StopDecision(True, end_of_previous, "indent")
            offset += len(line) + 1
            if not self.multiline and (self.mid_line or "".join(complete[: j + 1]).strip()):
                # One line: the first line with content ends the suggestion (a first line
                # that is blank means the suggestion starts on the next line, unless code
                # follows the cursor: a line break there would push that code down).
                return StopDecision(True, offset - 1, "newline")
            if j + 1 >= self.max_lines:
                return StopDecision(True, offset - 1, "max_lines")
        return CONTINUE

    @staticmethod
    def _leaves_block(j: int, line: str, block_indent: int) -> bool:
        """A new line (not the cursor line's end) indented less than the block."""
        if j == 0 or not line.strip():
            return False
        return indent_width(line) < block_indent

    def _initial_block_indent(self) -> int | None:
        if not self.line_before.strip():
            return None  # an empty line: the suggestion's first line says
        return self.base_indent + 1 if self.opens_block else self.base_indent

    def _block_indent_from_first_line(self, full: str) -> int:
        """On an empty line: the indentation of the suggestion's first line, taken as typed
        before the cursor plus what the model wrote, unless that is deeper than any block
        there and what the model wrote alone is not (the model repeated the indentation
        already typed; post-processing removes that repeat, see drop_indent_already_typed)."""
        emitted = indent_of(full[len(self.line_before) :])
        width = indent_width(full)
        if repeats_typed_indent(self.line_before, emitted, self.widest_indent):
            width = len(emitted)
        if self.opener_above >= 0:
            # The line above opened the block: its lines only need to be deeper than that line
            # (a C signature's continuation is indented more than the body that follows it).
            width = min(width, self.opener_above + 1)
        return width

    def _may_close(self, block_indent: int) -> bool:
        """A closing line is the block's own end only if the code below the cursor does not
        go on inside the block (then the closer is already there, further down)."""
        if not self.next_suffix_line:
            return True
        return indent_width(self.next_suffix_line) < block_indent

    def _repeats_suffix(self, j: int, full: str, later: list[str]) -> bool:
        """The line, as it would stand in the file, is the next non-blank line below the
        cursor, and the suggestion's next line is the one after it: the model is re-typing
        the code that follows. Two lines, because code repeats single lines legitimately (a
        second `for x in items:`, a `}`, a docstring's quotes); compared with indentation,
        because a `}` at another depth is another block's. Until the second line is complete,
        generation goes on (post-processing cuts a repeat the generation ended in)."""
        if not self.next_suffix_line or full.rstrip() != self.next_suffix_line:
            return False
        if j == 0 and self.line_before.strip():
            return False  # the cursor line's own completion: compared by post-processing
        if not self.second_suffix_line:
            return True  # the last line of code below (a closing `}`, an `end`)
        following = next((line for line in later if line.strip()), None)
        return following is not None and following.rstrip() == self.second_suffix_line
