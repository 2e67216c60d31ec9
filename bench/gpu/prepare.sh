#!/usr/bin/env bash
# Run HERE (network to PyPI, after `make setup`) right before a GPU run: fills .gpu/ (ignored by
# git) with what the GPU machine (Python 3.12, no network) lacks, within the 64 MiB a device call
# may carry (working tree included). bench/gpu/README.md has the device call.
#   .gpu/wheels/       ghostfim itself (built from this working tree) and its pure-Python
#                      dependencies, pinned to the versions .venv has (the traces type two of
#                      their files, so the same versions give the same traces)
#   .gpu/llama-cuda/   the CUDA build of llama-cpp-python if `GHOSTFIM_CUDA=1 make setup` made
#                      one here (its llama_cpp package, each library once: ~43 MB; run.sh then
#                      unpacks instead of building), else its sources trimmed for a CUDA build
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

# 2. Its dependencies that the GPU image lacks (device tool's KINDS.md), at .venv's versions:
#    the pure-Python ones, llama-cpp-python's diskcache (imported at `import llama_cpp`) and the
#    workspace index's parsers (tree-sitter and its grammars: CPython 3.12 wheels). numpy,
#    xxhash, httpx, huggingface_hub, tqdm, PyYAML, jinja2 and typing-extensions are in the image.
pins=$("$VENV_PY" -m pip freeze 2>/dev/null |
    grep -iE '^(pygls|lsprotocol|cattrs|attrs|cachetools|gguf|diskcache|tree.sitter.*)==' || true)
[ "$(echo "$pins" | wc -l)" -eq 10 ] || { echo "prepare.sh: .venv lacks a dependency: $pins" >&2; exit 1; }
# shellcheck disable=SC2086
"$VENV_PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$OUT/wheels" $pins 2>&1 |
    grep -v '^WARNING: Location' || true

# 3. llama-cpp-python: the CUDA build made here, or the sources. pip's wheel stores each library
#    six times (two install folders x three names; zip has no symlinks): 264 MB for sm_90. The
#    llama_cpp package with each library once and the other names as symlinks is ~43 MB as .tar.gz.
wheel=""
if [ -x "$CUDA_VENV/bin/python" ]; then
    wdir=$(GHOSTFIM_CUDA=1 "$CUDA_VENV/bin/python" engine/setup/build_flags.py --wheel-dir || true)
    wheel=$(ls "$wdir"/llama_cpp_python-*.whl 2>/dev/null | head -1 || true)
fi
pkg=$OUT/llama-cuda/llama_cpp-cuda.tar.gz
if [ -n "$wheel" ]; then
    "$VENV_PY" - "$wheel" "$pkg" <<'PY'
import sys, tarfile, zipfile
from pathlib import PurePosixPath

wheel, out = sys.argv[1:3]
with zipfile.ZipFile(wheel) as z, tarfile.open(out, "w:gz", compresslevel=6) as tar:
    infos = [i for i in z.infolist() if i.filename.startswith("llama_cpp/") and not i.is_dir()]
    # libfoo.so, libfoo.so.0, libfoo.so.0.25.3: one file (the longest name), two symlinks.
    real: dict[str, zipfile.ZipInfo] = {}
    for i in infos:
        if ".so" in i.filename:
            stem = i.filename.split(".so")[0]
            if stem not in real or len(i.filename) > len(real[stem].filename):
                real[stem] = i
    for i in infos:
        t = tarfile.TarInfo(i.filename)
        t.mode = 0o755 if ".so" in i.filename else 0o644
        target = real.get(i.filename.split(".so")[0]) if ".so" in i.filename else None
        if target is not None and target is not i:
            if (target.CRC, target.file_size) != (i.CRC, i.file_size):
                raise SystemExit(f"{i.filename} differs from {target.filename}")
            t.type, t.linkname = tarfile.SYMTYPE, PurePosixPath(target.filename).name
            tar.addfile(t)
        else:
            t.size = i.file_size
            with z.open(i) as f:
                tar.addfile(t, f)
PY
fi
if [ -n "$wheel" ] && [ "$(stat -c %s "$pkg")" -lt $((MAX_WHEEL_MB * 1000 * 1000)) ]; then
    # The CPU features it was compiled for: run.sh builds instead if the GPU host lacks one.
    GHOSTFIM_CUDA=1 "$CUDA_VENV/bin/python" engine/setup/build_flags.py > "$OUT/llama-cuda/cmake-args"
    echo "prepare.sh: carrying the CUDA build of $(basename "$wheel") ($(du -m "$wheel" |
        cut -f1) MB as a wheel) as $pkg ($(du -m "$pkg" | cut -f1) MB)"
else
    [ -z "$wheel" ] || { echo "prepare.sh: $pkg is over $MAX_WHEEL_MB MB: carrying sources"; rm -f "$pkg"; }
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
"$VENV_PY" -m bench.make_gguf --tokenizer-only --out "$OUT/tokenizer.gguf"

# 5. The files the replay types (bench/traces.py: default_sources), outside site-packages (those
#    come with the wheels above), plus the llama.cpp sources it looks for (only ggml-alloc.c
#    exists in 0.3.36's sources; the CPU benchmark typed that one too).
"$VENV_PY" - "$OUT/traces.tar" <<'PY'
import os, sys, tarfile
from pathlib import Path
from bench.traces import default_sources

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
# (files git lists may be gone from the tree while others edit it: count what exists)
tree=$(git ls-files -z -co --exclude-standard | "$VENV_PY" -c \
    'import os, sys; print(sum(os.path.getsize(p) for p in sys.stdin.read().split("\0") if os.path.isfile(p)))')
gpu=$(du -sb "$OUT" | cut -f1)
echo "prepare.sh: .gpu/ $((gpu / 1048576)) MiB + working tree $((tree / 1048576)) MiB" \
    "= $(((gpu + tree) / 1048576)) MiB of the 64 MiB a device call may carry"
# bench/results/ holds ~40 MiB of committed runs, which the call would carry: set them aside for
# the call (the device tool sends the working tree as it is) and restore them after it.
[ $((gpu + tree)) -lt $((64 * 1048576)) ] || {
    echo "prepare.sh: too big to carry; set the results aside for the call and rerun this:" >&2
    echo "  mkdir -p /tmp/results-hold && mv bench/results/*.json /tmp/results-hold/" >&2
    echo "  (after the call: git checkout -- bench/results)" >&2
    exit 1
}
ls -la "$OUT" "$OUT/wheels" "$OUT/llama-cuda"
