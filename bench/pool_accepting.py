"""Pool accepting-user runs: per system, the sums over several replay JSONs.

    python -m bench.pool_accepting bench/results/accepting-user.json other-run.json ...

Either benchmark's JSON: bench/replay.py's (`results`) or bench/workspace_bench.py's (`replay`,
each pass's `summary`), or a file of several such reports under `runs` (bench/results/ keeps a
multi-seed run that way).

One replay pass has 7-15 accepts, so a single run's ratios move by a third from one run to the
next (the same system, the same seed). This sums keystrokes saved, refusals and server CPU
seconds over the runs and divides by all their characters, per system and user.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Pooled:
    runs: int = 0
    chars: int = 0
    saved: float = 0.0
    refused: int = 0
    cpu_s: float = 0.0
    accepts: int = 0
    reads: int = 0

    def per_100(self, value: float) -> float:
        return 100 * value / self.chars if self.chars else 0.0


def passes(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each pass's figures by its name (system/user)."""
    if "results" in run:
        results: dict[str, dict[str, Any]] = run["results"]
        return results
    return {name: p["summary"] for name, p in run["replay"].items()}


def reports(path: Path) -> list[dict[str, Any]]:
    """The benchmark reports a file holds: itself, or those under `runs` (a list, or a dict
    by seed)."""
    data: dict[str, Any] = json.loads(path.read_text())
    runs = data.get("runs") or [data]
    return list(runs.values()) if isinstance(runs, dict) else list(runs)


def pool(paths: list[Path]) -> dict[str, Pooled]:
    pooled: dict[str, Pooled] = {}
    for run in (r for path in paths for r in reports(path)):
        for name, r in passes(run).items():
            if r.get("user") in (None, "none"):
                continue  # no accepting user in this pass
            p = pooled.setdefault(name, Pooled())
            chars = int(r["chars_written"])
            p.runs += 1
            p.chars += chars
            p.saved += float(r["keystrokes_saved_per_100"]) * chars / 100
            p.refused += int(r["refused"])
            p.cpu_s += float(r["cpu_s"] or 0.0)
            p.accepts += int(r["accepts"])
            p.reads += int(r["reads"])
    return pooled


def main(argv: list[str] | None = None) -> int:
    paths = [Path(a) for a in (sys.argv[1:] if argv is None else argv)]
    if not paths:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    print(
        "| system/user | runs | characters | saved /100 | refused /100 | CPU s /100 "
        "| accepts | reads |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, p in pool(paths).items():
        print(
            f"| {name} | {p.runs} | {p.chars} | {p.per_100(p.saved):.2f} | "
            f"{p.per_100(p.refused):.2f} | {p.per_100(p.cpu_s):.2f} | {p.accepts} | {p.reads} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
