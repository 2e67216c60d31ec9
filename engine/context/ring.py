"""Context from other files: a bounded ring of text chunks placed before the FIM prefix.

The idea is llama.vim's (its ring buffer of chunks: `ring_n_chunks`, `ring_chunk_size`,
`ring_scope`, a line-overlap similarity to keep near-duplicates out) and llama-server's
(`/infill`'s `input_extra`, laid out with the model's repository-level tokens); this is our own
take on it, sized for a KV cache that must stay valid across requests.

What goes in
    A chunk is at most `chunk_lines` whole lines (and CHUNK_CHARS characters) of one document,
    with at least MIN_LINES lines that say something (a letter or digit). Chunks are picked when
    a document is opened (its top: imports and first definitions, since LSP tells no cursor),
    saved (around its last edit or cursor), left (around the last cursor there: the requests
    moved to another document), edited (around the edit, at most once a CHANGE_PICK_S per
    document) and when the client sends text (`ghostfim/context`).

    A new chunk that repeats one already held (similarity >= DUPLICATE) is dropped, unless it
    is a newer view of the same region of the same document (content overlap >= SAME_REGION):
    then the newer one replaces the older (edited code wins over what it was).

When it changes
    Picks are queued; the queue enters the ring (a commit) when a full prompt is built: at most
    once every `update_interval_s` while the user stays in one document, and at once when the
    prompt is for another document (whose prefix is not cached anyway). New chunks are appended
    and the oldest evicted, so the ring's order is stable: the prompt's extra context only grows
    at its end between evictions, and its KV stays cached. Every commit invalidates the KV from
    the first changed chunk on (and with it the prefix after it), which is why nothing here
    happens per keystroke. A closed document's chunks leave at the next commit: the ring mirrors
    the documents the editor has open.

Prompt layout (repository-level FIM, as Qwen2.5-Coder and StarCoder2 were trained and as
llama-server's format_infill does it)::

    [<|repo_name|>project\\n] (<|file_sep|>path\\nchunk)* <|file_sep|>current path\\n
    <|fim_prefix|>prefix<|fim_suffix|>suffix<|fim_middle|>

Chunks that mostly repeat the prompt's own window (containment >= IN_WINDOW: the same lines as
the text around the cursor) are left out; of the rest, the newest that fit the token budget go
in, in ring order. Models without a file-separator token (DeepSeek-Coder, CodeLlama, Codestral,
prefix-only models) get no extra context: text before their FIM prefix is outside anything they
were trained on, and a comment-wrapped variant would need each language's comment syntax for a
gain nobody measured. Only full prompts (explicit invocations, the pause refresh) carry it; a
keystroke prompt on a CPU must decode one or two tokens, not re-check a ring.

Off by default (setting `extraContext`): on 8 tasks of the quality benchmark with the 0.5B model
and three neighbouring files open it lowered exact match (docs/benchmarks.md).
"""

from __future__ import annotations

import itertools
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from urllib.parse import unquote, urlparse

from ghostfim.engine.memory import CONTEXT_RING_BYTES, CacheUsage, str_bytes

MAX_CHUNKS = 16  # chunks the ring holds (llama.vim's ring_n_chunks)
CHUNK_LINES = 32  # lines a chunk holds at most (llama.vim picks half its ring_chunk_size, 64)
CHUNK_CHARS = 4000  # ... and characters (minified code has few, very long lines)
MIN_LINES = 3  # lines with a letter or digit a chunk needs to be worth its tokens
MAX_PENDING = 16  # picks waiting for the next commit
MAX_CLIENT_CHUNKS = 4  # chunks one `ghostfim/context` text may add
UPDATE_INTERVAL_S = 10.0  # the ring changes at most this often
CHANGE_PICK_S = 60.0  # an edited document gives a chunk at most this often

DUPLICATE = 0.9  # similarity at which a new chunk repeats one held (llama.vim's threshold)
SAME_REGION = 0.5  # content overlap at which two chunks of one document show the same region
IN_WINDOW = 0.5  # share of a chunk's lines already in the prompt's window: left out


