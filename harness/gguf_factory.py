"""Tiny random-weight GGUF models for fast unit tests of llama.cpp mechanics.

The files written here load in llama.cpp, tokenize, detokenize and decode, so tests of the
engine's plumbing (FIM token lookup, prompt building, KV-cache handling, detokenization of long
pieces, cancellation) run in milliseconds without a real model. Their weights are random: what
they generate is garbage, and they say nothing about completion quality.

The tokenizer is a byte-level BPE ("gpt2") vocabulary: all 256 byte tokens (GPT-2's byte-to-unicode
mapping), a few hundred merges learned from a fixed list of code fragments (so "def", " return",
"    ", 16 and 40 spaces, 40 '=' ... are single tokens), and the special tokens of one FIM family,
marked CONTROL so llama.cpp's vocabulary loader recognises them by their text.

Use from a conftest fixture, e.g.::

    @pytest.fixture(scope="session")
    def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
        return tiny_model_path(tmp_path_factory, "qwen")
"""

from __future__ import annotations

import functools
import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import gguf
import numpy as np

if TYPE_CHECKING:
    import pytest

__all__ = [
    "FIM_STYLES",
    "FimStyle",
    "TinyVocab",
    "byte_to_unicode",
    "make_tiny_gguf",
    "tiny_model_path",
    "tiny_vocab",
]


@dataclass(frozen=True)
class FimStyle:
    """The special tokens of one model family, with the texts the real models use."""

    # (prefix, suffix, middle) token texts, or None for a prefix-only model.
    fim: tuple[str, str, str] | None
    eos: str
    bos: str
    add_bos: bool = False
    eot: str | None = None
    # Other control tokens the family has (FIM pad, repo name, file separator).
    others: tuple[str, ...] = ()
    # False where llama.cpp's loader does not know the FIM texts and real GGUFs carry no
    # tokenizer.ggml.fim_*_token_id keys: such models report -1 unless the ids are in metadata.
    fim_autodetected: bool = True

    @property
    def specials(self) -> list[str]:
        """All special token texts once each, in the order they get ids."""
        texts = [self.bos, self.eos, self.eot, *(self.fim or ()), *self.others]
        return list(dict.fromkeys(t for t in texts if t is not None))


