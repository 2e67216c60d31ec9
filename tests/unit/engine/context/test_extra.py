"""engine/context/extra.py: the ring's chunks as tokens before a full prompt's FIM prefix, in
the repository-level layout, within a budget (a stand-in tokenizer)."""

from __future__ import annotations

from ghostfim.engine.context.extra import ExtraContextBuilder
from ghostfim.engine.context.ring import ContextChunk, ExtraContext
from ghostfim.engine.local.speed import PrefillCostModel
from ghostfim.engine.prompt.builder import PromptBuilder
from ghostfim.engine.prompt.fim import FimTemplate
from tests.support.fakes import words
from tests.unit.engine.context.helpers import code

# --- the prompt ---------------------------------------------------------------------------------
QWEN = FimTemplate(
    family="qwen", layout="psm", pre=1001, suf=1002, mid=1003, file_sep=1004, repo=1005
)


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
    extra = ExtraContext((ContextChunk("o.py", code("o", 4), "file:///o.py"),), "d.py")
    new = b.apply(parts, extra, PrefillCostModel(), room=500)
    assert (
        new.extra_tokens > 0
        and new.head[0] == 7
        and new.head[1] == 9
        and new.head[-len(parts.head) + 1 :] == (parts.head[1:])
    )
    assert new.plain_head == parts.plain_head  # the keystroke prompt is untouched
    assert b.apply(parts, extra, PrefillCostModel(), room=3) == parts  # no room: nothing
