"""llama.cpp's own `llama-server`, built once from the sources llama-cpp-python 0.3.36 vendors.

The benchmark compares ghostfim with llama.vim talking to llama-server `/infill`. Building the
server from the llama.cpp that llama-cpp-python ships keeps both sides on the same ggml kernels,
so the comparison is about the serving strategy, not the inference code.

Everything lives in ~/.cache/ghostfim/bench (never in the repository): the sdist, the extracted
llama.cpp sources (other benchmarks read C/C++ files from there), the build tree and the binary.

Run `python -m bench.llama_server` to build (or find) the binary and print its path.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
CACHE_DIR = Path(os.path.expanduser("~/.cache/ghostfim/bench"))
SOURCE_DIR = CACHE_DIR / "llama.cpp"
BUILD_DIR = CACHE_DIR / "llama.cpp-build"
BINARY = BUILD_DIR / "bin" / "llama-server"
BUILD_FLAGS_SCRIPT = Path(__file__).resolve().parent.parent / "engine" / "setup" / "build_flags.py"
LOOPBACK = "127.0.0.1"
VENDORED = "vendor/llama.cpp/"


def _log(message: str) -> None:
    print(f"[llama_server] {message}", file=sys.stderr, flush=True)


def _run(cmd: Sequence[str]) -> None:
    _log("$ " + " ".join(cmd))
    subprocess.run(list(cmd), check=True)


def _download_sdist(cache: Path) -> Path:
    """The llama-cpp-python sdist (source only on PyPI), downloaded once."""
    name = f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}.tar.gz"
    sdist = cache / name
    if sdist.exists():
        return sdist
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            # Source only for llama-cpp-python itself; its build backend may come as wheels
            # (":all:" would build scikit-build-core, hatchling... from source, recursively).
            "--no-binary",
            "llama-cpp-python",
            f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}",
            "-d",
            str(cache),
        ]
    )
    # Older pips name the file with a dash; accept either spelling.
    for candidate in cache.glob(f"llama[-_]cpp[-_]python-{LLAMA_CPP_PYTHON_VERSION}.tar.gz"):
        return candidate
    raise FileNotFoundError(f"pip download left no sdist in {cache}")


def _vendored_members(tar: tarfile.TarFile) -> list[tarfile.TarInfo]:
    """Members under `<root>/vendor/llama.cpp/`, renamed relative to it.

    Only that exact place: the sdist also holds the submodule's git data under
    `.git/modules/vendor/llama.cpp/`, which must not land in the source tree.
    """
    members = []
    for member in tar.getmembers():
        _root, _, rest = member.name.partition("/")
        if rest.startswith(VENDORED) and len(rest) > len(VENDORED):
            member.name = rest[len(VENDORED) :]
            members.append(member)
    return members


def _extract_llama_cpp(sdist: Path, dest: Path) -> None:
    """Unpack only vendor/llama.cpp from the sdist into dest (atomically, via a temp folder)."""
    if (dest / "CMakeLists.txt").exists():
        return
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with tarfile.open(sdist) as tar:
        members = _vendored_members(tar)
        tar.extractall(tmp, members=members, filter="data")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    _log(f"sources in {dest}")


def _cpu_flags() -> list[str]:
    """CMake flags for this CPU: explicit instruction sets, never the native build (it crashes)."""
    out = subprocess.run(
        [sys.executable, str(BUILD_FLAGS_SCRIPT)], capture_output=True, text=True, check=True
    ).stdout.split()
    # The benchmark's llama-server is the CPU anchor: drop any CUDA flags the script may add.
    flags = [f for f in out if "CUDA" not in f.upper()]
    if "-DGGML_NATIVE=OFF" not in flags:
        raise RuntimeError(f"refusing a native ggml build; build_flags.py said {out}")
    return flags


def _build(source: Path, build: Path, jobs: int) -> None:
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    _run(
        [
            "cmake",
            "-S",
            str(source),
            "-B",
            str(build),
            *generator,
            "-DCMAKE_BUILD_TYPE=Release",
            *_cpu_flags(),
            "-DLLAMA_CURL=OFF",
            "-DLLAMA_BUILD_TESTS=OFF",
            "-DLLAMA_BUILD_EXAMPLES=OFF",
            "-DBUILD_SHARED_LIBS=OFF",
        ]
    )
    _run(
        [
            "cmake",
            "--build",
            str(build),
            "--config",
            "Release",
            "--target",
            "llama-server",
            "-j",
            str(jobs),
        ]
    )


def ensure_llama_server(*, jobs: int = 2) -> Path:
    """Path of a built llama-server; downloads, extracts and builds it on the first call only."""
    if BINARY.exists() and os.access(BINARY, os.X_OK):
        return BINARY
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    sdist = _download_sdist(CACHE_DIR)
    _extract_llama_cpp(sdist, SOURCE_DIR)
    _build(SOURCE_DIR, BUILD_DIR, jobs)
    if not BINARY.exists():
        raise FileNotFoundError(f"the build finished without {BINARY}")
    _log(f"built {BINARY} in {time.monotonic() - started:.0f} s")
    return BINARY


def built_llama_server() -> Path | None:
    """The cached binary if it was built already (tests must not trigger a build)."""
    return BINARY if BINARY.exists() and os.access(BINARY, os.X_OK) else None


# Flags llama.vim's README recommends for small models (it lists `--fim-qwen-*-default`
# presets, which expand to `-ub 1024 -b 1024 --ctx-size 0 --cache-reuse 256` plus the model
# download and `-ngl 99`). GPU offload is dropped: this is a CPU anchor.
LLAMAVIM_SERVER_FLAGS = ("-ub", "1024", "-b", "1024", "--cache-reuse", "256")


def server_command(
    binary: Path, model: Path, *, port: int, ctx: int, threads: int, extra: Sequence[str] = ()
) -> list[str]:
    return [
        str(binary),
        "-m",
        str(model),
        "--host",
        LOOPBACK,
        "--port",
        str(port),
        "-c",
        str(ctx),
        "-t",
        str(threads),
        "-tb",
        str(threads),
        *LLAMAVIM_SERVER_FLAGS,
        "-np",
        "1",  # one slot: llama.vim keeps one request in flight
        *extra,
    ]


def wait_healthy(base_url: str, process: subprocess.Popen[bytes], timeout_s: float) -> None:
    """Poll /health until the model is loaded (503 while loading, 200 when ready)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"llama-server exited with {process.returncode} while starting")
        try:
            if httpx.get(f"{base_url}/health", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"llama-server not healthy after {timeout_s:.0f} s")


