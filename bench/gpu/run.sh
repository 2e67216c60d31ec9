#!/usr/bin/env bash
# Run ON the GPU machine (no network), from the repository root, with .gpu/ carried
# (made by bench/gpu/prepare.sh). About ten minutes: the CUDA build of llama.cpp (sm_90 only,
# 16 cores), a same-shape Qwen2.5-Coder 1.5B Q8_0 model with RANDOM weights (timing only: it
# says nothing about quality), then the keystroke replay with every layer on the GPU.
set -euo pipefail
export PYTHONUNBUFFERED=1
OUT_DIR=${OUT:-/tmp/ghostfim-gpu}
mkdir -p "$OUT_DIR" /tmp/site
python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/wheels/*.whl
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT_DIR/gpu.txt"

# 1. llama-cpp-python with the CUDA backend, built here (nvcc, cmake, ninja and
#    scikit-build-core are in the image; cuBLAS comes from the nvidia-cublas wheel).
work=/tmp/llama-src && rm -rf "$work" && mkdir -p "$work"
tar -xzf .gpu/llama-cpp-python-src.tar.gz -C "$work"
export CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF"
export CMAKE_BUILD_PARALLEL_LEVEL=16
time python3 -m pip install -q --no-build-isolation --no-deps --target /tmp/site \
    "$work/llama_cpp_python-0.3.36" 2>&1 | tail -5
python3 -c "import llama_cpp; assert llama_cpp.llama_supports_gpu_offload(), 'no GPU offload'; print('llama.cpp CUDA build ok')"

# 2. Same-shape 1.5B Q8_0 model (random weights, real tokenizer).
python3 -m ghostfim.bench.make_gguf --shape qwen2.5-coder-1.5b --quant q8_0 \
    --tokenizer-from .gpu/tokenizer.gguf --out /tmp/qwen-1.5b-random-q8_0.gguf

# 3. The replay, ghostfim only (all layers on the GPU: nGpuLayers -1 is the default).
python3 -m ghostfim.bench.replay --systems ghostfim --model /tmp/qwen-1.5b-random-q8_0.gguf \
    --json "$OUT_DIR/gpu-replay.json" | tee "$OUT_DIR/gpu-replay.md"
