"""The editor's side of a document, computed independently of the server: positions by regex
and code units, the text that breaks position arithmetic, digests, and the process's memory.

Shared by the reliability, soak and fuzz tests (tests/integration/) and their own unit test
(tests/unit/support/test_clientdoc.py), so a mismatch means the server.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_EOL = re.compile(r"\r\n|\r|\n")

# What makes positions and line splitting hard, mixed into ordinary code.
TRICKY = [
    "😀", "👩‍💻", "𝔘𝔫𝔦", "🇯🇵", "中文字符", "한국어", "e\u0301", "a\u0308\u0323", "שלום",
    "\t", "\t\t", "\r\n", "\r", "\n", "\x00", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85",
    "\u2028", "\u2029", "\ufeff", "\u200b", "\r\r\n", "\n\r",
]  # fmt: skip
CODE = [
    "def ", "return ", "self.", "value", " = ", "(", ")", ":", ",", " ", "    ", "if x:",
    "for i in range(n):", "print(", "'s'", '"""doc"""', "# note", "import os", "x + 1",
    "class A:", "[1, 2]", "{}", "None", "lambda: 0",
]  # fmt: skip


def snippet(rng: random.Random, pieces: int) -> str:
    return "".join(
        rng.choice(TRICKY) if rng.random() < 0.3 else rng.choice(CODE) for _ in range(pieces)
    )


def units(text: str, encoding: str) -> int:
    """Code units of text in the client's position encoding."""
    if encoding == "utf-8":
        return len(text.encode("utf-8", "surrogatepass"))
    if encoding == "utf-32":
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class ClientDoc:
    """The editor's copy of a document, and LSP positions computed independently of the
    server (Python string offsets, line breaks found by regex, units by encoding)."""

    uri: str
    text: str
    encoding: str
    version: int = 1

    def snap(self, offset: int) -> int:
        """An offset an LSP position can name: not between the \\r and \\n of a CRLF."""
        offset = max(0, min(offset, len(self.text)))
        if 0 < offset < len(self.text) and self.text[offset - 1 : offset + 1] == "\r\n":
            offset -= 1
        return offset

    def position(self, offset: int) -> dict[str, int]:
        line, start = 0, 0
        for m in _EOL.finditer(self.text, 0, offset):
            line, start = line + 1, m.end()
        return {"line": line, "character": units(self.text[start:offset], self.encoding)}

    def line_count(self) -> int:
        return len(_EOL.findall(self.text)) + 1

    def replace(self, start: int, end: int, new: str) -> dict[str, Any]:
        """Apply an edit to the client's copy; returns the LSP change (positions before it)."""
        change = {
            "range": {"start": self.position(start), "end": self.position(end)},
            "text": new,
        }
        self.text = self.text[:start] + new + self.text[end:]
        return change

    def clamped_offset(self, line: int, character: int) -> int:
        """vscode-languageserver-textdocument's offsetAt, on the client's copy."""
        starts = [0] + [m.end() for m in _EOL.finditer(self.text)]
        if line >= len(starts):
            return len(self.text)
        if line < 0:
            return 0
        end = starts[line + 1] if line + 1 < len(starts) else len(self.text)
        while end > starts[line] and self.text[end - 1] in "\r\n":
            end -= 1
        k = starts[line]
        while k < end and units(self.text[starts[line] : k + 1], self.encoding) <= character:
            k += 1
        return k


def rss_mb(pid: int) -> float:
    return proc_status(pid, "VmRSS") / 1024


def rss_anon_mb(pid: int) -> float:
    return proc_status(pid, "RssAnon") / 1024


def threads(pid: int) -> int:
    return int(proc_status(pid, "Threads"))


def proc_status(pid: int, key: str) -> float:
    """A field of /proc/<pid>/status (kB for the memory ones)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return float(line.split()[1])
    raise KeyError(key)
