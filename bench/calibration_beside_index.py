"""The keystroke windows a server sizes while its workspace index builds, against the context off.

    python -m bench.calibration_beside_index [--model small] [--trials 3] [--json FILE]

A server times its model's prefill once, at load, and sizes every keystroke window from that
(engine/local/loading.py): a slower timing means narrower windows for the whole session, and the
Tab user's whole lines at the dwell come from the first (start) window. With `workspaceContext`
on, the index starts reading files at `initialize`, beside the load; it now waits between files
while a model loads (engine/context/index.py `hold`). Per trial, `on` then `off`, each a fresh
`ghostfim serve` initialized on the bench corpus's package folders (bench/workspace_corpus.py) as
bench/workspace_bench.py starts them: the prefill cost and the start/wide windows the server
logged (window/logMessage), the time to the model and to the index, and the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.workspace_bench import default_manifest, start_server, workspace_roots
from harness.lspclient import Notification

# engine/local/loading.py's log line after the calibration.
_CALIBRATED = re.compile(
    r"prefill cost: ([\d.]+) ms \+ ([\d.]+) ms/token; keystroke windows (\d+)/(\d+) tokens"
)
SYSTEMS = ("on", "off")


async def one_server(
    system: str, roots: Sequence[Path], args: argparse.Namespace
) -> dict[str, Any]:
    logged: list[str] = []

    def on_note(note: Notification) -> None:
        if note.method == "window/logMessage" and isinstance(note.params, dict):
            logged.append(str(note.params.get("message", "")))

    server = await start_server(system, roots, args, listeners=[on_note])
    try:
        found = next((m for line in logged if (m := _CALIBRATED.search(line))), None)
        if found is None:
            raise RuntimeError(f"{system}: no calibration was logged")
        fixed, per_token, start, wide = found.groups()
        return {
            "system": system,
            "fixed_ms": float(fixed),
            "per_token_ms": float(per_token),
            "start_tokens": int(start),
            "wide_tokens": int(wide),
            "model_ready_ms": server.model_ready_ms,
            "index_ready_ms": server.index_ready_ms,
        }
    finally:
        await server.stop()


def median_of(rows: Sequence[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return round(statistics.median(values), 2) if values else None


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    manifest = json.loads(args.manifest.read_text())
    roots = workspace_roots(manifest, Path(manifest["workspace"]))
    rows: list[dict[str, Any]] = []
    for trial in range(args.trials):
        for system in SYSTEMS:
            row = {"trial": trial, **await one_server(system, roots, args)}
            rows.append(row)
            print(
                f"trial {trial} {system:>3}: {row['fixed_ms']:.1f} ms + "
                f"{row['per_token_ms']:.2f} ms/token, windows {row['start_tokens']}/"
                f"{row['wide_tokens']}, model ready {row['model_ready_ms']} ms, "
                f"index ready {row['index_ready_ms']} ms",
                flush=True,
            )
    keys = ("per_token_ms", "fixed_ms", "start_tokens", "wide_tokens", "index_ready_ms")
    medians = {
        system: {k: median_of([r for r in rows if r["system"] == system], k) for k in keys}
        for system in SYSTEMS
    }
    print("| median | " + " | ".join(SYSTEMS) + " |")
    print("|---|" + "---|" * len(SYSTEMS))
    for key in keys:
        print(f"| {key} | " + " | ".join(str(medians[s][key]) for s in SYSTEMS) + " |")
    return {
        "command": "python -m bench.calibration_beside_index " + " ".join(sys.argv[1:]),
        "rows": rows,
        "medians": medians,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="small")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--manifest", type=Path, default=default_manifest())
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    # What bench/workspace_bench.py's start_server reads of its arguments.
    args.settings = {}
    args.server = ""
    args.baseline_server = ""
    args.load_timeout_s = 300.0
    report = asyncio.run(main_async(args))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
