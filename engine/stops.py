"""When to stop generating: the newline policy and the indentation rule.

Checked after every generated token, so a suggestion ends as soon as it is complete and no
compute is spent on text that would be cut anyway (a block that runs into the next function, a
line that repeats the suffix).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Multiline = Literal["auto", "always", "never"]

# A line ending in one of these opens a block: a multi-line suggestion is likely wanted.
BLOCK_OPENERS = (":", "{", "(", "[", "=>", "->", " do", " then", "\\")
# At the block's own indentation, these close it: keep that line, then stop.
BLOCK_CLOSERS = ("}", ")", "]", "end", "fi", "done", "esac")


def indent_width(line: str) -> int:
    """Leading whitespace in characters (tabs count once: users do not mix styles in a file)."""
    return len(line) - len(line.lstrip(" \t"))


def wants_multiline(mode: Multiline, line_before_cursor: str, line_after_cursor: str) -> bool:
    """`auto`: a block at an empty line or after a block opener, one line anywhere else."""
    if mode == "always":
        return True
    if mode == "never":
        return False
    if line_after_cursor.strip():
        return False  # in the middle of a line: finish this line only
    before = line_before_cursor.rstrip()
    return not before.strip() or before.endswith(BLOCK_OPENERS)


@dataclass(frozen=True)
class StopDecision:
    stop: bool
    keep: int = -1  # characters of the text to keep (-1: all)
    reason: str = ""


CONTINUE = StopDecision(False)


@dataclass
class StopPolicy:
    """Decides, on the text generated so far, whether the suggestion is complete."""

    multiline: bool
    base_indent: int  # indentation of the cursor line (or the cursor column inside it)
    opens_block: bool  # the cursor line ends with a block opener
    next_suffix_line: str  # first non-blank line after the cursor line, stripped ('' if none)
    max_lines: int = 8

    @classmethod
    def for_cursor(
        cls,
        mode: Multiline,
        line_before_cursor: str,
        line_after_cursor: str,
        suffix: str,
        max_lines: int = 8,
    ) -> StopPolicy:
        before = line_before_cursor
        base = len(before) if not before.strip() else indent_width(before)
        next_line = ""
        for line in suffix.split("\n")[1:40]:
            if line.strip():
                next_line = line.strip()
                break
        return cls(
            multiline=wants_multiline(mode, before, line_after_cursor),
            base_indent=base,
            opens_block=before.rstrip().endswith(BLOCK_OPENERS) and bool(before.strip()),
            next_suffix_line=next_line,
            max_lines=max_lines,
        )

    def check(self, text: str) -> StopDecision:
        """Look at the complete lines of `text` (all but the last, which is still growing)."""
        lines = text.split("\n")
        complete = lines[:-1]
        if not complete:
            return CONTINUE
        offset = 0  # character offset of the current line's start in text
        for j, line in enumerate(complete):
            end_of_previous = offset - 1 if j > 0 else 0
            if j >= 1 and line.strip():
                if self._repeats_suffix(line):
                    return StopDecision(True, end_of_previous, "suffix")
                width = indent_width(line)
                if self.opens_block:
                    if width < self.base_indent or (
                        width == self.base_indent and not line.strip().startswith(BLOCK_CLOSERS)
                    ):
                        return StopDecision(True, end_of_previous, "indent")
                    if width == self.base_indent:  # the block's closing line: keep it, stop
                        return StopDecision(True, offset + len(line), "block_end")
                elif width < self.base_indent:
                    return StopDecision(True, end_of_previous, "indent")
            offset += len(line) + 1
            if not self.multiline and "".join(complete[: j + 1]).strip():
                # One line: the first line with content ends the suggestion (a first line
                # that is blank means the suggestion starts on the next line).
                return StopDecision(True, offset - 1, "newline")
            if j + 1 >= self.max_lines:
                return StopDecision(True, offset - 1, "max_lines")
        return CONTINUE

    def _repeats_suffix(self, line: str) -> bool:
        return bool(self.next_suffix_line) and line.strip() == self.next_suffix_line
