"""Speculative decoding's mechanics on tiny models the test builds (random weights, one
vocabulary): with a draft the output is the target's own, whether the draft agrees with it
always (the same weights) or hardly ever (other weights); the KV cache stays consistent."""

from __future__ import annotations

from pathlib import Path

import pytest

from ghostfim.engine.backend import CompletionRequest
from ghostfim.engine.local.drafted import DraftedSession, VocabularyMismatch
from ghostfim.engine.local.loading import open_model_file
from ghostfim.engine.local.session import ModelSession
from tests.support.gguf_factory import make_tiny_gguf

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
