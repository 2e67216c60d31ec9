"""Execution tasks: spans of Python functions whose doctests can judge a completion.

The sources are pure-Python modules with examples in their functions' docstrings: from the
standard library (`statistics`, `difflib`, `fractions`, `textwrap`, `pickletools`,
`_pydecimal`) and `more_itertools` as vendored by setuptools in the virtual environment. For a
function whose doctests pass as shipped, a span is a statement of its body (a `line`, or the
`rest` of it from a mid-line point) or the body of a block in it (`block`: a compound
statement's body, or the function's body after its docstring; 2 to 6 lines). A span is kept only
if the doctests catch its removal (replaced by `pass`, they fail): otherwise passing them would
say nothing about the completion.

Scoring puts the completion into the file as the editor would, and runs that function's doctests
on the result in a subprocess (`doctest_runner.py`, isolated, with a time and memory limit).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import random
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from bench.quality.tasks import (
    BLOCK_MAX_CHARS,
    BLOCK_MAX_LINES,
    BLOCK_MIN_LINES,
    KINDS,
    ExecSpec,
    Task,
    cut_points,
    eligible,
    indentation,
    round_robin,
)

RUNNER = Path(__file__).resolve().parent / "doctest_runner.py"
# Which candidates survive the mutation check, per function: running the doctests takes about a
# second a function, so the answer is kept (keyed by the module file and this code's source).
CACHE_FILE = Path(os.path.expanduser("~/.cache/ghostfim/bench/quality-exec-checks.json"))
TIMEOUT_S = 10.0
STDLIB_MODULES = ("statistics", "difflib", "fractions", "textwrap", "pickletools", "_pydecimal")


@dataclass(frozen=True)
class ExecModule:
    module: str
    package: str
    path: Path


def exec_modules() -> list[ExecModule]:
    paths = sysconfig.get_paths()
    stdlib, purelib = Path(paths["stdlib"]), Path(paths["purelib"])
    found = [ExecModule(name, "", stdlib / f"{name}.py") for name in STDLIB_MODULES]
    found.append(
        ExecModule(
            "more",
            "setuptools._vendor.more_itertools",
            purelib / "setuptools" / "_vendor" / "more_itertools" / "more.py",
        )
    )
    return [m for m in found if m.path.is_file()]


def exec_module_paths() -> list[Path]:
    return [m.path for m in exec_modules()]


# --- running doctests ------------------------------------------------------------------------
def run_doctests(
    module: ExecModule | ExecSpec,
    path: str | Path,
    qualname: str,
    sources: Sequence[str],
    timeout_s: float = TIMEOUT_S,
) -> list[dict[str, Any]]:
    """One result per source: {"attempted", "failed", "error"} (see doctest_runner.py)."""
    request = {
        "path": str(path),
        "module": module.module,
        "package": module.package,
        "qualname": qualname,
        "sources": list(sources),
        "timeout_s": timeout_s,
    }
    failed = [{"attempted": 0, "failed": 0, "error": "runner failed"} for _ in sources]
    with tempfile.TemporaryDirectory(prefix="ghostfim-quality-") as scratch:
        try:
            proc = subprocess.run(
                [sys.executable, "-I", str(RUNNER)],
                input=json.dumps(request),
                capture_output=True,
                text=True,
                cwd=scratch,
                timeout=timeout_s * len(sources) + 30,
            )
        except subprocess.TimeoutExpired:
            return [{**r, "error": "timeout"} for r in failed]
    try:
        results = json.loads(proc.stdout)
    except ValueError:
        return failed
    return results if isinstance(results, list) and len(results) == len(sources) else failed


def passed(result: dict[str, Any]) -> bool:
    return result.get("error") is None and result["attempted"] > 0 and result["failed"] == 0


def run_task_test(task: Task, completed_text: str, timeout_s: float = TIMEOUT_S) -> bool:
    """Whether the function's doctests pass on the file as completed."""
    assert task.exec is not None
    if completed_text == task.text:
        return True  # the original passes (checked when the task was made)
    result = run_doctests(task.exec, task.path, task.exec.qualname, [completed_text], timeout_s)
    return passed(result[0])


