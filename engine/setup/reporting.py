"""What `ghostfim setup` reports: lines and progress for a person, or one JSON object per line
for the editors (`--json`), and the log of everything pip and the build print. Standard library
only (engine/setup/install.py)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import IO, Any, Protocol

# --------------------------------------------------------------------------- reporting


class Reporter(Protocol):
    """Where the steps' events go: `event` is start, progress, note, done or error."""

    def emit(self, step: str, event: str, **fields: Any) -> None: ...

    def close(self) -> None: ...


class JsonReporter:
    """One JSON object per line on `out`, flushed at once: editors read them as they come."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.lock = threading.Lock()

    def emit(self, step: str, event: str, **fields: Any) -> None:
        line = json.dumps({"step": step, "event": event, **fields}, sort_keys=False)
        with self.lock:
            self.out.write(line + "\n")
            self.out.flush()

    def close(self) -> None:
        pass


def format_duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}" if seconds >= 60 else f"{seconds} s"


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit in ("B", "KiB") else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover - the loop returns


class TerminalReporter:
    """Lines for a person. A step's progress is one line on `err` rewritten in place on a
    terminal (the build's phase and elapsed time), or a tqdm bar in bytes for a download;
    without a terminal, only changes of phase are written."""

    def __init__(self, out: IO[str], err: IO[str]) -> None:
        self.out = out
        self.err = err
        self.tty = err.isatty()
        self.lock = threading.Lock()
        self.status_width = 0
        self.last_phase: dict[str, str] = {}
        self.bar: Any = None
        self.bar_step = ""

    def _clear_status(self) -> None:
        if self.status_width:
            self.err.write("\r" + " " * self.status_width + "\r")
            self.err.flush()
            self.status_width = 0

    def _close_bar(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def emit(self, step: str, event: str, **fields: Any) -> None:
        with self.lock:
            if event == "progress":
                self._progress(step, fields)
                return
            self._close_bar()
            self._clear_status()
            message = fields.get("message", "")
            if event == "start":
                if step == "setup":
                    self.out.write(f"ghostfim setup: {message}\n")
                else:
                    self.out.write(f"[..]   {fields.get('title', step)}: {message}\n")
            elif event == "note":
                self.out.write(f"       {step}: {message}\n")
            elif event == "done" and step == "setup":
                self.out.write(f"{message}\n")
            elif event == "done":
                took = fields.get("elapsed_s")
                suffix = f" ({format_duration(took)})" if took and took >= 1 else ""
                self.out.write(f"[ok]   {fields.get('title', step)}: {message}{suffix}\n")
            elif event == "error" and step == "setup":
                self.out.write(f"not ready: {message}\n")
            elif event == "error":
                self.out.write(f"[FAIL] {fields.get('title', step)}: {message}\n")
                if fields.get("fix"):
                    what = fields.get("what", "it")
                    self.out.write(f"       to install {what}: {fields['fix_text']}\n")
                if fields.get("log"):
                    self.out.write(f"       the whole output: {fields['log']}\n")
            self.out.flush()

    def _progress(self, step: str, fields: dict[str, Any]) -> None:
        total = fields.get("total")
        if "bytes" in fields and fields.get("phase") == "downloading":
            self._clear_status()
            if self.bar is None or self.bar_step != step:
                self._close_bar()
                from tqdm import tqdm  # installed by the packages step, before any download

                self.bar = tqdm(
                    total=total,
                    desc=f"{fields.get('title', step)}: downloading",
                    unit="B",
                    unit_scale=True,
                    unit_divisor=1024,
                    file=self.err,
                    leave=False,
                )
                self.bar_step = step
            self.bar.update(max(0, int(fields["bytes"]) - self.bar.n))
            return
        self._close_bar()
        phase = str(fields.get("phase", ""))
        percent = fields.get("percent")
        text = f"{fields.get('title', step)}: {phase}"
        if percent is not None:
            text += f" {percent:.0f}%"
        if fields.get("bytes") is not None and total:
            text += f" ({format_bytes(fields['bytes'])} of {format_bytes(total)})"
        text += f" · {format_duration(fields.get('elapsed_s', 0))}"
        if self.tty:
            self._clear_status()
            self.err.write(text)
            self.status_width = len(text)
            self.err.flush()
        elif self.last_phase.get(step) != phase:
            self.last_phase[step] = phase
            self.err.write(text + "\n")
            self.err.flush()

    def close(self) -> None:
        with self.lock:
            self._close_bar()
            self._clear_status()


class Log:
    """The output of pip and of the build: a file kept after the run, and, when asked, stderr."""

    def __init__(self, path: Path, echo: IO[str] | None) -> None:
        self.path = path
        self.echo = echo
        self.lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = path.open("w", encoding="utf-8", errors="replace")
        self.tail: list[str] = []

    def write(self, line: str) -> None:
        with self.lock:
            self.file.write(line + "\n")
            self.file.flush()
            self.tail = [*self.tail[-39:], line]
            if self.echo is not None:
                self.echo.write(line + "\n")
                self.echo.flush()

    def last_lines(self, n: int = 15) -> str:
        return "\n".join(self.tail[-n:])

    def close(self) -> None:
        self.file.close()
