"""A workspace of code the model has not seen, with lines to complete (issue 31, part 6).

    python -m bench.workspace_corpus [--n 20] [--seed 31]
    python -m bench.workspace_corpus --measure PATH [--max-files 20000]

Models were trained on the standard library and on popular old packages: completing their
lines needs no context and flatters the model. These packages were all first published in 2025
or later, after the training of the models ghostfim uses (Qwen2.5-Coder: 2024), and none is a
dependency of ghostfim. Their latest versions on 2026-12-04, pinned with their hashes:

    package               version  first release (the registry's upload time)
    google-adk            2.13.0   0.0.1 on 2025-03-17 (PyPI)
    openai-agents         0.24.0   0.0.1 on 2025-03-04 (PyPI)
    a2a-sdk               1.3.0    0.2.0a1 on 2025-05-15 (PyPI)
    strands-agents        1.62.0   0.0.1 on 2025-05-14 (PyPI)
    @tanstack/db (TS)     0.15.2   2025 (see below); ships its TypeScript sources in src/

Not taken: mcp and pydantic-ai-slim (first published in November 2024); the JS/TS agent SDKs
of 2025-2026 (@openai/agents-core, @a2a-js/sdk, @google/adk, @strands-agents/sdk) ship only
their compiled dist/. @tanstack/db's first versions (0.0.x) are from 2025, when TanStack DB was
announced; the registry reachable here reports an incomplete time table for it (its earliest
entry is 0.5.17, 2026-01-07), and none of its times is before 2025.

What it does, in ~/.cache/ghostfim/bench/ (GHOSTFIM_CACHE_DIR moves it):

- downloads each Python package's wheel with `python -I -m pip download --no-deps
  --only-binary=:all:` run in ghostfim's cache directory (engine/setup/child.py: nothing of
  the working directory is imported; wheels only, so no package's build code runs), and the npm
  tarball over HTTPS; each archive's hash is checked against the pinned one;
- unpacks each into workspace/<name>/ afresh (the package's own code: a wheel's package
  folders, the tarball's src/ and package.json), with no path out of that folder;
- indexes each package (engine/context/index.py) and picks, with the seed, N lines of each
  kind: "cross" lines use a name that another module of the same package defines (the index
  resolves the line's names through the file's imports), "plain" lines use none. Lines are
  single-line statements inside function bodies, 8 to 120 characters, at most 2 of a kind per
  file and none within 8 lines of another pick;
- writes the picks (file, 0-based line, indentation, the original line, the names and where
  they are defined) to workspace-manifest.json, outside the workspace, and cuts each picked
  line back to its indentation on disk, so that the workspace holds no answer.

`--measure PATH` indexes any tree (the venv's site-packages: `--max-files 20000`) and prints the
build time, what the index holds, its memory as tracemalloc sees it, and the longest stall a
1 ms ticker thread saw meanwhile (the parser holds the GIL while it parses one file).
"""

from __future__ import annotations

import argparse
import ast
import base64
import hashlib
import io
import json
import random
import re
import shutil
import sys
import tarfile
import threading
import time
import tracemalloc
import urllib.request
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath

from ghostfim.engine import env
from ghostfim.engine.context.files import SKIP_DIRS, Limits
from ghostfim.engine.context.index import WorkspaceIndex
from ghostfim.engine.context.jsoutline import parse_tree
from ghostfim.engine.setup.child import run_python


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    first_release: str
    archive: str  # the file name (wheel) or the tarball's URL (npm)
    digest: str  # "sha256:<hex>" (wheels) or "sha512-<base64>" (npm's integrity)


