"""The VS Code extension builds, passes its own unit tests and packages (npm; no VS Code)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

EXTENSION = Path(__file__).resolve().parents[1] / "editors" / "vscode"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not on PATH")
def test_extension_compiles_tests_and_packages() -> None:
    steps = (
        ["npm", "ci", "--no-audit", "--no-fund"],
        ["npm", "run", "compile"],
        ["npm", "test"],
        ["npm", "run", "package"],
    )
    for step in steps:
        run = subprocess.run(
            step, cwd=EXTENSION, capture_output=True, text=True, timeout=600, check=False
        )
        assert run.returncode == 0, (
            f"{' '.join(step)} failed:\n{run.stdout[-4000:]}\n{run.stderr[-4000:]}"
        )
    assert list(EXTENSION.glob("*.vsix")), "npm run package made no .vsix"
