"""Step 3 of `ghostfim setup`: llama-cpp-python, imported in a child to see what it is (missing,
crashing, another version, or without CUDA where an NVIDIA GPU and nvcc are), and installed or
built with engine/setup/build_flags.py's CMAKE_ARGS. Standard library only."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from ghostfim.engine.setup import build_flags
from ghostfim.engine.setup.child import run_python, which
from ghostfim.engine.setup.platforms import FIXES, SetupError, advice
from ghostfim.engine.setup.processes import (
    IMPORT_PROBE,
    LLAMA_REQUIREMENT,
    LlamaState,
    signal_name,
)
from ghostfim.engine.setup.steps import PROBE_TIMEOUT_S, Steps


class LlamaStep(Steps):
    """Installs or builds llama-cpp-python (the other steps: engine/setup/install.py)."""

    # ----------------------------------------------------------------- 3. llama

    def probe_llama(self) -> LlamaState:
        proc = run_python(
            ["-c", IMPORT_PROBE], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S
        )
        if proc.returncode < 0:
            return LlamaState(
                crashed=True, error=f"importing it died with {signal_name(proc.returncode)}"
            )
        lines = proc.stdout.strip().splitlines()
        try:
            found = json.loads(lines[-1]) if lines else {}
        except ValueError:
            found = {}
        if proc.returncode != 0 or not isinstance(found, dict) or not found:
            last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            return LlamaState(error=f"the probe failed (exit {proc.returncode}): {last}")
        if found.get("error"):
            return LlamaState(error=str(found["error"]))
        return LlamaState(
            version=str(found.get("version")),
            cuda=bool(found.get("cuda")),
            devices=int(found.get("devices") or 0),
            system=str(found.get("system", "")),
        )

    def wants_cuda(self) -> bool:
        return build_flags.wants_cuda()

    def cmake_args(self) -> str:
        """build_flags' CMAKE_ARGS; for CUDA, pip's cuBLAS first when the toolkit has none."""
        cuda = None
        if self.wants_cuda():
            toolkit = build_flags.find_cuda_toolkit()
            if toolkit is not None and not build_flags.toolkit_has_cublas(toolkit):
                requirement = build_flags.cublas_requirement(toolkit.version)
                if build_flags.find_pip_cublas(toolkit.version[0], build_flags.site_dirs()) is None:
                    self.pip(["install", requirement], "llama")
            try:
                cuda = build_flags.detect_cuda_build()
            except build_flags.CudaBuildError as exc:
                raise SetupError(f"cannot build with CUDA: {exc}") from None
        named = os.environ.get("GHOSTFIM_CPU_FEATURES")
        flags = set(named.split()) if named else build_flags.cpu_flags()
        return build_flags.cmake_args(flags, cuda=cuda)

    def build_tools(self, step: str) -> None:
        """Before a build from source: a compiler or say what installs one; cmake is noted
        (scikit-build-core fetches it from PyPI when there is none)."""
        if not self.has_compiler():
            raise SetupError(
                "llama.cpp must be built here and no C/C++ compiler was found", missing="compiler"
            )
        if which("cmake") is None:
            self.emit(
                step,
                "note",
                message="no cmake on PATH: the build fetches one from PyPI "
                f"(to install it: {advice('cmake', self.platform)})",
                missing="cmake",
                fix=FIXES["cmake"],
            )

    def has_compiler(self) -> bool:
        if sys.platform == "win32":
            vswhere = Path(os.environ.get("PROGRAMFILES(X86)", r"C:\Program Files (x86)"))
            vswhere = vswhere / "Microsoft Visual Studio" / "Installer" / "vswhere.exe"
            return which("cl") is not None or vswhere.is_file()
        if sys.platform == "darwin":
            # /usr/bin/clang++ is there without the tools too: it only offers to install them.
            probe = subprocess.run(["xcode-select", "-p"], capture_output=True, check=False)
            return probe.returncode == 0
        cxx = os.environ.get("CXX")
        if cxx and (which(cxx) or Path(cxx).is_file()):
            return True
        return any(which(name) for name in ("c++", "g++", "clang++"))

    def step_llama(self, *, force: bool = False) -> LlamaState:
        started = time.monotonic()
        want = build_flags.LLAMA_CPP_PYTHON_VERSION
        state = self.probe_llama()
        cuda = self.wants_cuda()
        if state.importable and state.version == want and (state.cuda or not cuda) and not force:
            self.emit("llama", "done", message=self._describe(state))
            return state
        if force:
            why = "rebuilding from source"
        elif state.crashed:
            why = f"the installed build crashes ({state.error}): rebuilding it"
        elif not state.importable and state.error and "No module named" not in state.error:
            why = f"the installed build does not load ({state.error}): installing it again"
        elif state.version not in (None, want):
            why = f"llama-cpp-python {state.version} is installed, ghostfim needs {want}"
        elif state.importable:
            why = "this machine has an NVIDIA GPU and nvcc, the build has no CUDA: rebuilding"
        else:
            why = f"installing llama-cpp-python {want}"
        self.emit("llama", "start", message=why)
        args = self.cmake_args()
        self.log.write(f"CMAKE_ARGS={args}")
        self.install_llama(args, from_source=force or state.crashed or cuda)
        self.changed.append("llama")
        state = self.probe_llama()
        if not state.importable:
            raise SetupError(f"llama-cpp-python was installed but does not load: {state.error}")
        if cuda and not state.cuda:
            raise SetupError("llama-cpp-python was built with CUDA but has no CUDA backend")
        self.emit(
            "llama",
            "done",
            message=self._describe(state),
            elapsed_s=round(time.monotonic() - started, 1),
        )
        return state

    def install_llama(self, args: str, *, from_source: bool) -> None:
        """A build made for these flags before (our wheel folder) is installed as it is.
        Otherwise, for a plain CPU build, pip installs with CMAKE_ARGS (its wheel cache may hold
        the build; the decode check catches one made with other flags); for CUDA, or after a
        crash, the build goes to the folder for these flags, never to pip's cache."""
        folder = build_flags.wheel_dir(args)
        built = sorted(folder.glob("llama_cpp_python-*.whl"))
        extra = {"CMAKE_ARGS": args}
        if built and not (from_source and self.options.rebuild):
            self.pip(["install", "--no-deps", "--force-reinstall", str(built[-1])], "llama")
            self.pip(["install", str(built[-1])], "llama")  # its own dependencies, if missing
            return
        if not from_source:
            try:
                self.pip(["install", LLAMA_REQUIREMENT], "llama", extra_env=extra, verbose=True)
                return
            except SetupError:
                if not self.has_compiler():
                    raise SetupError(
                        "building llama.cpp failed: no C/C++ compiler was found", missing="compiler"
                    ) from None
                raise
        self.build_tools("llama")
        folder.mkdir(parents=True, exist_ok=True)
        self.pip(
            ["wheel", "--no-deps", "--no-cache-dir", "-w", str(folder), LLAMA_REQUIREMENT],
            "llama",
            extra_env=extra,
            verbose=True,
        )
        built = sorted(folder.glob("llama_cpp_python-*.whl"))
        if not built:
            raise SetupError(f"pip built no llama-cpp-python wheel into {folder}")
        self.pip(["install", "--no-deps", "--force-reinstall", str(built[-1])], "llama")
        self.pip(["install", str(built[-1])], "llama")

    @staticmethod
    def _describe(state: LlamaState) -> str:
        gpu = f"CUDA build, {state.devices} GPU(s) visible" if state.cuda else "CPU build"
        features = re.findall(r"\b(AVX512|AVX2|AVX|NEON|METAL|AMX_INT8)\s*=\s*1", state.system)
        shown = f" ({', '.join(dict.fromkeys(features))})" if features else ""
        return f"llama-cpp-python {state.version}, {gpu}{shown}"
