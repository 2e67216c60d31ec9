"""Keystroke windows when the model loads on a busy CPU, and after the first quiet prefills.

    python -m bench.busy_load [--model small] [--trials 3] [--json FILE]

A server sizes its keystroke windows from a calibration at load (engine/local/loading.py). An
editor or a language server starting beside it slows that moment: the windows came out 50-120
tokens wide between servers on one machine (session 15). Here, per trial, side by side:

- quiet: the model loads with nothing else running;
- busy: it loads while one busy process per core runs;
- busy, then typing: the busy load, then the hog stops and a few cold keystroke-sized prompts
  run (real text), as a user's first requests would: whether the windows recover (today they
  do not: they are sized once, at load).

Prints each trial's start/wide windows and prefill cost, and the medians.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from ghostfim.engine.backend import CompletionRequest
from ghostfim.engine.local.loading import open_model_file
from ghostfim.engine.local.session import ModelSession
from ghostfim.engine.setup.fetch import resolve_model

SOURCE = Path(__file__).resolve().parents[1] / "engine" / "local" / "session.py"


def _spin(stop_at: float) -> None:
    while time.monotonic() < stop_at:
        pass


def hog(seconds: float) -> list[multiprocessing.Process]:
    """One busy process per core for `seconds`."""
    stop_at = time.monotonic() + seconds
    procs = [
        multiprocessing.Process(target=_spin, args=(stop_at,), daemon=True)
        for _ in range(os.cpu_count() or 1)
    ]
    for p in procs:
        p.start()
    return procs


def windows_of(session: ModelSession) -> dict[str, Any]:
    w, at_load = session.planner.windows, session.cost_at_load
    return {
        "start": w.start_tokens,
        "wide": w.wide_tokens,
        "fixed_ms": None if at_load is None else round(at_load[0], 1),
        "per_token_ms": None if at_load is None else round(at_load[1], 2),
    }


def first_prompts(session: ModelSession, n: int) -> None:
    """n cold keystroke prompts at different places of a real file (a user's first requests)."""
    lines = SOURCE.read_text().splitlines(keepends=True)
    for i in range(n):
        at = 60 + 37 * i
        prefix, suffix = "".join(lines[:at]), "".join(lines[at:])
        session.complete(
            CompletionRequest(
                prefix=prefix, suffix=suffix, doc_id=f"file:///t{i}.py", mode="keystroke",
                max_tokens=1,
            )
        )  # fmt: skip


def trial(path: Path, busy: bool, prompts: int) -> dict[str, Any]:
    procs = hog(60.0) if busy else []
    try:
        time.sleep(0.5 if busy else 0.0)  # the hog is running
        session = open_model_file(path)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.join()
    try:
        at_load = windows_of(session)
        first_prompts(session, prompts)
        return {"at_load": at_load, "after_prompts": windows_of(session)}
    finally:
        session.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="small")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=4, help="cold prompts after the load")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    path = resolve_model(args.model).path
    runs: dict[str, list[dict[str, Any]]] = {"quiet": [], "busy": []}
    for t in range(args.trials):
        for kind in ("quiet", "busy"):
            result = trial(path, kind == "busy", args.prompts)
            runs[kind].append(result)
            print(
                f"trial {t} {kind}: at load {result['at_load']}, "
                f"after {args.prompts} prompts {result['after_prompts']}",
                file=sys.stderr,
            )
    print("| load | start window at load (median) | after the first prompts | wide: load / after |")
    print("|---|---|---|---|")
    for kind, results in runs.items():
        start0 = statistics.median(r["at_load"]["start"] for r in results)
        start1 = statistics.median(r["after_prompts"]["start"] for r in results)
        wide0 = statistics.median(r["at_load"]["wide"] for r in results)
        wide1 = statistics.median(r["after_prompts"]["wide"] for r in results)
        print(f"| {kind} | {start0:g} | {start1:g} | {wide0:g} / {wide1:g} |")
    if args.json:
        report = {"command": " ".join(sys.argv), "model": str(path), "cpus": os.cpu_count(),
                  "runs": runs}  # fmt: skip
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