def _says_something(line: str) -> bool:
    return any(c.isalnum() for c in line)


def key_lines(text: str) -> frozenset[str]:
    """The lines similarity looks at: stripped, and only those with a letter or digit (a
    lone `}` or blank line is in every chunk and says nothing about it)."""
    return frozenset(s for line in text.split("\n") if _says_something(s := line.strip()))


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """Dice coefficient of two chunks' line sets (1: the same lines, 0: none in common).

    llama.vim's chunk_sim is this measure over raw lines; a Jaccard index ranks pairs the same
    way (J = D / (2 - D))."""
    if not a and not b:
        return 1.0
    return 2.0 * len(a & b) / (len(a) + len(b))


def overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """Share of the smaller chunk's lines that the other one holds."""
    smaller = min(len(a), len(b))
    return len(a & b) / smaller if smaller else 0.0


def containment(chunk: frozenset[str], window: frozenset[str]) -> float:
    """Share of a chunk's lines that a (larger) window holds."""
    return len(chunk & window) / len(chunk) if chunk else 1.0


@dataclass(frozen=True)
class ContextChunk:
    """Whole lines of one document (text ends with a newline), and the name the model sees."""

    filename: str
    text: str
    doc_id: str = ""  # the document it came from ("" for text the client sent)
    lines: frozenset[str] = field(init=False, repr=False, compare=False)
    nbytes: int = field(init=False, repr=False, compare=False)  # what it holds in memory

    def __post_init__(self) -> None:
        lines = key_lines(self.text)
        object.__setattr__(self, "lines", lines)
        held = (self.filename, self.text, self.doc_id, *lines)
        nbytes = sys.getsizeof(lines) + sum(str_bytes(s) for s in held)
        object.__setattr__(self, "nbytes", nbytes)


@dataclass(frozen=True)
class ExtraContext:
    """What a full prompt gets from the ring: the chunks in ring order and who asks."""

    chunks: tuple[ContextChunk, ...]
    filename: str  # the current document, as the model sees it
    project: str = ""  # the repository name (<|repo_name|>), "" for a neutral one
    budget: int | None = None  # tokens; None: "auto" (see AUTO_PREFILL_MS)


def document_name(doc_id: str, roots: Sequence[str] = ()) -> str:
    """A document's path as the model sees it: relative to the workspace root that holds it,
    else its file name (models were trained on repository-relative paths)."""
    parsed = urlparse(doc_id)
    path = unquote(parsed.path)
    for root in sorted(roots, key=len, reverse=True):
        base = root.rstrip("/")
        if base and path.startswith(base + "/"):
            return path[len(base) + 1 :]
    return PurePosixPath(path).name or doc_id


def root_path(uri_or_path: str) -> str:
    """A workspace root (URI or path) as a path."""
    parsed = urlparse(uri_or_path)
    return unquote(parsed.path) if parsed.scheme == "file" else uri_or_path


_LINE_END = re.compile(r"\r\n|\r|\n")


def _first_lines(text: str, n: int) -> str:
    """The start of `text` that holds its first n lines (with their line ends): what is
    looked at of text a client may send in any size, without splitting all of it."""
    ends = itertools.islice(_LINE_END.finditer(text), n - 1, n)
    last = next(ends, None)
    return text if last is None else text[: last.end()]


def _normalized_lines(text: str) -> list[str]:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


_COMMENT_STARTS = ("//", "/*", "*", "--", ";", "<!--")


def _is_comment(s: str) -> bool:
    """A comment line (`#` only when it is not C's `#include` and the like)."""
    if s.startswith("#"):
        return len(s) == 1 or s[1] in " \t!#-*"
    return s.startswith(_COMMENT_STARTS) or s.endswith("*/")


