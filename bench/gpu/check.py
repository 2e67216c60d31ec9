"""The GPU run against issue 14's targets, from the replay's JSON and the server's trace log.

    python bench/gpu/check.py REPLAY.json TRACE.log [--cpu] [--system NAME]

Targets (same-shape 1.5B Q8_0 on the GPU): TTFT p50 <= 15 ms and p95 <= 40 ms over the
replay, the whole suffix in every keystroke prompt, and no narrow keystroke window (on a GPU both
keystroke windows are the whole prefix budget). For a replay with the workspace in the prompt
(issue 31; `--system ghostfim-workspace`) it also counts the keystroke prompts that held the
workspace's block (on a GPU the block fits in every keystroke prompt once a lull prefilled it).
With --cpu (the rehearsal: the GPU policy forced by GHOSTFIM_PREFILL_COST on a CPU) the latency
targets are not judged: those are CPU figures.
Standard library only: it runs with any python3.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path

TTFT_P50_MS = 15.0
TTFT_P95_MS = 40.0
# engine/local/session.py's debug line per model request (GHOSTFIM_TRACE), e.g.
# "keystroke slot 1 narrow: 312 prompt tokens, 300 reused, 12 new, 3 generated, eos, 45.1 ms"
JOB = re.compile(
    r"\b(?P<mode>keystroke|full) slot \d+(?P<narrow> narrow)?[^:]*: (?P<prompt>\d+) prompt "
    r"tokens, (?P<reused>\d+) reused, (?P<new>\d+) new"
)
# The line engine/local/session.py writes after a job whose prompt held the workspace's block.
BLOCK = re.compile(r"\bdefinitions: (?P<tokens>\d+) tokens")


def trace_jobs(trace: Path) -> list[dict[str, object]]:
    if not trace.is_file():
        return []
    return parse_jobs(trace.read_text(errors="replace").splitlines())


def parse_jobs(lines: list[str]) -> list[dict[str, object]]:
    """The model jobs of trace lines, in order, each with the block its prompt held."""
    jobs: list[dict[str, object]] = []
    for line in lines:
        if m := JOB.search(line):
            jobs.append(
                {
                    "mode": m["mode"],
                    "narrow": bool(m["narrow"]),
                    "prompt": int(m["prompt"]),
                    "new": int(m["new"]),
                    "block": 0,
                }
            )
        elif (b := BLOCK.search(line)) and jobs:
            jobs[-1]["block"] = int(b["tokens"])
    return jobs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("replay", type=Path)
    parser.add_argument("trace", type=Path)
    parser.add_argument("--cpu", action="store_true", help="a CPU rehearsal: report, not judge")
    parser.add_argument("--system", default="ghostfim", help="the replay's system to judge")
    args = parser.parse_args(argv)

    report = json.loads(args.replay.read_text())
    r = report["results"][args.system]
    records = report["records"][args.system]
    lines = [f"model: {report['model']}", f"states: {r['states']}, requests {r['model_requests']}"]
    verdicts: list[bool] = []

    def judge(label: str, ok: bool | None, detail: str) -> None:
        if ok is None or args.cpu:
            lines.append(f"[info] {label}: {detail}")
            return
        verdicts.append(ok)
        lines.append(f"[{'ok' if ok else 'MISS'}] {label}: {detail}")

    p50, p95 = r.get("ttft_p50"), r.get("ttft_p95")
    judge(
        "TTFT",
        None if p50 is None or p95 is None else p50 <= TTFT_P50_MS and p95 <= TTFT_P95_MS,
        f"p50 {p50} ms (target <= {TTFT_P50_MS:g}), p95 {p95} ms (target <= {TTFT_P95_MS:g})",
    )

    jobs = trace_jobs(args.trace)
    keystroke = [j for j in jobs if j["mode"] == "keystroke"]
    narrow = [j for j in keystroke if j["narrow"]]
    if keystroke:
        judge(
            "keystroke windows",
            not narrow,
            f"{len(keystroke)} keystroke prompts, {len(narrow)} in the narrow window; "
            f"prompt tokens median {statistics.median(j['prompt'] for j in keystroke):g}, "
            f"new tokens median {statistics.median(j['new'] for j in keystroke):g}",
        )
    else:
        judge("keystroke windows", None, f"no keystroke prompt in {args.trace} ({len(jobs)} jobs)")
    with_block = [j for j in keystroke if j["block"]]
    if with_block:
        lines.append(
            f"[info] workspace block: in {len(with_block)} of {len(keystroke)} keystroke prompts, "
            f"median {statistics.median(j['block'] for j in with_block):g} tokens"
        )

    # Whole suffix: needs the per-request suffix flag in the replay's records (ghostfim/stats).
    flagged = [rec for rec in records if rec.get("suffix_cut") is not None]
    if flagged:
        cut = [rec for rec in flagged if rec["suffix_cut"]]
        judge(
            "whole suffix",
            not cut,
            f"{len(flagged) - len(cut)} of {len(flagged)} model requests had the whole suffix",
        )
    else:
        judge("whole suffix", None, "not recorded (the replay's records carry no suffix_cut)")

    if args.cpu:
        lines.append("CPU rehearsal with the GPU policy forced: these are not GPU figures")
    elif verdicts:
        lines.append("all targets met" if all(verdicts) else "some targets MISSED")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
