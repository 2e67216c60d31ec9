"""A stranger's repository: ghostfim runs none of its code and shows none of the secrets its
settings point at (issue 28; docs/reliability.md, "Threat model").

The workspace holds files that run code if Python imports or executes them from the working
directory (a `pip/` package, `sitecustomize.py`, a `llama_cpp/` package, the hub client) and
an `nvidia-smi` on a relative PATH entry. The server is started there as VS Code starts it
(the `ghostfim` script, the workspace as its working directory) and as `python -m` would,
with the repository as its workspace folder (the index reads its files), then asked for a
preset that is not downloaded (the fetch runs pip), a draft path into the
workspace, and remote backends whose URLs carry credentials. Every file writes a marker when
it runs: none may appear, and the word `secret` may appear in nothing the server says, in its
status, its stderr or its trace file.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.lspclient import LspProcess
from tests.support.server import SERVER, configure, open_doc, start, status, wait_for

SCRIPT = Path(sys.executable).with_name("ghostfim")  # the console script VS Code starts
KEY_VARIABLE = "GHOSTFIM_TEST_BACKEND_KEY"
SECRET = "secret"  # in every credential below; it must never be shown

# path in the workspace -> what it is (each writes markers/<name> when run)
PLANTED = {
    "pip/__init__.py": "python",
    "pip/__main__.py": "python",
    "sitecustomize.py": "python",
    "usercustomize.py": "python",
    "llama_cpp/__init__.py": "python",
    "huggingface_hub/__init__.py": "python",
    "filelock.py": "python",
    "tqdm/__init__.py": "python",
    "nvidia-smi": "executable",
    "bin/nvidia-smi": "executable",
    "bin/nvcc": "executable",
}


def hostile_workspace(root: Path) -> tuple[Path, Path]:
    """The repository and the folder its planted files write their markers to."""
    repo, markers = root / "repo", root / "markers"
    markers.mkdir(parents=True)
    for relative, kind in PLANTED.items():
        path = repo / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        marker = markers / relative.replace("/", "_")
        if kind == "python":
            path.write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
        else:
            path.write_text(f"#!/bin/sh\necho ran > '{marker}'\n")
            path.chmod(0o755)
    # The workspace's own settings, as a hostile repository would write them (VS Code reads
    # them in a trusted workspace only; the server never reads this file).
    vscode = repo / ".vscode"
    vscode.mkdir()
    (vscode / "settings.json").write_text(
        json.dumps({"ghostfim.model.size": "medium", "ghostfim.model.draft": "draft.gguf"})
    )
    (repo / "draft.gguf").write_bytes(b"GGUF" + b"\0" * 64)
    (repo / "main.py").write_text("import os\n\ndef main():\n    ")
    return repo, markers


def server_env(root: Path) -> dict[str, str]:
    """No download can succeed (pip has no index, the hub is offline): the fetch still runs
    pip, which is the point. Relative PATH entries name the workspace's `bin/` and itself."""
    return {
        "GHOSTFIM_CACHE_DIR": str(root / "cache"),  # nothing cached: `medium` is missing
        "GHOSTFIM_TRACE": str(root / "trace.log"),
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": "",
        "HF_HUB_OFFLINE": "1",
        "PATH": os.pathsep.join([".", "bin", os.environ.get("PATH", "")]),
        KEY_VARIABLE: f"sk-{SECRET}-0123456789",
    }


async def said(client: LspProcess, since: int) -> list[str]:
    return [json.dumps(n.params) for n in client.notifications[since:]]


@pytest.mark.slow
@pytest.mark.parametrize("launch", ["script", "python -m"])
async def test_a_hostile_workspace_runs_nothing_and_sees_no_secret(
    tmp_path: Path, launch: str
) -> None:
    repo, markers = hostile_workspace(tmp_path)
    command = [str(SCRIPT), "serve"] if launch == "script" else SERVER
    local = {
        "model": {"size": "medium", "draft": str(repo / "draft.gguf")},
        "backend": "local",
        "workspaceContext": "auto",  # the index reads the repository (it is off by default)
    }
    client = await start(
        local, env=server_env(tmp_path), cwd=repo, ready=False, command=command, root=repo
    )
    statuses: list[dict[str, Any]] = []
    try:
        # The workspace index reads every source file of the repository: it parses them, it
        # never runs or imports them.
        indexed = await wait_for(client, lambda s: s["workspace"]["state"] == "ready", 30)
        assert indexed["workspace"]["files"] >= 9, indexed["workspace"]
        # The missing preset is fetched (pip runs, and fails: no index) and reported.
        statuses.append(await wait_for(client, lambda s: bool(s.get("error")), timeout=120))
        assert "medium" in statuses[-1]["error"], statuses[-1]

        # Remote backends whose URLs carry credentials: over https to a closed port, over
        # plain http to another machine (refused: the key would go in clear), without a
        # scheme (a settings error that says which scheme to add).
        await open_doc(client, "file:///main.py", (repo / "main.py").read_text())
        urls = [
            f"https://user:{SECRET}@127.0.0.1:9/v1?api_key={SECRET}",
            f"http://user:{SECRET}@example.invalid:8080/v1?api_key={SECRET}",
            f"user:{SECRET}@127.0.0.1:9",
        ]
        for url in urls:
            await configure(
                client,
                {
                    "backend": "openai",
                    "backendUrl": url,
                    "backendApiKeyEnv": KEY_VARIABLE,
                    "backendTimeoutMs": 500,
                },
            )
            await asyncio.sleep(0.5)
            await client.call(
                "textDocument/inlineCompletion",
                {
                    "textDocument": {"uri": "file:///main.py"},
                    "position": {"line": 3, "character": 4},
                    "context": {"triggerKind": 1},
                },
                timeout=30,
            )
            statuses.append(await status(client))
        messages = await said(client, 0)
        assert any("refusing to send the API key" in m for m in messages), messages
        assert any("has no scheme: add https://" in m for m in messages), messages
    finally:
        await client.stop()

    ran = sorted(p.name for p in markers.iterdir())
    assert ran == [], f"workspace code ran: {ran}"
    shown = "\n".join(
        [
            *[json.dumps(n.params) for n in client.notifications],
            *map(json.dumps, statuses),
            *client.stderr_tail,
            (tmp_path / "trace.log").read_text(errors="replace"),
        ]
    )
    assert SECRET not in shown.lower(), [
        line for line in shown.splitlines() if SECRET in line.lower()
    ][:5]


@pytest.mark.model
def test_doctor_probes_in_isolation(tmp_path: Path) -> None:
    """`ghostfim doctor` run in the workspace: its decode probe (a child Python) imports the
    real llama_cpp, not the workspace's."""
    repo, markers = hostile_workspace(tmp_path)
    env = {**os.environ, "PATH": os.pathsep.join([".", "bin", os.environ.get("PATH", "")])}
    run = subprocess.run(
        [str(SCRIPT), "doctor"], cwd=repo, env=env, capture_output=True, text=True, timeout=300
    )
    assert "[ok] decode check" in run.stdout, run.stdout + run.stderr
    assert sorted(p.name for p in markers.iterdir()) == []
