"""Write a GGUF with Qwen2.5-Coder's architecture and tensor shapes but RANDOM WEIGHTS.

Such a file costs llama.cpp the same compute per token as the real model of that size (same
architecture, shapes, quantization type and vocabulary), so it serves to time model sizes that
cannot be downloaded here (e.g. the 3B). Its output is garbage: it is for timing only and says
nothing about completion quality.

The tokenizer and every tokenizer.* key are copied from a real Qwen2.5-Coder GGUF (any size, or a
tokenizer-only file written with --tokenizer-only), so prompts tokenize to the same lengths as with
the real model. Depends only on numpy and gguf: it also runs on machines without network access.

    python -m bench.make_gguf --shape qwen2.5-coder-1.5b --quant q8_0 --out /tmp/x.gguf
    python -m bench.make_gguf --tokenizer-only --out /tmp/qwen-tokenizer.gguf  # ~4 MB

Q4_K_M is not offered: gguf-py 0.19 has no Q4_K quantizer (only dequantization).
"""

from __future__ import annotations

import argparse
import mmap
import os
import struct
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf
import numpy as np

ARCH = "qwen2"
BANNER = "make_gguf [RANDOM WEIGHTS: timing only, says nothing about quality]"
# Weights are drawn with this standard deviation (typical of trained LLM matrices), so
# activations stay finite through all layers: NaNs could take different kernel paths.
WEIGHT_STD = 0.02
# Q8_0 blocks: 32 int8 values sharing one f16 scale (ggml's block_q8_0).
Q8_BLOCK = 32
# Uniform int8 in [-128, 127] has standard deviation ~73.9.
Q8_SCALE = WEIGHT_STD / 73.9


@dataclass(frozen=True)
class Shape:
    """Hyperparameters from the published config.json of each Qwen2.5-Coder size."""

    n_layer: int
    n_embd: int
    n_ff: int
    n_head: int
    n_head_kv: int
    n_vocab: int = 151936
    n_ctx_train: int = 32768
    rope_theta: float = 1_000_000.0
    rms_eps: float = 1e-6

    @property
    def n_embd_kv(self) -> int:
        return self.n_embd // self.n_head * self.n_head_kv


SHAPES: dict[str, Shape] = {
    # All three tie the output projection to the embedding (tie_word_embeddings: true).
    "qwen2.5-coder-0.5b": Shape(n_layer=24, n_embd=896, n_ff=4864, n_head=14, n_head_kv=2),
    "qwen2.5-coder-1.5b": Shape(n_layer=28, n_embd=1536, n_ff=8960, n_head=12, n_head_kv=2),
    "qwen2.5-coder-3b": Shape(n_layer=36, n_embd=2048, n_ff=11008, n_head=16, n_head_kv=2),
}

