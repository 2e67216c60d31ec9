"""The thin layer over llama.cpp's C API (through llama-cpp-python's ctypes bindings).

Only `ghostfim.engine.local.session` (the owner of the model and its KV cache) and
`ghostfim.engine.setup.doctor` use this module. We use the low-level API instead of
`llama_cpp.Llama` on purpose:

- `Llama.detokenize` drops token pieces longer than 32 bytes (code vocabularies have long
  whitespace tokens); `token_to_piece` below grows its buffer instead.
- `Llama.__init__(verbose=False)` redirects the process's stdout while loading, which would corrupt
  an LSP stdio stream; here llama.cpp's log goes to Python logging and stdout is never touched.
- `create_completion(suffix=...)` builds FIM prompts from placeholder ids; we build our own.
- Per-token overhead of `generate`/`create_completion` is 70-190 us; a numpy argmax is ~12 us.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import llama_cpp
import numpy as np

log = logging.getLogger("ghostfim.llama")

# llama_decode's return codes (llama.h).
DECODE_OK = 0
DECODE_NO_KV_SLOT = 1
DECODE_ABORTED = 2

# llama_flash_attn_type (llama.h).
FLASH_ATTN_AUTO = -1


# One of llama.cpp's handles (model, context, vocabulary), as llama_cpp types them.
_Pointer = TypeVar("_Pointer", bound=int)


class ModelLoadError(RuntimeError):
    """llama.cpp refused the file (missing, not a GGUF, truncated, unsupported architecture)."""


class DecodeError(RuntimeError):
    """llama_decode failed for a reason other than an abort we asked for."""


class ModelClosed(RuntimeError):
    """The model was closed (freed); nothing may use it any more."""


class DecodeAborted(Exception):
    """llama_decode stopped because the abort callback said so (a cancellation)."""


# ggml_log_level: 3 = WARN, 4 = ERROR; everything else (info, debug, continuation) is DEBUG.
_LOG_LEVELS = {3: logging.WARNING, 4: logging.ERROR}


def _log_to_python(level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
    # llama.cpp logs a lot at load time; keep it in Python logging at DEBUG except real problems.
    message = text.decode("utf-8", errors="replace").rstrip()
    if not message:
        return
    aborted = ("ret = 2", "compute failed", "failed with error", "failed to compute graph")
    if any(part in message for part in aborted):
        level = 0  # a decode we aborted on purpose (a cancel): not an error
    log.log(_LOG_LEVELS.get(level, logging.DEBUG), message)


# The C function pointer llama.cpp keeps: a module global, so it lives as long as the library.
_LOG_CALLBACK = llama_cpp.llama_log_callback(_log_to_python)

_backend_ready = False


def init_backend() -> None:
    """Initialise llama.cpp once and route its log into Python logging (never stdout)."""
    global _backend_ready
    if _backend_ready:
        return
    llama_cpp.llama_log_set(_LOG_CALLBACK, ctypes.c_void_p(0))
    llama_cpp.llama_backend_init()
    _backend_ready = True


def supports_gpu_offload() -> bool:
    init_backend()
    return bool(llama_cpp.llama_supports_gpu_offload())


def default_threads() -> int:
    """Physical-ish core count: llama.cpp's CPU kernels do not gain from SMT siblings."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 2)
    return max(1, n if n <= 4 else n // 2)


def check_gguf_header(path: Path) -> None:
    """Fail early and clearly on files that are not GGUF (llama.cpp's own message is vaguer)."""
    if not path.exists():
        raise ModelLoadError(f"model file not found: {path}")
    if not path.is_file():
        raise ModelLoadError(f"model path is not a file: {path}")
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise ModelLoadError(f"not a GGUF file (bad magic {magic!r}): {path}")


def check_model_file(path: Path) -> None:
    """Raise ModelLoadError for what loading would find wrong with the file's structure (not
    a GGUF, truncated, an unknown architecture) without loading its weights: llama.cpp reads
    the metadata, checks every tensor's bounds and builds the vocabulary only (0.2 s for a
    135M model). For a switch that is skipped, so that a broken file is still reported."""
    mparams = llama_cpp.llama_model_default_params()
    mparams.vocab_only = True
    llama_cpp.llama_model_free(_load_model_file(path, mparams))


def _load_model_file(path: Path, mparams: llama_cpp.llama_model_params) -> llama_cpp.llama_model_p:
    """llama.cpp's model load, after our own header check; ModelLoadError when it fails."""
    init_backend()
    check_gguf_header(path)
    model: llama_cpp.llama_model_p | None
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), mparams)
    if not model:
        raise ModelLoadError(
            f"llama.cpp could not load {path} (corrupt, truncated or unsupported GGUF)"
        )
    return model


