"""harness/gguf_factory.py: its tiny GGUF models load and behave in llama.cpp as the engine
expects.

Uses llama.cpp's C API directly (as the engine does): load, vocabulary FIM ids, tokenize,
detokenize with a growing buffer, decode a batch, free.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.gguf_factory import FIM_STYLES, make_tiny_gguf, tiny_model_path, tiny_vocab

llama_cpp = pytest.importorskip("llama_cpp")


@llama_cpp.llama_log_callback
def _drop_log(_level: int, _text: bytes, _user_data: ctypes.c_void_p) -> None:
    """llama.cpp logs every load at length; tests only care about return values."""


@pytest.fixture(scope="module", autouse=True)
def _backend() -> None:
    # _drop_log is a module global, so the ctypes callback outlives every call into llama.cpp.
    llama_cpp.llama_log_set(_drop_log, ctypes.c_void_p(0))
    llama_cpp.llama_backend_init()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tiny-gguf")


@pytest.fixture(scope="module")
def style_paths(model_dir: Path) -> dict[str, Path]:
    return {s: make_tiny_gguf(model_dir / f"{s}.gguf", fim_style=s) for s in FIM_STYLES}


@dataclass
class Loaded:
    model: ctypes.c_void_p
    vocab: ctypes.c_void_p
    ctx: ctypes.c_void_p


@contextmanager
def load(path: Path) -> Iterator[Loaded]:
    """Model and a small context on the CPU, both freed on exit."""
    model = llama_cpp.llama_model_load_from_file(
        str(path).encode(), llama_cpp.llama_model_default_params()
    )
    assert model, f"llama.cpp refused {path}"
    try:
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = 256
        params.n_batch = params.n_ubatch = 64
        params.n_threads = params.n_threads_batch = 1
        ctx = llama_cpp.llama_init_from_model(model, params)
        assert ctx
        try:
            yield Loaded(model, llama_cpp.llama_model_get_vocab(model), ctx)
        finally:
            llama_cpp.llama_free(ctx)
    finally:
        llama_cpp.llama_model_free(model)


def tokenize(vocab: ctypes.c_void_p, text: str, *, special: bool = False) -> list[int]:
    data = text.encode()
    size = len(data) + 8
    while True:
        buf = (llama_cpp.llama_token * size)()
        n = llama_cpp.llama_tokenize(vocab, data, len(data), buf, size, False, special)
        if n >= 0:
            return list(buf[:n])
        size = -n


def piece(
    vocab: ctypes.c_void_p, token: int, *, special: bool = False, initial_size: int = 8
) -> bytes:
    """llama_token_to_piece, growing the buffer when it returns minus the size it needs."""
    size = initial_size
    while True:
        buf = ctypes.create_string_buffer(size)
        n = llama_cpp.llama_token_to_piece(vocab, token, buf, size, 0, special)
        if n >= 0:
            return buf.raw[:n]
        size = -n


def decode(loaded: Loaded, tokens: list[int]) -> int:
    batch = llama_cpp.llama_batch_init(len(tokens), 0, 1)
    try:
        for i, token in enumerate(tokens):
            batch.token[i] = token
            batch.pos[i] = i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = i == len(tokens) - 1
        batch.n_tokens = len(tokens)
        return llama_cpp.llama_decode(loaded.ctx, batch)
    finally:
        llama_cpp.llama_batch_free(batch)


def fim_ids(vocab: ctypes.c_void_p) -> tuple[int, int, int]:
    return (
        llama_cpp.llama_vocab_fim_pre(vocab),
        llama_cpp.llama_vocab_fim_suf(vocab),
        llama_cpp.llama_vocab_fim_mid(vocab),
    )


@pytest.mark.parametrize("style", sorted(FIM_STYLES))
def test_fim_ids_are_found(style_paths: dict[str, Path], style: str) -> None:
    spec = FIM_STYLES[style]
    vocab = tiny_vocab(style)
    with load(style_paths[style]) as m:
        if spec.fim is None:
            assert fim_ids(m.vocab) == (-1, -1, -1)
            return
        assert fim_ids(m.vocab) == tuple(vocab.id_of(t) for t in spec.fim)
        texts = [piece(m.vocab, t, special=True).decode() for t in fim_ids(m.vocab)]
        assert texts == list(spec.fim)


@pytest.mark.parametrize("style", sorted(FIM_STYLES))
def test_special_tokens_and_eog(style_paths: dict[str, Path], style: str) -> None:
    spec = FIM_STYLES[style]
    vocab = tiny_vocab(style)
    with load(style_paths[style]) as m:
        assert llama_cpp.llama_vocab_bos(m.vocab) == vocab.id_of(spec.bos)
        assert llama_cpp.llama_vocab_eos(m.vocab) == vocab.id_of(spec.eos)
        assert llama_cpp.llama_vocab_get_add_bos(m.vocab) == spec.add_bos
        assert llama_cpp.llama_vocab_is_eog(m.vocab, vocab.id_of(spec.eos))
        if spec.eot is not None:
            assert llama_cpp.llama_vocab_eot(m.vocab) == vocab.id_of(spec.eot)
        # Special tokens are rendered only on request: plain detokenization must skip them.
        assert piece(m.vocab, vocab.id_of(spec.eos)) == b""


@pytest.mark.parametrize("style", sorted(FIM_STYLES))
def test_fim_prompt_decodes(style_paths: dict[str, Path], style: str) -> None:
    spec = FIM_STYLES[style]
    with load(style_paths[style]) as m:
        if spec.fim is None:
            prompt = "def add(a, b):\n    return"
        else:
            pre, suf, mid = spec.fim
            prompt = f"{pre}def add(a, b):\n    return{suf}\n\nprint(add(1, 2)){mid}"
        tokens = tokenize(m.vocab, prompt, special=True)
        if spec.fim is not None:
            assert fim_ids(m.vocab)[0] == tokens[0]  # parsed as one control token, not text
        assert decode(m, tokens) == 0
        logits = llama_cpp.llama_get_logits_ith(m.ctx, -1)
        n_vocab = llama_cpp.llama_vocab_n_tokens(m.vocab)
        assert all(math.isfinite(logits[i]) for i in range(n_vocab))


@pytest.mark.parametrize(
    "text", ["def", "return", " return", "self", " self", "    ", " " * 16, " " * 40, "=" * 40]
)
def test_common_code_strings_are_single_tokens(style_paths: dict[str, Path], text: str) -> None:
    with load(style_paths["qwen"]) as m:
        assert tokenize(m.vocab, text) == [tiny_vocab("qwen").id_of(text)]


def test_indented_line_tokenizes_like_qwen(style_paths: dict[str, Path]) -> None:
    # Qwen2's pre-tokenizer gives the indent's last space to the word that follows.
    vocab = tiny_vocab("qwen")
    with load(style_paths["qwen"]) as m:
        tokens = tokenize(m.vocab, "    return self")
        assert tokens == [vocab.id_of("   "), vocab.id_of(" return"), vocab.id_of(" self")]


@pytest.mark.parametrize("text", [" " * 40, "=" * 40])
def test_long_piece_needs_a_grown_buffer(style_paths: dict[str, Path], text: str) -> None:
    with load(style_paths["qwen"]) as m:
        (token,) = tokenize(m.vocab, text)
        small = ctypes.create_string_buffer(32)
        # Minus the needed size: a fixed 32-byte buffer (Llama.detokenize) would lose this piece.
        assert llama_cpp.llama_token_to_piece(m.vocab, token, small, 32, 0, False) == -40
        assert piece(m.vocab, token) == text.encode()


def test_text_round_trips(style_paths: dict[str, Path]) -> None:
    text = "class A:\n    def f(self):\n" + " " * 40 + "return 1  # é, 字\n"
    with load(style_paths["qwen"]) as m:
        tokens = tokenize(m.vocab, text)
        assert b"".join(piece(m.vocab, t) for t in tokens).decode() == text


def test_codestral_fim_ids_need_metadata(model_dir: Path) -> None:
    # llama.cpp does not know [PREFIX]/[SUFFIX]/[MIDDLE] by text: a Codestral GGUF without
    # tokenizer.ggml.fim_*_token_id reports no FIM tokens, and the engine must look them up.
    path = make_tiny_gguf(
        model_dir / "codestral-bare.gguf", fim_style="codestral", fim_ids_in_metadata=False
    )
    with load(path) as m:
        assert fim_ids(m.vocab) == (-1, -1, -1)


def test_codegemma_is_named_in_metadata(style_paths: dict[str, Path]) -> None:
    with load(style_paths["codegemma"]) as m:
        buf = ctypes.create_string_buffer(256)
        n = llama_cpp.llama_model_meta_val_str(m.model, b"general.name", buf, len(buf))
        assert n > 0
        assert "codegemma" in buf.value.decode()


def test_llama_architecture_loads_and_decodes(model_dir: Path) -> None:
    path = make_tiny_gguf(model_dir / "llama-arch.gguf", arch="llama", fim_style="codellama")
    with load(path) as m:
        vocab = tiny_vocab("codellama")
        assert fim_ids(m.vocab) == tuple(vocab.id_of(t) for t in ("<PRE>", "<SUF>", "<MID>"))
        assert decode(m, tokenize(m.vocab, "<PRE>def f():", special=True)) == 0


def test_files_are_tiny(style_paths: dict[str, Path]) -> None:
    assert all(p.stat().st_size < 1_000_000 for p in style_paths.values())


def test_tiny_model_path_writes_once(tmp_path_factory: pytest.TempPathFactory) -> None:
    first = tiny_model_path(tmp_path_factory, "deepseek")
    mtime = first.stat().st_mtime_ns
    assert tiny_model_path(tmp_path_factory, "deepseek") == first
    assert first.stat().st_mtime_ns == mtime
