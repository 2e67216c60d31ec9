"""Every environment variable ghostfim reads, in one table, read when asked (never at import).

Settings come from the editor (lsp/settings.py over engine/config.py); these variables are for
what an editor cannot say or must not be able to: where the cache is, whether downloads are
allowed, deadlines for tests and benchmarks, debugging. A variable read here is read on every
call, so a test may set it with monkeypatch and a long-running server sees a change.

Two readers sit outside this module on purpose: `engine/setup/build_flags.py` runs as a plain
script before ghostfim is installed (it reads `GHOSTFIM_CUDA`, `GHOSTFIM_CUDA_ARCH` and
`GHOSTFIM_CPU_FEATURES`, listed below too), and `engine/__init__.py` sets `OMP_WAIT_POLICY`
before llama.cpp loads. A remote backend's API key is read from the variable the
`backendApiKeyEnv` setting names (engine/remote/), never from a fixed name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

_TRUTHY = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Variable:
    name: str
    default: str
    meaning: str


VARIABLES: tuple[Variable, ...] = (
    Variable(
        "GHOSTFIM_CACHE_DIR",
        "$XDG_CACHE_HOME/ghostfim or ~/.cache/ghostfim",
        "where models (and the benchmarks' builds) are kept",
    ),
    Variable(
        "GHOSTFIM_STATE_DIR",
        "$XDG_STATE_HOME/ghostfim or ~/.local/state/ghostfim",
        "where the local acceptance statistics are kept (engine/service/localstats.py)",
    ),
    Variable("GHOSTFIM_OFFLINE", "0", "1: never download a model (only cached files are used)"),
    Variable(
        "GHOSTFIM_PREFILL_COST",
        "",
        "pin the prefill cost model, `FIXED+PER_TOKEN` ms "
        "(e.g. `3+0.02`: GPU policy on a CPU, for tests)",
    ),
    Variable("GHOSTFIM_REQUEST_DEADLINE_S", "8", "an automatic request is answered empty after"),
    Variable("GHOSTFIM_EXPLICIT_DEADLINE_S", "120", "the longest an explicit request may take"),
    Variable("GHOSTFIM_HOLD_LIMIT_S", "300", "how long a request waits for a model to load"),
    Variable("GHOSTFIM_TRACE", "", "a file: every model job and prompt is logged there"),
    Variable("GHOSTFIM_DEBUG", "", "1: tracebacks from the command line"),
    Variable("GHOSTFIM_DEBUG_PROTOCOL", "0", "1: the server answers ghostfim/documentText"),
    Variable("GHOSTFIM_CUDA", "0", "1: make setup builds llama.cpp with CUDA (build_flags.py)"),
    Variable("GHOSTFIM_CUDA_ARCH", "native or 90", "the CUDA architectures to build for"),
    Variable("GHOSTFIM_CPU_FEATURES", "", "override the CPU features build_flags.py detects"),
)


def _text(name: str) -> str:
    return os.environ.get(name, "").strip()


def _flag(name: str) -> bool:
    return _text(name).lower() in _TRUTHY


def _seconds(name: str, default: float) -> float:
    try:
        value = float(_text(name) or default)
    except ValueError:
        return default
    return value if value > 0 else default


def cache_dir() -> Path:
    """Root of ghostfim's cache (outside the repository, so model files never end up in git)."""
    if explicit := _text("GHOSTFIM_CACHE_DIR"):
        return Path(explicit).expanduser()
    if xdg := _text("XDG_CACHE_HOME"):
        return Path(xdg).expanduser() / "ghostfim"
    return Path.home() / ".cache" / "ghostfim"


def state_dir() -> Path:
    """Where ghostfim keeps what it learns on this machine (XDG's state directory)."""
    if explicit := _text("GHOSTFIM_STATE_DIR"):
        return Path(explicit).expanduser()
    if xdg := _text("XDG_STATE_HOME"):
        return Path(xdg).expanduser() / "ghostfim"
    return Path.home() / ".local" / "state" / "ghostfim"


def offline() -> bool:
    return _flag("GHOSTFIM_OFFLINE")


def hub_offline() -> bool:
    """huggingface_hub's own switch, honoured before any network call."""
    return _flag("HF_HUB_OFFLINE")


def pinned_prefill_cost() -> str:
    return _text("GHOSTFIM_PREFILL_COST")


def automatic_deadline_s() -> float:
    return _seconds("GHOSTFIM_REQUEST_DEADLINE_S", 8.0)


def explicit_deadline_s() -> float:
    return _seconds("GHOSTFIM_EXPLICIT_DEADLINE_S", 120.0)


def hold_limit_s() -> float:
    return _seconds("GHOSTFIM_HOLD_LIMIT_S", 300.0)  # a first download may take minutes


def trace_path() -> str | None:
    return _text("GHOSTFIM_TRACE") or None


def debug() -> bool:
    return bool(_text("GHOSTFIM_DEBUG"))


def debug_protocol() -> bool:
    return _flag("GHOSTFIM_DEBUG_PROTOCOL")


def secret(name: str) -> str:
    """The value of the variable a setting names (an API key): read at each use."""
    return os.environ.get(name, "") if name else ""
