#!/usr/bin/env bash
# The GPU keystroke benchmark, in one command. ON the GPU machine (no network), from the
# repository root, with .gpu/ carried (made by bench/gpu/prepare.sh just before):
#     bash bench/gpu/run.sh
# Rehearsal on a CPU (no CUDA device; the GPU policy forced with GHOSTFIM_PREFILL_COST):
#     bash bench/gpu/run.sh --cpu --files 1 --lines 2
# Steps: install ghostfim and its dependencies from .gpu/wheels; llama-cpp-python unpacked from
# the carried CUDA build (if the host CPU has every feature it was compiled for), or built for
# sm_90 from the carried sources when no build was carried; a Qwen2.5-Coder-1.5B Q8_0 GGUF with the real shapes
# and tokenizer but RANDOM WEIGHTS (timing only: it says nothing about quality); the replay,
# ghostfim only, every layer on the GPU; the table; bench/gpu/check.py against the targets; then
# the same replay with the workspace in the prompt (issue 31: each file opened with its package's
# folder as the workspace), unless --no-workspace.
# Results go to $OUT (the device tool's folder that comes back) or /tmp/ghostfim-gpu-out.
set -euo pipefail
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."

CPU=0 FILES=6 LINES=3 WORKSPACE=1 PLAIN=1
while [ $# -gt 0 ]; do
    case $1 in
        --cpu) CPU=1 ;;
        --files) FILES=$2; shift ;;
        --lines) LINES=$2; shift ;;
        --no-workspace) WORKSPACE=0 ;;
        --workspace-only) PLAIN=0 ;;
        *) echo "usage: run.sh [--cpu] [--files N] [--lines N] [--no-workspace|--workspace-only]" >&2
           exit 2 ;;
    esac
    shift
done
OUT_DIR=${OUT:-/tmp/ghostfim-gpu-out}
WORK=${GHOSTFIM_GPU_WORK:-/tmp/ghostfim-gpu}
# The folder's name matters: bench/traces.py types files from the first sys.path entry that
# ends in site-packages, so the pinned pygls/cachetools give the same traces as here.
SITE=$WORK/site-packages
MODEL=$WORK/qwen2.5-coder-1.5b-random-q8_0.gguf
if [ $CPU = 1 ]; then PY=${PY:-.venv/bin/python}; else PY=${PY:-python3}; fi
export GHOSTFIM_OFFLINE=1
T0=$(date +%s)
step() { echo "== [$(($(date +%s) - T0)) s] $*"; }
[ -d .gpu/wheels ] || { echo "run.sh: no .gpu/ (run bench/gpu/prepare.sh here first)" >&2; exit 1; }
rm -rf "$SITE" && mkdir -p "$SITE" "$OUT_DIR"
step "$($PY -V) at $(command -v "$PY"), $(nproc) CPUs, mode $([ $CPU = 1 ] && echo 'CPU rehearsal' || echo GPU)"
if [ $CPU = 0 ]; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv |
        tee "$OUT_DIR/llama.txt"
fi

