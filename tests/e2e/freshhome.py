"""A user who has never installed ghostfim: the environment the fresh-install tests run editors in.

A HOME (and XDG folders) of its own, so no ghostfim cache, model, editor state or install from
an earlier run is there; a PATH with no `ghostfim` on it, and with `python3`/`python` naming a
plain interpreter (not this checkout's virtual environment, not a pyenv shim that needs the real
HOME). pip's cache is the one thing shared with the machine, as on a CI machine or a developer's
laptop: the llama-cpp-python wheel built there before is used, not rebuilt (the build itself is
tests/unit/engine/setup/test_install.py's, with pip faked). Models come from ghostfim's own fetch.

Standard library only: tests/e2e/vscode/e2e.py imports it from Playwright's virtual environment.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

# The system's folders, whatever PATH the tests were started with.
SYSTEM_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
# Variables that point Python, pip or ghostfim at a place of the machine's, not the fresh user's.
DROPPED_PREFIXES = ("GHOSTFIM_", "PYTHON", "PIP_", "VIRTUAL_ENV", "CONDA", "PYENV", "XDG_")


def base_python(python: str = sys.executable) -> Path:
    """The interpreter a virtual environment was made from (itself when it is none)."""
    out = subprocess.run(
        [python, "-I", "-c", "import sys; print(getattr(sys, '_base_executable', sys.executable))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return Path(out).resolve()


def pip_cache_dir(python: str = sys.executable) -> str:
    """pip's cache of this machine (where the llama-cpp-python wheel it built is kept)."""
    return subprocess.run(
        [python, "-I", "-m", "pip", "cache", "dir"], capture_output=True, text=True, check=True
    ).stdout.strip()


def fresh_environment(
    root: Path, *, python: str = sys.executable, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a fresh user under `root` (created): HOME, XDG folders, a PATH
    without ghostfim whose `python3` is `python`'s base interpreter, pip's cache shared."""
    base = dict(os.environ if base is None else base)
    home = root / "home"
    bin_dir = root / "bin"
    for folder in (home, bin_dir):
        folder.mkdir(parents=True, exist_ok=True)
    interpreter = base_python(python)
    for name in ("python3", "python"):
        link = bin_dir / name
        if not link.exists():
            link.symlink_to(interpreter)
    cache = pip_cache_dir(python)

    env = {k: v for k, v in base.items() if not k.startswith(DROPPED_PREFIXES)}
    dirs = [str(bin_dir)]
    for folder in [*base.get("PATH", "").split(os.pathsep), *SYSTEM_PATH]:
        if not folder or not os.path.isabs(folder) or folder in dirs:
            continue
        if "pyenv" in folder or ".venv" in folder or (Path(folder) / "ghostfim").exists():
            continue
        dirs.append(folder)
    env.update(
        HOME=str(home),
        PATH=os.pathsep.join(dirs),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        PIP_CACHE_DIR=cache,
    )
    found = shutil.which("ghostfim", path=env["PATH"])
    assert found is None, f"a ghostfim is on the fresh PATH: {found}"
    return env
