"""The small module everything demonstrates on: docs/examples/stats.py, cut at the cursor.

`make demo`, the profile and the LSP tests all complete inside `stddev()`; one copy of the text
keeps them talking about the same thing.
"""

from __future__ import annotations

from pathlib import Path

STATS_PY = Path(__file__).resolve().parent.parent / "docs" / "examples" / "stats.py"
CURSOR_LINE = '    """Population standard deviation."""\n'


def stats_before_cursor() -> str:
    """From `import math` to stddev()'s docstring, then the cursor line's indentation."""
    text = STATS_PY.read_text(encoding="utf-8")
    start = text.index("import math")
    end = text.index(CURSOR_LINE) + len(CURSOR_LINE)
    return text[start:end] + "    "
