"""What every step of `ghostfim setup` shares: its options and outcome, the reporting of each step,
and pip run with its output logged and its progress reported (engine/setup/install.py runs the
steps). Standard library only."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ghostfim.engine.setup.child import python_command
from ghostfim.engine.setup.platforms import (
    FIXES,
    WHAT_IS_MISSING,
    SetupError,
    advice,
    this_platform,
)
from ghostfim.engine.setup.processes import BuildProgress, stream, ticking
from ghostfim.engine.setup.reporting import Log, Reporter

# The checks load a model and decode: a cold disk and a busy machine take a while.
PROBE_TIMEOUT_S = 300
TICK_S = 1.0  # how often a long step reports its elapsed time


# --------------------------------------------------------------------------- the steps

STEP_TITLES = {
    "python": "Python",
    "packages": "packages",
    "llama": "llama.cpp",
    "model": "model",
    "check": "decode check",
    "setup": "setup",
}


@dataclass
class Options:
    json: bool = False
    verbose: bool = False
    model: str | None = None  # a preset; None: the default for this machine
    rebuild: bool = False  # build llama-cpp-python from source even if it works


@dataclass
class Outcome:
    ready: bool
    changed: list[str] = field(default_factory=list)
    server: str | None = None


class Steps:
    """What the steps share; engine/setup/install.py `Setup` runs them in order."""

    def __init__(self, reporter: Reporter, log: Log, options: Options) -> None:
        self.reporter = reporter
        self.log = log
        self.options = options
        self.changed: list[str] = []
        self.platform = this_platform()
        self.installer: list[str] = python_command(["-m", "pip"])
        self.rebuilt = False

    # ----------------------------------------------------------------- helpers

    def emit(self, step: str, event: str, **fields: Any) -> None:
        self.reporter.emit(step, event, title=STEP_TITLES.get(step, step), **fields)

    def fail(self, step: str, error: SetupError) -> None:
        fields: dict[str, Any] = {"message": str(error), "log": str(self.log.path)}
        if error.missing:
            fields["missing"] = error.missing
            fields["what"] = WHAT_IS_MISSING[error.missing]
            fields["fix"] = FIXES[error.missing]
            fields["fix_text"] = advice(error.missing, self.platform)
        if error.log_tail:
            fields["output"] = error.log_tail
        self.emit(step, "error", **fields)

    def pip(
        self,
        args: Sequence[str],
        step: str,
        *,
        extra_env: dict[str, str] | None = None,
        verbose: bool = False,
    ) -> None:
        """pip ARGS, its output to the log; a failure raises with its last lines. A long one
        reports the build's phase (from pip -v's output) and the time so far every second."""
        cmd = [*self.installer, *args, "--disable-pip-version-check", "--no-input"]
        cmd += ["--progress-bar", "off", "-v"] if verbose else ["--progress-bar", "off"]
        self.log.write(f"$ {' '.join(cmd)}")
        progress = BuildProgress()
        started = time.monotonic()

        def on_line(line: str) -> None:
            self.log.write(line)
            progress.feed(line)

        def tick() -> None:
            fields: dict[str, Any] = {
                "phase": progress.phase,
                "elapsed_s": round(time.monotonic() - started, 1),
            }
            if progress.percent is not None:
                fields["percent"] = round(progress.percent, 1)
            self.emit(step, "progress", **fields)

        with ticking(TICK_S, tick):
            rc = stream(cmd, on_line, extra_env=extra_env)
        if rc != 0:
            raise SetupError(f"`pip {args[0]}` failed (exit {rc})", log_tail=self.log.last_lines())
