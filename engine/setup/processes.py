"""What `ghostfim setup` runs and reads: ghostfim's own requirements, pip's and the build's output
(the build's phase, from CMake's and ninja's progress lines), and the child Python that imports
llama-cpp-python to see what it is. Standard library only (engine/setup/install.py)."""

from __future__ import annotations

import contextlib
import fnmatch
import importlib
import importlib.metadata
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ghostfim.engine.setup import build_flags
from ghostfim.engine.setup.child import child_env, child_workdir
from ghostfim.engine.setup.platforms import SetupError

DIST = "ghostfim"
LLAMA = "llama-cpp-python"
LLAMA_REQUIREMENT = f"{LLAMA}=={build_flags.LLAMA_CPP_PYTHON_VERSION}"

# --------------------------------------------------------------------------- requirements


def normalize_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(text: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", text)
    return normalize_name(match.group(1)) if match else ""


def runtime_requirements(dist: str = DIST) -> list[str]:
    """ghostfim's own dependencies as its metadata lists them, without the extras' (tests)."""
    try:
        requires = importlib.metadata.requires(dist) or []
    except importlib.metadata.PackageNotFoundError:
        raise SetupError(
            f"{dist} is not installed in {sys.prefix}: install its wheel first"
        ) from None
    return [r for r in requires if not re.search(r"\bextra\s*==", r)]


def missing_requirements(requirements: Sequence[str]) -> list[str]:
    """The requirements this environment does not satisfy. Without `packaging` (an environment
    where nothing is installed yet) every one counts as missing, and pip decides."""
    try:
        from packaging.requirements import InvalidRequirement, Requirement
    except ImportError:
        return list(requirements)
    missing = []
    for text in requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            missing.append(text)
            continue
        if req.marker is not None and not req.marker.evaluate():
            continue
        try:
            have = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(text)
            continue
        if req.specifier and not req.specifier.contains(have, prereleases=True):
            missing.append(text)
    return missing


# --------------------------------------------------------------------------- the build's phases

_NINJA = re.compile(r"^\s*\[(\d+)/(\d+)\]")
_MAKE = re.compile(r"^\s*\[\s*(\d+)%\]")
# pip's and scikit-build-core's lines that start a phase (pip -v shows the backend's output).
_PHASES = (
    (
        re.compile(r"Using cached llama_cpp_python-.*\.whl|Processing .*llama_cpp_python-.*\.whl"),
        "installing a build made before",
    ),
    (
        re.compile(r"Downloading llama_cpp_python-|Collecting llama-cpp-python"),
        "downloading the source",
    ),
    (
        re.compile(
            r"Installing build dependencies|Getting requirements to build|Preparing metadata"
            r"|Building wheel for llama"
        ),
        "preparing the build",
    ),
    (
        re.compile(r"\*\*\* Configuring CMake|^-- (The C|Detecting|Found|Configuring)"),
        "configuring",
    ),
    (re.compile(r"\*\*\* Building project"), "compiling"),
    (
        re.compile(r"\*\*\* (Installing project|Making wheel)|Created wheel for llama"),
        "packaging the build",
    ),
    # Not indented: pip's own, not that of the build's isolated environment.
    (re.compile(r"^Installing collected packages"), "installing"),
)


@dataclass
class BuildProgress:
    """The phase and the compile percentage of a pip build, from its output lines."""

    phase: str = "starting pip"
    percent: float | None = None

    def feed(self, line: str) -> None:
        count = _NINJA.match(line)
        if count:
            done, total = int(count.group(1)), int(count.group(2))
            self.phase = "compiling"
            self.percent = 100.0 * done / total if total else None
            return
        percent = _MAKE.match(line)
        if percent:
            self.phase = "compiling"
            self.percent = float(percent.group(1))
            return
        for pattern, phase in _PHASES:
            if pattern.search(line):
                if phase != self.phase:
                    self.percent = None
                self.phase = phase
                return


# --------------------------------------------------------------------------- child processes


def stream(
    cmd: Sequence[str],
    on_line: Callable[[str], None],
    *,
    extra_env: dict[str, str] | None = None,
) -> int:
    """Run `cmd` in ghostfim's cache directory, its output (stdout and stderr) line by line."""
    proc = subprocess.Popen(
        list(cmd),
        cwd=child_workdir(),
        env=child_env(extra_env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    )
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            on_line(line.rstrip("\r\n"))
    except BaseException:
        proc.kill()
        raise
    finally:
        proc.stdout.close()
    return proc.wait()


@contextlib.contextmanager
def ticking(every_s: float, tick: Callable[[], None]) -> Iterator[None]:
    """Call `tick` every `every_s` seconds in a thread while the block runs."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(every_s):
            tick()

    thread = threading.Thread(target=loop, name="ghostfim-setup-tick", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def tree_bytes(root: Path, pattern: str = "*") -> int:
    """Bytes of the files matching `pattern` under `root` (files vanish while pip works: those
    count as 0)."""
    total = 0
    for folder, _, files in os.walk(root):
        for name in fnmatch.filter(files, pattern):
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(folder, name)).st_size
    return total


# llama-cpp-python, imported in a child: a build that crashes the process (SIGILL, SIGSEGV)
# crashes the child. The CUDA question is asked of ggml's registry (device.cuda_backend).
IMPORT_PROBE = r"""
import json, sys
try:
    import llama_cpp
    from ghostfim.engine.setup.device import cuda_backend
    backend = cuda_backend()
except Exception as exc:
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
    sys.exit(0)
print(json.dumps({
    "version": llama_cpp.__version__,
    "cuda": backend.compiled,
    "devices": backend.devices,
    "system": llama_cpp.llama_print_system_info().decode(errors="replace").strip(),
}))
"""


@dataclass(frozen=True)
class LlamaState:
    """What the import probe found. `crashed`: the child died of a signal."""

    version: str | None = None
    cuda: bool = False
    devices: int = 0
    system: str = ""
    error: str | None = None
    crashed: bool = False

    @property
    def importable(self) -> bool:
        return self.version is not None and self.error is None and not self.crashed


def signal_name(returncode: int) -> str:
    import signal

    with contextlib.suppress(ValueError):
        return signal.Signals(-returncode).name
    return f"signal {-returncode}"
