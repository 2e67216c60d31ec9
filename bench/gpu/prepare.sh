#!/usr/bin/env bash
# Run HERE (network to PyPI, after `make setup`) right before a GPU run: fills .gpu/ (ignored by
# git) with what the GPU machine (Python 3.12, no network) lacks, within the 64 MiB a device call
# may carry (working tree included). bench/gpu/README.md has the device call.
#   .gpu/wheels/       ghostfim itself (built from this working tree) and its pure-Python
#                      dependencies, pinned to the versions .venv has (the traces type two of
#                      their files, so the same versions give the same traces)
#   .gpu/llama-cuda/   the CUDA wheel of llama-cpp-python if `GHOSTFIM_CUDA=1 make setup` built
#                      one here and it is under 60 MB (run.sh then installs instead of building),
#                      else llama-cpp-python's sources trimmed to what a CUDA build needs
#   .gpu/tokenizer.gguf  the small model's tokenizer, for the same-shape random-weight model
#   .gpu/traces.tar    the replay's source files that the GPU image may not have
#   .gpu/stamp         the hash of the sources the ghostfim wheel was built from
# Env: GHOSTFIM_CUDA_VENV (default ~/.cache/ghostfim/venv-cuda), the venv of the CUDA build.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=.gpu
VENV_PY=.venv/bin/python
CUDA_VENV=${GHOSTFIM_CUDA_VENV:-$HOME/.cache/ghostfim/venv-cuda}
MAX_WHEEL_MB=60
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
[ -x "$VENV_PY" ] || { echo "prepare.sh: no .venv; run make setup first" >&2; exit 1; }
rm -rf "$OUT" && mkdir -p "$OUT/wheels" "$OUT/llama-cuda"

# 1. ghostfim, as pip builds it from this tree (build isolation: .venv's setuptools is too old).
"$VENV_PY" -m pip wheel -q --no-deps -w "$OUT/wheels" . 2>&1 | grep -v '^WARNING: Location' || true
ls "$OUT"/wheels/ghostfim-*.whl >/dev/null
bash bench/gpu/stamp.sh > "$OUT/stamp"

# 2. Its pure-Python dependencies that the GPU image lacks (device tool's KINDS.md), at .venv's
#    versions. numpy, xxhash, httpx, huggingface_hub, tqdm and PyYAML are in the image.
pins=$("$VENV_PY" -m pip freeze 2>/dev/null |
    grep -iE '^(pygls|lsprotocol|cattrs|attrs|cachetools|gguf)==' || true)
[ "$(echo "$pins" | wc -l)" -eq 6 ] || { echo "prepare.sh: .venv lacks a dependency: $pins" >&2; exit 1; }
# shellcheck disable=SC2086
"$VENV_PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux2014_x86_64 -d "$OUT/wheels" $pins 2>&1 |
    grep -v '^WARNING: Location' || true

# 3. llama-cpp-python: the CUDA wheel built here, or the sources.
wheel=""
if [ -x "$CUDA_VENV/bin/python" ]; then
    wdir=$(GHOSTFIM_CUDA=1 "$CUDA_VENV/bin/python" engine/build_flags.py --wheel-dir || true)
    wheel=$(ls "$wdir"/llama_cpp_python-*.whl 2>/dev/null | head -1 || true)
fi
if [ -n "$wheel" ] && [ "$(stat -c %s "$wheel")" -lt $((MAX_WHEEL_MB * 1000 * 1000)) ]; then
    cp "$wheel" "$OUT/llama-cuda/"
    # The CPU features it was compiled for: run.sh builds instead if the GPU host lacks one.
    GHOSTFIM_CUDA=1 "$CUDA_VENV/bin/python" engine/build_flags.py > "$OUT/llama-cuda/cmake-args"
    echo "prepare.sh: carrying $(basename "$wheel") ($(du -m "$wheel" | cut -f1) MB)"
else
    [ -n "$wheel" ] && echo "prepare.sh: $wheel is over $MAX_WHEEL_MB MB: carrying sources"
    SDIST=$HOME/.cache/ghostfim/bench/llama_cpp_python-0.3.36.tar.gz
    [ -f "$SDIST" ] || "$VENV_PY" -m pip download -q --no-deps --no-binary llama-cpp-python \
        llama-cpp-python==0.3.36 -d "$HOME/.cache/ghostfim/bench"
    tmp=$(mktemp -d)
    tar -xzf "$SDIST" -C "$tmp"
    src="$tmp/llama_cpp_python-0.3.36"
    v="$src/vendor/llama.cpp"
    # Not needed to build the library: docs, test models, tests, examples, other GPU backends.
    rm -rf "$src/docs" "$src/examples" "$src/tests" "$src/docker" "$v/docs" "$v/models" \
        "$v/tests" "$v/benches" "$v/examples" "$v/pocs" "$v/app" "$v/ggml/src/ggml-sycl" \
        "$v/ggml/src/ggml-vulkan" "$v/ggml/src/ggml-opencl" "$v/ggml/src/ggml-cann" \
        "$v/ggml/src/ggml-musa" "$v/ggml/src/ggml-metal" "$v/ggml/src/ggml-webgpu"
    find "$v/tools" -mindepth 1 -maxdepth 1 ! -name mtmd -exec rm -rf {} +
    tar -czf "$OUT/llama-cuda/llama-cpp-python-src.tar.gz" -C "$tmp" llama_cpp_python-0.3.36
    rm -rf "$tmp"
fi

# 4. The tokenizer of the real small model, for same-shape random-weight models.
"$VENV_PY" -m ghostfim.bench.make_gguf --tokenizer-only --out "$OUT/tokenizer.gguf"

# 5. The files the replay types (bench/traces.py: default_sources), outside site-packages (those
#    come with the wheels above), plus the llama.cpp sources it looks for (only ggml-alloc.c
#    exists in 0.3.36's sources; the CPU benchmark typed that one too).
"$VENV_PY" - "$OUT/traces.tar" <<'PY'
import os, sys, tarfile
from pathlib import Path
from ghostfim.bench.traces import default_sources

files = [p for _, p in default_sources() if "site-packages" not in p.parts]
sdist = Path.home() / ".cache/ghostfim/bench/llama_cpp_python-0.3.36.tar.gz"
bench_src = Path.home() / ".cache/ghostfim/bench/llama.cpp"
with tarfile.open(sys.argv[1], "w") as out:
    for p in files:
        out.add(p, arcname=str(p).lstrip("/"))
    if sdist.exists():
        with tarfile.open(sdist) as src:
            for rel in ("src/llama-sampling.cpp", "ggml/src/ggml-alloc.c"):
                try:
                    member = src.getmember(f"llama_cpp_python-0.3.36/vendor/llama.cpp/{rel}")
                except KeyError:
                    continue
                member.name = str(bench_src / rel).lstrip("/")
                out.addfile(member, src.extractfile(member))
    names = out.getnames()
print(f"prepare.sh: {len(names)} trace sources in {sys.argv[1]}: {names}", file=sys.stderr)
PY

# What one device call carries: the working tree git would send plus .gpu/.
tree=$(git ls-files -z -co --exclude-standard | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
gpu=$(du -sb "$OUT" | cut -f1)
echo "prepare.sh: .gpu/ $((gpu / 1048576)) MiB + working tree $((tree / 1048576)) MiB" \
    "= $(((gpu + tree) / 1048576)) MiB of the 64 MiB a device call may carry"
[ $((gpu + tree)) -lt $((64 * 1048576)) ] || { echo "prepare.sh: too big to carry" >&2; exit 1; }
ls -la "$OUT" "$OUT/wheels" "$OUT/llama-cuda"
