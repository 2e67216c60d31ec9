"""engine/memory.py: caches bounded by the bytes they hold, measured as CPython holds them."""

from __future__ import annotations

import gc
import sys
import tracemalloc
from collections.abc import Callable
from typing import Any

from ghostfim.engine.memory import (
    ENTRY_BYTES,
    ByteLRU,
    CacheUsage,
    fix_mmap_threshold,
    ints_bytes,
    merged,
    rss_bytes,
    str_bytes,
)


def line_cache(limit: int) -> ByteLRU[str, int]:
    return ByteLRU(limit, lambda line, _n: str_bytes(line))


def test_many_small_entries_and_a_few_large_ones_are_bounded_alike() -> None:
    small = line_cache(100_000)
    for i in range(10_000):  # tiny entries: the bookkeeping is what bounds them
        small[f"x = {i}\n"] = 3
    assert small.nbytes <= small.limit and len(small) < 10_000
    assert len(small) * (ENTRY_BYTES + 50) <= small.limit + ENTRY_BYTES + 50
    large = line_cache(100_000)
    for i in range(100):  # 10 kB lines (a minified file): about nine fit
        large[f"{i:05d}" + "a" * 10_000] = 2_000
    assert large.nbytes <= large.limit and 5 <= len(large) <= 10


def test_the_least_recently_used_go_first_and_an_oversized_entry_is_not_kept() -> None:
    cache = line_cache(3 * (ENTRY_BYTES + str_bytes("a" * 100)))
    for key in ("a", "b", "c"):
        cache[key * 100] = 1
    assert cache.get("a" * 100) == 1  # "a" is now the most recent
    cache["d" * 100] = 1
    assert cache.get("b" * 100) is None and cache.get("a" * 100) == 1
    cache["c" * 100] = 5
    cache["c" * 100] = 6  # a new value replaces the old one in place
    assert cache.get("c" * 100) == 6 and cache.nbytes <= cache.limit
    cache["c" * 100] = 7
    cache["c" * 100 + "x" * 10_000] = 1  # larger than the whole cache: computed again later
    assert cache.get("c" * 100 + "x" * 10_000) is None and cache.get("c" * 100) == 7
    assert sorted(cache) == ["a" * 100, "c" * 100, "d" * 100]
    assert cache.pop("a" * 100) == 1 and "a" * 100 not in cache


def held_by(fill: Callable[[], ByteLRU[str, Any]]) -> tuple[ByteLRU[str, Any], int]:
    """A cache `fill` makes, and what tracemalloc sees it hold."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        cache = fill()
        return cache, tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_the_counted_bytes_are_what_the_entries_really_hold() -> None:
    """Full caches of token lists and of short lines (where the bookkeeping is most of it):
    the count within 20% of what tracemalloc sees (an undercount lets a cache grow past its
    limit unseen)."""

    def token_lists() -> ByteLRU[str, Any]:
        cache: ByteLRU[str, Any] = ByteLRU(2_000_000, lambda k, ids: str_bytes(k) + ints_bytes(ids))
        for i in range(20_000):
            cache[f"chunk {i} " + "y" * (i % 300)] = [1000 + i + j for j in range(i % 50)]
        return cache

    def short_lines() -> ByteLRU[str, Any]:
        cache: ByteLRU[str, Any] = ByteLRU(2_000_000, lambda k, _n: str_bytes(k) + 8)
        for i in range(20_000):
            cache[f"    x = {i}\n"] = 3
        return cache

    for fill in (token_lists, short_lines):
        cache, held = held_by(fill)
        assert cache.nbytes <= cache.limit
        assert 0.8 * held <= cache.nbytes <= 1.2 * held, (fill.__name__, cache.nbytes, held)


def test_sizes_of_strings_and_token_lists() -> None:
    assert str_bytes("a" * 1000) < str_bytes("é" * 1000) < str_bytes("😀" * 1000)
    assert str_bytes("😀" * 1000) >= 4000
    assert ints_bytes([1000] * 100) >= 100 * 28 + sys.getsizeof([])


def test_caches_of_one_name_are_summed() -> None:
    target = (CacheUsage("lineTokens", 10, 100), CacheUsage("kvSnapshots", 5, 60))
    draft = (CacheUsage("lineTokens", 3, 100), CacheUsage("kvSnapshots", 2, 40))
    assert merged((*target, *draft)) == (
        CacheUsage("lineTokens", 13, 200),
        CacheUsage("kvSnapshots", 7, 100),
    )


def test_the_process_knows_its_size_and_fixes_the_mmap_threshold() -> None:
    rss = rss_bytes()
    assert rss is not None and rss > 10 * 2**20
    if sys.platform.startswith("linux"):
        assert fix_mmap_threshold()
