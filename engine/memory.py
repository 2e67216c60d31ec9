"""What the server keeps beyond the documents and the model, bounded in bytes, in one table.

Every cache that grows with what editors send is bounded by the bytes it holds, never by a
count of entries alone: a count lets the input decide the size (8,192 lines as keys were 8,192
lines of 40 characters in ordinary code, and 8,192 lines of 11 kB, 94 MB, in a minified file).
Issue 28 measured a fuzz client growing the server by 114 MB over 3,000 events that way. Each
limit below says why it is what it is; `ghostfim/status` reports every cache's bytes against its
limit (`memory.caches`), and docs/reliability.md, "Memory bounds", lists them for users.

Sizes are what CPython allocates for the objects (sys.getsizeof of strings and containers, the
int objects of token lists) plus ENTRY_BYTES for the cache's own bookkeeping of an entry, so
that many tiny entries are bounded too. An entry larger than its whole cache is not kept
(cachetools refuses it): it is computed again when it is needed.

The per-document state (the service's records, the context feed's, the prompt windows' anchors,
the KV snapshots) goes when the editor closes the document; a document larger than the
`maxDocumentMb` setting gets no whole-document work (engine/service/doclimit.py).
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Protocol, TypeVar, runtime_checkable

from cachetools import LRUCache

MIB = 1024 * 1024

# --- the limits (bytes) ----------------------------------------------------------------------
# Token counts of prompt lines: every keystroke counts the lines of the prefix window, and each
# line's count is looked up here first. 4 MiB holds about 10,000 lines of 40 characters (more
# than the 8,192 lines it held by count: the windows of a dozen files), but only about 350 cuts
# of a minified line (11.5 kB each at the default budget), where it is recounted anyway.
LINE_TOKENS_BYTES = 4 * MIB
# The suffix's tokens, shared by the prompts of one keystroke and the next keystrokes on the
# same line: the last few suffixes are all that is reused (it held 8 by count).
SUFFIX_TOKENS_BYTES = 1 * MIB
# Where each document's sticky prefix window starts (one entry per document and budget; URIs
# are the keys): dropped when the document closes, bounded against URIs of any length.
PREFIX_ANCHORS_BYTES = 256 * 1024
# Tokens of the chunks from other files (`extraContext`): at most 16 chunks of 4,000
# characters are in the ring at once, about 1,000 tokens (40 kB as Python ints) each; 2 MiB
# holds about 45 such chunks, the ring's and those its last changes replaced.
CONTEXT_TOKENS_BYTES = 2 * MIB
# Tokens of the workspace's definitions (`workspaceContext`, engine/prompt/definitions.py): a
# block of at most 512 tokens (2 kB as Python ints, with its text) per place the user types at,
# and each entry's count; 1 MiB holds a few hundred blocks.
DEFINITION_TOKENS_BYTES = 1 * MIB
# Suggestions kept for typed-through reuse: the text, and the marks (a tuple per token) the
# confidence rule reads. A 64-token suggestion (the default maxTokens) is about 9 kB; 5 MiB
# holds the 512 suggestions it held by count even when each is that long, and thousands of
# the usual short ones.
SUGGESTIONS_BYTES = 5 * MIB
# The ring of chunks from other files and the picks waiting for it: 32 chunks of at most 4,000
# characters and their line sets are about 0.3 MB of ASCII; 1 MiB bounds text of 4-byte
# characters too.
CONTEXT_RING_BYTES = 1 * MIB
# Per document: no context picks and no whole-document scans above this size (the
# `maxDocumentMb` setting's default, engine/config.py). The model never sees more than
# 80,000 characters around the cursor anyway (engine/tuning.py's windows).
DEFAULT_MAX_DOCUMENT_MB = 2.0
# Documents told to be over the limit (one message per document and session): their URIs.
TOLD_DOCUMENTS_BYTES = 256 * 1024
# Unknown notification methods told of once each (lsp/rpcguard.py): their names.
WARNED_METHODS_BYTES = 256 * 1024

# What a cache's bookkeeping costs per entry (cachetools' dict entry, its LRU order and its
# size, and the (value, size) pair kept here): about 310 bytes measured with tracemalloc in
# CPython 3.11 (tests/unit/engine/test_memory.py holds the count to what is held).
ENTRY_BYTES = 320
# A Python int (token ids are mostly above the 256 small ints CPython shares), and a reference.
INT_BYTES = 32
POINTER_BYTES = 8


def str_bytes(text: str) -> int:
    """What CPython allocates for a string (1, 2 or 4 bytes a character, and its header)."""
    return sys.getsizeof(text)


def ints_bytes(ids: Sequence[int]) -> int:
    """A list or tuple of token ids: the container and an int object per id."""
    return sys.getsizeof(ids) + INT_BYTES * len(ids)


K = TypeVar("K")
V = TypeVar("V")


class ByteLRU(Generic[K, V]):
    """An LRU cache bounded by the bytes of its entries (cachetools' `getsizeof`).

    `size(key, value)` measures an entry; the bookkeeping's ENTRY_BYTES are added to it. The
    least recently used entries go until the new one fits; one larger than `limit` is not kept.
    """

    def __init__(self, limit: int, size: Callable[[K, V], int]) -> None:
        self.limit = limit
        self._size = size
        self._cache: LRUCache[K, tuple[V, int]] = LRUCache(maxsize=limit, getsizeof=_entry_size)

    def get(self, key: K) -> V | None:
        entry = self._cache.get(key)
        return None if entry is None else entry[0]

    def __setitem__(self, key: K, value: V) -> None:
        nbytes = self._size(key, value) + ENTRY_BYTES
        if nbytes > self.limit:
            self._cache.pop(key, None)  # an older value must not stay in its place
            return
        self._cache[key] = (value, nbytes)

    def pop(self, key: K) -> V | None:
        entry = self._cache.pop(key, None)
        return None if entry is None else entry[0]

    def __iter__(self) -> Iterator[K]:
        """The keys (a copy: the caller may change the cache meanwhile)."""
        return iter(list(self._cache.keys()))

    def clear(self) -> None:
        self._cache.clear()

    def __len__(self) -> int:
        return len(self._cache)

    def __contains__(self, key: object) -> bool:
        return key in self._cache

    @property
    def nbytes(self) -> int:
        return int(self._cache.currsize)


def _entry_size(entry: tuple[object, int]) -> int:
    return entry[1]


@dataclass(frozen=True)
class CacheUsage:
    """One cache's bytes against its limit (ghostfim/status `memory.caches`)."""

    name: str
    bytes: int
    limit: int


def merged(usages: Sequence[CacheUsage]) -> tuple[CacheUsage, ...]:
    """Caches of one name summed (a draft model and its target each have their own), in the
    order their names first come."""
    out: dict[str, CacheUsage] = {}
    for u in usages:
        had = out.get(u.name)
        out[u.name] = (
            u if had is None else CacheUsage(u.name, had.bytes + u.bytes, had.limit + u.limit)
        )
    return tuple(out.values())


# glibc's malloc serves a request of this many bytes or more with a mapping of its own, which
# goes back to the system when the block is freed. By default that threshold moves up (to as
# much as 32 MB) each time such a block is freed; from then on blocks the size of a document's
# text (an edit copies it) or of a KV snapshot come from the heap arenas, whose freed pages
# mostly stay resident, and RSS creeps up with the sizes documents and snapshots had. Measured
# with the fuzz client of tests/integration/test_memory.py (10,000 events, tiny model): RSS grew
# 28 MB between event 3,000 and 10,000 with the moving threshold, 5 MB with this fixed one.
MMAP_THRESHOLD_BYTES = 256 * 1024
_M_MMAP_THRESHOLD = -3  # malloc.h


def fix_mmap_threshold() -> bool:
    """Set glibc's mmap threshold to MMAP_THRESHOLD_BYTES, which also stops it moving (the
    server calls this once at start). False where the C library is not glibc's."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))


def rss_bytes() -> int | None:
    """This process's resident memory (Linux; None elsewhere)."""
    try:
        resident_pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


@runtime_checkable
class KeepsCaches(Protocol):
    """A backend that keeps caches of its own (the local model: its prompt builder's, its KV
    snapshots); remote backends keep none."""

    def caches(self) -> tuple[CacheUsage, ...]: ...