# --- candidates -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Candidate:
    kind: str  # "line" or "block" ("rest" tasks are cut from "line" candidates)
    first: int  # 0-based first line of the span
    last: int  # 0-based last line


@dataclass(frozen=True)
class Function:
    module: ExecModule
    qualname: str
    candidates: tuple[Candidate, ...]


_COMPOUND = (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.AsyncFor, ast.AsyncWith)


def _has_trailing_comment(line: str) -> bool:
    code = line.split("#", 1)
    return len(code) == 2 and code[0].strip() != "" and code[0].count("'") % 2 == 0


def _simple(stmt: ast.stmt) -> bool:
    return (
        not isinstance(stmt, (*_COMPOUND, ast.FunctionDef, ast.ClassDef, ast.Pass))
        and stmt.lineno == stmt.end_lineno
    )


def _block_candidate(body: Sequence[ast.stmt], lines: Sequence[str]) -> Candidate | None:
    first, last = body[0].lineno - 1, (body[-1].end_lineno or body[-1].lineno) - 1
    span = lines[first : last + 1]
    nonblank = [s for s in span if s.strip()]
    if not BLOCK_MIN_LINES <= len(nonblank) <= BLOCK_MAX_LINES:
        return None
    if not eligible(lines[first], "python") or any(not s.isascii() for s in span):
        return None
    if sum(len(s) + 1 for s in span) - len(indentation(lines[first])) > BLOCK_MAX_CHARS:
        return None
    return Candidate("block", first, last)


def function_candidates(fn: ast.FunctionDef, lines: Sequence[str]) -> list[Candidate]:
    body = fn.body
    has_doc = (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    )
    statements = body[1:] if has_doc else body
    if not statements:
        return []
    out: list[Candidate] = []
    seen: set[tuple[str, int]] = set()

    def add(c: Candidate | None) -> None:
        if c is not None and (c.kind, c.first) not in seen:
            seen.add((c.kind, c.first))
            out.append(c)

    if has_doc:
        add(_block_candidate(statements, lines))  # the function's body after its docstring
    for node in ast.walk(ast.Module(body=list(statements), type_ignores=[])):
        if isinstance(node, _COMPOUND) and node.body:
            header = lines[node.body[0].lineno - 2].rstrip()
            if node.body[0].lineno > node.lineno and header.endswith(":"):
                add(_block_candidate(node.body, lines))
        if isinstance(node, ast.stmt) and _simple(node):
            i = node.lineno - 1
            if eligible(lines[i], "python") and not _has_trailing_comment(lines[i]):
                add(Candidate("line", i, i))
    return sorted(out, key=lambda c: (c.first, c.kind))


