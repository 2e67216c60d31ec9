"""engine/prompt/fim.py: the one table of FIM families, the family a model name implies, the
prompt as text, and the template of a vocabulary (token texts resolved to ids)."""

from __future__ import annotations

import pytest

from ghostfim.engine.prompt.fim import (
    BY_NAME,
    FAMILIES,
    PREFIX_ONLY,
    detect_template,
    family_for_name,
)


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("/root/.cache/ghostfim/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "qwen"),
        ("Qwen/Qwen2.5-Coder-1.5B", "qwen"),
        ("qwen2.5-coder:1.5b-base", "qwen"),
        ("bigcode/starcoder2-3b", "starcoder"),
        ("deepseek-ai/deepseek-coder-1.3b-base", "deepseek"),
        ("codellama:7b-code", "codellama"),
        ("mistralai/Codestral-22B-v0.1", "codestral"),
        ("google/codegemma-2b", "codegemma"),
        ("smollm2-135m-instruct-q4_1", "prefix-only"),
        ("qwen2.5-7b-instruct", "prefix-only"),  # not a coder model: no FIM training
        ("", "prefix-only"),
    ],
)
def test_the_fim_family_comes_from_the_model_name(name: str, family: str) -> None:
    assert family_for_name(name).name == family


def test_fim_prompts_put_the_cursor_where_each_family_expects_it() -> None:
    assert BY_NAME["qwen"].prompt("a", "b") == "<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>"
    assert BY_NAME["codestral"].prompt("a", "b") == "[SUFFIX]b[PREFIX]a"
    assert BY_NAME["codellama"].prompt("a", "b") == "<PRE> a <SUF>b <MID>"
    assert BY_NAME["prefix-only"].prompt("a", "b") == "a"


def test_the_table_is_one_entry_a_family() -> None:
    names = [f.name for f in FAMILIES]
    assert len(set(names)) == len(names) and PREFIX_ONLY.name not in names
    assert set(BY_NAME) == {*names, PREFIX_ONLY.name}
    for family in FAMILIES:
        assert family.layout in ("psm", "spm") and family.pre and family.suf
        assert family.stops and (family.layout == "spm" or family.mid)
        assert family.names_pre(family.pre) and not family.names_pre("")


def vocab(texts: dict[int, str]) -> tuple[dict[str, int], object, object]:
    by_text = {t: i for i, t in texts.items()}
    return by_text, (lambda i: texts.get(i, "")), (lambda t: by_text.get(t, -1))


def test_qwen_vocabulary_gives_qwen_with_its_stops_and_file_separator() -> None:
    texts = {
        1: "<|fim_prefix|>", 2: "<|fim_suffix|>", 3: "<|fim_middle|>", 4: "<|endoftext|>",
        5: "<|file_sep|>", 6: "<|repo_name|>", 7: "<|fim_pad|>",
    }  # fmt: skip
    _, text_of, find = vocab(texts)
    ids = {"fim_pre": 1, "fim_suf": 2, "fim_mid": 3, "eos": 4, "fim_sep": 5, "fim_rep": 6}
    t = detect_template(ids, text_of, find_token=find)  # type: ignore[arg-type]
    assert (t.family, t.layout, t.pre, t.suf, t.mid) == ("qwen", "psm", 1, 2, 3)
    assert t.file_sep == 5 and t.repo == 6 and t.bos == -1
    assert {1, 2, 3, 4, 5, 7} <= t.stop_tokens


def test_codegemma_spells_its_tokens_like_qwen_and_is_told_apart() -> None:
    texts = {1: "<|fim_prefix|>", 2: "<|fim_suffix|>", 3: "<|fim_middle|>", 9: "<|file_separator|>"}
    _, text_of, find = vocab(texts)
    ids = {"fim_pre": 1, "fim_suf": 2, "fim_mid": 3, "bos": 0}
    by_vocab = detect_template(ids, text_of, find_token=find, add_bos=True)  # type: ignore[arg-type]
    assert by_vocab.family == "codegemma" and by_vocab.file_sep == 9 and by_vocab.bos == 0
    _, text_of, _ = vocab({k: v for k, v in texts.items() if k != 9})
    by_name = detect_template(ids, text_of, model_name="CodeGemma 2B")  # type: ignore[arg-type]
    assert by_name.family == "codegemma"


def test_unknown_fim_tokens_are_a_generic_psm_and_none_is_prefix_only() -> None:
    texts = {1: "<fim-a>", 2: "<fim-b>", 3: "<fim-c>"}
    _, text_of, _ = vocab(texts)
    generic = detect_template({"fim_pre": 1, "fim_suf": 2, "fim_mid": 3}, text_of)  # type: ignore[arg-type]
    assert generic.family == "generic-psm" and generic.layout == "psm"
    none = detect_template({"eos": 2}, lambda i: "", add_bos=True)
    assert none.layout == "prefix" and not none.uses_suffix and none.bos == -1  # no bos id


def test_codestral_is_found_by_text_when_llama_cpp_names_no_fim_tokens() -> None:
    texts = {10: "[PREFIX]", 11: "[SUFFIX]", 12: "</s>"}
    _, text_of, find = vocab(texts)
    t = detect_template({"eos": 12, "bos": 1}, text_of, find_token=find, add_bos=True)  # type: ignore[arg-type]
    assert (t.family, t.layout, t.pre, t.suf, t.mid, t.bos) == ("codestral", "spm", 10, 11, -1, 1)
    assert 12 in t.stop_tokens