PACKAGES = (
    Package(
        "google-adk",
        "2.13.0",
        "0.0.1, 2025-03-17",
        "google_adk-2.13.0-py3-none-any.whl",
        "sha256:bec4c4ee0aa3e63a2243c23365c5aef666ea539bc48c78dfbbf004dbddfc5f00",
    ),
    Package(
        "openai-agents",
        "0.24.0",
        "0.0.1, 2025-03-04",
        "openai_agents-0.24.0-py3-none-any.whl",
        "sha256:18d4ac34e84ed937333ec8ce46395ed3521ffcbb0a521780a4c2eaa451467f49",
    ),
    Package(
        "a2a-sdk",
        "1.3.0",
        "0.2.0a1, 2025-05-15",
        "a2a_sdk-1.3.0-py3-none-any.whl",
        "sha256:b94a73b5dc7ff1afe5f11d324480f83386a64d02b8a6b719baf013595284cc6c",
    ),
    Package(
        "strands-agents",
        "1.62.0",
        "0.0.1, 2025-05-14",
        "strands_agents-1.62.0-py3-none-any.whl",
        "sha256:331c94c61a5ddf2c4f06dfd877551bdd1d0bfee5ea89b76d6c546b65ea2104e1",
    ),
    Package(
        "@tanstack/db",
        "0.15.2",
        "0.0.x, 2025",
        "https://registry.npmjs.org/@tanstack/db/-/db-0.15.2.tgz",
        "sha512-s7CR8kOgkF1oPEGyKWItWHsg7U3hhQQu+k9CPjjAWwS6wzWVvjCbHbu/xnJvO1aPe7v3SBwo1tf6CMyKjNPNxg==",
    ),
)