def doctest_functions(module: ExecModule) -> list[tuple[str, ast.FunctionDef]]:
    """(qualname, node) of top-level functions and methods with examples in their docstring."""
    tree = ast.parse(module.path.read_text(encoding="utf-8"))
    found = []

    def visit(body: Sequence[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef):
                doc = ast.get_docstring(node)
                if doc and ">>>" in doc:
                    found.append((prefix + node.name, node))
            elif isinstance(node, ast.ClassDef) and not prefix:
                visit(node.body, node.name + ".")

    visit(tree.body, "")
    return found


def _mutant(lines: Sequence[str], c: Candidate) -> str:
    replaced = [*lines[: c.first], indentation(lines[c.first]) + "pass", *lines[c.last + 1 :]]
    return "\n".join(replaced)


def _code_version() -> str:
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for name in ("exec_tasks.py", "tasks.py", "doctest_runner.py"):
        digest.update((here / name).read_bytes())
    return digest.hexdigest()[:16]


def _cache_key(module: ExecModule, qualname: str) -> str:
    st = module.path.stat()
    return f"{_code_version()}|{module.path}|{st.st_size}|{st.st_mtime_ns}|{qualname}"


def _load_cache() -> dict[str, Any]:
    try:
        data = json.loads(CACHE_FILE.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _store_cache(key: str, value: list[list[Any]]) -> None:
    data = _load_cache()
    data[key] = value
    try:
        CACHE_FILE.parent.mkdir(parents=True, exist_ok=True)
        tmp = CACHE_FILE.with_name(f"{CACHE_FILE.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(CACHE_FILE)
    except OSError:
        pass


@cache
def checked_function(module: ExecModule, qualname: str) -> Function:
    """The function's candidates whose removal its doctests catch (none if they fail as is)."""
    key = _cache_key(module, qualname)
    cached = _load_cache().get(key)
    if isinstance(cached, list):
        return Function(module, qualname, tuple(Candidate(k, a, b) for k, a, b in cached))
    kept = _check(module, qualname)
    _store_cache(key, [[c.kind, c.first, c.last] for c in kept])
    return Function(module, qualname, kept)


def _check(module: ExecModule, qualname: str) -> tuple[Candidate, ...]:
    text = module.path.read_text(encoding="utf-8")
    lines = text.split("\n")
    node = dict(doctest_functions(module))[qualname]
    candidates = function_candidates(node, lines)
    if not candidates:
        return ()
    results = run_doctests(
        module, module.path, qualname, [text, *(_mutant(lines, c) for c in candidates)]
    )
    if not passed(results[0]):
        return ()
    return tuple(c for c, r in zip(candidates, results[1:], strict=True) if not passed(r))


# --- tasks ----------------------------------------------------------------------------------
def _offsets(lines: Sequence[str]) -> list[int]:
    out, at = [], 0
    for line in lines:
        out.append(at)
        at += len(line) + 1
    return out


def make_task(fn: Function, kind: str, seed: int) -> Task | None:
    """One task of this kind from the function's checked candidates (seeded choice)."""
    want = "line" if kind == "rest" else kind
    pool = [c for c in fn.candidates if c.kind == want]
    rng = random.Random(f"{seed}:exec:{kind}:{fn.module.module}.{fn.qualname}")
    if kind == "rest":
        pool = [c for c in pool if cut_points(_lines(fn.module)[c.first])]
    if not pool:
        return None
    c = rng.choice(pool)
    text = fn.module.path.read_text(encoding="utf-8")
    lines = text.split("\n")
    offsets = _offsets(lines)
    line = lines[c.first]
    if kind == "rest":
        start = offsets[c.first] + rng.choice(cut_points(line))
    else:
        start = offsets[c.first] + len(indentation(line))
    end = offsets[c.last] + len(lines[c.last])
    spec = ExecSpec(fn.module.module, fn.module.package, fn.qualname)
    label = f"{fn.module.path.name}:{c.first + 1}:{start - offsets[c.first]}"
    return Task(
        f"python-exec/{kind}/{label}",
        "python",
        kind,
        str(fn.module.path),
        text,
        start,
        end,
        exec=spec,
    )


@cache
def _lines(module: ExecModule) -> list[str]:
    return module.path.read_text(encoding="utf-8").split("\n")


def _function_order(seed: int, salt: str) -> list[tuple[ExecModule, str]]:
    """All doctested functions: modules in turn, each module's functions in seeded order."""
    per_module = []
    for module in exec_modules():
        names = [q for q, _ in doctest_functions(module)]
        random.Random(f"{seed}:{salt}:{module.module}").shuffle(names)
        per_module.append(iter([(module, q) for q in names]))
    out: list[tuple[ExecModule, str]] = []
    live = per_module
    while live:
        still = []
        for it in live:
            item = next(it, None)
            if item is not None:
                out.append(item)
                still.append(it)
        live = still
    return out


def kind_stream(kind: str, seed: int) -> Iterator[Task]:
    for module, qualname in _function_order(seed, kind):
        task = make_task(checked_function(module, qualname), kind, seed)
        if task is not None:
            yield task


def exec_task_stream(*, seed: int = 7, kinds: Sequence[str] = KINDS) -> Iterator[Task]:
    """Execution tasks, round-robin over the kinds; functions are checked as they come."""
    return round_robin([kind_stream(kind, seed) for kind in kinds])