Progress = Callable[[float], None]  # a model load's progress, 0..1


@dataclass
class NativeModel:
    """A loaded model with one context. Freed explicitly with `close()`."""

    path: Path
    # None once closed (`_live` turns that into ModelClosed).
    model: llama_cpp.llama_model_p | None
    ctx: llama_cpp.llama_context_p | None
    vocab: llama_cpp.llama_vocab_p | None
    n_ctx: int
    n_batch: int
    n_vocab: int
    n_gpu_layers: int
    n_layer: int
    _batch: llama_cpp.llama_batch | None
    _abort_cb: object = None

    # --- metadata -------------------------------------------------------------------------
    def meta(self, key: str) -> str | None:
        model = self._live(self.model)
        buf = ctypes.create_string_buffer(256)
        n = llama_cpp.llama_model_meta_val_str(model, key.encode(), buf, len(buf))
        if n < 0:
            return None
        if n >= len(buf):
            buf = ctypes.create_string_buffer(n + 1)
            llama_cpp.llama_model_meta_val_str(model, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8", errors="replace")

    def size_bytes(self) -> int:
        return int(llama_cpp.llama_model_size(self._live(self.model)))

    def kv_bytes_per_token(self) -> int:
        """What one token's KV cells take: keys and values of every layer, 16 bits each (the
        cache type the context is created with). A KV snapshot grows by this per token."""
        model = self._live(self.model)
        head_dim = int(llama_cpp.llama_model_n_embd(model)) // max(
            1, int(llama_cpp.llama_model_n_head(model))
        )
        return 2 * self.n_layer * int(llama_cpp.llama_model_n_head_kv(model)) * head_dim * 2

    # --- vocabulary -----------------------------------------------------------------------
    def tokenize(
        self, text: str, *, add_special: bool = False, parse_special: bool = False
    ) -> list[int]:
        vocab = self._live(self.vocab)
        data = text.encode("utf-8")
        capacity = len(data) + 8
        buf = (llama_cpp.llama_token * capacity)()
        n = llama_cpp.llama_tokenize(
            vocab, data, len(data), buf, capacity, add_special, parse_special
        )
        if n < 0:  # should not happen (a token is at least one byte) but the API allows it
            capacity = -n
            buf = (llama_cpp.llama_token * capacity)()
            n = llama_cpp.llama_tokenize(
                vocab, data, len(data), buf, capacity, add_special, parse_special
            )
        return list(buf[:n])

    def token_piece(self, token: int, *, special: bool = False) -> bytes:
        """The bytes of one token; grows the buffer for long pieces (the 32-byte trap)."""
        vocab = self._live(self.vocab)
        size = 64
        while True:
            buf = ctypes.create_string_buffer(size)
            n = llama_cpp.llama_token_to_piece(vocab, token, buf, size, 0, special)
            if n >= 0:
                return buf.raw[:n]
            size = -n

    def token_text(self, token: int) -> str:
        """The vocabulary's stored text of a token (for special tokens: '<|fim_prefix|>' etc.)."""
        raw = llama_cpp.llama_vocab_get_text(self._live(self.vocab), token)
        return raw.decode("utf-8", errors="replace") if raw else ""

    def is_eog(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_eog(self._live(self.vocab), token))

    # --- KV cache -------------------------------------------------------------------------
    def kv_remove_from(self, pos: int, seq: int = 0) -> None:
        """Drop a sequence's cells at positions >= pos."""
        mem = llama_cpp.llama_get_memory(self._live(self.ctx))
        llama_cpp.llama_memory_seq_rm(mem, seq, pos, -1)

    def kv_clear(self) -> None:
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self._live(self.ctx)), True)

    def seq_state(self, seq: int) -> bytes:
        """The KV cells of one sequence, serialized (not the whole context: no logits, no
        other sequences; a few MB for a keystroke window where `save_state` copies hundreds)."""
        ctx = self._live(self.ctx)
        size = int(llama_cpp.llama_state_seq_get_size(ctx, seq))
        buf = (ctypes.c_ubyte * size)()
        written = int(llama_cpp.llama_state_seq_get_data(ctx, buf, size, seq))
        if written <= 0:
            raise DecodeError(f"llama_state_seq_get_data wrote nothing for sequence {seq}")
        return ctypes.string_at(buf, written)  # one copy (slicing a ctypes array is per byte)

    def restore_seq_state(self, data: bytes, seq: int) -> None:
        """Put a `seq_state` back into sequence `seq` (its old cells are dropped first)."""
        ctx = self._live(self.ctx)
        self.kv_remove_from(0, seq)
        buf = (ctypes.c_ubyte * len(data)).from_buffer_copy(data)
        if int(llama_cpp.llama_state_seq_set_data(ctx, buf, len(data), seq)) == 0:
            self.kv_remove_from(0, seq)  # a partial restore must not leave stale cells
            raise DecodeError(f"llama_state_seq_set_data could not restore sequence {seq}")

    # --- decoding -------------------------------------------------------------------------
    def set_abort(self, callback: object | None) -> None:
        """Install (or remove) llama.cpp's abort callback; it is polled between graph nodes.

        CUDA ignores it, which is why prefill also goes in chunks with a check between them.
        """
        if not self.ctx:
            self._abort_cb = None
            return  # closed: nothing holds the callback any more
        self._abort_cb = callback  # keep the ctypes callback alive while llama.cpp holds it
        if callback is None:
            callback = llama_cpp.ggml_abort_callback()  # a NULL function pointer
        llama_cpp.llama_set_abort_callback(self.ctx, callback, ctypes.c_void_p(0))

    def decode(
        self,
        tokens: Sequence[int],
        start_pos: int,
        *,
        want_logits: bool,
        seq: int = 0,
        all_logits: bool = False,
    ) -> None:
        """Decode `tokens` at positions start_pos.. of a sequence (at most n_batch tokens);
        the logits of the last one, or (`all_logits`, to check a draft) of every one."""
        ctx = self._live(self.ctx)
        n = len(tokens)
        if n == 0 or n > self.n_batch:
            raise ValueError(f"decode takes 1..{self.n_batch} tokens, got {n}")
        batch = self._batch
        assert batch is not None  # freed only with the context, and _live(self.ctx) passed
        batch.n_tokens = n
        for i, tok in enumerate(tokens):
            batch.token[i] = tok
            # llama_cpp types `pos` as an array of arrays; llama.h has `llama_pos *pos`.
            batch.pos[i] = start_pos + i  # type: ignore[call-overload]
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq
            batch.logits[i] = 1 if all_logits else 0
        batch.logits[n - 1] = 1 if want_logits or all_logits else 0
        rc = llama_cpp.llama_decode(ctx, batch)
        if rc == DECODE_ABORTED:
            raise DecodeAborted()
        if rc != DECODE_OK:
            raise DecodeError(f"llama_decode returned {rc} (n_tokens={n}, pos={start_pos})")

    def argmax_last_with_prob(self, among: np.ndarray | None = None) -> tuple[int, float]:
        """The greedy pick and the model's probability of it (softmax over the whole
        vocabulary, even when the pick is restricted): what the confidence filter reads. The
        logits are there already; the softmax costs well under a millisecond."""
        return self.argmax_at(-1, among)

    def argmax_at(self, index: int, among: np.ndarray | None = None) -> tuple[int, float]:
        """As argmax_last_with_prob, for the batch's token `index` (-1: the last) of the last
        decode (one made with all_logits for any other than the last)."""
        ptr = llama_cpp.llama_get_logits_ith(self._live(self.ctx), index)
        logits = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))
        if among is not None and len(among):
            token = int(among[int(logits[among].argmax())])
        else:
            token = int(logits.argmax())
        top = float(logits.max())
        total = float(np.exp(logits - top, dtype=np.float32).sum())
        return token, float(np.exp(logits[token] - top)) / total

    @property
    def closed(self) -> bool:
        return not self.model

    def _live(self, pointer: _Pointer | None) -> _Pointer:
        """A pointer of this model, or ModelClosed (llama.cpp would crash on NULL)."""
        if not pointer:
            raise ModelClosed(f"{self.path.name} is closed")
        return pointer

    def close(self) -> None:
        """Free the batch, the context (its KV cache and compute buffers) and the model's
        weights, in that order. Safe to call twice, and after a partial failure."""
        ctx, model, batch = self.ctx, self.model, self._batch
        self.ctx = self.model = self.vocab = None
        self._batch = None
        self._abort_cb = None
        if batch is not None:
            llama_cpp.llama_batch_free(batch)
        if ctx:
            llama_cpp.llama_free(ctx)
        if model:
            llama_cpp.llama_model_free(model)

    def __del__(self) -> None:
        # A model dropped without close() (a load that failed after this was built) must not
        # keep hundreds of MB of weights and KV cache until the process ends.
        with contextlib.suppress(Exception):  # at interpreter exit llama_cpp may be gone
            self.close()


