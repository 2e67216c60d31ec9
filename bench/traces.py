"""Keystroke traces: lines of real source files (not ours) typed at a human pace.

A trace takes a file, picks lines in it, and for each one empties the line after its
indentation (a jump, not a keystroke) and types it back one character at a time. Delays come
from a seeded model of typing: bursts around 8-10 characters a second with some variance, a
thinking pause now and then after a word, and a long pause at the end of each line.
Every keystroke state records what the user will type next on the line: the ground truth for
"was the ghost text right".

How often the typist stops to think is `think_rate`, the chance of a 0.4-1.5 s pause after a
character that ends a word (" .(,:="). The `classic` traces (0.12, the default here) are the
ones every latency table so far was measured on; they have only a handful of pauses in the
middle of a line (4 in the default 667 keystroke states), too few to see what a user who reads
the ghost text takes. The `thinking` traces (0.5: a pause after every second word, 42 in the
middle of a line in the same 667 states) are what bench/replay.py uses for its accepting
users. Given the same seed and rate a trace is the same on every run; with rate 0.12 it is
exactly the trace of earlier runs.
"""

from __future__ import annotations

import glob
import os
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PAUSE_MS = 400.0  # a gap at least this long before the next keystroke is a pause
END_OF_LINE_PAUSE_MS = 1500.0
TYPING_MEDIAN_MS = 110.0  # the median gap between two keystrokes of a burst
THINK_RATES = {"classic": 0.12, "thinking": 0.5}  # chance of a pause after a word's end


@dataclass(frozen=True)
class Edit:
    """An LSP content change: replace [start, end) (line, UTF-16 character) with text."""

    start: tuple[int, int]
    end: tuple[int, int]
    text: str

    def to_lsp(self) -> dict[str, object]:
        return {
            "range": {
                "start": {"line": self.start[0], "character": self.start[1]},
                "end": {"line": self.end[0], "character": self.end[1]},
            },
            "text": self.text,
        }


@dataclass(frozen=True)
class Keystroke:
    at_ms: float  # when it is typed, from the trace's start
    edit: Edit  # the change it makes
    text: str  # the document after it
    line: int  # cursor after it (LSP, UTF-16)
    character: int
    offset: int  # cursor as a character offset into text
    rest_of_line: str  # what the user will still type on this line (ground truth)
    gap_ms: float  # time until the next keystroke (or the jump to the next line)
    jump: bool = False  # emptying a line before typing it: a change, not a typed character

    @property
    def is_pause(self) -> bool:
        return self.gap_ms >= PAUSE_MS


@dataclass(frozen=True)
class Trace:
    name: str
    language: str
    path: str
    initial_text: str
    keystrokes: list[Keystroke]


def utf16_len(text: str) -> int:
    return sum(2 if ord(c) > 0xFFFF else 1 for c in text)


class TypingModel:
    """Seeded inter-key delays: lognormal bursts, occasional thinking pauses after words."""

    def __init__(
        self,
        seed: int,
        median_ms: float = TYPING_MEDIAN_MS,
        think_rate: float = THINK_RATES["classic"],
    ) -> None:
        self.rng = random.Random(seed)
        self.median_ms = median_ms
        self.think_rate = think_rate

    def gap_after(self, ch: str) -> float:
        gap = self.rng.lognormvariate(0, 0.35) * self.median_ms
        # The rate changes no other draw: with the classic rate the trace is the old one.
        if ch in " .(,:=" and self.rng.random() < self.think_rate:
            gap += self.rng.uniform(400, 1500)  # stops to think
        return max(30.0, min(gap, 3000.0))


def _candidate_lines(lines: list[str]) -> list[int]:
    out = []
    for i, line in enumerate(lines):
        body = line.strip()
        if 12 <= len(body) <= 90 and not body.startswith(("#", "//", "--", "*", "/*")):
            out.append(i)
    return out


