"""Clean-up of a finished suggestion before it is shown. Each rule is one small function."""

from __future__ import annotations


def strip_trailing_whitespace(text: str) -> str:
    """No trailing spaces on any line, no trailing blank lines."""
    return "\n".join(line.rstrip() for line in text.split("\n")).rstrip("\n")


def drop_overlap_with_rest_of_line(text: str, rest_of_line: str) -> str:
    """Remove the end of a one-line suggestion that the rest of the line already holds.

    E.g. the editor auto-inserted ')' after the cursor and the model wrote 'a, b)': show 'a, b'.
    """
    rest = rest_of_line.strip()
    if not rest or "\n" in text:
        return text
    stripped = text.rstrip()
    for n in range(min(len(rest), len(stripped)), 0, -1):
        overlap = rest[:n]
        # The whole rest repeated, or a run of closing punctuation the editor auto-inserted;
        # never a partial word ('x' against 'x = 1' is a coincidence, not a repeat).
        if stripped.endswith(overlap) and (n == len(rest) or not any(c.isalnum() for c in overlap)):
            return stripped[:-n]
    return text


def empty_if_blank(text: str) -> str:
    return text if text.strip() else ""


def clean_suggestion(text: str, rest_of_line: str) -> str:
    text = strip_trailing_whitespace(text)
    text = drop_overlap_with_rest_of_line(text, rest_of_line)
    return empty_if_blank(text)
