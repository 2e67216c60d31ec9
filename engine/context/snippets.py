"""Code from elsewhere in the workspace that looks like the code before the cursor.

A definition tells the model a name's signature; it does not show how the project calls it.
The project's other files usually do: the same helper called with the same arguments, a sibling
class written the same way. Retrieval by similarity finds them (RepoCoder's sparse retrieval,
Copilot's "similar snippets"): the workspace's files are cut into overlapping windows of lines,
each window keeps the set of identifiers it uses, and a request's query is the identifiers of
the lines just before the cursor. The windows with the highest Jaccard similarity win.

Pure functions on text: the workspace index (engine/context/index.py) owns the windows of its
files; engine/service/workspace.py asks for them per request; engine/prompt/ lays them out.
"""

from __future__ import annotations

import keyword
import re
from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ghostfim.engine.memory import str_bytes

WINDOW_LINES = 12  # a window: this many lines of a file
WINDOW_STRIDE = 6  # windows overlap by half, so a function's start is in one of them
QUERY_LINES = 12  # the lines before the cursor whose identifiers make the query
MIN_WORDS = 4  # a window with fewer distinct identifiers says too little to match on
MIN_SIMILARITY = 0.15  # below this a window shares only the usual words (self, return, ...)

_WORD = re.compile(r"[A-Za-z_$][\w$]*")
# Words every file uses: matching on them ranks windows by length, not by likeness.
_COMMON = frozenset(keyword.kwlist) | frozenset(
    {
        "self", "cls", "str", "int", "bool", "float", "dict", "list", "tuple", "set", "None",
        "const", "let", "var", "function", "export", "this", "new", "typeof", "undefined",
        "null", "string", "number", "boolean", "void", "any", "extends", "implements",
        "interface", "type", "readonly", "private", "public", "protected", "static", "of",
    }
)  # fmt: skip


def words(text: str) -> frozenset[str]:
    """The identifiers of `text`, less the ones every file uses."""
    return frozenset(w for w in _WORD.findall(text) if w not in _COMMON)


@dataclass(frozen=True)
class Window:
    """Lines [line, end) of a file (0-based), by their identifiers: the store keeps no text
    (a hit's lines are read from the file when a prompt takes them)."""

    path: str
    line: int
    end: int
    words: frozenset[str]


def windows_of(path: str, text: str) -> list[Window]:
    """`text` cut into windows of WINDOW_LINES lines every WINDOW_STRIDE lines; windows that
    say too little (blank lines, imports of one name, a closing bracket) are left out."""
    lines = text.split("\n")
    per_line = [words(x) for x in lines]  # each line is in two windows: its words found once
    out: list[Window] = []
    for start in range(0, max(1, len(lines) - WINDOW_LINES + WINDOW_STRIDE), WINDOW_STRIDE):
        stop = min(len(lines), start + WINDOW_LINES)
        while stop > start and not lines[stop - 1].strip():
            stop -= 1
        found = frozenset().union(*per_line[start:stop])
        if len(found) >= MIN_WORDS:
            out.append(Window(path, start, stop, found))
    return out


def query_words(before_cursor: str) -> frozenset[str]:
    """The query of a request: the identifiers of the QUERY_LINES lines before the cursor
    (the cursor's own line up to the cursor included)."""
    return words("\n".join(before_cursor.split("\n")[-QUERY_LINES:]))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    shared = len(a & b)
    return shared / (len(a) + len(b) - shared)


# --- the workspace's windows, searchable -------------------------------------------------------
# A word in more than this share of the windows (and more than COMMON_MIN of them) tells no
# window apart; its postings are not walked (they would cost most of a query's time).
COMMON_SHARE = 0.1
COMMON_MIN = 500
CANDIDATES = 400  # the windows sharing the most words, scored exactly
DEAD = 0xFFFFFFFF  # the file id of a window whose file changed or went


@dataclass(frozen=True)
class Hit:
    """A window the store found: lines [line, end) of `path` (0-based), as last indexed."""

    path: str
    line: int
    end: int
    similarity: float


