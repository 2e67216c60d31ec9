"""The Neovim plugin's headless end-to-end test (editors/nvim/tests/run.lua), run against the
real `ghostfim serve` of this virtual environment with the tiny model."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "editors" / "nvim" / "tests" / "run.lua"
# run.lua stops itself after 170 s (GHOSTFIM_TEST_TIMEOUT_S); this is the backstop.
TIMEOUT_S = 180


def _text(stream):
    if isinstance(stream, bytes):
        return stream.decode(errors="replace")
    return stream or ""


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvim") is None, reason="nvim is not on PATH")
def test_nvim_plugin_against_real_server():
    server = Path(sys.executable).parent / "ghostfim"
    assert server.exists(), f"{server} is missing: install the project (pip install -e .)"
    env = dict(os.environ)
    env["GHOSTFIM_SERVER_CMD"] = json.dumps([str(server), "serve"])
    env.setdefault("GHOSTFIM_TEST_MODEL", "tiny")
    luafile = "luafile " + str(SCRIPT).replace("\\", "\\\\").replace(" ", "\\ ")
    command = ["nvim", "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", luafile]
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
    assert run.returncode == 0, (
        f"nvim exited with {run.returncode}\n--- stdout ---\n{run.stdout}\n"
        f"--- stderr ---\n{run.stderr}"
    )
