"""One source of truth for the settings: the engine's defaults (engine/config.py) and the
server's ranges (lsp/settings.py) are what VS Code's package.json declares and what both
clients' docs and docs/protocol.md say; and lsp/settings.py's trust classification is what
package.json restricts in an untrusted workspace and what both clients' docs say of it."""

from __future__ import annotations

import json
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from ghostfim.engine.config import EngineConfig
from ghostfim.lsp.settings import (
    AUTO_FIELDS,
    CLIENT_KEYS,
    KEYS,
    NOT_TRUST_SENSITIVE,
    TRUST_SENSITIVE,
    IntRange,
    NumberRange,
)

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "editors" / "vscode" / "package.json"
VSCODE_README = ROOT / "editors" / "vscode" / "README.md"
NVIM = ROOT / "editors" / "nvim"
NVIM_DOC = NVIM / "doc" / "ghostfim.txt"
PROTOCOL = ROOT / "docs" / "protocol.md"


def manifest() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(PACKAGE.read_text())
    return data


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
    assert set(vscode_properties()) - set(KEYS) == set(CLIENT_KEYS)
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


# --- workspace trust (issue 28) ------------------------------------------------------------------
# Free text a setting might hold: a validator that takes one of these takes a path, a program or
# a host, so its key is presumed trust-sensitive until someone argues otherwise in lsp/settings.py.
FREE_TEXT = ("/tmp/x.gguf", "x.gguf", "https://example.com", "HOME")


def restricted() -> list[str]:
    trust = manifest()["capabilities"]["untrustedWorkspaces"]
    assert trust["supported"] == "limited"
    keys: list[str] = trust["restrictedConfigurations"]
    return keys


def test_every_setting_is_classified_once_for_trust() -> None:
    # A key added to KEYS, to CLIENT_KEYS or to package.json without saying whether a workspace
    # may set it fails here (package.json's own keys are KEYS plus CLIENT_KEYS, above).
    classified = set(TRUST_SENSITIVE) | set(NOT_TRUST_SENSITIVE)
    assert not set(TRUST_SENSITIVE) & set(NOT_TRUST_SENSITIVE)
    assert set(KEYS) | set(CLIENT_KEYS) == classified, (
        "classify in lsp/settings.py TRUST_SENSITIVE or NOT_TRUST_SENSITIVE: "
        f"{sorted((set(KEYS) | set(CLIENT_KEYS)) - classified)}; "
        f"not settings: {sorted(classified - set(KEYS) - set(CLIENT_KEYS))}"
    )
    assert all(
        reason.strip() for reason in (*TRUST_SENSITIVE.values(), *NOT_TRUST_SENSITIVE.values())
    )


@pytest.mark.parametrize("key", sorted(KEYS))
def test_a_server_setting_that_takes_free_text_is_trust_sensitive(key: str) -> None:
    _, check = KEYS[key]
    takes_text = []
    for text in FREE_TEXT:
        try:
            check(text)
            takes_text.append(text)
        except ValueError:
            pass
    if takes_text:
        assert key in TRUST_SENSITIVE, f"ghostfim.{key} takes {takes_text}: a file, program or host"
    if key.startswith("backend"):
        assert key in TRUST_SENSITIVE, f"ghostfim.{key}: the remote connection is the user's"


def test_a_vscode_setting_that_takes_free_text_is_trust_sensitive() -> None:
    # The same presumption on VS Code's side, which also holds the client-only keys: a string
    # without an enum, or a list, can name a file, a program, an argument or a host.
    for key, prop in vscode_properties().items():
        types = prop["type"] if isinstance(prop["type"], list) else [prop["type"]]
        if ("string" in types and "enum" not in prop and "pattern" not in prop) or "array" in types:
            assert key in TRUST_SENSITIVE, f"ghostfim.{key} takes free text"


def test_vscode_restricts_exactly_the_trust_sensitive_settings() -> None:
    keys = restricted()
    assert len(keys) == len(set(keys)), keys
    assert {k.removeprefix("ghostfim.") for k in keys} == set(TRUST_SENSITIVE)
    assert all(k.startswith("ghostfim.") for k in keys), keys


def test_the_vscode_readme_lists_the_restricted_settings() -> None:
    text = VSCODE_README.read_text()
    heading = "### Untrusted workspaces"
    assert heading in text, f"editors/vscode/README.md has no {heading!r} section"
    section = text[text.index(heading) + len(heading) :]
    section = section[: section.index("\n#")] if "\n#" in section else section
    for key in sorted(TRUST_SENSITIVE):
        assert f"`ghostfim.{key}`" in section, f"the trust section does not list ghostfim.{key}"
    for key in sorted(NOT_TRUST_SENSITIVE):
        assert f"`ghostfim.{key}`" not in section, f"ghostfim.{key} is not restricted"


# Lua that reads a file, runs one, or finds one by walking the directories: none of it may take
# the plugin's settings from a project (a repository's file would then choose the model, the
# server command or the backend). The plugin's files are its own code, found on runtimepath.
LUA_FILE_READS = re.compile(
    r"\bio\.(open|lines|read)\b|\bvim\.fn\.(readfile|filereadable|findfile|glob|globpath)\b"
    r"|\b(loadfile|dofile)\b|\bvim\.secure\b|\bvim\.fs\.(find|dir)\b|\bvim\.json\.decode\b"
    r"|\bjson_decode\b|\bexrc\b"
)


# The one JSON the plugin decodes: each line its own `ghostfim setup --json` child prints
# (:GhostfimInstall), never a file's content.
LUA_CHILD_OUTPUT = ("install.lua", "local ok, event = pcall(vim.json.decode, line)")


def test_the_neovim_plugin_reads_its_settings_from_the_users_config_only() -> None:
    sources = sorted((NVIM / "lua").rglob("*.lua")) + sorted((NVIM / "lsp").rglob("*.lua"))
    assert len(sources) >= 5
    for path in sources:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("--", 1)[0]  # comments may name what the code must not do
            if (path.name, code.strip()) == LUA_CHILD_OUTPUT:
                continue
            assert not LUA_FILE_READS.search(code), f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
    for doc in (NVIM / "README.md", NVIM_DOC):
        text = " ".join(doc.read_text().split())
        assert "your own configuration" in text and "project" in text, doc
