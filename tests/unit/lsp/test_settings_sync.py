"""One source of truth for the settings: the engine's defaults (engine/config.py) and the
server's ranges (lsp/settings.py) are what VS Code's package.json declares and what both
clients' docs and docs/protocol.md say."""

from __future__ import annotations

import json
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from ghostfim.engine.config import EngineConfig
from ghostfim.lsp.settings import AUTO_FIELDS, KEYS, IntRange, NumberRange

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "editors" / "vscode" / "package.json"
VSCODE_README = ROOT / "editors" / "vscode" / "README.md"
NVIM_DOC = ROOT / "editors" / "nvim" / "doc" / "ghostfim.txt"
PROTOCOL = ROOT / "docs" / "protocol.md"
CLIENT_ONLY = {"serverPath", "serverArgs", "trace.server"}  # VS Code's own settings


def vscode_properties() -> dict[str, dict[str, Any]]:
    manifest = json.loads(PACKAGE.read_text())
    conf = manifest["contributes"]["configuration"]
    props: dict[str, dict[str, Any]] = {}
    for section in conf if isinstance(conf, list) else [conf]:
        for key, value in section["properties"].items():
            props[key.removeprefix("ghostfim.")] = value
    return props


def shown(default: Any, name: str) -> Any:
    """A default as the clients write it: "auto" for the fields where None means auto."""
    if default is None and name in AUTO_FIELDS:
        return "auto"
    return default


# Settings the engine and the server have that the editors' settings and docs do not declare
# yet (report bug 4): their checks are expected to fail until they do.
UNDECLARED: set[str] = set()


def keys() -> list[object]:
    return [
        pytest.param(
            key,
            marks=pytest.mark.xfail(
                strict=True,
                reason=f"report bug 4: ghostfim.{key} is not in editors/vscode/package.json, "
                "editors/vscode/README.md, editors/nvim/doc/ghostfim.txt or docs/protocol.md",
            ),
        )
        if key in UNDECLARED
        else key
        for key in sorted(KEYS)
    ]


def test_every_field_has_one_key_and_one_default() -> None:
    names = [name for name, _ in KEYS.values()]
    assert sorted(names) == sorted(f.name for f in fields(EngineConfig))  # nothing left out
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("key", keys())
def test_vscode_declares_the_servers_range_and_default(key: str) -> None:
    props = vscode_properties()
    assert key in props, f"package.json does not declare ghostfim.{key}"
    prop = props[key]
    name, check = KEYS[key]
    default = shown(getattr(EngineConfig(), name), name)
    if key == "model.size":
        assert prop["default"] == "auto"  # VS Code's "auto": the server's choice (None)
        assert set(prop["enum"]) - {"auto"} == {"tiny", "small", "medium", "large"}
    else:
        assert prop["default"] == default, (key, prop["default"], default)
    if isinstance(check, IntRange | NumberRange):
        assert (prop.get("minimum"), prop.get("maximum")) == (check.lo, check.hi), key
    if "enum" in prop and key != "model.size":
        for value in prop["enum"]:
            check(value)  # every choice the Settings UI offers is accepted
    assert prop.get("description") or prop.get("markdownDescription"), key


def test_vscode_declares_no_setting_the_server_does_not_know() -> None:
    assert set(vscode_properties()) - set(KEYS) == CLIENT_ONLY
    assert set(KEYS) - set(vscode_properties()) <= UNDECLARED  # nothing else missing


@pytest.mark.parametrize("key", keys())
def test_docs_name_every_setting_with_its_default_and_range(key: str) -> None:
    name, check = KEYS[key]
    default = shown(getattr(EngineConfig(), name), name)
    rng = f"{check.lo}..{check.hi}" if isinstance(check, IntRange | NumberRange) else None
    rng = rng.replace(".0..", "..").removesuffix(".0") if rng else None
    # VS Code's README: | `ghostfim.key` | `default` | range | meaning |
    row = next(
        (line for line in VSCODE_README.read_text().splitlines() if f"`ghostfim.{key}`" in line),
        None,
    )
    assert row is not None, f"editors/vscode/README.md does not document ghostfim.{key}"
    if rng:
        assert rng in row, (key, rng, row)
    # Neovim's help: `key`  `default`  lo..hi ..., in the settings section.
    doc = NVIM_DOC.read_text()
    section = doc[doc.index("*ghostfim-settings*") :]
    section = section[: section.index("=" * 20)]
    match = re.search(rf"^\s+`{re.escape(key)}`\s+(\S+)\s*(.*)$", section, re.M)
    assert match, f"editors/nvim/doc/ghostfim.txt does not document {key}"
    if default is not None and key != "model.size":
        assert match.group(1) == f"`{json.dumps(default)}`".replace(".0`", "`"), (key, match[0])
    if rng:
        assert match.group(2).startswith(rng), (key, match[0])
    assert f"`{key}`" in PROTOCOL.read_text(), f"docs/protocol.md does not document {key}"
