"""Which files of a workspace the index reads, and how it reads them safely.

The workspace may be a stranger's repository: nothing here runs, imports or follows anything in
it. Directories are walked with `os.scandir` without following symlinks (a link is skipped,
whatever it points at); a path an editor names is taken only when its real path is the path
itself under a workspace root (no link on the way); a file is opened with O_NOFOLLOW and
O_NONBLOCK and read only when it is a regular file (a FIFO named `x.py` would block a read for
ever), up to a size.

Skipped: hidden directories (`.git`, `.venv`, tool caches), virtual environments (any directory
holding a `pyvenv.cfg`), `node_modules`, build output, vendored trees, and what the `.gitignore`
files (each applying to its own directory and below, as git reads them) and
`.git/info/exclude` exclude, read with `pathspec` (git's own rules, in pure Python: git itself
is a program in the workspace's PATH, and its config can run commands). Minified JavaScript is
skipped too: its "definitions" would be noise.
"""

from __future__ import annotations

import os
import stat
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

import pathspec

from ghostfim.engine.memory import MIB

# Directory names never walked into. Build output and vendored code are not the project's own
# code: their definitions would shadow the sources' ones (a `build/lib/pkg/mod.py` copy).
SKIP_DIRS = frozenset(
    {
        "node_modules",
        "bower_components",
        "jspm_packages",
        "__pycache__",
        "site-packages",
        "venv",
        "build",
        "dist",
        "vendor",
        "third_party",
        "third-party",
        "coverage",
        "htmlcov",
    }
)
PYTHON_SUFFIXES = (".py", ".pyi")
JS_SUFFIXES = (".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs")
GITIGNORE_BYTES = 256 * 1024  # a larger .gitignore is not read (none is that large)
# JS with lines this long on average, or one line this many times as long, is a bundler's or
# minifier's output (google-adk 2.13 ships its web UI's chunks among its sources), not code
# anyone writes or imports from.
MINIFIED_LINE_CHARS = 300
MINIFIED_LONGEST_LINE = 1000


@dataclass(frozen=True)
class Limits:
    """What one index holds at most; a workspace over a limit is indexed in part (`capped`)."""

    files: int = 5000
    file_bytes: int = 512 * 1024  # larger files are skipped (generated code, data in code)
    total_bytes: int = 64 * MIB  # source read, all files together
    # What the index keeps (its estimate): outlines and the snippet store's windows. The bench
    # corpus (bench/workspace_corpus.py, 1,757 files of 2025-2026 packages, 19 MB of source)
    # takes 18 MB of outlines and 34 MB of windows by the estimate: 5,000 files of such code
    # take about 150 MB, so on the largest workspaces this cap binds before the file cap.
    memory_bytes: int = 128 * MIB
    # Directory entries the walk looks at, sources or not: a tree of a million data files
    # must not keep the thread walking for minutes.
    entries: int = 200_000


@dataclass(frozen=True)
class Root:
    """A workspace root as the editor named it and as it really is (symlinks resolved)."""

    given: str
    real: str

    @staticmethod
    def of(path: str | os.PathLike[str]) -> Root:
        given = os.path.abspath(os.fspath(path))
        return Root(given, os.path.realpath(given))

    def relative(self, path: str) -> str | None:
        """`path` (absolute) relative to this root ("/"-separated), when it lies under it and
        no symlink is on the way; None otherwise."""
        path = os.path.normpath(path)
        for base in (self.real, self.given):
            if path.startswith(base + os.sep):
                rel = path[len(base) + 1 :]
                if os.path.realpath(path) == os.path.join(self.real, rel):
                    return rel.replace(os.sep, "/")
        return None


def language_of(path: str) -> str | None:
    """ "python" or "javascript" (TypeScript included) for a source file the index reads."""
    name = os.path.basename(path)
    if name.endswith(PYTHON_SUFFIXES):
        return "python"
    if name.endswith(JS_SUFFIXES) and ".min." not in name:
        return "javascript"
    return None


def skips_dir(name: str, path: str, skip_dirs: frozenset[str]) -> bool:
    return (
        name.startswith(".")
        or name in skip_dirs
        or name.endswith(".egg-info")
        or os.path.lexists(os.path.join(path, "pyvenv.cfg"))
    )