QUANTS: dict[str, tuple[gguf.GGMLQuantizationType, gguf.LlamaFileType]] = {
    "q8_0": (gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
    "f16": (gguf.GGMLQuantizationType.F16, gguf.LlamaFileType.MOSTLY_F16),
}


def default_tokenizer_source() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "ghostfim" / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


def say(message: str) -> None:
    print(f"{BANNER}: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]  # numpy order: (rows, cols) = (out features, in features)
    is_matrix: bool  # matrices get the chosen quantization; norms and biases stay f32
    fill: float = 0.0  # norms are 1.0; 0.0 means random


def tensor_specs(shape: Shape) -> Iterator[TensorSpec]:
    """llama.cpp's qwen2 tensors in convert order; no output.weight (tied embeddings)."""
    yield TensorSpec("token_embd.weight", (shape.n_vocab, shape.n_embd), True)
    for i in range(shape.n_layer):
        blk = f"blk.{i}"
        yield TensorSpec(f"{blk}.attn_norm.weight", (shape.n_embd,), False, fill=1.0)
        yield TensorSpec(f"{blk}.attn_q.weight", (shape.n_embd, shape.n_embd), True)
        yield TensorSpec(f"{blk}.attn_q.bias", (shape.n_embd,), False)
        yield TensorSpec(f"{blk}.attn_k.weight", (shape.n_embd_kv, shape.n_embd), True)
        yield TensorSpec(f"{blk}.attn_k.bias", (shape.n_embd_kv,), False)
        yield TensorSpec(f"{blk}.attn_v.weight", (shape.n_embd_kv, shape.n_embd), True)
        yield TensorSpec(f"{blk}.attn_v.bias", (shape.n_embd_kv,), False)
        yield TensorSpec(f"{blk}.attn_output.weight", (shape.n_embd, shape.n_embd), True)
        yield TensorSpec(f"{blk}.ffn_norm.weight", (shape.n_embd,), False, fill=1.0)
        yield TensorSpec(f"{blk}.ffn_gate.weight", (shape.n_ff, shape.n_embd), True)
        yield TensorSpec(f"{blk}.ffn_up.weight", (shape.n_ff, shape.n_embd), True)
        yield TensorSpec(f"{blk}.ffn_down.weight", (shape.n_embd, shape.n_ff), True)
    yield TensorSpec("output_norm.weight", (shape.n_embd,), False, fill=1.0)


# ---------------------------------------------------------------------------------------------
# Random tensor data


def random_q8_0(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """Q8_0 blocks written directly: random int8 values with one fixed scale.

    Drawing raw bytes is ~6x faster than drawing floats and quantizing them with
    gguf.quants.quantize (measured: 1.5B model ~8 s vs ~50 s on 2 cores), and no tensor is ever
    held as f32 (the 1.5B embedding alone would be 0.9 GB). Returns the byte layout
    (rows, cols/32*34) uint8.
    """
    n_blocks = rows * cols // Q8_BLOCK
    blocks = np.empty((n_blocks, 2 + Q8_BLOCK), dtype=np.uint8)
    blocks[:, :2] = np.frombuffer(np.float16(Q8_SCALE).tobytes(), dtype=np.uint8)
    blocks[:, 2:] = np.frombuffer(rng.bytes(n_blocks * Q8_BLOCK), dtype=np.uint8).reshape(
        n_blocks, Q8_BLOCK
    )
    return blocks.reshape(rows, -1)


def random_f16(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """Normal(0, WEIGHT_STD) in f16, drawn in row chunks so no full f32 copy is held."""
    out = np.empty((rows, cols), dtype=np.float16)
    step = max(1, (1 << 24) // cols)
    for start in range(0, rows, step):
        stop = min(rows, start + step)
        out[start:stop] = rng.standard_normal((stop - start, cols), dtype=np.float32) * WEIGHT_STD
    return out


def tensor_data(
    spec: TensorSpec, qtype: gguf.GGMLQuantizationType, rng: np.random.Generator
) -> np.ndarray:
    if not spec.is_matrix:
        if spec.fill:
            return np.full(spec.shape, spec.fill, dtype=np.float32)
        return rng.standard_normal(spec.shape, dtype=np.float32) * WEIGHT_STD
    rows, cols = spec.shape
    if qtype == gguf.GGMLQuantizationType.Q8_0:
        return random_q8_0(rng, rows, cols)
    return random_f16(rng, rows, cols)


def add_tensor_infos(
    writer: gguf.GGUFWriter, specs: list[TensorSpec], qtype: gguf.GGMLQuantizationType
) -> int:
    """Declare every tensor up front (the GGUF header lists them); returns total data bytes."""
    total = 0
    for spec in specs:
        if not spec.is_matrix:
            nbytes = int(np.prod(spec.shape)) * 4
            writer.add_tensor_info(spec.name, spec.shape, np.dtype(np.float32), nbytes)
        elif qtype == gguf.GGMLQuantizationType.Q8_0:
            byte_shape = gguf.quant_shape_to_byte_shape(spec.shape, qtype)
            nbytes = int(np.prod(byte_shape))
            writer.add_tensor_info(spec.name, byte_shape, np.dtype(np.uint8), nbytes, qtype)
        else:
            nbytes = int(np.prod(spec.shape)) * 2
            writer.add_tensor_info(spec.name, spec.shape, np.dtype(np.float16), nbytes)
        total += nbytes
    return total


# ---------------------------------------------------------------------------------------------
# Metadata


@dataclass(frozen=True)
class KeyValue:
    key: str
    value: Any
    vtype: gguf.GGUFValueType
    sub_type: gguf.GGUFValueType | None = None


_SCALARS: dict[gguf.GGUFValueType, str] = {
    gguf.GGUFValueType.UINT8: "<B",
    gguf.GGUFValueType.INT8: "<b",
    gguf.GGUFValueType.UINT16: "<H",
    gguf.GGUFValueType.INT16: "<h",
    gguf.GGUFValueType.UINT32: "<I",
    gguf.GGUFValueType.INT32: "<i",
    gguf.GGUFValueType.UINT64: "<Q",
    gguf.GGUFValueType.INT64: "<q",
    gguf.GGUFValueType.FLOAT32: "<f",
    gguf.GGUFValueType.FLOAT64: "<d",
    gguf.GGUFValueType.BOOL: "<?",
}


class _MetadataCursor:
    """Reads GGUF key/values from a buffer, little-endian, strings kept as raw bytes.

    gguf.GGUFReader takes ~20 s on a Qwen tokenizer (it builds a numpy view per string of the
    151k tokens and 151k merges); this reads the same metadata in well under a second.
    """

    def __init__(self, buf: mmap.mmap) -> None:
        self.buf = buf
        self.pos = 0

    def scalar(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def string(self) -> bytes:
        n = self.scalar("<Q")
        self.pos += n
        return self.buf[self.pos - n : self.pos]

    def value(self, vtype: gguf.GGUFValueType) -> Any:
        if vtype == gguf.GGUFValueType.STRING:
            return self.string()
        return self.scalar(_SCALARS[vtype])

    def array(self) -> tuple[list[Any], gguf.GGUFValueType]:
        sub = gguf.GGUFValueType(self.scalar("<I"))
        count = self.scalar("<Q")
        if sub == gguf.GGUFValueType.STRING:
            return [self.string() for _ in range(count)], sub
        if sub == gguf.GGUFValueType.ARRAY:
            raise ValueError("nested GGUF arrays are not supported")
        dtype = np.dtype(_SCALARS[sub])
        items = np.frombuffer(self.buf, dtype=dtype, count=count, offset=self.pos)
        self.pos += dtype.itemsize * count
        return items.tolist(), sub


def read_tokenizer(path: Path) -> list[KeyValue]:
    """Every tokenizer.* key of a GGUF, copied as stored (types kept, strings as raw bytes)."""
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        cursor = _MetadataCursor(buf)
        if buf[:4] != b"GGUF":
            raise SystemExit(f"{BANNER}: {path} is not a GGUF file")
        cursor.pos = 8  # magic, version
        cursor.scalar("<Q")  # tensor count
        n_kv = cursor.scalar("<Q")
        out: list[KeyValue] = []
        for _ in range(n_kv):
            key = cursor.string().decode("utf-8")
            vtype = gguf.GGUFValueType(cursor.scalar("<I"))
            if vtype == gguf.GGUFValueType.ARRAY:
                items, sub = cursor.array()
                kv = KeyValue(key, items, vtype, sub)
            else:
                kv = KeyValue(key, cursor.value(vtype), vtype)
            if key.startswith("tokenizer."):
                out.append(kv)
    if not any(kv.key == gguf.Keys.Tokenizer.LIST for kv in out):
        raise SystemExit(f"{BANNER}: {path} has no tokenizer ({gguf.Keys.Tokenizer.LIST})")
    return out


def vocab_size(tokenizer: list[KeyValue]) -> int:
    return next(len(kv.value) for kv in tokenizer if kv.key == gguf.Keys.Tokenizer.LIST)


def add_metadata(
    writer: gguf.GGUFWriter,
    shape_name: str,
    shape: Shape,
    file_type: gguf.LlamaFileType,
    tokenizer: list[KeyValue],
) -> None:
    # The name says it too, so any tool that lists models shows that this one is not real.
    writer.add_name(f"RANDOM WEIGHTS {shape_name} (timing only)")
    writer.add_description(
        f"Random weights with the architecture and tensor shapes of {shape_name}: for timing "
        "only; says nothing about completion quality. Written by bench/make_gguf.py."
    )
    writer.add_file_type(int(file_type))
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    writer.add_context_length(shape.n_ctx_train)
    writer.add_embedding_length(shape.n_embd)
    writer.add_block_count(shape.n_layer)
    writer.add_feed_forward_length(shape.n_ff)
    writer.add_head_count(shape.n_head)
    writer.add_head_count_kv(shape.n_head_kv)
    writer.add_rope_freq_base(shape.rope_theta)
    writer.add_layer_norm_rms_eps(shape.rms_eps)
    for kv in tokenizer:
        writer.add_key_value(kv.key, kv.value, kv.vtype, kv.sub_type)


# ---------------------------------------------------------------------------------------------
# Writing


def write_model(
    out: Path,
    shape_name: str,
    quant: str,
    tokenizer: list[KeyValue],
    seed: int,
    *,
    with_tensors: bool = True,
) -> int:
    """Write the file (to a .part name first, so a killed run leaves no valid-looking file)."""
    shape = SHAPES[shape_name]
    if vocab_size(tokenizer) != shape.n_vocab:
        raise SystemExit(
            f"{BANNER}: the tokenizer has {vocab_size(tokenizer)} tokens, "
            f"{shape_name} has {shape.n_vocab}: use a Qwen2.5-Coder tokenizer"
        )
    qtype, file_type = QUANTS[quant]
    specs = list(tensor_specs(shape)) if with_tensors else []
    rng = np.random.default_rng(seed)
    partial = out.with_name(out.name + ".part")
    out.parent.mkdir(parents=True, exist_ok=True)

    writer = gguf.GGUFWriter(partial, ARCH)
    try:
        add_metadata(writer, shape_name, shape, file_type, tokenizer)
        total = add_tensor_infos(writer, specs, qtype)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        if with_tensors:
            say(f"writing {len(specs)} random tensors, {total / 2**30:.2f} GiB")
        for n, spec in enumerate(specs, 1):
            writer.write_tensor_data(tensor_data(spec, qtype, rng))
            if n % 60 == 0:
                say(f"{n}/{len(specs)} random tensors written")
    except BaseException:
        writer.close()
        partial.unlink(missing_ok=True)
        raise
    writer.close()
    os.replace(partial, out)
    return out.stat().st_size


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.make_gguf",
        description="Write a GGUF with Qwen2.5-Coder's shapes and RANDOM WEIGHTS: for timing "
        "only, it says nothing about quality.",
    )
    parser.add_argument("--shape", choices=sorted(SHAPES), default="qwen2.5-coder-1.5b")
    parser.add_argument(
        "--quant",
        choices=sorted(QUANTS),
        default="q8_0",
        help="q4_k_m is not available: gguf-py has no Q4_K quantizer",
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--tokenizer-from",
        type=Path,
        default=default_tokenizer_source(),
        help="GGUF to copy tokenizer.* from (default: %(default)s)",
    )
    parser.add_argument(
        "--tokenizer-only",
        action="store_true",
        help="write metadata and tokenizer without tensors (a few MB), to carry "
        "to a machine that lacks the real model",
    )
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.tokenizer_from.is_file():
        say(
            f"no tokenizer source at {args.tokenizer_from}; pass --tokenizer-from with a "
            "Qwen2.5-Coder GGUF or a file written by --tokenizer-only"
        )
        return 2
    started = time.perf_counter()
    tokenizer = read_tokenizer(args.tokenizer_from)
    size = write_model(
        args.out, args.shape, args.quant, tokenizer, args.seed, with_tensors=not args.tokenizer_only
    )
    what = "tokenizer-only file" if args.tokenizer_only else f"{args.shape} {args.quant} model"
    say(f"wrote {what} {args.out}: {size / 2**20:.1f} MiB in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