def load(
    path: Path,
    *,
    n_ctx: int = 4096,
    n_batch: int = 256,
    n_gpu_layers: int = 0,
    n_threads: int | None = None,
    flash_attn: bool = True,
    n_seq: int = 1,
    progress: Progress | None = None,
) -> NativeModel:
    """Load a GGUF model and create one context with room for n_ctx tokens.

    `progress` is called with 0..1 while the weights load (on the loading thread)."""
    mparams = llama_cpp.llama_model_default_params()
    mparams.n_gpu_layers = n_gpu_layers
    if progress is not None:

        def report(fraction: float, _user_data: ctypes.c_void_p) -> bool:
            with contextlib.suppress(Exception):  # a failing listener must not stop the load
                progress(float(fraction))
            return True  # false would abort the load

        callback = llama_cpp.llama_progress_callback(report)
        mparams.progress_callback = callback  # kept alive by this frame during the load
    model = _load_model_file(path, mparams)
    vocab = llama_cpp.llama_model_get_vocab(model)
    threads = n_threads or default_threads()
    cparams = llama_cpp.llama_context_default_params()
    cparams.n_ctx = n_ctx
    cparams.n_batch = n_batch
    cparams.n_ubatch = n_batch
    cparams.n_seq_max = n_seq
    cparams.kv_unified = True  # sequences share one pool of n_ctx cells
    cparams.n_threads = threads
    cparams.n_threads_batch = threads
    cparams.no_perf = True
    cparams.flash_attn_type = FLASH_ATTN_AUTO if flash_attn else 0
    ctx = llama_cpp.llama_init_from_model(model, cparams)
    if not ctx:
        llama_cpp.llama_model_free(model)
        raise ModelLoadError(f"llama.cpp could not create a context for {path} (n_ctx={n_ctx})")
    batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
    return NativeModel(
        path=path,
        model=model,
        ctx=ctx,
        vocab=vocab,
        n_ctx=int(llama_cpp.llama_n_ctx(ctx)),
        n_batch=n_batch,
        n_vocab=int(llama_cpp.llama_vocab_n_tokens(vocab)),
        n_gpu_layers=n_gpu_layers,
        n_layer=int(llama_cpp.llama_model_n_layer(model)),
        _batch=batch,
    )


def special_token_ids(nm: NativeModel) -> dict[str, int]:
    """The vocabulary's own idea of its special tokens (-1 where the model has none)."""
    v = nm.vocab
    return {
        "bos": int(llama_cpp.llama_vocab_bos(v)),
        "eos": int(llama_cpp.llama_vocab_eos(v)),
        "eot": int(llama_cpp.llama_vocab_eot(v)),
        "fim_pre": int(llama_cpp.llama_vocab_fim_pre(v)),
        "fim_suf": int(llama_cpp.llama_vocab_fim_suf(v)),
        "fim_mid": int(llama_cpp.llama_vocab_fim_mid(v)),
        "fim_pad": int(llama_cpp.llama_vocab_fim_pad(v)),
        "fim_rep": int(llama_cpp.llama_vocab_fim_rep(v)),
        "fim_sep": int(llama_cpp.llama_vocab_fim_sep(v)),
    }


def adds_bos(nm: NativeModel) -> bool:
    return bool(llama_cpp.llama_vocab_get_add_bos(nm.vocab))
