"""Other files of a task's package, opened before the task (`--neighbors N`).

An editor rarely holds one file alone: the files next to it, and the ones it imports, are open
in other tabs. ghostfim puts chunks of open documents before full prompts (`extraContext`,
engine/context/); with `--neighbors N` each task gets up to N files from its own folder with
the same extension, the ones the task's file names (imports, includes) first, then the rest by
name. They are opened (`didOpen`) before the task's document and closed after it.

A sibling that holds the task's expected text verbatim is never opened: it would hand the
answer over (a copy of the file, or a generated twin), which a benchmark must not reward.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from bench.quality.tasks import Task, read_source

if TYPE_CHECKING:
    from bench.quality.systems import GhostfimSystem

MIN_LEAK_CHARS = 12  # a shorter expected text (`return x`) says nothing about a sibling


def neighbor_files(task: Task, n: int) -> list[tuple[Path, str]]:
    """Up to n (path, text) siblings of the task's file, the ones it names first."""
    if n <= 0:
        return []
    path = Path(task.path)
    try:
        siblings = sorted(
            p for p in path.parent.iterdir() if p.is_file() and p.suffix == path.suffix
        )
    except OSError:
        return []
    siblings = [p for p in siblings if p.resolve() != path.resolve()]

    def named(p: Path) -> bool:
        return re.search(rf"\b{re.escape(p.stem)}\b", task.document) is not None

    expected = task.expected.strip()
    out: list[tuple[Path, str]] = []
    for p in [*filter(named, siblings), *(p for p in siblings if not named(p))]:
        text = read_source(p)
        if text is None or (len(expected) >= MIN_LEAK_CHARS and expected in text):
            continue
        out.append((p, text))
        if len(out) == n:
            break
    return out


async def open_neighbors(system: GhostfimSystem, task: Task, folder_uri: str, n: int) -> list[str]:
    """Open the task's neighbours in ghostfim (before the task's own document); returns their
    URIs, for `system.close` after the task."""
    from bench.quality.systems import LANGUAGE_IDS

    assert system.client is not None
    uris = []
    for path, text in neighbor_files(task, n):
        uri = f"{folder_uri}/{path.name}"
        item = {
            "uri": uri,
            "languageId": LANGUAGE_IDS.get(task.language, task.language),
            "version": 1,
            "text": text,
        }
        await system.client.notify("textDocument/didOpen", {"textDocument": item})
        uris.append(uri)
    return uris
