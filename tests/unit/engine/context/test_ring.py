"""engine/context/ring.py: the ring of chunks from other files: picking, dedup, eviction,
a stable order, commits at most once an interval."""

from __future__ import annotations

import pytest

from ghostfim.engine.context.ring import (
    DUPLICATE,
    MAX_CLIENT_CHUNKS,
    ContextRing,
    RingStatus,
    containment,
    document_name,
    key_lines,
    root_path,
    similarity,
)
from tests.unit.engine.context.helpers import Clock, code, ring


# --- similarity -----------------------------------------------------------------------------
def test_similarity_is_dice_over_meaningful_lines() -> None:
    a = key_lines("x = 1\ny = 2\n}\n\n  z = 3\n")
    assert a == frozenset({"x = 1", "y = 2", "z = 3"})  # a lone brace or blank says nothing
    assert similarity(a, a) == 1.0
    assert similarity(a, key_lines("x = 1\nq = 9\n")) == pytest.approx(2 * 1 / 5)
    assert similarity(a, key_lines("p = 0\n")) == 0.0
    assert containment(key_lines("x = 1\n"), a) == 1.0


# --- picking ----------------------------------------------------------------------------------
def test_a_chunk_is_whole_lines_around_the_line_and_bounded() -> None:
    r = ring(chunk_lines=8)
    text = code("a", 40)
    chunk = r.chunk_of(text, "a.py", "file:///a.py", line=20)
    assert chunk is not None
    lines = chunk.text.splitlines()
    assert len(lines) == 8 and chunk.text.endswith("\n")
    assert "a_20 " in chunk.text and lines[0] == text.splitlines()[16]
    top = r.chunk_of(text, "a.py", "file:///a.py")  # no cursor: the top of the file
    assert top is not None and top.text.splitlines()[0] == text.splitlines()[0]
    end = r.chunk_of(text, "a.py", "file:///a.py", line=39)  # near the end: still 8 lines
    assert end is not None and len(end.text.splitlines()) == 8
    assert r.chunk_of("}\n\n)\nx\n", "b.py") is None  # too little in it


# --- dedup ------------------------------------------------------------------------------------
def test_the_same_text_twice_is_queued_once() -> None:
    r = ring()
    assert r.pick(code("a"), "a.py", "file:///a.py") is not None
    assert r.pick(code("a"), "a.py", "file:///a.py") is None
    r.commit()
    assert r.pick(code("a"), "copy.py", "file:///copy.py") is None  # already held
    assert len(r.chunks) == 1 and not r.pending


def test_similarity_threshold_drops_near_copies_and_keeps_the_rest() -> None:
    r = ring()
    base = code("a", 20)
    r.pick(base, "a.py", "file:///a.py")
    r.commit()
    # 19 of 20 lines in common: similarity 0.95 >= DUPLICATE -> a copy, dropped.
    near = base.replace("a_0 = compute_a(0, 0)", "other = 1")
    assert similarity(key_lines(base), key_lines(near)) >= DUPLICATE
    assert r.pick(near, "b.py", "file:///b.py") is None
    # 16 of 20 in common: 0.8 < DUPLICATE -> different enough, kept.
    lines = base.splitlines(keepends=True)
    half = "".join(lines[:16]) + code("b", 4)
    assert similarity(key_lines(base), key_lines(half)) < DUPLICATE
    assert r.pick(half, "c.py", "file:///c.py") is not None


def test_a_newer_view_of_the_same_region_replaces_the_older() -> None:
    r = ring()
    r.pick(code("a"), "a.py", "file:///a.py")
    r.pick(code("b"), "b.py", "file:///b.py")
    r.commit()
    edited = code("a", 14) + code("new", 6)  # the same region of a.py, edited
    r.pick(edited, "a.py", "file:///a.py")
    assert r.commit()
    assert [c.text for c in r.chunks] == [code("b"), edited]
    assert r.evicted == 1


# --- eviction and order -----------------------------------------------------------------------
def test_oldest_chunks_are_evicted_and_the_order_is_stable() -> None:
    r = ring(max_chunks=3)
    names = ["a", "b", "c", "d", "e"]
    snapshots = []
    for name in names:
        r.pick(code(name), f"{name}.py", f"file:///{name}.py")
        snapshots.append(r.snapshot())
    assert [c.filename for c in r.chunks] == ["c.py", "d.py", "e.py"]
    assert r.evicted == 2
    # Until the ring is full, each snapshot extends the previous one: its KV stays valid.
    assert snapshots[1][: len(snapshots[0])] == snapshots[0]
    assert snapshots[2][: len(snapshots[1])] == snapshots[1]