class SnippetStore:
    """Every window of the workspace's files, by the identifiers it uses: an inverted index
    (word -> the windows that use it), so a query walks the postings of its own words rather
    than every window. Not thread-safe: its owner (the workspace index) locks around it.

    Kept in flat arrays of 4-byte ids, not an object a window: the bench corpus's 85,000
    windows took 49 MB as tuples and arrays of their own. Files change: a changed file's
    windows are marked dead and its new ones added; postings keep dead ids until a compaction
    rebuilds them (when the dead outnumber the live)."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Forget every window."""
        self._vocab: dict[str, int] = {}
        self._postings: list[array[int]] = []  # word id -> window ids
        self._paths: list[str] = []  # file id -> path
        self._file_ids: dict[str, int] = {}
        # window id -> its file id (DEAD: gone), first line, line count, word count, and where
        # its word ids start in _word_ids (they run to the next window's start)
        self._file = array("I")
        self._line = array("I")
        self._lines = array("B")
        self._size = array("H")
        self._start = array("I")
        self._word_ids = array("I")
        self._by_file: dict[str, list[int]] = {}
        self._live = 0

    def __len__(self) -> int:
        return self._live

    @property
    def nbytes(self) -> int:
        """An estimate of what the store keeps."""
        arrays = [*self._postings, self._file, self._line, self._lines, self._size, self._start]
        held = sum(64 + a.itemsize * len(a) for a in arrays) + 4 * len(self._word_ids)
        names = sum(str_bytes(w) + 40 for w in self._vocab)
        paths = sum(str_bytes(p) + 40 for p in self._paths)
        return held + names + paths + 8 * len(self._postings) + 100 * len(self._by_file)

    def add(self, path: str, windows: Sequence[Window]) -> None:
        """The windows of `path` are now `windows` (windows_of its text: the caller cuts them
        outside its lock)."""
        self.remove(path)
        file = self._file_ids.get(path)
        if file is None:
            file = self._file_ids[path] = len(self._paths)
            self._paths.append(path)
        ids: list[int] = []
        for w in windows:
            wid = len(self._file)
            words = sorted({self._word_id(x) for x in w.words})[:0xFFFF]
            for word in words:
                self._postings[word].append(wid)
            self._file.append(file)
            self._line.append(w.line)
            self._lines.append(min(255, w.end - w.line))
            self._size.append(len(words))
            self._start.append(len(self._word_ids))
            self._word_ids.extend(words)
            ids.append(wid)
        if ids:
            self._by_file[path] = ids
            self._live += len(ids)

    def remove(self, path: str) -> None:
        for wid in self._by_file.pop(path, ()):
            self._file[wid] = DEAD
            self._live -= 1
        if len(self._file) > 1024 and len(self._file) > 2 * self._live:
            self._compact()

    def query(
        self,
        query: frozenset[str],
        count: int,
        skip: Sequence[tuple[str, int, int]] = (),
    ) -> list[Hit]:
        """The `count` windows most like `query` (Jaccard on identifiers), best first, at most
        one per stretch of a file, none inside a `skip` range (path, first line, end line)."""
        known = [self._vocab[w] for w in query if w in self._vocab]
        if not known or count <= 0:
            return []
        common = max(COMMON_MIN, int(self._live * COMMON_SHARE))
        shared: Counter[int] = Counter()
        for word in known:
            posting = self._postings[word]
            if len(posting) <= common:
                shared.update(posting)
        scored: list[tuple[float, int, Hit]] = []
        for wid, n in shared.most_common(CANDIDATES):
            file = self._file[wid]
            if file == DEAD:
                continue
            path, line = self._paths[file], self._line[wid]
            end = line + self._lines[wid]
            if any(path == p and line < e and end > f for p, f, e in skip):
                continue
            similarity = n / (len(query) + self._size[wid] - n)
            if similarity >= MIN_SIMILARITY:
                scored.append((similarity, -line, Hit(path, line, end, similarity)))
        scored.sort(key=lambda t: (t[0], t[1], t[2].path), reverse=True)
        chosen: list[Hit] = []
        for _, _, hit in scored:
            if any(h.path == hit.path and h.line < hit.end and h.end > hit.line for h in chosen):
                continue
            chosen.append(hit)
            if len(chosen) == count:
                break
        return chosen

    def _word_id(self, word: str) -> int:
        wid = self._vocab.get(word)
        if wid is None:
            wid = self._vocab[word] = len(self._postings)
            self._postings.append(array("I"))
        return wid

    def _compact(self) -> None:
        """Drop the dead windows: new ids, postings rebuilt from the live windows' words."""
        old = (self._file, self._line, self._lines, self._size, self._start, self._word_ids)
        self._file, self._line, self._lines = array("I"), array("I"), array("B")
        self._size, self._start, self._word_ids = array("H"), array("I"), array("I")
        self._postings = [array("I") for _ in self._postings]
        self._by_file = {}
        file, line, lines, size, start, word_ids = old
        for wid in range(len(file)):
            if file[wid] == DEAD:
                continue
            new = len(self._file)
            words = word_ids[start[wid] : start[wid] + size[wid]]
            for word in words:
                self._postings[word].append(new)
            self._file.append(file[wid])
            self._line.append(line[wid])
            self._lines.append(lines[wid])
            self._size.append(size[wid])
            self._start.append(len(self._word_ids))
            self._word_ids.extend(words)
            self._by_file.setdefault(self._paths[file[wid]], []).append(new)


# A string literal given to a name that says it holds a secret (`API_KEY = "sk-..."`,
# `password: str = '...'`, `"token": "..."`): workspace text goes into prompts, and a remote
# backend receives them, so the value is replaced before any of it leaves the index.
_SECRET_LITERAL = re.compile(
    r"""(?ix)
    (\b[\w$]*(?:key|token|secret|passw|pwd|credential|auth)[\w$]*["']?   # the name
     \s*(?::\s*[\w\[\]., |]+)?\s*[:=]\s*)                                  # : type =  or  :
    (["'`])[^"'`\n]{6,}\2                                                 # the literal
    """
)


def hide_secret_literals(text: str) -> str:
    """`text` with the string literals of secret-named names replaced by "***"."""
    return _SECRET_LITERAL.sub(lambda m: f"{m.group(1)}{m.group(2)}***{m.group(2)}", text)
