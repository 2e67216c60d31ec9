"""Every child Python that ghostfim starts, started one safe way.

Editors start the server with the workspace as its working directory, and the workspace is
not ours: a repository under review may hold `pip/__main__.py`, `sitecustomize.py` or
`llama_cpp/__init__.py`. `python -m pip` and `python -c` put the working directory first on
`sys.path`, so a plain child would import and run those files. A child started here runs

- isolated (`-I`): neither the working directory nor the user's site-packages is on its
  path, and `PYTHON*` variables (PYTHONPATH, PYTHONSTARTUP, ...) are ignored;
- in ghostfim's own cache directory, never the caller's working directory;
- with stdin closed, so a child that asks a question fails instead of hanging.

`python_command` is the argv (for callers that stream the child's output themselves),
`run_python` runs it to the end.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ghostfim.engine import env


def child_workdir() -> Path:
    """The directory children run in: ghostfim's cache, created if needed."""
    path = env.cache_dir()
    path.mkdir(parents=True, exist_ok=True)
    return path


def python_command(args: Sequence[str], python: str | None = None) -> list[str]:
    """`python -I ARGS`: the interpreter that runs ghostfim (or `python`), isolated."""
    return [python or sys.executable, "-I", *args]


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a child: ours, without what points Python at other code.

    `-I` ignores PYTHON* variables already; they are dropped too so that a child which starts
    a Python of its own (pip building a package) does not hand them on.
    """
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    environ["PYTHONSAFEPATH"] = "1"  # Python >= 3.11: no working directory on sys.path
    environ.update(extra or {})
    return environ


def run_python(
    args: Sequence[str],
    *,
    python: str | None = None,
    extra_env: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> subprocess.CompletedProcess[Any]:
    """Run `python -I ARGS` in the cache directory; `kwargs` go to `subprocess.run`."""
    kwargs.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.run(
        python_command(args, python),
        cwd=child_workdir(),
        env=child_env(extra_env),
        check=kwargs.pop("check", False),
        **kwargs,
    )


def which(name: str) -> str | None:
    """`shutil.which` over the absolute entries of PATH only.

    A relative entry (`.`, an empty one, `bin`) names a folder of the working directory, which
    is the workspace: a `nvidia-smi` or `nvcc` there must not be what runs.
    """
    path = os.environ.get("PATH", os.defpath)
    absolute = [d for d in path.split(os.pathsep) if d and os.path.isabs(d)]
    return shutil.which(name, path=os.pathsep.join(absolute))
