"""Acceptance statistics kept on this machine only: a bounded file in the user's state directory.

One JSON line per outcome (engine/service/acceptance.py): when, the language, where the cursor
was (end of line or mid-line, after which kind of character), accepted / partial / refused, the
characters taken and shown, and the time to ghost text. No code, no file names, nothing that
identifies what was typed; the file is never sent anywhere. `ghostfim stats` reads it, and the
adaptive filter (engine/service/filter.py) starts from it. The setting `acceptanceStats: false`
stops writing it.

Private: the file (and its lock and temporary files) is created with mode 0600, and one an older
version created readable by others is made 0600 at the next write. Every string field is cut to
MAX_FIELD characters, written or read, so an editor's language id cannot grow the file or a
reader's memory; a line longer than MAX_LINE (no record is) is skipped unread.

Bounded: past MAX_RECORDS lines the oldest are dropped, keeping the newest MAX_RECORDS // 2
(rewritten through a unique temporary file and an atomic rename), so the file stays under a few
megabytes whatever the user types.

Shared: every editor window runs a server, and they all write this one file. Each append and
each compaction happens under one lock (`acceptance.jsonl.lock`: flock, or a byte-range lock on
Windows, through filelock; the kernel releases it when a process dies), so an append never lands
in a file that a compaction is replacing (it would go to the old inode and vanish with it),
compactions never interleave, and each writer counts the lines the others appended. Lost
outcomes, exactly:

1. none to another process, its appends or its compactions;
2. when a process dies in the middle of its write: the lines it was writing (one, or those
   waiting below). A line cut short is skipped by readers, and the next writer starts a new one;
3. while another process holds the lock for more than LOCK_WAIT_S (only one stopped in the middle
   of a write holds it that long): outcomes wait in memory, are written by the next outcome that
   gets the lock, and past MAX_PENDING the oldest waiting is dropped and counted in `dropped`;
   those still waiting when the process exits are lost (at most MAX_PENDING);
4. when the file cannot be written at all (read-only home, full disk): told once, and that
   process keeps nothing more.

tests/unit/engine/service/test_localstats.py has processes write at once and accounts for every
outcome; tests/integration/test_localstats_servers.py does it with two `ghostfim serve`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from filelock import FileLock, Timeout

from ghostfim.engine import env
from ghostfim.engine.service.acceptance import Outcome

log = logging.getLogger("ghostfim.localstats")

FILE_NAME = "acceptance.jsonl"
MAX_RECORDS = 20_000  # about 3 MB
MAX_FIELD = 64  # characters of a string field: language ids are short ("typescriptreact")
MAX_LINE = 1024  # characters of a line: a record with every field at its longest is under 600
LOCK_WAIT_S = 1.0  # a holder appends or compacts (milliseconds); longer means it is stuck
MAX_PENDING = 1000  # outcomes kept in memory while another process holds the lock
_BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation


def _bounded(value: Any) -> str:
    return str(value)[:MAX_FIELD]


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
            _bounded(p.language),  # the editor's languageId: any length a client sends
            _bounded(p.position),
            _bounded(p.after),
            _bounded(outcome.kind),
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
        # Bounded again: the file may have been written by an older version, or by hand.
        return cls(
            float(data["t"]),
            _bounded(data.get("lang", "")),
            _bounded(data["pos"]),
            _bounded(data["after"]),
            _bounded(data["kind"]),
            int(data.get("chars", 0)),
            int(data.get("shown", 0)),
            float(data.get("ttgt", 0.0)),
            bool(data.get("explicit", False)),
        )


def default_path() -> Path:
    return env.state_dir() / FILE_NAME


class _Seen(NamedTuple):
    """The file as this process left it: what it need not count again."""

    device: int
    inode: int
    size: int
    lines: int


class LocalStats:
    """Appends outcomes to the file (when enabled) and reads it back."""

    def __init__(self, path: Path | None = None, *, enabled: bool = True) -> None:
        self.path = path or default_path()
        self.enabled = enabled
        # Between processes, and between threads of one (thread_local: each its own hold).
        self._lock = FileLock(f"{self.path}.lock", mode=0o600)
        self._pending: list[str] = []  # lines not written yet (the lock was busy)
        self._seen: _Seen | None = None
        self._broken = False  # a write failed (read-only home, full disk): told once
        self.dropped = 0  # outcomes never written: past MAX_PENDING while the lock was held
        self.compacted_away = 0  # oldest records this process's compactions removed

    def record(self, outcome: Outcome, now: float | None = None) -> None:
        if not self.enabled or self._broken:
            return
        line = json.dumps(Record.of(outcome, time.time() if now is None else now).as_json())
        self._pending.append(line)
        # Called on the server's event loop: wait for the lock only while nothing is waiting
        # yet. Once an outcome had to wait, the holder is stuck, and trying costs nothing.
        wait = LOCK_WAIT_S if len(self._pending) == 1 else 0.0
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            with self._lock.acquire(timeout=wait):
                self._write_pending()
        except Timeout:  # before OSError: filelock's Timeout is a TimeoutError
            if len(self._pending) == 1:
                log.warning(
                    "acceptance statistics: %s is held; outcomes wait", self._lock.lock_file
                )
            if len(self._pending) > MAX_PENDING:
                del self._pending[0]  # the oldest: the newest say more of what the user does now
                self.dropped += 1
        except OSError as exc:
            self._broken = True
            self._pending.clear()
            log.warning("acceptance statistics are not kept: cannot write %s: %s", self.path, exc)

    def _write_pending(self) -> None:
        """Append the waiting lines in one write, and compact past MAX_RECORDS (lock held)."""
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _BINARY, 0o600)
        try:
            _make_private(fd)
            st = os.fstat(fd)
            lines, cut_short = self._count(st)
            data = "".join(line + "\n" for line in self._pending).encode("utf-8")
            if cut_short:
                data = b"\n" + data  # end the line a dead writer left, or ours joins it
            _write_all(fd, data)
        finally:
            os.close(fd)
        lines += len(self._pending)
        self._pending.clear()
        self._seen = _Seen(st.st_dev, st.st_ino, st.st_size + len(data), lines)
        if lines > MAX_RECORDS:
            self._compact()

    def _count(self, st: os.stat_result) -> tuple[int, bool]:
        """Lines in the file, and whether its last one has no newline: counted from where this
        process left it when it is the same file, else from the start (another compacted)."""
        seen = self._seen
        if seen is not None and (seen.device, seen.inode) == (st.st_dev, st.st_ino):
            if seen.size <= st.st_size:
                start, lines = seen.size, seen.lines  # only what the others appended since
            else:
                start, lines = 0, 0
        else:
            start, lines = 0, 0
        if st.st_size == start:
            return lines, False  # ours was the last write: it ended its line
        last = b"\n"
        with open(self.path, "rb") as f:
            f.seek(start)
            while chunk := f.read(1 << 16):
                lines += chunk.count(b"\n")
                last = chunk[-1:]
        cut_short = last != b"\n"
        return lines + cut_short, cut_short

    def _compact(self) -> None:
        """Keep the newest MAX_RECORDS // 2 (lock held). Written to a temporary file of a unique
        name, then renamed over the file: a crash leaves the old file whole, and a reader
        without the lock sees the old file or the new one, never a mix."""
        for stale in self.path.parent.glob(f"{self.path.name}.*.tmp"):
            # Only a compaction, under this lock, makes one: any found now is a dead one's.
            with contextlib.suppress(OSError):
                stale.unlink()
        lines = list(_lines_of(self.path))
        keep = lines[-(MAX_RECORDS // 2) :]
        fd, tmp = tempfile.mkstemp(prefix=f"{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        try:  # mkstemp: mode 0600, a name no other process has
            with os.fdopen(fd, "wb") as f:
                f.write("".join(line + "\n" for line in keep).encode("utf-8"))
                f.flush()
                os.fsync(f.fileno())  # the rename must not publish an empty file after a crash
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self.compacted_away += len(lines) - len(keep)
        st = os.stat(self.path)
        self._seen = _Seen(st.st_dev, st.st_ino, st.st_size, len(keep))

    def records(self) -> list[Record]:
        """Every readable record, oldest first (a damaged or cut-short line is skipped)."""
        out = []
        for line in self._read():
            with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
                out.append(Record.from_json(json.loads(line)))
        return out

    def _read(self) -> list[str]:
        # Under the lock when it comes: on Windows a file open for reading cannot be renamed
        # over. On POSIX a read without it sees one whole file (the rename is atomic).
        if not self.path.exists():
            return []
        try:
            with self._lock.acquire(timeout=LOCK_WAIT_S):
                return list(_lines_of(self.path))
        except OSError:  # the lock's Timeout too, or a state directory that cannot be written
            return list(_lines_of(self.path))


def _make_private(fd: int) -> None:
    """0600 for a file an older version created with the umask's mode (POSIX only)."""
    if os.name == "posix" and stat.S_IMODE(os.fstat(fd).st_mode) & 0o077:
        os.fchmod(fd, 0o600)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _lines_of(path: Path) -> Iterator[str]:
    """The file's non-empty lines, reading no more than MAX_LINE characters of any."""
    try:
        with path.open(encoding="utf-8", errors="replace", newline="\n") as f:
            while line := f.readline(MAX_LINE + 1):
                if not line.endswith("\n") and len(line) > MAX_LINE:
                    while line and not line.endswith("\n"):  # no record is this long: skip it
                        line = f.readline(MAX_LINE + 1)
                    continue
                if line.strip():
                    yield line.rstrip("\n")
    except OSError:  # not there yet (or not readable): no records
        return
