"""The VS Code extension builds, passes its own unit tests and packages (npm; no VS Code)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

EXTENSION = Path(__file__).resolve().parents[2] / "editors" / "vscode"


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


E2E = Path(__file__).resolve().parent / "vscode"


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not on PATH")
def test_extension_in_real_vscode(tmp_path: Path) -> None:
    """`make e2e`: the packaged .vsix in code-server, typed into with headless Chromium.

    About 40 s once code-server, Node 24 and Playwright are cached (~/.cache/ghostfim/e2e), two
    to three minutes more the first time (tests/e2e/vscode/setup.sh installs them).
    """
    setup = subprocess.run(
        ["bash", str(E2E / "setup.sh")], capture_output=True, text=True, timeout=1200, check=False
    )
    if setup.returncode != 0 and "needs Debian packages" in setup.stderr:
        pytest.skip(setup.stderr.strip().splitlines()[-1])  # not root, no sudo: cannot install
    assert setup.returncode == 0, f"e2e set-up failed:\n{setup.stderr[-4000:]}"

    root = EXTENSION.parents[1]
    build = subprocess.run(
        ["make", "vsix"], cwd=root, capture_output=True, text=True, timeout=600, check=False
    )
    assert build.returncode == 0, (
        f"make vsix failed:\n{build.stdout[-3000:]}\n{build.stderr[-3000:]}"
    )
    vsix = max(EXTENSION.glob("ghostfim-*.vsix"), key=lambda p: p.stat().st_mtime)

    run = subprocess.run(
        [
            "bash",
            str(E2E / "run.sh"),
            "--vsix",
            str(vsix),
            "--screenshot",
            str(tmp_path / "ghost-text.png"),
            "--artifacts",
            str(tmp_path / "artifacts"),
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    out = run.stdout + run.stderr
    assert run.returncode == 0 and "0 failed" in out, f"e2e failed:\n{out[-8000:]}"
    assert (tmp_path / "ghost-text.png").stat().st_size > 10_000