FIM_STYLES: dict[str, FimStyle] = {
    # Qwen2.5-Coder: bos is <|endoftext|> (not added); base models stop on <|endoftext|>.
    "qwen": FimStyle(
        fim=("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),
        others=("<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"),
        eos="<|endoftext|>",
        bos="<|endoftext|>",
        eot="<|im_end|>",
    ),
    "starcoder": FimStyle(
        fim=("<fim_prefix>", "<fim_suffix>", "<fim_middle>"),
        others=("<fim_pad>", "<file_sep>"),
        eos="<|endoftext|>",
        bos="<|endoftext|>",
    ),
    "deepseek": FimStyle(
        fim=("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"),
        eos="<｜end▁of▁sentence｜>",
        bos="<｜begin▁of▁sentence｜>",
        add_bos=True,
    ),
    # Real CodeLlama (SentencePiece) spells these "▁<PRE>" etc.; llama.cpp detects both spellings,
    # and the plain one is what a byte-level vocabulary can hold without an SPM space marker.
    "codellama": FimStyle(
        fim=("<PRE>", "<SUF>", "<MID>"),
        eos="</s>",
        bos="<s>",
        add_bos=True,
        eot="<EOT>",
    ),
    "codestral": FimStyle(
        fim=("[PREFIX]", "[SUFFIX]", "[MIDDLE]"),
        eos="</s>",
        bos="<s>",
        add_bos=True,
        fim_autodetected=False,
    ),
    "codegemma": FimStyle(
        fim=("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),
        others=("<|file_separator|>",),
        eos="<eos>",
        bos="<bos>",
        add_bos=True,
    ),
    "none": FimStyle(fim=None, eos="<|endoftext|>", bos="<|endoftext|>"),
}

# Code fragments the merges are learned from. Each is one pre-token as Qwen2's pre-tokenizer
# regex cuts code: words keep their leading space (" return"), an indent before a word loses
# its last space to the word ("        return" -> "       " + " return"), punctuation runs keep
# trailing newlines ("):\n").
_WORD_LIST = """
    def return self class import from if else elif for while in not and or is None True False
    print len range with as try except raise pass yield lambda async await del global assert
    break continue value name data result items append index key args kwargs list dict str int
    float open path test get set update super isinstance enumerate zip map sorted sum min max
    format join split strip replace lower upper tuple bool bytes object Exception ValueError
    TypeError KeyError os sys json math time logging typing Optional Any main run config model
    node count total response request user message error line text file size start end content
    function const let var this new public static void private struct fn impl pub use mut
    package func type interface
"""
_WORDS = tuple(_WORD_LIST.split())
_PUNCT = ("():", "()", "):", "):\n", ":\n", "\n", "\n\n", "==", " ==", " =", " #", "...", ",")
# 40-byte pieces exceed the 32-byte buffer llama-cpp-python's Llama.detokenize uses per token.
_RUNS = (*(" " * n for n in (2, 3, 4, 7, 8, 11, 12, 15, 16, 40)), "=" * 40)
TRAINING_FRAGMENTS: tuple[str, ...] = (
    *_WORDS,
    *(" " + w for w in _WORDS),
    *_PUNCT,
    *_RUNS,
)

_TOKEN_TYPE_NORMAL = int(gguf.TokenType.NORMAL)
_TOKEN_TYPE_CONTROL = int(gguf.TokenType.CONTROL)


@functools.cache
def byte_to_unicode() -> tuple[str, ...]:
    """GPT-2's byte -> printable character table (index = byte value).

    Printable Latin-1 bytes stand for themselves; the others (controls, space, soft hyphen ...)
    are shifted to U+0100 and up in byte order, so every byte has a visible, unique character.
    """
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    keep += range(ord("®"), ord("ÿ") + 1)
    kept = set(keep)
    table: list[str] = []
    shifted = 0
    for b in range(256):
        if b in kept:
            table.append(chr(b))
        else:
            table.append(chr(256 + shifted))
            shifted += 1
    return tuple(table)


def _encode_bytes(text: str) -> str:
    table = byte_to_unicode()
    return "".join(table[b] for b in text.encode("utf-8"))


def _merge_pair(symbols: list[str], pair: tuple[str, str]) -> list[str]:
    """Merge every non-overlapping occurrence of `pair`, left to right (as BPE encoding does)."""
    out: list[str] = []
    i = 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(symbols[i] + symbols[i + 1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


def _learn_merges(fragments: Sequence[str]) -> list[tuple[str, str]]:
    """Plain BPE training until every fragment is one symbol.

    Learning (rather than listing merges by hand) keeps the merge ranks consistent, so llama.cpp's
    encoder, which applies the lowest-ranked pair first, rebuilds each fragment as one token.
    Ties go to the lexically smallest pair so the vocabulary is the same on every run.
    """
    words = [list(_encode_bytes(f)) for f in dict.fromkeys(fragments)]
    merges: list[tuple[str, str]] = []
    while True:
        counts: Counter[tuple[str, str]] = Counter()
        for symbols in words:
            counts.update(itertools.pairwise(symbols))
        if not counts:
            return merges
        best = min(counts, key=lambda pair: (-counts[pair], pair))
        merges.append(best)
        words = [_merge_pair(symbols, best) for symbols in words]


@dataclass(frozen=True)
class TinyVocab:
    """Token texts (byte-mapped), their GGUF token types, and the BPE merges."""

    tokens: list[str]
    types: list[int]
    merges: list[str]
    _ids: dict[str, int] = field(repr=False)

    def id_of(self, text: str) -> int:
        """Id of a special token (given as is) or of a normal token (given as plain text)."""
        if text in self._ids and self.types[self._ids[text]] == _TOKEN_TYPE_CONTROL:
            return self._ids[text]
        return self._ids[_encode_bytes(text)]


@functools.cache
def _base_tokens() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Byte tokens (id = byte value) then learned merge results; and the merges as GGUF strings."""
    merges = _learn_merges(TRAINING_FRAGMENTS)
    tokens = list(byte_to_unicode())
    tokens += (left + right for left, right in merges)
    # Different pairs can build the same string ("ĠĠ"+"Ġ" and "Ġ"+"ĠĠ"): keep one token.
    unique = tuple(dict.fromkeys(tokens))
    return unique, tuple(f"{left} {right}" for left, right in merges)


def tiny_vocab(fim_style: str = "qwen") -> TinyVocab:
    """The vocabulary make_tiny_gguf writes for `fim_style` (specials get the last ids)."""
    style = FIM_STYLES[fim_style]
    base, merges = _base_tokens()
    tokens = [*base, *style.specials]
    types = [_TOKEN_TYPE_NORMAL] * len(base) + [_TOKEN_TYPE_CONTROL] * len(style.specials)
    ids = {text: i for i, text in enumerate(tokens)}
    return TinyVocab(tokens=tokens, types=types, merges=list(merges), _ids=ids)


def _add_tokenizer(
    writer: gguf.GGUFWriter, style: FimStyle, vocab: TinyVocab, fim_ids_in_metadata: bool
) -> None:
    writer.add_tokenizer_model("gpt2")
    # qwen2's pre-tokenizer regex is the one the merges were learned for.
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(vocab.tokens)
    writer.add_token_types(vocab.types)
    writer.add_token_merges(vocab.merges)
    # Always explicit: without these keys llama.cpp defaults a gpt2 vocab's bos and eos to id 11
    # (a byte token here).
    writer.add_bos_token_id(vocab.id_of(style.bos))
    writer.add_eos_token_id(vocab.id_of(style.eos))
    writer.add_add_bos_token(style.add_bos)
    writer.add_add_eos_token(False)
    if style.eot is not None:
        # Explicit because several texts qualify as EOT by name (<|im_end|>, <|endoftext|>) and
        # llama.cpp picks the first one it meets in a hash map: the choice would not be stable.
        writer.add_eot_token_id(vocab.id_of(style.eot))
    if style.fim is not None and fim_ids_in_metadata:
        keys = (
            gguf.Keys.Tokenizer.FIM_PRE_ID,
            gguf.Keys.Tokenizer.FIM_SUF_ID,
            gguf.Keys.Tokenizer.FIM_MID_ID,
        )
        for key, text in zip(keys, style.fim, strict=True):
            writer.add_uint32(key, vocab.id_of(text))


def _add_hparams(
    writer: gguf.GGUFWriter,
    *,
    n_layer: int,
    n_embd: int,
    n_head: int,
    n_head_kv: int,
    n_ff: int,
    n_ctx_train: int,
) -> None:
    writer.add_context_length(n_ctx_train)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_rope_freq_base(1_000_000.0)
    writer.add_layer_norm_rms_eps(1e-6)


def _add_weights(
    writer: gguf.GGUFWriter,
    rng: np.random.Generator,
    *,
    arch: str,
    n_vocab: int,
    n_layer: int,
    n_embd: int,
    n_head: int,
    n_head_kv: int,
    n_ff: int,
) -> None:
    """Random weights in llama.cpp's tensor layout (numpy shape = (out, in)).

    Matrices are f16 to keep files small; norms and biases stay f32 as converters write them.
    The output projection is tied to the embedding (no output.weight), as in Qwen2.5-Coder.
    """

    def matrix(name: str, rows: int, cols: int) -> None:
        data = rng.standard_normal((rows, cols), dtype=np.float32) * 0.02
        writer.add_tensor(name, data.astype(np.float16))

    def vector(name: str, size: int, *, ones: bool = False) -> None:
        data = np.ones(size, np.float32) if ones else rng.standard_normal(size, np.float32) * 0.02
        writer.add_tensor(name, data)

    n_embd_kv = n_embd // n_head * n_head_kv
    matrix("token_embd.weight", n_vocab, n_embd)
    for i in range(n_layer):
        vector(f"blk.{i}.attn_norm.weight", n_embd, ones=True)
        matrix(f"blk.{i}.attn_q.weight", n_embd, n_embd)
        matrix(f"blk.{i}.attn_k.weight", n_embd_kv, n_embd)
        matrix(f"blk.{i}.attn_v.weight", n_embd_kv, n_embd)
        if arch == "qwen2":  # Qwen2 has q/k/v biases; llama has none.
            vector(f"blk.{i}.attn_q.bias", n_embd)
            vector(f"blk.{i}.attn_k.bias", n_embd_kv)
            vector(f"blk.{i}.attn_v.bias", n_embd_kv)
        matrix(f"blk.{i}.attn_output.weight", n_embd, n_embd)
        vector(f"blk.{i}.ffn_norm.weight", n_embd, ones=True)
        matrix(f"blk.{i}.ffn_gate.weight", n_ff, n_embd)
        matrix(f"blk.{i}.ffn_up.weight", n_ff, n_embd)
        matrix(f"blk.{i}.ffn_down.weight", n_embd, n_ff)
    vector("output_norm.weight", n_embd, ones=True)


def _model_name(name: str, fim_style: str) -> str:
    # Code Gemma's FIM texts are Qwen's; only metadata can tell the families apart.
    if fim_style == "codegemma" and "codegemma" not in name.lower():
        return f"{name}-codegemma"
    return name


def make_tiny_gguf(
    path: Path,
    *,
    fim_style: str = "qwen",
    n_layer: int = 2,
    n_embd: int = 64,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_ff: int = 128,
    n_ctx_train: int = 2048,
    seed: int = 0,
    name: str = "tiny-test",
    arch: str = "qwen2",
    fim_ids_in_metadata: bool | None = None,
) -> Path:
    """Write a tiny random-weight GGUF model with `fim_style`'s special tokens; return `path`.

    arch: "qwen2" (default, like Qwen2.5-Coder) or "llama" (no attention biases).
    fim_ids_in_metadata: also write tokenizer.ggml.fim_{pre,suf,mid}_token_id. The default
    (None) writes them only for families llama.cpp cannot recognise by token text (codestral);
    pass False to get what a real Codestral GGUF gives: llama_vocab_fim_pre() == -1.
    general.name is `name`; for codegemma "-codegemma" is appended unless already there.
    """
    if fim_style not in FIM_STYLES:
        raise ValueError(f"unknown fim_style {fim_style!r}; one of {sorted(FIM_STYLES)}")
    if arch not in ("qwen2", "llama"):
        raise ValueError(f"arch must be 'qwen2' or 'llama', not {arch!r}")
    if n_embd % n_head or n_head % n_head_kv:
        raise ValueError("n_embd must divide by n_head and n_head by n_head_kv")
    style = FIM_STYLES[fim_style]
    if fim_ids_in_metadata is None:
        fim_ids_in_metadata = not style.fim_autodetected
    vocab = tiny_vocab(fim_style)

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(path, arch)
    writer.add_name(_model_name(name, fim_style))
    writer.add_description("random weights: for tests of mechanics only, output is garbage")
    writer.add_file_type(int(gguf.LlamaFileType.MOSTLY_F16))
    _add_hparams(
        writer,
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        n_ff=n_ff,
        n_ctx_train=n_ctx_train,
    )
    _add_tokenizer(writer, style, vocab, fim_ids_in_metadata)
    _add_weights(
        writer,
        np.random.default_rng(seed),
        arch=arch,
        n_vocab=len(vocab.tokens),
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        n_ff=n_ff,
    )
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:
        writer.close()
    return path


def tiny_model_path(tmp_path_factory: pytest.TempPathFactory, fim_style: str = "qwen") -> Path:
    """A tiny model of `fim_style` in the session's temp dir, written on first use only."""
    path = tmp_path_factory.getbasetemp() / "tiny-gguf" / f"{fim_style}.gguf"
    if not path.exists():
        make_tiny_gguf(path, fim_style=fim_style)
    return path