def test_the_ring_changes_at_most_once_per_interval() -> None:
    clock = Clock()
    r = ContextRing(update_interval_s=10.0, clock=clock)
    r.pick(code("a"), "a.py", "file:///a.py")
    assert len(r.snapshot()) == 1  # the first commit is never held back
    r.pick(code("b"), "b.py", "file:///b.py")
    clock.now += 5
    assert len(r.snapshot()) == 1 and len(r.pending) == 1  # too soon: still queued
    version = r.version
    clock.now += 5
    assert [c.filename for c in r.snapshot()] == ["a.py", "b.py"]
    assert r.version == version + 1


def test_client_text_is_split_into_a_few_chunks() -> None:
    r = ring(chunk_lines=10)
    text = "".join(code(f"n{i}", 10) for i in range(MAX_CLIENT_CHUNKS + 3))
    assert r.add_text(text, "snippet") == MAX_CLIENT_CHUNKS
    assert all(len(c.text.splitlines()) == 10 for c in r.pending)


def test_document_names_are_relative_to_the_workspace() -> None:
    roots = ["/work/proj", "/work/proj/sub"]
    assert document_name("file:///work/proj/pkg/a%20b.py", roots) == "pkg/a b.py"
    assert document_name("file:///work/proj/sub/x.py", roots) == "x.py"
    assert document_name("file:///elsewhere/y.py", roots) == "y.py"
    assert document_name("untitled:Untitled-1") == "Untitled-1"


def test_closed_documents_leave_and_a_document_switch_commits_at_once() -> None:
    clock = Clock()
    r = ContextRing(update_interval_s=10.0, clock=clock)
    r.pick(code("a"), "a.py", "file:///a.py")
    r.pick(code("b"), "b.py", "file:///b.py")
    assert len(r.snapshot("file:///main.py")) == 2
    r.forget("file:///a.py")
    r.pick(code("c"), "c.py", "file:///c.py")
    r.forget("file:///c.py")  # queued, then closed: never enters
    assert len(r.snapshot("file:///main.py")) == 2  # same document, too soon: unchanged
    assert [c.filename for c in r.snapshot("file:///other.py")] == ["b.py"]  # switched: now


def test_an_opened_file_gives_its_code_not_its_header() -> None:
    r = ring(chunk_lines=4)
    py = '#!/usr/bin/env python\n# Copyright\n"""Module doc.\n\nMore.\n"""\n\n'
    py += "import os\nimport re\nx = 1\n"
    chunk = r.chunk_of(py, "m.py")
    assert chunk is not None and chunk.text.startswith("import os\n")
    c = "/*\n * License\n */\n#include <stdio.h>\n#include <string.h>\nint x;\nint y;\n"
    chunk = r.chunk_of(c, "m.c")
    assert chunk is not None and chunk.text.startswith("#include <stdio.h>\n")


def test_root_paths_and_the_status() -> None:
    assert root_path("file:///work/my%20proj") == "/work/my proj"
    assert root_path("/plain/path") == "/plain/path"
    r = ring()
    r.pick(code("a"), "a.py", "file:///a.py")
    r.pick(code("b"), "b.py", "file:///b.py")
    assert r.status() == RingStatus(0, 2, 0, 0, ())
    r.commit()
    assert r.status() == RingStatus(2, 0, 0, 1, ("a.py", "b.py"))
    r.clear()
    assert r.status().chunks == 0 and r.status().version == 2


# --- memory (engine/memory.py) -------------------------------------------------------------------
def test_the_ring_is_bounded_in_bytes_even_with_four_byte_characters() -> None:
    """Sixteen chunks of 4,000 astral characters would be 1 MB of text and as much again of
    line sets: the ring keeps what fits its bytes, the newest."""
    r = ring()
    for i in range(40):
        text = "".join(f"𝔵_{i}_{j} = '{'😀' * 110}'\n" for j in range(32))
        assert r.pick(text, f"f{i}.py", f"file:///f{i}.py", line=16) is not None
        r.commit(force=True)
        usage = r.usage()
        assert usage.name == "contextRing" and 0 < usage.bytes <= usage.limit
    assert 1 <= len(r.chunks) < 16  # fewer than the count bound: the bytes bound first
    assert r.chunks[-1].doc_id == "file:///f39.py"  # the newest kept


def test_client_text_of_any_size_is_read_no_further_than_its_chunks() -> None:
    head = code("sent", 32 * MAX_CLIENT_CHUNKS)
    huge = head + "x" * 50_000_000  # a 50 MB paste: only its first lines can become chunks
    a, b = ring(), ring()
    assert a.add_text(huge, "snippet") == b.add_text(head, "snippet") == MAX_CLIENT_CHUNKS
    assert [c.text for c in a.pending] == [c.text for c in b.pending]