# 1. ghostfim and its dependencies. The wheel was built from the tree prepare.sh saw; if the
#    tree changed since, the current tree is linked in instead (same package names).
step "install ghostfim"
pip_target() { $PY -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$@"; }
# The compiled wheels are CPython 3.12's (the GPU image's): a CPU rehearsal's .venv has its own.
wheels=$(ls .gpu/wheels/*.whl | { if [ $CPU = 1 ]; then grep -v -- '-cp3'; else cat; fi; })
if [ "$(bash bench/gpu/stamp.sh)" = "$(cat .gpu/stamp)" ]; then
    pip_target $wheels
else
    echo "run.sh: WARNING: the tree changed since prepare.sh; linking it instead of its wheel"
    pip_target $(echo "$wheels" | grep -v '/ghostfim-')
    mkdir -p "$SITE/ghostfim"
    for pkg in engine lsp bench; do ln -s "$PWD/$pkg" "$SITE/ghostfim/$pkg"; done
fi
export PYTHONPATH=$SITE

# 2. llama-cpp-python with CUDA.
pkg=.gpu/llama-cuda/llama_cpp-cuda.tar.gz
missing=""
if [ -f "$pkg" ]; then
    missing=$($PY engine/setup/build_flags.py --missing-cpu-flags "$(cat .gpu/llama-cuda/cmake-args)")
    [ -z "$missing" ] || echo "run.sh: this CPU lacks $missing, which the carried build uses"
fi
if [ -f "$pkg" ] && [ -z "$missing" ]; then
    step "unpack the carried CUDA build of llama-cpp-python"
    tar -xzf "$pkg" -C "$SITE"
elif [ $CPU = 0 ] && [ -f .gpu/llama-cuda/llama-cpp-python-src.tar.gz ]; then
    step "build llama-cpp-python with CUDA (sm_90) from the carried sources"
    src=$WORK/llama-src && rm -rf "$src" && mkdir -p "$src"
    tar -xzf .gpu/llama-cuda/llama-cpp-python-src.tar.gz -C "$src"
    CMAKE_ARGS=$(GHOSTFIM_CUDA=1 GHOSTFIM_CUDA_ARCH=${GHOSTFIM_CUDA_ARCH:-90} $PY engine/setup/build_flags.py)
    echo "CMAKE_ARGS=$CMAKE_ARGS"
    # nvcc, cmake, ninja and scikit-build-core are in the image; cuBLAS is its nvidia-cublas.
    CMAKE_ARGS=$CMAKE_ARGS CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) $PY -m pip install -q \
        --no-build-isolation --no-deps --no-index --target "$SITE" "$src/llama_cpp_python-0.3.36"
fi
if [ $CPU = 1 ] && [ ! -d "$SITE/llama_cpp" ]; then
    step "no carried CUDA build: using the llama-cpp-python that $PY has"
elif [ ! -d "$SITE/llama_cpp" ]; then
    echo "run.sh: no usable llama-cpp-python (carried build unusable here and no sources)" >&2
    exit 1
fi
# The build's RUNPATH names the build machine's cuBLAS; here it is in the Python's nvidia wheels.
nvlib=$($PY - <<'PY'
import sys
from pathlib import Path
for p in sys.path:
    for d in sorted(Path(p or ".").glob("nvidia/cu1*/lib")):
        if list(d.glob("libcublas.so.*")):
            print(d)
            raise SystemExit
PY
)
[ -z "$nvlib" ] || export LD_LIBRARY_PATH=$nvlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
$PY - "$CPU" <<'PY' | tee -a "$OUT_DIR/llama.txt"
import sys
import llama_cpp
from ghostfim.engine.local import native; from ghostfim.engine.setup import device

cuda = device.cuda_backend()
print(f"llama_cpp {llama_cpp.__version__} from {llama_cpp.__file__}")
print(f"ghostfim from {device.__file__}")
print(f"{cuda}; llama_supports_gpu_offload()={native.supports_gpu_offload()}")
if sys.argv[1] == "0" and cuda.devices == 0:
    raise SystemExit("run.sh: llama.cpp sees no CUDA device: stopping before the replay")
PY
$PY -m ghostfim.cli.main doctor 2>&1 | grep -E '^\[|features' || true
# Every module imports (a dependency missing here would otherwise show only as "server exited").
$PY - <<'PY'
import importlib, pkgutil
import ghostfim.engine, ghostfim.lsp
for pkg in (ghostfim.engine, ghostfim.lsp):
    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        importlib.import_module(m.name)
print("run.sh: every ghostfim module imports")
PY

# 3. The files the replay types (the GPU image has no npm, Neovim or llama.cpp sources).
if [ $CPU = 0 ]; then tar -xf .gpu/traces.tar -C / --skip-old-files; fi

# 4. The same-shape model.
if [ -f "$MODEL" ]; then
    step "reusing $MODEL"
else
    step "write the random-weight 1.5B Q8_0 model"
    $PY -m bench.make_gguf --shape qwen2.5-coder-1.5b --quant q8_0 \
        --tokenizer-from .gpu/tokenizer.gguf --out "$MODEL"
fi

# 5. The replay, ghostfim only (nGpuLayers defaults to every layer when a GPU is usable).
if [ $CPU = 1 ]; then
    # Pin the prefill cost at a GPU's, so the engine takes the GPU policy on this CPU.
    export GHOSTFIM_PREFILL_COST=${GHOSTFIM_PREFILL_COST:-3+0.02}
    echo "run.sh: CPU rehearsal: GHOSTFIM_PREFILL_COST=$GHOSTFIM_PREFILL_COST (not GPU figures)"
fi
# 6. One replay of a system, its trace and report under $OUT_DIR, then check.py's verdicts
#    against the targets (appended to CHECK): replay_and_check SYSTEM TRACE REPORT CHECK [ARGS].
rc=0
replay_and_check() {
    local system=$1 trace=$2 report=$3 check=$4
    shift 4
    export GHOSTFIM_TRACE=$OUT_DIR/$trace.log
    $PY -m bench.replay --systems "$system" "$@" --model "$MODEL" --files "$FILES" \
        --lines "$LINES" --json "$OUT_DIR/$report.json" | tee "$OUT_DIR/$report.md"
    [ "$check" = "$report.md" ] || : > "$OUT_DIR/$check"
    $PY bench/gpu/check.py "$OUT_DIR/$report.json" "$OUT_DIR/$trace.log" --system "$system" \
        $([ $CPU = 1 ] && echo --cpu) | tee -a "$OUT_DIR/$check" || rc=$?
    gzip -f "$OUT_DIR/$trace.log"
}
if [ $PLAIN = 1 ]; then
    step "replay: $FILES files x $LINES lines"
    replay_and_check ghostfim trace gpu-replay check.txt
fi
# 7. The workspace in the prompt: the same traces, the index on each file's package folder.
if [ $WORKSPACE = 1 ]; then
    step "replay with the workspace in the prompt"
    replay_and_check ghostfim-workspace trace-workspace gpu-workspace gpu-workspace.md --workspace
fi
step "done (wall $(($(date +%s) - T0)) s)"
exit $rc
