"""Where the member guide constrains a dot on the bench corpus, and whether the name the code
really writes there is on its list. No model: the index and the guide alone.

    python -m bench.guide_coverage [--files 300] [--sites 8] [--seed 5] [--json FILE]

The guide (engine/context/guide.py) lets the local model write only the names the index knows
after a dot. Where it constrains, a name missing from its list is a suggestion it has made
impossible (a harm); where it does not, the model guesses as it would without it. This samples
`name.attr` sites in the corpus's Python and JS/TS source files (bench/workspace_corpus.py;
test folders left out), builds the index over the corpus's package folders as the server does
(bench/workspace_bench.py `workspace_roots`), and asks the guide at each dot with the text
before it, the file's cursor line and the index's lookup, as a request does. Per kind of the
name before the dot (a module or class, `self`, `cls`, `this`, a local whose function shows its
class, any other local): sites, guided, harmed; and the guide's time to its first answer
(p50/p95/p99, on the keystroke path).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.workspace_bench import default_manifest, workspace_roots
from ghostfim.engine.context.guide import MemberGuide, local_classes
from ghostfim.engine.context.index import WorkspaceIndex

SUFFIXES = (".py", ".ts", ".tsx", ".js", ".mjs")
SKIPPED_DIRS = {"node_modules", ".venv", "venv", "tests", "test", "__tests__", "dist", "build"}
_SITE = re.compile(r"(?<![\w.$])([A-Za-z_$][\w$]*)\.([A-Za-z_$][\w$]*)")
KINDS = ("module or class", "self", "cls", "this", "local, annotated or called", "other local")


def source_files(roots: Sequence[Path]) -> list[str]:
    found: list[str] = []
    for root in roots:
        for folder, dirs, files in os.walk(os.path.realpath(root)):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("."))
            found += [os.path.join(folder, f) for f in sorted(files) if f.endswith(SUFFIXES)]
    return found


def kind_of(before: str, head: str) -> str:
    if head in ("self", "cls", "this"):
        return head
    local = local_classes(before).get(head)  # as the guide reads the function around the dot
    if local is None:
        return "module or class"
    return "local, annotated or called" if local else "other local"


def is_allowed(guide: MemberGuide, name: str) -> bool:
    """Whether the guide lets `name` be written after the dot (a dunder once `__` is typed)."""
    written = "__" if name.startswith("__") else ""
    found = guide.after(written)
    return found is None or name[len(written) :] in found.names or (name == written and found.ends)


def sample_sites(text: str, rng: random.Random, per_file: int) -> list[re.Match[str]]:
    sites = []
    for site in _SITE.finditer(text):
        line = text[text.rfind("\n", 0, site.start()) + 1 : site.start()].lstrip()
        if not line.startswith(("#", "//", "import ", "from ", "*")):
            sites.append(site)
    return rng.sample(sites, min(per_file, len(sites)))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=300, help="source files sampled")
    parser.add_argument("--sites", type=int, default=8, help="dots sampled per file")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--manifest", type=Path, default=default_manifest())
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    manifest = json.loads(args.manifest.read_text())
    workspace = Path(manifest["workspace"])
    roots = workspace_roots(manifest, workspace)
    index = WorkspaceIndex()
    started = time.perf_counter()
    index.start(roots)
    if not index.wait(300):
        raise SystemExit("the index did not finish in 300 s")
    index_s = time.perf_counter() - started
    rng = random.Random(args.seed)
    files = source_files(roots)
    counts: Counter[tuple[str, str]] = Counter()
    harmed: list[str] = []
    times_ms: list[float] = []
    try:
        for path in rng.sample(files, min(args.files, len(files))):
            text = Path(path).read_text(errors="replace")
            for site in sample_sites(text, rng, args.sites):
                before = text[: site.start(2)]
                line = before.count("\n")
                t0 = time.perf_counter()
                guide = MemberGuide(lambda d, p=path, n=line: index.members(p, d, n), before)
                guided = guide.after("") is not None
                times_ms.append((time.perf_counter() - t0) * 1000)
                kind = kind_of(before, site.group(1))
                counts[(kind, "sites")] += 1
                if guided:
                    counts[(kind, "guided")] += 1
                    if not is_allowed(guide, site.group(2)):
                        counts[(kind, "harmed")] += 1
                        harmed.append(
                            f"{os.path.relpath(path, workspace)}:{line + 1} {site.group(0)}"
                        )
        indexed = index.status().files
    finally:
        index.stop()

    print(f"index: {indexed} files in {index_s:.1f} s; {len(times_ms)} sites")
    print("| before the dot | sites | guided | the real name not on the list |")
    print("|---|---|---|---|")
    rows = []
    for kind in KINDS:
        sites, guided, harm = (counts[(kind, k)] for k in ("sites", "guided", "harmed"))
        rows.append({"kind": kind, "sites": sites, "guided": guided, "harmed": harm})
        if sites:
            print(f"| {kind} | {sites} | {guided} ({guided / sites:.0%}) | {harm} |")
    total = {k: sum(r[k] for r in rows) for k in ("sites", "guided", "harmed")}
    print(f"| all | {total['sites']} | {total['guided']} | {total['harmed']} |")
    quantiles = statistics.quantiles(times_ms, n=100)
    latency = {
        "p50": quantiles[49],
        "p95": quantiles[94],
        "p99": quantiles[98],
        "max": max(times_ms),
    }
    print("guide's first answer, ms: " + ", ".join(f"{k} {v:.2f}" for k, v in latency.items()))
    for site in harmed:
        print("harmed:", site)
    if args.json:
        report: dict[str, Any] = {
            "command": "python -m bench.guide_coverage " + " ".join(sys.argv[1:]),
            "rows": rows,
            "total": total,
            "first_answer_ms": {k: round(v, 3) for k, v in latency.items()},
            "harmed": harmed,
        }
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
