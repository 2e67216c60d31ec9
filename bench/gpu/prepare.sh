#!/usr/bin/env bash
# Run HERE (a machine with network to PyPI) before the GPU run: fills .gpu/ (git-ignored) with
# what the GPU machine cannot fetch, well under the 64 MiB a device call may carry:
#   - llama-cpp-python 0.3.36's sources, trimmed to what a CUDA build needs;
#   - wheels of ghostfim's pure-Python dependencies that the GPU image lacks (Python 3.12);
#   - the real 0.5B model's tokenizer as a tokenizer-only GGUF (ghostfim.bench.make_gguf --tokenizer-only).
# Then: device run with carry [".gpu"] and command `bash bench/gpu/run.sh`.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=.gpu
mkdir -p "$OUT/wheels"
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude

SDIST=~/.cache/ghostfim/bench/llama_cpp_python-0.3.36.tar.gz
[ -f "$SDIST" ] || python3 -m pip download --no-binary :all: --no-deps llama-cpp-python==0.3.36 \
    -d ~/.cache/ghostfim/bench
tmp=$(mktemp -d)
tar -xzf "$SDIST" -C "$tmp"
src="$tmp/llama_cpp_python-0.3.36"
v="$src/vendor/llama.cpp"
# Not needed to build the library: docs, test models, tests, examples, other GPU backends.
rm -rf "$src/docs" "$src/examples" "$src/tests" "$src/docker" "$v/docs" "$v/models" "$v/tests" \
       "$v/benches" "$v/examples" "$v/pocs" "$v/app" "$v/ggml/src/ggml-sycl" \
       "$v/ggml/src/ggml-vulkan" "$v/ggml/src/ggml-opencl" "$v/ggml/src/ggml-cann" \
       "$v/ggml/src/ggml-musa" "$v/ggml/src/ggml-metal" "$v/ggml/src/ggml-webgpu"
find "$v/tools" -mindepth 1 -maxdepth 1 ! -name mtmd -exec rm -rf {} +
tar -czf "$OUT/llama-cpp-python-src.tar.gz" -C "$tmp" llama_cpp_python-0.3.36
rm -rf "$tmp"

# Pure-Python dependencies the GPU image does not have (see the device tool's KINDS.md).
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux2014_x86_64 -d "$OUT/wheels" \
    pygls==2.1.1 lsprotocol==2025.0.0 cattrs cachetools gguf diskcache

# The tokenizer of the real small model, for same-shape random-weight models.
.venv/bin/python -m ghostfim.bench.make_gguf --tokenizer-only --out "$OUT/tokenizer.gguf"
du -sh "$OUT"
