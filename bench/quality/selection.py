"""The quality benchmark's task list: text tasks cut from real files, interleaved with the
execution tasks (bench/quality/exec_tasks.py), the same for every system and seed."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.quality import exec_tasks
from bench.quality.tasks import (
    KINDS,
    LANGUAGES,
    Task,
    discover_sources,
    interleave,
    text_tasks,
)


@dataclass
class Selection:
    tasks: list[Task]
    sources: dict[str, int] = field(default_factory=dict)  # files found per language


def build_tasks(
    n: int,
    *,
    seed: int = 7,
    languages: Sequence[str] = LANGUAGES,
    kinds: Sequence[str] = KINDS,
    exec_share: float = 1 / 3,
    sources: dict[str, list[Path]] | None = None,
    executed: Iterable[Task] | None = None,
) -> Selection:
    """The first n tasks of the seeded sequence (about exec_share of them execution tasks)."""
    found = discover_sources() if sources is None else sources
    exclude = frozenset(str(p) for p in exec_tasks.exec_module_paths())
    text = text_tasks(found, seed=seed, languages=languages, kinds=kinds, exclude=exclude)
    if executed is None:
        executed = (
            exec_tasks.exec_task_stream(seed=seed, kinds=kinds)
            if "python" in languages and exec_share > 0
            else iter(())
        )
    tasks = []
    for task in interleave(text, iter(executed), exec_share):
        tasks.append(task)
        if len(tasks) >= n:
            break
    return Selection(tasks, {lang: len(paths) for lang, paths in found.items()})
