"""Where the workspace's block went in a side-by-side replay, and what it changed for the user.

    python -m bench.block_report --trace TRACE.log [--replay RESULT.json --systems on,off]

- `--trace`: a bench run's GHOSTFIM_TRACE (bench/workspace_bench.py runs its servers one after
  another into one file; each starts at its "prefill cost:" line): per server, its keystroke
  jobs, how many held the workspace's block (engine/local/session.py's "definitions:" line
  after the job's), how many used the narrow window.
- `--replay`: that run's JSON: per user, the suggestions two systems showed at the same state
  that differ (what each showed, what the user did, the rest of the line), and the picks whose
  accepted characters differ. Most reads are the same in both systems; these are the ones that
  make a ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.gpu.check import parse_jobs

SERVER_START = "prefill cost:"  # engine/local/loading.py logs it once a server's model is ready


def server_jobs(text: str) -> list[list[dict[str, Any]]]:
    """Per server in the trace, its model jobs in order (bench/gpu/check.py's: mode, narrow,
    prompt and new tokens, block); lines before the first server's start are no server's."""
    servers: list[list[str]] = []
    for line in text.splitlines():
        if SERVER_START in line:
            servers.append([])
        elif servers:
            servers[-1].append(line)
    return [parse_jobs(lines) for lines in servers]


def jobs_report(servers: Sequence[Sequence[dict[str, Any]]]) -> list[str]:
    lines = []
    for i, jobs in enumerate(servers):
        keystroke = [j for j in jobs if j["mode"] == "keystroke"]
        held = [j for j in keystroke if j["block"]]
        share = len(held) / len(keystroke) if keystroke else 0.0
        median = statistics.median(j["block"] for j in held) if held else 0
        lines.append(
            f"server {i}: {len(keystroke)} keystroke jobs, {len(held)} held the block "
            f"({share:.0%}, median {median:g} tokens), "
            f"{sum(j['narrow'] for j in keystroke)} narrow"
        )
    return lines


def reads_by_state(run: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(r["trace"], r["index"]): r for r in run["reads"]}


def accepted_by_pick(run: dict[str, Any]) -> Counter[str]:
    chars: Counter[str] = Counter()
    for r in run["reads"]:
        chars[r["trace"]] += len(r["accepted"] or "")
    return chars


def replay_report(data: dict[str, Any], systems: Sequence[str]) -> list[str]:
    a, b = systems
    lines = []
    for user in data["users"]:
        if f"{a}/{user}" not in data["replay"] or f"{b}/{user}" not in data["replay"]:
            continue
        run_a, run_b = data["replay"][f"{a}/{user}"], data["replay"][f"{b}/{user}"]
        ra, rb = reads_by_state(run_a), reads_by_state(run_b)
        differ = [
            k
            for k in sorted(set(ra) | set(rb))
            if k not in ra or k not in rb or ra[k]["shown"] != rb[k]["shown"]
        ]
        lines.append(
            f"\n{user} user: {len(ra)} reads ({a}), {len(rb)} ({b}); {len(differ)} differ "
            "(state: what each showed and the user's decision | the rest of the line)"
        )
        for key in differ:
            shown = [
                "-" if r is None else f"{r['shown'][:40]!r} {r['decision']}"
                for r in (ra.get(key), rb.get(key))
            ]
            rest = (ra.get(key) or rb[key])["rest_of_line"]
            lines.append(f"  {key[0]} @{key[1]}: {shown[0]} / {shown[1]} | {rest[:40]!r}")
        ca, cb = accepted_by_pick(run_a), accepted_by_pick(run_b)
        picks = [p for p in data["replay_picks"] if ca[p] != cb[p]]
        lines.append(f"accepted characters differ in {len(picks)} of {len(data['replay_picks'])}")
        lines.extend(f"  {p}: {ca[p]} ({a}) / {cb[p]} ({b})" for p in picks)
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, help="a bench run's GHOSTFIM_TRACE")
    parser.add_argument("--replay", type=Path, help="bench/workspace_bench.py's JSON")
    parser.add_argument("--systems", default="on,off", help="the two systems to compare")
    args = parser.parse_args(argv)
    if not args.trace and not args.replay:
        parser.error("give --trace, --replay or both")
    lines: list[str] = []
    if args.trace:
        lines += jobs_report(server_jobs(args.trace.read_text(errors="replace")))
    if args.replay:
        systems = args.systems.split(",")
        if len(systems) != 2:
            parser.error("--systems names two systems")
        lines += replay_report(json.loads(args.replay.read_text()), systems)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