@dataclass(frozen=True)
class Source:
    text: str
    size: int  # bytes on disk
    mtime_ns: int


def read_source(path: str, max_bytes: int) -> Source | None:
    """A source file's text, or None when it is not a regular file (a link, a FIFO), is larger
    than `max_bytes`, holds NUL bytes (binary) or cannot be read."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
            return None
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes or b"\0" in data:
        return None
    return Source(data.decode("utf-8", "replace"), len(data), info.st_mtime_ns)


def is_minified(text: str) -> bool:
    if len(text) / (text.count("\n") + 1) > MINIFIED_LINE_CHARS:
        return True
    return len(text) > MINIFIED_LONGEST_LINE and any(
        len(line) > MINIFIED_LONGEST_LINE for line in text.split("\n")
    )


class Ignores:
    """The .gitignore rules of a root's directories, read once each (`forget` after a change).

    Only the index's own thread uses it."""

    def __init__(self, root: Root) -> None:
        self.root = root
        self._specs: dict[str, pathspec.GitIgnoreSpec | None] = {}

    def forget(self, rel_dir: str) -> None:
        self._specs.pop(rel_dir, None)

    def spec(self, rel_dir: str) -> pathspec.GitIgnoreSpec | None:
        """The rules of the .gitignore in `rel_dir` ("" for the root, with
        .git/info/exclude's before them)."""
        if rel_dir not in self._specs:
            base = os.path.join(self.root.real, rel_dir)
            lines = _lines(os.path.join(base, ".gitignore"))
            if rel_dir == "":
                lines = _lines(os.path.join(base, ".git", "info", "exclude")) + lines
            self._specs[rel_dir] = pathspec.GitIgnoreSpec.from_lines(lines) if lines else None
        return self._specs[rel_dir]

    def ignored(self, rel: str, is_dir: bool) -> bool:
        """Whether git would ignore `rel` (relative to the root, "/"-separated): the deepest
        .gitignore with a rule for it decides, as in git. The caller has checked that no
        directory above it is ignored (the walk does not enter those)."""
        parts = rel.split("/")
        for depth in range(len(parts) - 1, -1, -1):
            spec = self.spec("/".join(parts[:depth]))
            if spec is None:
                continue
            below = "/".join(parts[depth:]) + ("/" if is_dir else "")
            verdict = spec.check_file(below).include
            if verdict is not None:
                return verdict
        return False

    def admits(self, rel: str, skip_dirs: frozenset[str]) -> bool:
        """Whether the walk would reach and read the file at `rel` (a file an editor names)."""
        parts = rel.split("/")
        for depth in range(1, len(parts)):
            name = parts[depth - 1]
            path = os.path.join(self.root.real, *parts[:depth])
            if skips_dir(name, path, skip_dirs) or self.ignored("/".join(parts[:depth]), True):
                return False
        return language_of(rel) is not None and not self.ignored("/".join(parts), False)


def _lines(path: str) -> list[str]:
    source = read_source(path, GITIGNORE_BYTES)
    return source.text.splitlines() if source else []


@dataclass(frozen=True)
class Found:
    path: str  # absolute, under the root's real path
    rel: str
    size: int
    mtime_ns: int


def walk(ignores: Ignores, skip_dirs: frozenset[str], max_entries: int) -> Iterator[Found | None]:
    """The source files under a root, nearest the root first (a capped index holds a project's
    top-level code rather than the deepest test fixtures), in name order within a directory;
    None, and the end, once `max_entries` directory entries were looked at."""
    root = ignores.root.real
    queue: deque[str] = deque([""])
    looked_at = 0
    while queue:
        rel_dir = queue.popleft()
        try:
            with os.scandir(os.path.join(root, rel_dir)) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        looked_at += len(entries)
        if looked_at > max_entries:
            yield None
            return
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                if entry.is_symlink():
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if not skips_dir(entry.name, entry.path, skip_dirs) and not ignores.ignored(
                        rel, True
                    ):
                        queue.append(rel)
                elif (
                    entry.is_file(follow_symlinks=False)
                    and language_of(entry.name)
                    and not ignores.ignored(rel, False)
                ):
                    info = entry.stat(follow_symlinks=False)
                    yield Found(entry.path, rel, info.st_size, info.st_mtime_ns)
            except OSError:
                continue
