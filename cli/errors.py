"""What the commands share: the error a user can cause, and reading a FILE:LINE:COL."""

from __future__ import annotations

from pathlib import Path


class UserError(Exception):
    """A problem with what the user asked for: reported in one line."""


def parse_location(location: str) -> tuple[Path, int, int]:
    """FILE:LINE:COL with 1-based line and column (a path may itself contain ':')."""
    try:
        file_part, line_part, col_part = location.rsplit(":", 2)
        line, col = int(line_part), int(col_part)
    except ValueError:
        raise UserError(f"expected FILE:LINE:COL (1-based), got {location!r}") from None
    return Path(file_part), line, col
