"""Fill-in-the-middle templates, chosen from the model itself.

The vocabulary knows its FIM tokens (llama.cpp detects them by their text when it loads the
vocabulary: `llama_vocab_fim_pre/suf/mid/...`, -1 where absent). We identify the family from
those tokens' texts and the GGUF metadata, and never hard-code token ids.

Layouts:
- PSM (prefix, suffix, middle): `[bos] PRE prefix SUF suffix MID` -> the model writes the middle.
  Qwen2.5-Coder, StarCoder/StarCoder2, DeepSeek-Coder, CodeLlama, CodeGemma.
- SPM (suffix, prefix): `[bos] SUF suffix PRE prefix` -> Codestral's documented order.
- prefix-only: `[bos] prefix` for models without FIM tokens (e.g. SmolLM2): plain continuation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

Layout = Literal["psm", "spm", "prefix"]


@dataclass(frozen=True)
class FimTemplate:
    family: str
    layout: Layout
    pre: int = -1
    suf: int = -1
    mid: int = -1
    bos: int = -1  # prepended when >= 0
    # Token ids that end the middle besides what llama.cpp already calls end-of-generation:
    # the FIM tokens themselves (a model that emits one has left the hole) and file separators.
    stop_tokens: frozenset[int] = field(default_factory=frozenset)
    # Separator for repository-level context (other files before the prompt), -1 if none.
    file_sep: int = -1
    # Repository-name token that opens repository-level context (Qwen's <|repo_name|>), -1 if none.
    repo: int = -1

    @property
    def uses_suffix(self) -> bool:
        return self.layout != "prefix"


def _valid(*ids: int) -> bool:
    return all(i >= 0 for i in ids)


def detect_template(
    ids: Mapping[str, int],
    token_text: Callable[[int], str],
    *,
    model_name: str = "",
    architecture: str = "",
    add_bos: bool = False,
    find_token: Callable[[str], int] | None = None,
) -> FimTemplate:
    """Pick the FIM template for a model.

    ids: llama.cpp's special ids (keys bos, eos, eot, fim_pre, fim_suf, fim_mid, fim_pad,
    fim_rep, fim_sep); token_text: the vocabulary text of an id; find_token: look a special
    token up by its text (returns -1 when absent), used for separators llama.cpp does not name.
    """
    pre, suf, mid = ids.get("fim_pre", -1), ids.get("fim_suf", -1), ids.get("fim_mid", -1)
    bos = ids.get("bos", -1) if add_bos else -1
    ends = {ids.get(k, -1) for k in ("eos", "eot", "fim_pad", "fim_rep", "fim_sep")}
    lookup = find_token or (lambda _text: -1)
    if not _valid(pre, suf) and _valid(lookup("[PREFIX]"), lookup("[SUFFIX]")):
        # llama.cpp does not recognise Codestral's FIM tokens by their text.
        pre, suf = lookup("[PREFIX]"), lookup("[SUFFIX]")

    if not _valid(pre, suf):
        return FimTemplate(
            family="prefix-only",
            layout="prefix",
            bos=bos,
            stop_tokens=frozenset(i for i in ends if i >= 0),
        )

    pre_text = token_text(pre).strip().lstrip("▁")
    name = f"{model_name} {architecture}".lower()
    stops = {i for i in ends | {pre, suf, mid} if i >= 0}

    if pre_text == "[PREFIX]":
        # Codestral: suffix first, then prefix; the middle follows the prefix directly.
        return FimTemplate(
            family="codestral",
            layout="spm",
            pre=pre,
            suf=suf,
            mid=-1,
            bos=bos,
            stop_tokens=frozenset(stops),
        )
    if not _valid(mid):
        return FimTemplate(
            family="prefix-only",
            layout="prefix",
            bos=bos,
            stop_tokens=frozenset(i for i in ends if i >= 0),
        )

    if pre_text == "<|fim_prefix|>":
        if "gemma" in name or lookup("<|file_separator|>") >= 0:
            sep = lookup("<|file_separator|>")
            family = "codegemma"
        else:
            sep = ids.get("fim_sep", -1) if ids.get("fim_sep", -1) >= 0 else lookup("<|file_sep|>")
            family = "qwen"
    elif pre_text == "<fim_prefix>":
        sep = ids.get("fim_sep", -1) if ids.get("fim_sep", -1) >= 0 else lookup("<file_sep>")
        family = "starcoder"
    elif "fim▁begin" in pre_text or "fim_begin" in pre_text:
        sep, family = -1, "deepseek"
    elif pre_text == "<PRE>":
        sep, family = -1, "codellama"
        # llama.cpp looks for "_<EOT>" (ASCII underscore); CodeLlama's token is "▁<EOT>".
        stops.update(i for i in (lookup("▁<EOT>"), lookup("<EOT>")) if i >= 0)
    else:
        sep, family = ids.get("fim_sep", -1), "generic-psm"
    if sep >= 0:
        stops.add(sep)
    return FimTemplate(
        family=family,
        layout="psm",
        pre=pre,
        suf=suf,
        mid=mid,
        bos=bos,
        stop_tokens=frozenset(stops),
        file_sep=sep,
        repo=ids.get("fim_rep", -1) if sep >= 0 else -1,
    )
