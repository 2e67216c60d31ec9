"""Acceptance statistics kept on this machine only: a bounded file in the user's state directory.

One JSON line per outcome (engine/service/acceptance.py): when, the language, where the cursor
was (end of line or mid-line, after which kind of character), accepted / partial / refused, the
characters taken and shown, and the time to ghost text. No code, no file names, nothing that
identifies what was typed; the file is never sent anywhere. `ghostfim stats` reads it, and the
adaptive filter (engine/service/filter.py) starts from it. The setting `acceptanceStats: false`
stops writing it.

Bounded: past MAX_RECORDS lines the oldest half is dropped (the file is rewritten, atomically),
so it stays under a few megabytes whatever the user types.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ghostfim.engine import env
from ghostfim.engine.service.acceptance import Outcome

log = logging.getLogger("ghostfim.localstats")

FILE_NAME = "acceptance.jsonl"
MAX_RECORDS = 20_000  # about 2 MB


@dataclass(frozen=True)
class Record:
    """One outcome as the file keeps it."""

    time: float  # seconds since the epoch
    language: str
    position: str  # end | closers | mid
    after: str  # indent | word | space | dot | open | operator | colon | quote | other
    kind: str  # accepted | partial | refused
    chars: int  # characters taken by this event
    shown: int  # characters the suggestion showed
    ttgt_ms: float  # from the keystroke to the answer
    explicit: bool

    @property
    def place_key(self) -> str:
        return f"{self.language or '?'}|{self.position}|{self.after}"

    @classmethod
    def of(cls, outcome: Outcome, now: float) -> Record:
        p = outcome.place
        return cls(
            round(now, 1),
            p.language,
            p.position,
            p.after,
            outcome.kind,
            outcome.chars,
            outcome.shown_chars,
            round(outcome.ttgt_ms, 1),
            outcome.explicit,
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "t": self.time,
            "lang": self.language,
            "pos": self.position,
            "after": self.after,
            "kind": self.kind,
            "chars": self.chars,
            "shown": self.shown,
            "ttgt": self.ttgt_ms,
            "explicit": self.explicit,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Record:
        return cls(
            float(data["t"]),
            str(data.get("lang", "")),
            str(data["pos"]),
            str(data["after"]),
            str(data["kind"]),
            int(data.get("chars", 0)),
            int(data.get("shown", 0)),
            float(data.get("ttgt", 0.0)),
            bool(data.get("explicit", False)),
        )


def default_path() -> Path:
    return env.state_dir() / FILE_NAME


class LocalStats:
    """Appends outcomes to the file (when enabled) and reads it back."""

    def __init__(self, path: Path | None = None, *, enabled: bool = True) -> None:
        self.path = path or default_path()
        self.enabled = enabled
        self._lines: int | None = None  # counted on the first write
        self._broken = False  # a write failed (read-only home, full disk): told once

    def record(self, outcome: Outcome, now: float | None = None) -> None:
        if not self.enabled or self._broken:
            return
        line = json.dumps(Record.of(outcome, time.time() if now is None else now).as_json())
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self._lines is None:
                self._lines = sum(1 for _ in _lines_of(self.path))
            with self.path.open("a", encoding="utf-8") as f:
                f.write(line + "\n")
            self._lines += 1
            if self._lines > MAX_RECORDS:
                self._compact()
        except OSError as exc:
            self._broken = True
            log.warning("acceptance statistics are not kept: cannot write %s: %s", self.path, exc)

    def _compact(self) -> None:
        """Keep the newer half (rewritten atomically: a crash leaves the old file whole)."""
        keep = list(_lines_of(self.path))[-(MAX_RECORDS // 2) :]
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text("".join(line + "\n" for line in keep), encoding="utf-8")
        os.replace(tmp, self.path)
        self._lines = len(keep)

    def records(self) -> list[Record]:
        """Every readable record, oldest first (a damaged line is skipped)."""
        out = []
        for line in _lines_of(self.path):
            with contextlib.suppress(ValueError, KeyError, TypeError):
                out.append(Record.from_json(json.loads(line)))
        return out


def _lines_of(path: Path) -> Iterator[str]:
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.strip():
                    yield line.rstrip("\n")
    except OSError:  # not there yet (or not readable): no records
        return