def _code_start(lines: list[str]) -> int:
    """The first line after a file's opening comments, license header or docstring (what an
    opened file is worth showing is its imports and first definitions)."""
    i, n = 0, len(lines)
    while i < n:
        s = lines[i].strip()
        if not s or _is_comment(s):
            i += 1
            continue
        quote = s[:3] if s[:3] in ('"""', "'''") else ""
        if not quote:
            break
        if s.count(quote) >= 2 and len(s) > 3:  # a one-line docstring
            i += 1
            continue
        i += 1
        while i < n and quote not in lines[i]:
            i += 1
        i += 1
    return i if i < n else 0


def _trim(lines: list[str]) -> list[str]:
    """No blank lines at either end; at most CHUNK_CHARS characters."""
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    total = sum(len(line) + 1 for line in lines)
    while len(lines) > 1 and total > CHUNK_CHARS:
        total -= len(lines[-1]) + 1
        lines = lines[:-1]
    if lines and len(lines[0]) > CHUNK_CHARS:
        lines = [lines[0][:CHUNK_CHARS]]
    return lines


class ContextRing:
    """Chunks of recently seen documents, oldest first, with picks queued for the next commit.

    Not thread-safe: the service touches it from its event loop only.
    """

    def __init__(
        self,
        *,
        max_chunks: int = MAX_CHUNKS,
        chunk_lines: int = CHUNK_LINES,
        update_interval_s: float = UPDATE_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_chunks = max_chunks
        self.chunk_lines = chunk_lines
        self.update_interval_s = update_interval_s
        self.clock = clock
        self.chunks: list[ContextChunk] = []  # committed: what prompts get, oldest first
        self.pending: list[ContextChunk] = []  # picked, waiting for the next commit
        self.version = 0  # bumped by every commit that changed `chunks`
        self.evicted = 0  # chunks dropped for age or replaced by a newer view
        self._committed_at: float | None = None
        self._closed: set[str] = set()  # documents whose chunks go at the next commit
        self._last_doc: str | None = None  # the document the last snapshot was for

    # --- picking ------------------------------------------------------------------------------
    def chunk_of(
        self, text: str, filename: str, doc_id: str = "", line: int | None = None
    ) -> ContextChunk | None:
        """The chunk of `text` centred on `line` (the top of it when None), or None when it
        has too little in it."""
        lines = _normalized_lines(text)
        n = len(lines)
        if line is None:
            start = _code_start(lines)
        else:
            start = max(0, min(line - self.chunk_lines // 2, n - self.chunk_lines))
        picked = _trim(lines[start : start + self.chunk_lines])
        if sum(1 for s in picked if _says_something(s)) < MIN_LINES:
            return None
        return ContextChunk(filename, "\n".join(picked) + "\n", doc_id)

    def pick(
        self, text: str, filename: str, doc_id: str = "", line: int | None = None
    ) -> ContextChunk | None:
        """Queue the chunk around `line`; returns it, or None when it was not worth queueing."""
        chunk = self.chunk_of(text, filename, doc_id, line)
        return chunk if chunk is not None and self.add(chunk) else None

    def add_text(self, text: str, filename: str, doc_id: str = "") -> int:
        """Queue text the client sent (at most MAX_CLIENT_CHUNKS chunks of it, from its start);
        returns how many chunks were queued."""
        lines = _normalized_lines(_first_lines(text, MAX_CLIENT_CHUNKS * self.chunk_lines))
        added = 0
        for start in range(0, len(lines), self.chunk_lines):
            if start // self.chunk_lines >= MAX_CLIENT_CHUNKS:
                break
            part = "\n".join(lines[start : start + self.chunk_lines])
            chunk = self.chunk_of(part, filename, doc_id)
            if chunk is not None and self.add(chunk):
                added += 1
        return added

    def forget(self, doc_id: str) -> None:
        """A closed document: its queued chunks go now, its held ones at the next commit (the
        ring mirrors what the editor has open, not everything it ever had)."""
        self.pending = [p for p in self.pending if p.doc_id != doc_id]
        if any(c.doc_id == doc_id for c in self.chunks):
            self._closed.add(doc_id)

    def add(self, chunk: ContextChunk) -> bool:
        """Queue a chunk unless it repeats one held or queued; a queued older view of the same
        region goes. Returns whether it was queued."""
        if any(_repeats(held, chunk) for held in (*self.chunks, *self.pending)):
            return False
        self.pending = [p for p in self.pending if not _same_region(p, chunk)]
        self.pending.append(chunk)
        del self.pending[:-MAX_PENDING]
        while len(self.pending) > 1 and _bytes(self.pending) > CONTEXT_RING_BYTES // 2:
            del self.pending[0]
        return True

    # --- committing ---------------------------------------------------------------------------
    def commit(self, *, force: bool = False) -> bool:
        """Move the queued chunks into the ring and drop closed documents' chunks (at most
        once every update_interval_s unless forced); returns whether the ring changed."""
        if not self.pending and not self._closed:
            return False
        now = self.clock()
        due = self._committed_at is None or now - self._committed_at >= self.update_interval_s
        if not (force or due):
            return False
        kept = [c for c in self.chunks if c.doc_id not in self._closed]
        changed = len(kept) < len(self.chunks)
        self.chunks, self._closed = kept, set()
        for chunk in self.pending:
            if any(_repeats(held, chunk) for held in self.chunks):
                continue
            kept = [held for held in self.chunks if not _same_region(held, chunk)]
            self.evicted += len(self.chunks) - len(kept)
            self.chunks = [*kept, chunk]
            changed = True
        if len(self.chunks) > self.max_chunks:
            self.evicted += len(self.chunks) - self.max_chunks
            self.chunks = self.chunks[-self.max_chunks :]
        # Half the ring's bytes for what prompts get, half for the picks waiting for it.
        while len(self.chunks) > 1 and _bytes(self.chunks) > CONTEXT_RING_BYTES // 2:
            self.evicted += 1
            self.chunks = self.chunks[1:]
        self.pending = []
        self._committed_at = now
        if changed:
            self.version += 1
        return changed

    def snapshot(self, doc_id: str | None = None) -> tuple[ContextChunk, ...]:
        """The chunks a prompt for `doc_id` gets now. The queue is committed when it is due,
        and always when the prompt is for another document than the last one: that prompt's
        prefix is not cached anyway, so a fresh ring costs only its own tokens."""
        switched = doc_id is not None and doc_id != self._last_doc
        self._last_doc = doc_id
        self.commit(force=switched)
        return tuple(self.chunks)

    def clear(self) -> None:
        self.chunks, self.pending, self._closed = [], [], set()
        self.version += 1

    def usage(self) -> CacheUsage:
        return CacheUsage(
            "contextRing", _bytes(self.chunks) + _bytes(self.pending), CONTEXT_RING_BYTES
        )

    def status(self) -> RingStatus:
        return RingStatus(
            len(self.chunks),
            len(self.pending),
            self.evicted,
            self.version,
            tuple(sorted({c.filename for c in self.chunks})),
        )


@dataclass(frozen=True)
class RingStatus:
    chunks: int
    pending: int  # picks waiting for the next update of the ring
    evicted: int
    version: int
    files: tuple[str, ...]


def _bytes(chunks: list[ContextChunk]) -> int:
    return sum(c.nbytes for c in chunks)


def _same_region(held: ContextChunk, new: ContextChunk) -> bool:
    """Two views of one region of one document (the newer replaces the older)."""
    return (
        bool(held.doc_id)
        and held.doc_id == new.doc_id
        and overlap(held.lines, new.lines) >= SAME_REGION
    )


def _repeats(held: ContextChunk, new: ContextChunk) -> bool:
    """`new` adds nothing to `held`: the same text, or nearly the same lines from elsewhere."""
    if held.text == new.text:
        return True
    if _same_region(held, new):
        return False  # a newer view: it replaces the held one
    return similarity(held.lines, new.lines) >= DUPLICATE
