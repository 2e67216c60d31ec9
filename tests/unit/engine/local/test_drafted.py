"""Speculative decoding's mechanics on tiny models the test builds (random weights, one
vocabulary): with a draft the output is the target's own, whether the draft agrees with it
always (the same weights) or hardly ever (other weights); the KV cache stays consistent."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ghostfim.engine.backend import CompletionRequest
from ghostfim.engine.local.drafted import DraftedSession, DraftLength, VocabularyMismatch
from ghostfim.engine.local.kvslots import SLOT_FULL
from ghostfim.engine.local.loading import open_model_file
from ghostfim.engine.local.session import ModelSession
from ghostfim.engine.memory import LINE_TOKENS_BYTES
from harness.gguf_factory import make_tiny_gguf

PROMPTS = [
    "def f(x):\n    return x",
    "import os\n\nclass A:\n    def run(self):\n        ",
    "for i in range(10):\n    if i == ",
]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("drafted")
    return {
        "target": make_tiny_gguf(base / "target.gguf", seed=0),
        "other": make_tiny_gguf(base / "other.gguf", seed=1),
        "starcoder": make_tiny_gguf(base / "star.gguf", seed=0, fim_style="starcoder"),
    }


def session(path: Path) -> ModelSession:
    return open_model_file(path, n_ctx=3 * 1024, calibrate=False)


def requests() -> list[CompletionRequest]:
    out = []
    for prompt in PROMPTS:
        for mode in ("keystroke", "full"):
            out.append(CompletionRequest(prompt, "\n", doc_id="d", mode=mode, max_tokens=16))  # type: ignore[arg-type]
    return out


@pytest.mark.parametrize("draft_name", ["target", "other"])
def test_the_output_is_the_targets_own(models: dict[str, Path], draft_name: str) -> None:
    alone = session(models["target"])
    both = DraftedSession(session(models["target"]), session(models[draft_name]))
    try:
        for request in requests() * 2:  # twice: the second time over reused KV cells
            a, b = alone.complete(request), both.complete(request)
            assert b.raw_text == a.raw_text, (request.prefix, a.raw_text, b.raw_text)
            assert b.token_ids == a.token_ids
            assert b.timings.draft_tokens >= b.timings.draft_accepted
        if draft_name == "target":
            assert both.accepted == both.proposed > 0  # the same weights: every token kept
        info = both.info
        assert info.draft is not None and info.name.count("+") == 1
    finally:
        alone.close()
        both.close()


def test_a_draft_with_another_tokenizer_is_refused(models: dict[str, Path]) -> None:
    target, draft = session(models["target"]), session(models["starcoder"])
    try:
        with pytest.raises(VocabularyMismatch):
            DraftedSession(target, draft)
    finally:
        target.close()
        draft.close()


def test_the_draft_proposes_more_while_kept_and_fewer_when_not() -> None:
    length = DraftLength(start=8, least=2, most=64)
    assert length.next(max_tokens=64) == 8
    length.observed(8, 8)
    assert length.next(64) == 16  # all kept: twice as many
    assert length.next(5) == 5  # never past the request's own limit
    for _ in range(6):
        length.observed(length.next(64), 1)  # the target parts after its own first token
    assert length.next(64) == 2  # down to the floor: a draft that disagrees costs little
    for _ in range(2):
        length.observed(length.next(64), length.next(64))
    assert length.next(64) >= 8  # and back up when it agrees again
    before = length.next(64)
    length.observed(0, 0)  # nothing proposed (a prefill-only request): nothing learnt
    assert length.next(64) == before


def test_a_disagreeing_draft_is_asked_for_fewer_tokens(models: dict[str, Path]) -> None:
    both = DraftedSession(session(models["target"]), session(models["other"]))
    try:
        for request in requests():
            both.complete(request)
        assert both.length.next(16) < 8  # other weights: it hardly ever agrees
    finally:
        both.close()


def test_the_snapshot_ram_is_the_servers_shared_by_both_models(models: dict[str, Path]) -> None:
    """`kvSnapshotMb` is one budget for the server: with a draft, the two models' snapshot
    limits add up to it (split by their KV bytes a token), and so does what status reports."""
    target, draft = session(models["target"]), session(models["other"])
    both = DraftedSession(target, draft)
    try:
        asked = target.budgets.effective.snapshot_bytes
        assert target.slots.snapshot_bytes + draft.slots.snapshot_bytes == asked
        per_target, per_draft = target.kv_bytes_per_token, draft.kv_bytes_per_token
        assert draft.slots.snapshot_bytes == asked * per_draft // (per_target + per_draft)
        both.set_budgets(replace(target.budgets.effective, kv_snapshot_mb=16))
        assert target.slots.snapshot_bytes + draft.slots.snapshot_bytes == 16 * 2**20
        kv = both.kv_status()
        assert kv is not None and kv.snapshot_limit_bytes == 16 * 2**20
        caches = {c.name: c for c in both.caches()}
        assert caches["kvSnapshots"].limit == 16 * 2**20
        assert caches["lineTokens"].limit == 2 * LINE_TOKENS_BYTES  # one builder each
    finally:
        both.close()


def test_a_tokens_kv_bytes_are_what_a_snapshot_grows_by(models: dict[str, Path]) -> None:
    s = session(models["target"])
    try:
        slot = SLOT_FULL  # where full prompts (the default mode) go
        s.complete(CompletionRequest("def f(x):\n    return x", "\n", doc_id="d", max_tokens=1))
        n, short = s.slots.length(slot), len(s.model.seq_state(slot))
        s.complete(CompletionRequest("def f(x):\n    return x + 1 + 2 + 3", "\n", doc_id="d"))
        n_long, long_ = s.slots.length(slot), len(s.model.seq_state(slot))
        assert n_long > n
        assert (long_ - short) / (n_long - n) == pytest.approx(s.kv_bytes_per_token, rel=0.05)
    finally:
        s.close()
