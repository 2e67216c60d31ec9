"""What `ghostfim setup` may find missing on a machine, and the command that installs it on each
platform (Debian/Ubuntu, Fedora, macOS, Windows). Standard library only: it runs before ghostfim's
dependencies are installed (engine/setup/install.py)."""

from __future__ import annotations

import sys
from pathlib import Path

# --------------------------------------------------------------------------- what to install

# The platforms the advice names, in the order it is shown.
PLATFORMS = ("debian", "fedora", "macos", "windows")
PLATFORM_NAMES = {
    "debian": "Debian/Ubuntu",
    "fedora": "Fedora",
    "macos": "macOS",
    "windows": "Windows",
}
# The command that installs each missing piece. The editors say the same for Python and its
# venv module, before ghostfim exists to say it (editors/vscode/src/setupPlan.ts and
# editors/nvim/lua/ghostfim/install.lua; tests/unit/engine/setup/test_install.py checks).
FIXES: dict[str, dict[str, str]] = {
    "python": {
        "debian": "sudo apt-get install python3 python3-venv",
        "fedora": "sudo dnf install python3",
        "macos": "brew install python@3.12",
        "windows": "winget install Python.Python.3.12",
    },
    "venv": {
        "debian": "sudo apt-get install python3-venv",
        "fedora": "sudo dnf install python3",
        "macos": "brew install python@3.12",
        "windows": "winget install Python.Python.3.12",
    },
    "pip": {
        "debian": "sudo apt-get install python3-pip",
        "fedora": "sudo dnf install python3-pip",
        "macos": "python3 -m ensurepip --upgrade",
        "windows": "py -m ensurepip --upgrade",
    },
    "compiler": {
        "debian": "sudo apt-get install build-essential",
        "fedora": "sudo dnf install gcc gcc-c++ make",
        "macos": "xcode-select --install",
        "windows": "winget install Microsoft.VisualStudio.2022.BuildTools --override "
        '"--wait --add Microsoft.VisualStudio.Workload.VCTools --includeRecommended"',
    },
    "cmake": {
        "debian": "sudo apt-get install cmake",
        "fedora": "sudo dnf install cmake",
        "macos": "brew install cmake",
        "windows": "winget install Kitware.CMake",
    },
}
WHAT_IS_MISSING = {
    "python": "Python 3.10 or later",
    "venv": "Python's venv module",
    "pip": "pip for this Python",
    "compiler": "a C/C++ compiler (llama.cpp is built from source)",
    "cmake": "cmake",
}


def this_platform(os_release: Path = Path("/etc/os-release")) -> str | None:
    """Which of PLATFORMS this machine is, when it is one of them."""
    if sys.platform == "win32":
        return "windows"
    if sys.platform == "darwin":
        return "macos"
    try:
        text = os_release.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    ids: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key in ("ID", "ID_LIKE"):
            ids.update(value.strip().strip('"').split())
    if ids & {"debian", "ubuntu"}:
        return "debian"
    if ids & {"fedora", "rhel", "centos"}:
        return "fedora"
    return None


def advice(missing: str, here: str | None) -> str:
    """What to run, this machine's command first ("Debian/Ubuntu: sudo apt-get ...; ...")."""
    order = sorted(PLATFORMS, key=lambda p: p != here)
    return "; ".join(f"{PLATFORM_NAMES[p]}: {FIXES[missing][p]}" for p in order)


class SetupError(Exception):
    """A step could not finish; `missing` names what to install (a key of FIXES), if that is
    the reason, and `log_tail` holds the last lines of the command that failed."""

    def __init__(self, message: str, *, missing: str | None = None, log_tail: str = "") -> None:
        super().__init__(message)
        self.missing = missing
        self.log_tail = log_tail