def make_trace(
    path: Path,
    language: str,
    *,
    lines_per_file: int,
    seed: int,
    think_rate: float = THINK_RATES["classic"],
) -> Trace | None:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    text = text.replace("\r\n", "\n")
    lines = text.split("\n")
    rng = random.Random(f"{seed}:{path.name}")
    candidates = _candidate_lines(lines)
    if len(candidates) < lines_per_file:
        return None
    chosen = sorted(rng.sample(candidates[len(candidates) // 10 :], lines_per_file))
    typing = TypingModel(seed + len(path.name), think_rate=think_rate)
    keystrokes: list[Keystroke] = []
    now = 0.0
    doc = lines[:]
    for line_no in chosen:
        original = doc[line_no]
        indent = original[: len(original) - len(original.lstrip())]
        body = original[len(indent) :]
        # The jump: empty the line after its indentation.
        doc[line_no] = indent
        col = utf16_len(indent)
        jump = Edit((line_no, col), (line_no, utf16_len(original)), "")
        now += 800.0
        jump_at = now
        now += 300.0  # the first character follows the jump
        current = "\n".join(doc)
        offset = sum(len(s) + 1 for s in doc[:line_no]) + len(indent)
        keystrokes.append(
            Keystroke(jump_at, jump, current, line_no, col, offset, body, 300.0, True)
        )
        typed = ""
        for i, ch in enumerate(body):
            before_col = utf16_len(indent + typed)
            typed += ch
            doc[line_no] = indent + typed
            current = "\n".join(doc)
            gap = END_OF_LINE_PAUSE_MS if i == len(body) - 1 else typing.gap_after(ch)
            offset = sum(len(s) + 1 for s in doc[:line_no]) + len(indent) + len(typed)
            keystrokes.append(
                Keystroke(
                    now,
                    Edit((line_no, before_col), (line_no, before_col), ch),
                    current,
                    line_no,
                    before_col + utf16_len(ch),
                    offset,
                    body[i + 1 :],
                    gap,
                )
            )
            now += gap
        doc[line_no] = original
    return Trace(f"{language}:{path.name}", language, str(path), text, keystrokes)


def default_sources() -> list[tuple[str, Path]]:
    """Real files this project did not write, in several languages, found on this machine."""
    site = Path(next(p for p in sys.path if p.endswith("site-packages")))
    patterns = [
        ("python", str(site / "pygls" / "workspace" / "text_document.py")),
        ("python", str(site / "cachetools" / "__init__.py")),
        ("javascript", "/usr/lib/node_modules/npm/lib/commands/install.js"),
        ("javascript", "/usr/lib/node_modules/npm/lib/utils/*.js"),
        ("lua", "/usr/share/nvim/runtime/lua/vim/shared.lua"),
        ("cpp", os.path.expanduser("~/.cache/ghostfim/bench/llama.cpp/src/llama-sampler.cpp")),
        ("c", os.path.expanduser("~/.cache/ghostfim/bench/llama.cpp/ggml/src/ggml-alloc.c")),
    ]
    found: list[tuple[str, Path]] = []
    for language, pattern in patterns:
        matches = sorted(glob.glob(pattern))
        if matches:
            found.append((language, Path(matches[0])))
    return found


def build_traces(
    *,
    files: int = 6,
    lines_per_file: int = 3,
    seed: int = 7,
    think_rate: float = THINK_RATES["classic"],
) -> list[Trace]:
    traces = []
    for language, path in default_sources():
        trace = make_trace(
            path, language, lines_per_file=lines_per_file, seed=seed, think_rate=think_rate
        )
        if trace is not None:
            traces.append(trace)
        if len(traces) >= files:
            break
    return traces


Record = dict[str, Any]


def new_record(trace: Trace, index: int, k: Keystroke, carried: str, **extra: Any) -> Record:
    """A keystroke state before anything is known of its answer, in the format every replay
    client reports (bench/replay.py). `extra` adds or overrides keys; those starting with _
    are the client's own bookkeeping, dropped from the report."""
    return {
        "trace": trace.name,
        "index": index,
        "at_ms": k.at_ms,
        "gap_ms": k.gap_ms,
        "is_pause": k.is_pause,
        "rest_of_line": k.rest_of_line,
        "shown_at_ms": 0.0 if carried else None,
        "shown_text": carried,
        "requested": True,
        "source": "none",
        "ttft_ms": None,
        "prompt_tokens": None,
        "reused_tokens": None,
        "generated_tokens": None,
        "cancelled": False,
        "_closed": False,
        **extra,
    }
