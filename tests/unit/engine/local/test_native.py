"""engine/local/native.py: the thin layer over llama.cpp's C API, on self-made tiny models."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ghostfim.engine.local import native


@pytest.fixture
def model(tiny_gguf: Path) -> Iterator[native.NativeModel]:
    m = native.load(tiny_gguf, n_ctx=512, n_batch=64, n_seq=3)
    yield m
    m.close()


def test_close_is_idempotent_and_use_after_close_raises(tiny_gguf: Path) -> None:
    from ghostfim.engine.local.loading import open_model_file

    session = open_model_file(tiny_gguf, n_ctx=512, calibrate=False)
    model = session.model
    session.close()
    session.close()  # twice: no double free
    model.close()
    assert model.closed
    for use in (
        lambda: model.tokenize("x"),
        lambda: model.decode([1], 0, want_logits=True),
        lambda: model.kv_clear(),
        lambda: model.token_piece(1),
        lambda: model.meta("general.name"),
    ):
        with pytest.raises(native.ModelClosed):
            use()
    model.set_abort(None)  # nothing holds a callback any more: harmless


def test_files_that_are_not_models_fail_clearly(tmp_path: Path, tiny_gguf: Path) -> None:
    with pytest.raises(native.ModelLoadError, match="not found"):
        native.check_gguf_header(tmp_path / "missing.gguf")
    with pytest.raises(native.ModelLoadError, match="not a file"):
        native.check_gguf_header(tmp_path)
    text = tmp_path / "notes.gguf"
    text.write_text("hello")
    with pytest.raises(native.ModelLoadError, match="bad magic"):
        native.check_gguf_header(text)
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(tiny_gguf.read_bytes()[: tiny_gguf.stat().st_size // 3])
    native.check_gguf_header(cut)  # the magic is right ...
    with pytest.raises(native.ModelLoadError, match="could not load"):
        native.check_model_file(cut)  # ... but llama.cpp refuses the structure
    native.check_model_file(tiny_gguf)
    with pytest.raises(native.ModelLoadError):
        native.load(cut)


def test_tokens_round_trip_and_long_pieces_grow_the_buffer(model: native.NativeModel) -> None:
    text = "def f(x):\n" + " " * 40 + "return x\n" + "=" * 40 + "\n"
    tokens = model.tokenize(text)
    pieces = [model.token_piece(t) for t in tokens]
    assert b"".join(pieces).decode() == text
    assert max(len(p) for p in pieces) >= 40  # a piece past llama-cpp-python's 32 bytes
    assert model.tokenize("") == []


def test_special_tokens_and_metadata(model: native.NativeModel) -> None:
    ids = native.special_token_ids(model)
    assert set(ids) >= {"bos", "eos", "fim_pre", "fim_suf", "fim_mid"}
    assert model.token_text(ids["fim_pre"]) == "<|fim_prefix|>"
    assert model.tokenize("<|fim_prefix|>", parse_special=True) == [ids["fim_pre"]]
    assert model.is_eog(ids["eos"]) and not model.is_eog(model.tokenize("x")[0])
    assert isinstance(native.adds_bos(model), bool)
    assert model.meta("general.architecture") == "qwen2"
    assert model.meta("no.such.key") is None
    assert model.size_bytes() > 0 and model.n_vocab > 256 and model.n_layer >= 1


def test_decode_takes_one_batch_at_most_and_gives_logits(model: native.NativeModel) -> None:
    with pytest.raises(ValueError, match=r"1\.\.64"):
        model.decode([], 0, want_logits=True)
    with pytest.raises(ValueError, match=r"1\.\.64"):
        model.decode([1] * 65, 0, want_logits=True)
    tokens = model.tokenize("x = 1\ny = ")
    model.decode(tokens, 0, want_logits=True, seq=1)
    first, prob = model.argmax_last_with_prob()
    assert 0 <= first < model.n_vocab and 0.0 < prob <= 1.0
    among, _ = model.argmax_last_with_prob(among=np.array([5, 7]))
    assert among in (5, 7)


def test_a_sequences_cells_are_saved_and_restored(model: native.NativeModel) -> None:
    tokens = model.tokenize("alpha = beta + gamma\n")
    model.decode(tokens, 0, want_logits=True, seq=1)
    expected = model.argmax_last_with_prob()[0]
    state = model.seq_state(1)
    assert len(state) > 0
    model.kv_clear()
    model.restore_seq_state(state, 2)  # into another sequence: it continues from there
    model.decode(model.tokenize(" "), len(tokens), want_logits=True, seq=2)
    model.kv_clear()
    model.restore_seq_state(state, 1)
    model.kv_remove_from(len(tokens) - 1, 1)
    model.decode(tokens[-1:], len(tokens) - 1, want_logits=True, seq=1)
    assert model.argmax_last_with_prob()[0] == expected  # the same cells: the same next token


def test_the_host_facts() -> None:
    assert native.default_threads() >= 1
    assert isinstance(native.supports_gpu_offload(), bool)
