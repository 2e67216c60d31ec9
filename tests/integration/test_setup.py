"""ghostfim as a package: the wheel holds the product and nothing else, and installed into a
fresh environment outside this checkout its installer runs before its dependencies are there
(what the editors run first), and with them `ghostfim` works and `ghostfim setup`, run twice,
leaves a ready install as it is, in seconds.

The fresh environment borrows this virtual environment's site-packages through a `.pth` line
(the dependencies, llama.cpp's build) instead of downloading them: the editors' whole path,
downloads included, is tests/e2e's (test_vscode.py's fresh install, test_nvim.py's
:GhostfimInstall).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `make wheel` builds, built the same way from a copy of the sources (pip's
    in-tree build writes build/ next to them; the checkout's may hold leftovers)."""
    import shutil

    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    skip = shutil.ignore_patterns("__pycache__")
    for folder in ("engine", "lsp", "cli", "tests", "bench"):
        shutil.copytree(REPO / folder, src / folder, ignore=skip)
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    (found,) = out.glob("ghostfim-*-py3-none-any.whl")
    return found


def test_the_wheel_holds_engine_lsp_and_cli_only(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"ghostfim", wheel.name.split("-py3")[0] + ".dist-info"}, tops
    packages = {name.split("/")[1] for name in names if name.startswith("ghostfim/")}
    assert packages == {"engine", "lsp", "cli"}, packages
    for needed in ("ghostfim/engine/setup/install.py", "ghostfim/cli/setup.py"):
        assert needed in names
    assert not [n for n in names if "/tests/" in n or "/bench/" in n or n.endswith(".pyc")]
    # Code that only the checkout can import must not be in what ships.
    for name in names:
        if name.endswith(".py"):
            text = zipfile.ZipFile(wheel).read(name).decode()
            assert "from tests" not in text and "import bench" not in text, name
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA")))
    entry = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt")))
    assert b"Requires-Dist: llama-cpp-python==0.3.36" in metadata
    assert b"ghostfim = ghostfim." in entry


def fresh_venv(root: Path, wheel: Path) -> Path:
    """A venv with only the wheel installed (no pip of its own: ours installs into it)."""
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-deps",
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    return venv


def test_the_installer_runs_before_the_dependencies_are_there(wheel: Path, tmp_path: Path) -> None:
    """Only the wheel, no pygls, no llama.cpp, no tqdm: the editors install it with --no-deps
    and run `python -I -m ghostfim.engine.setup.install --json` in exactly such an environment,
    so that module imports nothing that is not there yet."""
    venv = fresh_venv(tmp_path, wheel)
    python = str(venv / "bin" / "python")
    run = subprocess.run(
        [python, "-I", "-m", "ghostfim.engine.setup.install", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "--json" in run.stdout and "--rebuild" in run.stdout
    imports = subprocess.run([python, "-I", "-c", "import pygls"], capture_output=True)
    assert imports.returncode != 0, "the fresh environment was meant to lack the dependencies"


@pytest.mark.model
@pytest.mark.slow
def test_setup_in_a_fresh_environment_twice_changes_nothing(wheel: Path, tmp_path: Path) -> None:
    """`ghostfim setup --json` from the wheel, outside this checkout, with the dependencies and
    the build borrowed and the small model in the cache: ready, nothing to change, twice."""
    from ghostfim.engine.setup.fetch import fetch_model

    fetch_model("small")  # the machine's default model (a CPU: small), in the cache
    venv = fresh_venv(tmp_path, wheel)
    site = Path(sysconfig.get_paths()["purelib"])
    fresh_site = next((venv / "lib").glob("python3*/site-packages"))
    (fresh_site / "borrowed.pth").write_text(f"{site}\n", encoding="utf-8")
    python = venv / "bin" / "python"
    where = subprocess.run(
        [str(python), "-I", "-c", "import ghostfim.engine.setup.install as m; print(m.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.startswith(str(venv)), f"the wheel's code must run, not the checkout's: {where}"

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    for args in (["--help"], ["setup", "--help"]):
        shown = subprocess.run(
            [str(venv / "bin" / "ghostfim"), *args], cwd=tmp_path, env=env, capture_output=True
        )
        assert shown.returncode == 0, shown.stderr
    for _ in range(2):
        started = time.monotonic()
        run = subprocess.run(
            [str(venv / "bin" / "ghostfim"), "setup", "--json"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        took = time.monotonic() - started
        assert run.returncode == 0, run.stdout + run.stderr
        events = [json.loads(line) for line in run.stdout.splitlines()]
        final = events[-1]
        assert final["step"] == "setup" and final["ready"] is True, events
        assert final["changed"] == [], final
        assert final["server"] == str(venv / "bin" / "ghostfim")
        assert {e["step"] for e in events if e["event"] == "done"} >= {
            "python",
            "packages",
            "llama",
            "model",
            "check",
        }
        assert took < 60, f"a ready install took {took:.0f} s"
    print(f"ghostfim setup on a ready install: {took:.1f} s")
