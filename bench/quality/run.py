"""Completion-quality benchmark: ghostfim vs. ghostfim without post-processing vs. llama-server.

    python -m bench.quality [--model small] [--tasks 60] [--seed 7]
                            [--systems ghostfim,ghostfim-raw,llama-server]
                            [--languages python,javascript,...] [--kinds line,rest,block]
                            [--exec-share 0.34] [--out bench/results/quality.json]
    python -m bench.quality --list [--tasks 60]   # the tasks, no model
    python -m bench.quality --count      # every task there is, per language and kind

Each task (bench/quality/tasks.py, exec_tasks.py) goes to every system in turn before the next
task, all on the same model file: the two ghostfim arms run back to back on one server (the
second finds the prompt in the KV cache), and drift in the machine's load hits every system
alike. Scores and the way answers are applied: bench/quality/scoring.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.quality import exec_tasks, scoring
from bench.quality.neighbors import open_neighbors
from bench.quality.selection import build_tasks
from bench.quality.systems import GHOSTFIM_ARMS, GhostfimSystem, LlamaServerSystem, Outcome
from bench.quality.tasks import (
    KINDS,
    LANGUAGES,
    Task,
    discover_sources,
    spans_of,
)

SYSTEMS = ("ghostfim", "ghostfim-raw", "llama-server")


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 0


_test_results: dict[tuple[str, str], bool] = {}  # (task, completed file): passed


def record_of(task: Task, system: str, outcome: Outcome) -> dict[str, Any]:
    scores = scoring.score(task, outcome.result)
    passed = None
    if task.exec is not None and outcome.result is not None:
        key = (task.id, outcome.result)  # two systems with the same answer: one test run
        if key not in _test_results:
            _test_results[key] = exec_tasks.run_task_test(task, outcome.result)
        passed = _test_results[key]
    elif task.exec is not None:
        passed = False
    return {
        "task": task.id,
        "system": system,
        "language": task.language,
        "kind": task.kind,
        "exec": task.exec is not None,
        "completion": outcome.completion,
        **scores,
        "passed": passed,
        "latency_ms": outcome.latency_ms,
        **outcome.details,
        "error": outcome.error,
    }


def report_of(
    args: argparse.Namespace,
    systems: Sequence[str],
    tasks: Sequence[Task],
    records: list[dict[str, Any]],
    meta: dict[str, Any],
) -> dict[str, Any]:
    done = {r["task"] for r in records}
    pairs = [(a, b) for i, a in enumerate(systems) for b in systems[i + 1 :]]
    return {
        "command": "python -m bench.quality " + " ".join(sys.argv[1:]),
        "machine": {
            "platform": platform.platform(),
            "cpus": _cpu_count(),
            "python": platform.python_version(),
        },
        **meta,
        "seed": args.seed,
        "systems": list(systems),
        "tasks_done": len(done),
        "results": scoring.by_system(records, systems),
        "by_language": scoring.breakdown(records, systems, "language"),
        "by_kind": scoring.breakdown(records, systems, "kind"),
        # Tasks one system gets right and the other wrong, per metric (a = the first named).
        "pairs": {f"{a} vs {b}": scoring.pairwise(records, a, b) for a, b in pairs},
        "tasks": [t.describe() for t in tasks if t.id in done],
        "records": records,
    }


async def run(args: argparse.Namespace, tasks: Sequence[Task]) -> dict[str, Any]:
    from ghostfim.engine.setup.fetch import resolve_model

    systems = [s for s in args.systems.split(",") if s]
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        raise SystemExit(f"unknown system(s) {unknown}; choose from {', '.join(SYSTEMS)}")
    model_path = Path(resolve_model(args.model).path)
    meta: dict[str, Any] = {"model": str(model_path), "settings": {}}
    ghostfim = llama = None
    records: list[dict[str, Any]] = []
    waits: list[float] = []  # waiting for ghostfim's background work between systems
    try:
        if any(s in GHOSTFIM_ARMS for s in systems):
            ghostfim = GhostfimSystem(
                args.model, args.ghostfim_settings, deadline_s=args.deadline_s
            )
            status = await ghostfim.start()
            meta["settings"]["ghostfim"] = {
                **ghostfim.options,
                "env": ghostfim.env,
                "model_status": status.get("model"),
            }
            unknown_setting = [w for w in ghostfim.warnings if "postprocess" in w]
            if unknown_setting:
                meta["warnings"] = unknown_setting
                _log(f"warning: {unknown_setting[0]} (ghostfim-raw may equal ghostfim)")
        if "llama-server" in systems:
            llama = LlamaServerSystem(
                model_path,
                threads=args.threads,
                t_max_predict_ms=args.llamavim_t_max_predict_ms,
                seed=None if args.llamavim_seed == "random" else int(args.llamavim_seed),
            )
            llama.start()
            meta["settings"]["llama-server"] = {
                "llamavim": {k: v for k, v in vars(llama.settings).items()},
                "seed": llama.seed,
                "server_flags": "see bench/llama_server.py (LLAMAVIM_SERVER_FLAGS)",
            }
        for i, task in enumerate(tasks):
            uri = f"file:///quality/{i}/{Path(task.path).name}"
            outcomes: dict[str, Outcome] = {}
            opened = False
            neighbors: list[str] = []
            for system in systems:
                if system in GHOSTFIM_ARMS:
                    assert ghostfim is not None
                    if not opened:
                        neighbors = await open_neighbors(
                            ghostfim, task, uri.rsplit("/", 1)[0], args.neighbors
                        )
                        await ghostfim.open(task, uri)
                        opened = True
                    outcomes[system] = await ghostfim.complete(
                        task, uri, postprocess=system == "ghostfim"
                    )
                else:
                    if ghostfim is not None and opened:
                        waits.append(await ghostfim.wait_idle())
                    assert llama is not None
                    outcomes[system] = await llama.complete(task)
            if ghostfim is not None and opened:
                await ghostfim.close(uri)
                for neighbor in neighbors:
                    await ghostfim.close(neighbor)
                waits.append(await ghostfim.wait_idle())
            meta["idle_wait_ms_total"] = round(sum(waits), 1)
            line = []
            for system in systems:
                rec = record_of(task, system, outcomes[system])
                records.append(rec)
                mark = "=" if rec["span_em"] else ("~" if rec["first_line_em"] else "x")
                if rec["passed"] is not None:
                    mark += " pass" if rec["passed"] else " fail"
                latency = rec["latency_ms"]
                line.append(f"{system} {mark} {latency if latency is not None else '-'} ms")
            _log(f"[{i + 1}/{len(tasks)}] {task.id}: " + " | ".join(line))
            if args.out:
                write_report(args.out, report_of(args, systems, tasks, records, meta))
    finally:
        if ghostfim is not None:
            await ghostfim.stop()
        if llama is not None:
            await llama.stop()
    return report_of(args, systems, tasks, records, meta)


def write_report(path: Path, report: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=1) + "\n")
    tmp.replace(path)


def print_tables(report: dict[str, Any]) -> None:
    print(scoring.markdown_table(report["results"]))
    print()
    print(scoring.markdown_breakdown(report["by_language"], "language"))
    print()
    print(scoring.markdown_breakdown(report["by_kind"], "kind"))
    print()
    for pair, metrics in report["pairs"].items():
        a, b = pair.split(" vs ")
        counts = ", ".join(
            f"{metric}: {len(m['a_only'])} only {a}, {len(m['b_only'])} only {b}"
            for metric, m in metrics.items()
        )
        print(f"{pair}: {counts}")


def count_available(args: argparse.Namespace) -> dict[str, Any]:
    """Every task the seed could draw: per language and kind, and execution tasks."""
    import random

    from bench.quality.tasks import read_source

    sources = discover_sources()
    excluded = {str(p) for p in exec_tasks.exec_module_paths()}
    counts: dict[str, dict[str, Any]] = {}
    for language in args.languages:
        files = [p for p in sources.get(language, []) if str(p) not in excluded]
        usable = 0
        per_kind: Counter[str] = Counter()
        for path in files:
            text = read_source(path)
            if text is None:
                continue
            usable += 1
            for kind in args.kinds:
                rng = random.Random(f"{args.seed}:{kind}:{path}")
                if spans_of(text, language, kind, rng):
                    per_kind[kind] += 1  # one task per file and kind
        counts[language] = {"files": len(files), "usable_files": usable, **per_kind}
    exec_counts: Counter[str] = Counter()
    functions = 0
    for module in exec_tasks.exec_modules():
        for qualname, _ in exec_tasks.doctest_functions(module):
            fn = exec_tasks.checked_function(module, qualname)
            functions += bool(fn.candidates)
            for kind in args.kinds:
                if exec_tasks.make_task(fn, kind, args.seed) is not None:
                    exec_counts[kind] += 1  # one task per function and kind
    counts["python-exec"] = {"functions": functions, **exec_counts}
    return counts


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="small", help="a preset (tiny, small...) or a path")
    parser.add_argument("--tasks", type=int, default=60)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument(
        "--languages",
        type=lambda s: [x for x in s.split(",") if x],
        default=list(LANGUAGES),
    )
    parser.add_argument("--kinds", type=lambda s: [x for x in s.split(",") if x], default=KINDS)
    parser.add_argument(
        "--exec-share",
        type=float,
        default=0.34,
        help="share of the tasks that are execution tasks (Python doctests)",
    )
    parser.add_argument("--threads", type=int, default=2, help="llama-server threads")
    parser.add_argument(
        "--llamavim-t-max-predict-ms",
        type=int,
        default=None,
        help="override llama.vim's 250 ms generation limit of a first request",
    )
    parser.add_argument(
        "--llamavim-seed",
        default="7",
        help="sampling seed sent to llama-server ('random': none, as llama.vim sends)",
    )
    parser.add_argument(
        "--ghostfim-settings",
        type=json.loads,
        default={},
        help='more ghostfim settings as JSON, e.g. \'{"multiline": "always"}\'',
    )
    parser.add_argument(
        "--deadline-s",
        type=float,
        default=900.0,
        help="ghostfim's request deadlines (GHOSTFIM_REQUEST_DEADLINE_S and "
        "GHOSTFIM_EXPLICIT_DEADLINE_S; the server's 60 s for explicit requests would answer "
        "cold prompts on a slow or busy CPU empty)",
    )
    parser.add_argument(
        "--neighbors",
        type=int,
        default=0,
        help="open up to N other files of each task's folder before it (the files it names "
        "first), so ghostfim's context from other files holds real neighbouring code; compare "
        "with --ghostfim-settings '{\"extraContext\": false}'",
    )
    parser.add_argument("--out", type=Path, help="write the report (every answer) here as JSON")
    parser.add_argument("--list", action="store_true", help="print the tasks and exit")
    parser.add_argument("--count", action="store_true", help="count every available task")
    args = parser.parse_args(argv)
    bad = [lang for lang in args.languages if lang not in LANGUAGES]
    if bad or any(k not in KINDS for k in args.kinds):
        raise SystemExit(f"languages: {', '.join(LANGUAGES)}; kinds: {', '.join(KINDS)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    if args.count:
        print(json.dumps(count_available(args), indent=1))
        return 0
    started = time.perf_counter()
    selection = build_tasks(
        args.tasks,
        seed=args.seed,
        languages=args.languages,
        kinds=args.kinds,
        exec_share=args.exec_share,
    )
    tasks = selection.tasks
    mix = Counter(f"{t.language}{'-exec' if t.exec else ''}/{t.kind}" for t in tasks)
    _log(
        f"{len(tasks)} tasks in {time.perf_counter() - started:.1f} s: "
        + ", ".join(f"{k} {v}" for k, v in sorted(mix.items()))
    )
    if args.list:
        for t in tasks:
            print(json.dumps(t.describe()))
        return 0
    # An idle server must not spin on its OpenMP threads while the other one works.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    report = asyncio.run(run(args, tasks))
    report["sources"] = selection.sources
    if args.out:
        write_report(args.out, report)
    print_tables(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