def start_llama_server(
    model: Path,
    *,
    port: int,
    ctx: int = 4096,
    threads: int = 2,
    extra: Sequence[str] = (),
    binary: Path | None = None,
    log_path: Path | None = None,
    timeout_s: float = 120.0,
) -> tuple[subprocess.Popen[bytes], str]:
    """Start llama-server on the loopback address; returns (process, base_url) once healthy.

    stderr (llama-server logs everything there) goes to log_path, by default a file in the
    cache folder named after the port.
    """
    exe = binary or ensure_llama_server()
    log_path = log_path or CACHE_DIR / f"llama-server-{port}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = server_command(exe, model, port=port, ctx=ctx, threads=threads, extra=extra)
    _log("$ " + " ".join(cmd) + f"  (log: {log_path})")
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    base_url = f"http://{LOOPBACK}:{port}"
    try:
        wait_healthy(base_url, process, timeout_s)
    except BaseException:
        stop_llama_server(process)
        raise
    return process, base_url


def stop_llama_server(process: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def llama_server(
    model: Path,
    *,
    port: int,
    ctx: int = 4096,
    threads: int = 2,
    extra: Sequence[str] = (),
    binary: Path | None = None,
    log_path: Path | None = None,
) -> Iterator[str]:
    """`with llama_server(model, port=...) as base_url:` — stops the server on exit."""
    process, base_url = start_llama_server(
        model, port=port, ctx=ctx, threads=threads, extra=extra, binary=binary, log_path=log_path
    )
    try:
        yield base_url
    finally:
        stop_llama_server(process)


def free_port() -> int:
    """A free TCP port on the loopback address (tiny race, fine for a benchmark)."""
    import socket

    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


if __name__ == "__main__":
    print(ensure_llama_server())
