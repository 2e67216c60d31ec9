"""bench/import_statements.py: a document's import statements found by a line scan that survives
an unparsable file, and the ones a block takes (far above the cursor, the used ones first)."""

from __future__ import annotations

from bench.import_statements import fit_imports, import_statements, imports_above

PYTHON = """\
\"\"\"A module.\"\"\"
from __future__ import annotations

import os
from typing import TYPE_CHECKING
from a2a.server.id_generator import (
    IDGenerator,  # (a comment with a paren
    UUIDGenerator,
)
from a2a.utils.errors import \\
    InvalidParamsError

if TYPE_CHECKING:
    from a2a.types import Task

def f(
    x,
):
    import json  # a local import is no file-level one
    return x(  # an unclosed call while the user types
"""

TYPESCRIPT = """\
import { D2, output } from '@tanstack/db-ivm'
import {
  buildQueryFromConfig,
  splitUpdates,
} from './live/utils.js'
import type { Collection } from '../collection/index.js';
import './side-effect.js'

const lazy = await import('./lazy.js')
export function f() {}
"""


def texts(text: str, language: str) -> list[str]:
    return [s.text for s in import_statements(text, language)]


def test_python_statements_keep_their_continuations_and_leave_out_future_and_local_ones() -> None:
    found = import_statements(PYTHON, "python")
    assert [s.text for s in found] == [
        "import os",
        "from typing import TYPE_CHECKING",
        "from a2a.server.id_generator import (\n"
        "    IDGenerator,  # (a comment with a paren\n"
        "    UUIDGenerator,\n"
        ")",
        "from a2a.utils.errors import \\\n    InvalidParamsError",
        "from a2a.types import Task",  # inside `if TYPE_CHECKING:`, dedented
    ]
    assert [s.line for s in found] == [3, 4, 5, 9, 13]


def test_an_unclosed_statement_is_taken_as_its_first_line() -> None:
    text = "import os\nfrom pkg import (\n    a,\n\ndef f():\n    pass\n"
    assert texts(text, "python")[0] == "import os"
    # Past MAX_STATEMENT_LINES the scan gives up on the parenthesis: the first line alone.
    long = "from pkg import (\n" + "    a,\n" * 60
    assert texts(long, "python") == ["from pkg import ("]


def test_typescript_statements_span_their_lines_and_skip_dynamic_imports() -> None:
    assert texts(TYPESCRIPT, "typescript") == [
        "import { D2, output } from '@tanstack/db-ivm'",
        "import {\n  buildQueryFromConfig,\n  splitUpdates,\n} from './live/utils.js'",
        "import type { Collection } from '../collection/index.js';",
        "import './side-effect.js'",
    ]
    assert texts(TYPESCRIPT, "typescriptreact") == texts(TYPESCRIPT, "typescript")
    assert texts(TYPESCRIPT, "rust") == []


def test_the_block_takes_the_far_statements_the_used_ones_first() -> None:
    body = "\n" * 30 + "    raise InvalidParamsError('x')\n    \n"
    text = PYTHON.split("def f(")[0] + body
    cursor_line = text.count("\n") - 1
    used = frozenset({"InvalidParamsError", "raise"})
    found = imports_above(text, "python", cursor_line, 10, used)
    assert found[0].text.endswith("InvalidParamsError")  # used near the cursor: first
    assert len(found) == 5
    # The ones within `lines_above` of the cursor are in the prompt's window already.
    assert imports_above(text, "python", 12, 10, used) == ()

    def count(s: str) -> int:
        return len(s.split())

    fitted = fit_imports(found, 7, count)  # room for the used statement (5) and `import os` (2)
    assert [s.text for s in fitted] == [
        "import os",
        "from a2a.utils.errors import \\\n    InvalidParamsError",
    ]  # in file order
