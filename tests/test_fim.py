"""FIM templates are chosen from the model itself (tiny models with each family's tokens)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ghostfim.engine.local import native
from ghostfim.engine.local.session import _template_of
from ghostfim.engine.prompt.fim import detect_template
from tests.support.gguf_factory import make_tiny_gguf

EXPECTED = {
    "qwen": ("qwen", "psm"),
    "starcoder": ("starcoder", "psm"),
    "deepseek": ("deepseek", "psm"),
    "codellama": ("codellama", "psm"),
    "codestral": ("codestral", "spm"),
    "codegemma": ("codegemma", "psm"),
    "none": ("prefix-only", "prefix"),
}


@pytest.mark.parametrize("style", sorted(EXPECTED))
def test_template_detected_from_vocabulary(style: str, tmp_path: Path) -> None:
    path = make_tiny_gguf(tmp_path / f"{style}.gguf", fim_style=style)
    model = native.load(path, n_ctx=256)
    try:
        t = _template_of(model)
        assert (t.family, t.layout) == EXPECTED[style]
        if t.layout != "prefix":
            assert model.token_text(t.pre).strip("▁ ") in {
                "<|fim_prefix|>",
                "<fim_prefix>",
                "<｜fim▁begin｜>",
                "<PRE>",
                "[PREFIX]",
            }
            assert t.pre in t.stop_tokens and t.suf in t.stop_tokens
        if style in ("deepseek", "codellama", "codestral", "codegemma"):
            assert t.bos >= 0, "these families expect a BOS token"
    finally:
        model.close()


def test_codestral_found_by_text_when_llama_cpp_does_not_name_it(tmp_path: Path) -> None:
    path = make_tiny_gguf(tmp_path / "c.gguf", fim_style="codestral", fim_ids_in_metadata=False)
    model = native.load(path, n_ctx=256)
    try:
        assert native.special_token_ids(model)["fim_pre"] == -1
        assert _template_of(model).family == "codestral"
    finally:
        model.close()


def test_no_fim_tokens_means_prefix_only() -> None:
    t = detect_template(
        {"fim_pre": -1, "fim_suf": -1, "fim_mid": -1, "eos": 2}, lambda i: "", add_bos=False
    )
    assert t.layout == "prefix" and not t.uses_suffix and 2 in t.stop_tokens
