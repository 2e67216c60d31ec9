"""Context from other files: the ring (picking, dedup, eviction, stable order, commits) and the
full prompt's layout with it (file separators before the FIM prefix, the budget, keystroke
prompts untouched), on the tiny model."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from ghostfim.engine.backend import CompletionRequest
from ghostfim.engine.context.ring import (
    DUPLICATE,
    MAX_CLIENT_CHUNKS,
    ContextChunk,
    ContextRing,
    ExtraContext,
    ExtraContextBuilder,
    containment,
    document_name,
    key_lines,
    similarity,
)
from ghostfim.engine.local.session import ModelSession
from ghostfim.engine.prompt.builder import PromptBuilder
from ghostfim.engine.prompt.fim import FimTemplate


def code(name: str, n: int = 20, start: int = 0) -> str:
    """n distinct lines of code about `name`."""
    return "".join(
        f"    {name}_{i} = compute_{name}({i}, {i * 7})\n" for i in range(start, start + n)
    )


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def ring(**kwargs: object) -> ContextRing:
    kwargs.setdefault("update_interval_s", 0.0)
    return ContextRing(**kwargs)  # type: ignore[arg-type]


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


# --- the prompt ---------------------------------------------------------------------------------
QWEN = FimTemplate(
    family="qwen", layout="psm", pre=1001, suf=1002, mid=1003, file_sep=1004, repo=1005
)


def words(text: str) -> list[int]:
    return [hash(w) % 997 for w in text.replace("\n", " \n ").split(" ") if w]


def test_extra_chunks_go_before_the_prefix_newest_within_budget() -> None:
    b = ExtraContextBuilder(words, QWEN)
    chunks = tuple(ContextChunk(f"{n}.py", code(n, 5), f"file:///{n}.py") for n in "abc")
    extra = ExtraContext(chunks, "cur.py", "proj")
    each = len(b.chunk_tokens(chunks[0]))
    tokens, n = b.head(extra, window="", budget=10_000)
    assert n == 3 and tokens[0] == QWEN.repo
    assert tokens.count(QWEN.file_sep) == 4  # three chunks and the current file
    assert tokens[-len(words("cur.py\n")) - 1 :] == [QWEN.file_sep, *words("cur.py\n")]
    # A budget for two chunks keeps the two newest, in ring order.
    tokens, n = b.head(extra, window="", budget=2 * each + 10)
    assert n == 2 and len(tokens) <= 2 * each + 10
    assert tokens[len(words("proj\n")) + 1 :][:each] == b.chunk_tokens(chunks[1])
    # Chunks the prompt's own window already holds are left out.
    tokens, n = b.head(extra, window=code("c", 5) + code("b", 5), budget=10_000)
    assert n == 1
    # No file separator: no extra context.
    plain = FimTemplate(family="deepseek", layout="psm", pre=1, suf=2, mid=3)
    assert ExtraContextBuilder(words, plain).head(extra, "", 10_000) == ([], 0)


def test_apply_puts_the_head_after_bos_only() -> None:
    with_bos = FimTemplate(family="starcoder", layout="psm", pre=1, suf=2, mid=3, bos=7, file_sep=9)
    pb = PromptBuilder(words, with_bos, prefix_tokens=40, suffix_tokens=10)
    parts = pb.parts("d", "def f():\n    ", "\nx = 1\n", 1)
    b = ExtraContextBuilder(words, with_bos)
    from ghostfim.engine.local.speed import PrefillCostModel

    extra = ExtraContext((ContextChunk("o.py", code("o", 4), "file:///o.py"),), "d.py")
    new, n = b.apply(parts, extra, PrefillCostModel(), room=500)
    assert (
        n > 0
        and new.head[0] == 7
        and new.head[1] == 9
        and new.head[-len(parts.head) + 1 :] == (parts.head[1:])
    )
    assert new.plain_head == parts.plain_head  # the keystroke prompt is untouched
    assert b.apply(parts, extra, PrefillCostModel(), room=3)[1] == 0  # no room: nothing


# --- with the tiny model ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def roomy_session(tiny_gguf: Path) -> Iterator[ModelSession]:
    """The tiny model with room in its full-prompt slot for extra context."""
    session = ModelSession.load(tiny_gguf, n_ctx=3 * 2048)
    yield session
    session.close()


OTHER = "def helper(values):\n" + code("h", 12) + "    return values\n"
CURRENT = "import os\n\n\ndef main():\n    total = helper([1, 2])\n    "


def request(
    mode: str = "full", extra: ExtraContext | None = None, **kw: object
) -> CompletionRequest:
    return CompletionRequest(
        prefix=CURRENT,
        suffix="\n    print(total)\n",
        doc_id="file:///p/main.py",
        mode=mode,  # type: ignore[arg-type]
        extra_context=extra,
        **kw,  # type: ignore[arg-type]
    )


def test_full_prompt_has_the_other_file_before_the_prefix(roomy_session: ModelSession) -> None:
    s = roomy_session
    t = s.template
    assert t.file_sep >= 0 and t.repo >= 0
    chunk = ContextChunk("util.py", OTHER, "file:///p/util.py")
    extra = ExtraContext((chunk,), "main.py", "p", budget=400)
    plain = s.build_prompt(request()).prompt
    prompt = s.build_prompt(request(extra=extra)).prompt
    expected_head = [
        t.repo,
        *s.tokenize("p\n"),
        t.file_sep,
        *s.tokenize("util.py\n" + OTHER),
        t.file_sep,
        *s.tokenize("main.py\n"),
    ]
    assert prompt.tokens[: len(expected_head)] == expected_head
    assert prompt.tokens[len(expected_head) :] == plain.tokens  # then the usual FIM prompt
    assert prompt.extra_tokens == len(expected_head) <= 400
    assert prompt.stable_tokens == plain.stable_tokens + len(expected_head)
    # A budget too small for the chunk: no extra context at all.
    small = s.build_prompt(request(extra=ExtraContext((chunk,), "main.py", "p", budget=20))).prompt
    assert small.tokens == plain.tokens and small.extra_tokens == 0


def test_keystroke_prompts_ignore_extra_context(roomy_session: ModelSession) -> None:
    s = roomy_session
    extra = ExtraContext((ContextChunk("util.py", OTHER, "file:///p/util.py"),), "main.py")
    with_extra = s.build_prompt(request("keystroke", extra)).prompt
    without = s.build_prompt(request("keystroke")).prompt
    assert with_extra.tokens == without.tokens and with_extra.extra_tokens == 0


def test_extra_context_stays_cached_across_requests(roomy_session: ModelSession) -> None:
    s = roomy_session
    a = ContextChunk("util.py", OTHER, "file:///p/util.py")
    extra = ExtraContext((a,), "main.py", "p", budget=800)
    first = s.complete(request(extra=extra, max_tokens=2))
    assert first.timings.extra_tokens > 0
    again = s.complete(request(extra=extra, max_tokens=2))
    assert again.timings.prefill_reused_tokens >= first.timings.extra_tokens
    # A chunk appended to the ring: what was before it is still served from the cache.
    b = ContextChunk("more.py", code("m", 6), "file:///p/more.py")
    grown = s.complete(
        request(extra=ExtraContext((a, b), "main.py", "p", budget=800), max_tokens=2)
    )
    assert grown.timings.extra_tokens > first.timings.extra_tokens
    assert grown.timings.prefill_reused_tokens >= len(s.extra.chunk_tokens(a))


# --- the service and the settings ---------------------------------------------------------------
class NoEvents:
    def __getattr__(self, name: str) -> object:
        return lambda *args, **kwargs: None


def test_service_feeds_the_ring_and_full_requests_only() -> None:
    from ghostfim.engine.config import EngineConfig
    from ghostfim.engine.service.completion import CompletionService, CursorState

    service = CompletionService(NoEvents(), EngineConfig(extra_context=True))  # type: ignore[arg-type]
    service.context.ring.update_interval_s = 0.0
    service.set_workspace_roots(["file:///p"])
    service.document_opened("file:///p/pkg/util.py", OTHER)
    state = CursorState("file:///p/main.py", 1, None, CURRENT, "\n", 5, len(CURRENT), 30)
    extra = service._request_for(state, "full").extra_context
    assert extra is not None and extra.project == "p" and extra.filename == "main.py"
    assert [c.filename for c in extra.chunks] == ["pkg/util.py"]
    assert service._request_for(state, "keystroke").extra_context is None
    # Leaving a document gives the chunk around its last cursor.
    other = CursorState("file:///p/b.py", 1, None, code("b", 30), code("b", 10, 30), 30, 0, 0)
    ring = service.context.ring

    def move(left: CursorState | None, to: CursorState) -> None:
        records = service.docs
        record = service._doc(to.doc_id)
        service.context.cursor_moved(
            to, record, left, records.get(left.doc_id) if left is not None else None
        )

    move(None, other)
    service._doc(other.doc_id)  # it had a request and is still open
    move(other, state)
    assert [c.filename for c in ring.pending] == ["b.py"]
    assert "b_30 " in ring.pending[0].text  # around the cursor, not the top
    service.document_closed(other.doc_id)  # closed: its chunk goes, and leaving it gives none
    assert ring.pending == []
    move(other, state)
    assert ring.pending == []
    # Edits give a chunk at most once a CHANGE_PICK_S; a save always does.
    service.document_edited("file:///p/pkg/util.py", OTHER + code("z", 20), 16)
    assert ring.pending == []  # util.py gave its chunk at open, just now
    service.document_saved("file:///p/pkg/util.py", OTHER + code("z", 20))
    assert len(ring.pending) == 1 and "z_" in ring.pending[0].text
    service._request_for(state, "keystroke")  # a keystroke never moves the ring
    assert len(ring.pending) == 1
    service.set_options(replace(service.config, extra_context=False))
    assert service._request_for(state, "full").extra_context is None
    service.set_options(replace(service.config, extra_context=True, extra_context_tokens=0))
    assert service._request_for(state, "full").extra_context is None
    assert service.status()["context"]["chunks"] >= 1


def test_settings() -> None:
    from ghostfim.lsp.settings import parse_settings, settings_to_client

    settings, problems = parse_settings({})
    assert problems == [] and settings.extra_context is False  # off unless measured to help
    assert settings.extra_context_tokens is None  # auto
    assert settings_to_client(settings)["extraContextTokens"] == "auto"
    settings, problems = parse_settings({"extraContext": True, "extraContextTokens": 512})
    assert problems == []
    assert settings.extra_context is True and settings.extra_context_tokens == 512
    assert parse_settings(settings_to_client(settings)) == (settings, [])
    bad, problems = parse_settings({"extraContextTokens": -1, "extraContext": "yes"}, settings)
    # Bad values keep the last valid ones.
    assert len(problems) == 2 and bad.extra_context_tokens == 512 and bad.extra_context is True


# --- over LSP -------------------------------------------------------------------------------------
async def test_lsp_a_second_opened_file_reaches_the_full_prompt(tiny_gguf: Path) -> None:
    import asyncio
    import sys

    from tests.support.lspclient import LspProcess

    client = await LspProcess.start([sys.executable, "-m", "ghostfim.cli.main", "serve"])
    try:
        options = {"model": {"path": str(tiny_gguf)}, "maxTokens": 4, "extraContext": True}
        await client.initialize(options)
        assert (await client.wait_ready())["state"] == "ready"
        for uri, text in (("file:///p/util.py", OTHER), ("file:///p/main.py", CURRENT)):
            item = {"uri": uri, "languageId": "python", "version": 1, "text": text}
            await client.notify("textDocument/didOpen", {"textDocument": item})
        await client.notify("textDocument/didSave", {"textDocument": {"uri": "file:///p/util.py"}})
        await client.notify("ghostfim/context", {"text": code("yank", 8)})
        lines = CURRENT.split("\n")
        position = {"line": len(lines) - 1, "character": len(lines[-1])}
        await client.call(
            "textDocument/inlineCompletion",
            {
                "textDocument": {"uri": "file:///p/main.py"},
                "position": position,
                "context": {"triggerKind": 1},  # explicit: the full prompt
            },
        )
        for _ in range(100):
            stats = [n.params for n in client.notifications if n.method == "ghostfim/stats"]
            if stats:
                break
            await asyncio.sleep(0.05)
        assert stats and stats[-1]["extraTokens"] > 0, stats
        context = (await client.call("ghostfim/status", None))["context"]
        assert {"util.py", "snippet"} <= set(context["files"]), context
        problems = [n for n in client.notifications if n.method == "window/showMessage"]
        assert not problems, problems
    finally:
        assert await client.stop() == 0


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