MIN_CHARS, MAX_CHARS = 8, 120  # a picked line's stripped length
PER_FILE = 2  # picks of one kind in one file at most
GAP = 8  # lines between two picks of one file at least (a cut line is the other's context)
DOWNLOAD_TIMEOUT_S = 120
_NAMES = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*")
# String literals, whose words are not names the line uses (`raise ValueError("Event ...")`).
_STRINGS = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|`(?:[^`\\]|\\.)*`")
_SIMPLE = (
    ast.Assign,
    ast.AnnAssign,
    ast.AugAssign,
    ast.Expr,
    ast.Return,
    ast.Raise,
    ast.Assert,
    ast.Delete,
)
_JS_STATEMENTS = frozenset(
    {
        "lexical_declaration",
        "variable_declaration",
        "expression_statement",
        "return_statement",
        "throw_statement",
    }
)


def bench_dir() -> Path:
    return env.cache_dir() / "bench"


def folder_name(package: Package) -> str:
    return package.name.replace("@", "").replace("/", "-")


# --- download and unpack -----------------------------------------------------------------------
def _check_digest(data: bytes, digest: str) -> None:
    if digest.startswith("sha256:"):
        ok = hashlib.sha256(data).hexdigest() == digest.removeprefix("sha256:")
    else:
        ok = base64.b64encode(hashlib.sha512(data).digest()).decode() == digest.removeprefix(
            "sha512-"
        )
    if not ok:
        raise SystemExit(f"hash mismatch: {digest}")


def download(package: Package, downloads: Path) -> bytes:
    downloads.mkdir(parents=True, exist_ok=True)
    if package.archive.startswith("https://"):
        target = downloads / package.archive.rsplit("/", 1)[1]
        if not target.exists():
            with urllib.request.urlopen(package.archive, timeout=DOWNLOAD_TIMEOUT_S) as answer:
                target.write_bytes(answer.read())
    else:
        target = downloads / package.archive
        if not target.exists():
            spec = f"{package.name}=={package.version}"
            args = ["-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet"]
            done = run_python([*args, "--dest", str(downloads), spec])
            if done.returncode != 0 or not target.exists():
                raise SystemExit(f"pip download {spec} failed ({done.returncode})")
    data = target.read_bytes()
    _check_digest(data, package.digest)
    return data


def _safe_relative(name: str) -> PurePosixPath | None:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        return None
    return path


def unpack(package: Package, data: bytes, into: Path) -> int:
    """The package's own code into `into` (emptied first); returns the files written."""
    if into.exists():
        shutil.rmtree(into)
    into.mkdir(parents=True)
    written = 0
    if package.archive.endswith(".whl"):
        with zipfile.ZipFile(io.BytesIO(data)) as wheel:
            for info in wheel.infolist():
                rel = _safe_relative(info.filename)
                if rel is None or info.is_dir() or rel.parts[0].endswith(".dist-info"):
                    continue
                target = into.joinpath(*rel.parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(wheel.read(info))
                written += 1
        return written
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            rel = _safe_relative(member.name)
            if rel is None or not member.isfile() or rel.parts[0] != "package":
                continue
            inner = PurePosixPath(*rel.parts[1:])
            if inner.parts[:1] != ("src",) and str(inner) != "package.json":
                continue
            extracted = tar.extractfile(member)
            if extracted is None:
                continue
            target = into.joinpath(*inner.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(extracted.read())
            written += 1
    return written


# --- picking lines -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Candidate:
    path: str
    line: int
    text: str


def python_candidates(path: str, text: str) -> list[Candidate]:
    """Single-line simple statements in function bodies (no imports, no docstrings)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    lines = text.splitlines()
    out = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if not isinstance(node, _SIMPLE) or node.lineno != node.end_lineno:
                continue
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # a docstring
            out.append(Candidate(path, node.lineno - 1, lines[node.lineno - 1]))
    return out


def js_candidates(path: str, text: str) -> list[Candidate]:
    """Single-line statements in function bodies, alone on their line."""
    source = text.encode("utf-8")
    lines = text.splitlines()
    out = []
    stack = [parse_tree(source, path).root_node]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.type not in _JS_STATEMENTS or node.parent is None:
            continue
        if node.parent.type != "statement_block" or node.start_point.row != node.end_point.row:
            continue
        row = node.start_point.row
        if row < len(lines):
            out.append(Candidate(path, row, lines[row]))
    return out


def _alone(candidate: Candidate) -> bool:
    stripped = candidate.text.strip()
    return MIN_CHARS <= len(stripped) <= MAX_CHARS and not stripped.startswith(("#", "//"))


def classify(index: WorkspaceIndex, candidate: Candidate) -> tuple[str, list[list[str]]]:
    """("cross", [[name, defining file, line]...]) when the line uses names other modules of
    the package define, else ("plain", [])."""
    names = _NAMES.findall(_STRINGS.sub('""', candidate.text))
    found = index.definitions_for(candidate.path, names)
    other = [d for d in found if d.path != candidate.path]
    if other:
        return "cross", [[d.name, d.path, str(d.line)] for d in other]
    return "plain", []


def pick(
    index: WorkspaceIndex, candidates: list[Candidate], n: int, seed: str
) -> list[tuple[str, Candidate, list[list[str]]]]:
    by_kind: dict[str, list[tuple[Candidate, list[list[str]]]]] = {"cross": [], "plain": []}
    for candidate in sorted(candidates, key=lambda c: (c.path, c.line)):
        if _alone(candidate):
            kind, uses = classify(index, candidate)
            by_kind[kind].append((candidate, uses))
    taken: dict[str, list[int]] = {}
    picks = []
    for kind in ("cross", "plain"):
        pool = by_kind[kind]
        random.Random(f"{seed}:{kind}").shuffle(pool)
        per_file: dict[str, int] = {}
        count = 0
        for candidate, uses in pool:
            if count == n:
                break
            lines = taken.setdefault(candidate.path, [])
            if per_file.get(candidate.path, 0) >= PER_FILE:
                continue
            if any(abs(candidate.line - other) < GAP for other in lines):
                continue
            lines.append(candidate.line)
            per_file[candidate.path] = per_file.get(candidate.path, 0) + 1
            picks.append((kind, candidate, uses))
            count += 1
    return picks


def cut(path: Path, rows: list[int]) -> None:
    """Each row of `path` back to its indentation (its line end kept)."""
    lines = path.read_bytes().decode("utf-8").splitlines(keepends=True)
    for row in rows:
        line = lines[row]
        body = line.rstrip("\r\n")
        lines[row] = body[: len(body) - len(body.lstrip())] + line[len(body) :]
    path.write_bytes("".join(lines).encode("utf-8"))


def build_index(root: Path, limits: Limits | None = None) -> WorkspaceIndex:
    index = WorkspaceIndex(limits)
    index.start([root])
    if not index.wait(600):
        raise SystemExit(f"indexing {root} did not finish")
    return index


def make_corpus(n: int, seed: int) -> dict[str, object]:
    base = bench_dir()
    workspace = base / "workspace"
    manifest: dict[str, object] = {"workspace": str(workspace), "seed": seed, "n": n}
    packages, picks = [], []
    for package in PACKAGES:
        folder = workspace / folder_name(package)
        files = unpack(package, download(package, base / "workspace-downloads"), folder)
        index = build_index(folder)
        status = index.status()
        candidates = []
        python = package.archive.endswith(".whl")
        for path in index.paths():
            text = Path(path).read_text(encoding="utf-8")
            # Lines of the package's own language only (a wheel may ship a web UI's JS).
            if python and path.endswith(".py"):
                candidates += python_candidates(path, text)
            elif not python and path.endswith((".ts", ".tsx")) and not path.endswith(".d.ts"):
                candidates += js_candidates(path, text)
        chosen = pick(index, candidates, n, f"{seed}:{package.name}")
        index.stop()
        rows: dict[str, list[int]] = {}
        for kind, candidate, uses in chosen:
            rows.setdefault(candidate.path, []).append(candidate.line)
            text = candidate.text
            picks.append(
                {
                    "package": package.name,
                    "kind": kind,
                    "file": str(Path(candidate.path).relative_to(workspace)),
                    "line": candidate.line,
                    "indent": text[: len(text) - len(text.lstrip())],
                    "text": text,
                    "uses": [[u[0], str(Path(u[1]).relative_to(workspace)), u[2]] for u in uses],
                }
            )
        for path, lines in rows.items():
            cut(Path(path), lines)
        counts = {k: sum(1 for c in chosen if c[0] == k) for k in ("cross", "plain")}
        packages.append(
            {
                **asdict(package),
                "folder": folder.name,
                "files_unpacked": files,
                "index": asdict(status),
                "candidates": len(candidates),
                "picked": counts,
            }
        )
        print(
            f"{package.name} {package.version}: {files} files unpacked, "
            f"{status.files} indexed, {status.definitions} definitions, "
            f"{status.bytes / 1e6:.1f} MB held, {status.index_ms} ms; "
            f"{len(candidates)} candidate lines, picked {counts}"
        )
    manifest["packages"] = packages
    manifest["picks"] = picks
    target = base / "workspace-manifest.json"
    target.write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{len(picks)} lines cut; manifest: {target}")
    return manifest


# --- measuring the index on a tree -------------------------------------------------------------
def measure(root: Path, max_files: int, skips: bool) -> dict[str, object]:
    """Build the index of `root` twice: timed, with a 1 ms ticker thread noting how long it
    waits for the GIL; then under tracemalloc (which slows it) for what it holds."""
    limits = Limits(files=max_files, total_bytes=1 << 40, memory_bytes=1 << 40)
    skip_dirs = SKIP_DIRS if skips else frozenset()
    stalls: list[float] = []
    done = threading.Event()

    def ticker() -> None:
        while not done.is_set():
            before = time.perf_counter()
            time.sleep(0.001)
            stalls.append(time.perf_counter() - before - 0.001)

    thread = threading.Thread(target=ticker, daemon=True)
    thread.start()
    started = time.perf_counter()
    index = WorkspaceIndex(limits, skip_dirs=skip_dirs)
    index.start([root])
    index.wait(None)
    elapsed = time.perf_counter() - started
    done.set()
    thread.join()
    status = index.status()
    index.stop()

    tracemalloc.start()
    baseline = tracemalloc.get_traced_memory()[0]
    traced = WorkspaceIndex(limits, skip_dirs=skip_dirs)
    traced.start([root])
    traced.wait(None)
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    traced.stop()
    stalls.sort()
    result = {
        "root": str(root),
        "state": status.state,
        "files": status.files,
        "definitions": status.definitions,
        "bytes_estimated": status.bytes,
        "bytes_traced": current - baseline,
        "peak_traced": peak - baseline,
        "index_ms": status.index_ms,
        "wall_s": round(elapsed, 2),
        "ticker_stall_ms_p99": round(stalls[int(len(stalls) * 0.99)] * 1000, 1) if stalls else 0,
        "ticker_stall_ms_max": round(stalls[-1] * 1000, 1) if stalls else 0,
    }
    print(json.dumps(result, indent=1))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20, help="lines of each kind per package")
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--measure", type=Path, help="index this tree and report, nothing else")
    parser.add_argument("--max-files", type=int, default=Limits().files)
    parser.add_argument("--no-skips", action="store_true", help="walk skipped folders too")
    args = parser.parse_args(argv)
    if args.measure:
        measure(args.measure.resolve(), args.max_files, not args.no_skips)
    else:
        make_corpus(args.n, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
