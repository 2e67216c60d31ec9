"""engine/tuning.py: every tuning constant described once, defined once."""

from __future__ import annotations

import ast
from pathlib import Path

from ghostfim.engine import tuning

ENGINE = Path(__file__).resolve().parents[3] / "engine"


def constants() -> set[str]:
    return {n for n in vars(tuning) if n.isupper() and not n.startswith("_") and n != "TABLE"}


def test_the_table_describes_every_constant_once() -> None:
    names = [entry.name for entry in tuning.TABLE]
    assert len(names) == len(set(names))
    assert set(names) == constants()
    for entry in tuning.TABLE:
        assert entry.meaning and entry.chosen_by, entry.name
        assert isinstance(getattr(tuning, entry.name), int | float), entry.name


def test_no_module_defines_its_own_value() -> None:
    """A module that set one of these itself would drift from the table without notice."""
    names = constants()
    for path in ENGINE.rglob("*.py"):
        if path.name == "tuning.py":
            continue
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign):
                targets = [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    assert target.id not in names, f"{path}: {target.id} is engine/tuning.py's"
