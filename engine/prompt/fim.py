"""Fill-in-the-middle templates: one table of families, written as token texts.

A family is its FIM tokens' texts, the texts that end the middle, and its layout. The local
model resolves the texts to ids in its own vocabulary (`detect_template`: llama.cpp names the
FIM tokens it recognises, `llama_vocab_fim_pre/suf/mid/...`, and the rest are looked up by
their text), so no token id is ever hard-coded. A remote server holds the tokenizer, so there
the family comes from the model's name and the prompt is text (`family_for_name`).

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

from ghostfim.engine.context.definitions import ContextStyle

Layout = Literal["psm", "spm", "prefix"]


@dataclass(frozen=True)
class FimFamily:
    name: str
    layout: Layout
    pre: str = ""  # the FIM tokens' texts
    suf: str = ""
    mid: str = ""
    stops: tuple[str, ...] = ()  # texts of tokens that end the middle
    file_sep: str = ""  # repository-level context: the separator before each file
    pre_aliases: tuple[str, ...] = ()  # other spellings of `pre` in vocabularies
    name_hints: tuple[tuple[str, ...], ...] = ()  # words all in a model's name: this family
    # A prompt as text, where the tokens need spaces around them (CodeLlama's "<PRE> ").
    text_pre: str | None = None
    text_suf: str | None = None
    text_mid: str | None = None
    # How the workspace's definitions read in a prompt (engine/context/definitions.py): chosen
    # by measurement (bench/context_layout.py, docs/benchmarks.md "The workspace in the prompt").
    # Qwen2.5-Coder Instruct, small: "repo" (its repository-level layout) was the worst of all,
    # "comment" no worse than none; the others are unmeasured and take the same.
    context_style: ContextStyle = "comment"

    def prompt(self, prefix: str, suffix: str) -> str:
        """The prompt as text (for servers that take a string)."""
        pre = self.pre if self.text_pre is None else self.text_pre
        suf = self.suf if self.text_suf is None else self.text_suf
        mid = self.mid if self.text_mid is None else self.text_mid
        if self.layout == "prefix":
            return prefix
        if self.layout == "spm":
            return f"{suf}{suffix}{pre}{prefix}"
        return f"{pre}{prefix}{suf}{suffix}{mid}"

    def names_pre(self, text: str) -> bool:
        return bool(text) and (text == self.pre or text in self.pre_aliases)


FAMILIES: tuple[FimFamily, ...] = (
    # CodeGemma spells its tokens like Qwen's: told apart by its file separator (or its name).
    FimFamily(
        "codegemma",
        "psm",
        "<|fim_prefix|>",
        "<|fim_suffix|>",
        "<|fim_middle|>",
        ("<|file_separator|>", "<eos>"),
        file_sep="<|file_separator|>",
        name_hints=(("codegemma",),),
    ),
    FimFamily(
        "qwen",
        "psm",
        "<|fim_prefix|>",
        "<|fim_suffix|>",
        "<|fim_middle|>",
        ("<|endoftext|>", "<|file_sep|>", "<|fim_pad|>", "<|repo_name|>"),
        file_sep="<|file_sep|>",
        name_hints=(("qwen", "coder"),),
    ),
    FimFamily(
        "starcoder",
        "psm",
        "<fim_prefix>",
        "<fim_suffix>",
        "<fim_middle>",
        ("<|endoftext|>", "<file_sep>"),
        file_sep="<file_sep>",
        name_hints=(("starcoder",),),
    ),
    FimFamily(
        "deepseek",
        "psm",
        "<｜fim▁begin｜>",
        "<｜fim▁hole｜>",
        "<｜fim▁end｜>",
        ("<｜end▁of▁sentence｜>", "<|EOT|>"),
        pre_aliases=("<|fim▁begin|>", "<|fim_begin|>", "<｜fim_begin｜>"),
        name_hints=(("deepseek", "coder"),),
    ),
    FimFamily(
        "codellama",
        "psm",
        "<PRE>",
        "<SUF>",
        "<MID>",
        # llama.cpp looks for "_<EOT>" (an ASCII underscore); CodeLlama's token is "▁<EOT>".
        ("<EOT>", "▁<EOT>"),
        pre_aliases=("▁<PRE>",),
        name_hints=(("codellama",), ("code-llama",)),
        text_pre="<PRE> ",
        text_suf=" <SUF>",
        text_mid=" <MID>",
    ),
    FimFamily(
        "codestral",
        "spm",
        "[PREFIX]",
        "[SUFFIX]",
        "",
        ("</s>",),
        name_hints=(("codestral",),),
    ),
)
PREFIX_ONLY = FimFamily("prefix-only", "prefix")
BY_NAME: dict[str, FimFamily] = {f.name: f for f in (*FAMILIES, PREFIX_ONLY)}


def family_for_name(model_name: str) -> FimFamily:
    """The family a model name implies (a GGUF file name, a Hugging Face id or an Ollama tag
    all carry it); plain prefix completion when none is known."""
    name = model_name.lower()
    return next((f for f in FAMILIES if _named(f, name)), PREFIX_ONLY)


@dataclass(frozen=True)
class FimTemplate:
    """A family resolved to one vocabulary's token ids."""

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
    context_style: ContextStyle = "comment"  # the family's (FimFamily.context_style)

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
    """The FIM template of a vocabulary.

    ids: llama.cpp's special ids (keys bos, eos, eot, fim_pre, fim_suf, fim_mid, fim_pad,
    fim_rep, fim_sep); token_text: the vocabulary text of an id; find_token: a special token's
    id by its text (-1 when absent), for the texts llama.cpp does not name.
    """
    lookup = find_token or (lambda _text: -1)
    pre, suf, mid = ids.get("fim_pre", -1), ids.get("fim_suf", -1), ids.get("fim_mid", -1)
    bos = ids.get("bos", -1) if add_bos else -1
    ends = {ids.get(k, -1) for k in ("eos", "eot", "fim_pad", "fim_rep", "fim_sep")}
    codestral = BY_NAME["codestral"]
    if not _valid(pre, suf) and _valid(lookup(codestral.pre), lookup(codestral.suf)):
        pre, suf = lookup(codestral.pre), lookup(codestral.suf)  # llama.cpp misses these

    pre_text = token_text(pre).strip() if _valid(pre) else ""
    candidates = [f for f in FAMILIES if f.names_pre(pre_text)]
    family = _choose(candidates, f"{model_name} {architecture}".lower(), lookup)
    if not _valid(pre, suf) or (family is not None and family.layout == "psm" and not _valid(mid)):
        family = None
    if family is None and _valid(pre, suf, mid):
        family = FimFamily("generic-psm", "psm")  # FIM tokens of a family we do not know
    if family is None:
        return FimTemplate(
            family=PREFIX_ONLY.name,
            layout="prefix",
            bos=bos,
            stop_tokens=frozenset(i for i in ends if i >= 0),
        )
    stops = ends | {pre, suf} | ({mid} if family.layout == "psm" else set())
    stops |= {lookup(text) for text in family.stops}
    sep = _file_separator(family, ids, lookup)
    if sep >= 0:
        stops.add(sep)
    return FimTemplate(
        family=family.name,
        layout=family.layout,
        pre=pre,
        suf=suf,
        mid=mid if family.layout == "psm" else -1,
        bos=bos,
        stop_tokens=frozenset(i for i in stops if i >= 0),
        file_sep=sep,
        repo=ids.get("fim_rep", -1) if sep >= 0 else -1,
        context_style=family.context_style,
    )


def _file_separator(family: FimFamily, ids: Mapping[str, int], lookup: Callable[[str], int]) -> int:
    """The repository-level separator's id (-1: the family has none)."""
    named = ids.get("fim_sep", -1)
    if family.name == "generic-psm":
        return named
    if not family.file_sep:
        return -1
    if family.name == "codegemma":  # llama.cpp's fim_sep is not CodeGemma's file separator
        return lookup(family.file_sep)
    return named if named >= 0 else lookup(family.file_sep)


def _choose(
    candidates: list[FimFamily], name: str, lookup: Callable[[str], int]
) -> FimFamily | None:
    """Of the families spelling the prefix token this way, the one the vocabulary or the name
    gives away (its own file separator, or its name); else the last, the common one."""
    for family in candidates[:-1]:
        if (family.file_sep and lookup(family.file_sep) >= 0) or _named(family, name):
            return family
    return candidates[-1] if candidates else None


def _named(family: FimFamily, name: str) -> bool:
    return any(all(w in name for w in words) for words in family.name_hints)
