"""Switching files: A -> B -> C -> A, the first keystroke back in A (issue 13's check).

    python -m bench.file_switch [--model small] [--chars 12] [--json out.json]

Three real files this project did not write (bench/traces.py's sources). In each, a line is
emptied after its indentation and typed back one character at a time, each keystroke an
automatic inlineCompletion request answered before the next (so the figures are the engine's,
not the typing rhythm's); after each file a pause of `--dwell` seconds, as when a user reads.
Then back in A the line goes on: the first keystroke back is compared with A's warm keystrokes.

Two ways back, each its own pass: after the dwell (the user read C's ghost text), and at once
(`--back-after 0`: the user saw C's ghost text appear and moved on while C's job still streamed
the rest of its suggestion; the keystroke back used to queue behind that job for 0.2-1.9 s).
Two servers side by side in one run: per-document KV snapshots on (the default, kvSnapshotMb
256) and off (kvSnapshotMb 0: the behaviour before snapshots, where coming back is a cold
start). Printed: TTFT of the first keystroke back (and its time queued), A's warm median, the
share of that prompt served from the KV cache, and the milliseconds and bytes of each snapshot
and restore.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shlex
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.traces import Edit, Keystroke, Trace, default_sources, make_trace
from harness.lspclient import LspProcess

ANSWER_S = 10.0


@dataclass
class Typed:
    doc: str
    version: int
    ttft_ms: float | None = None
    reused: int = 0
    new: int = 0
    source: str = ""
    queue_ms: float = 0.0

    @property
    def cache_share(self) -> float:
        total = self.reused + self.new
        return self.reused / total if total else 0.0


@dataclass
class Run:
    system: str
    keystrokes: list[Typed] = field(default_factory=list)
    kv: dict[str, Any] = field(default_factory=dict)


class Document:
    """A file with a line emptied after its indentation, typed into with text the model
    cannot guess (seeded random identifiers): every keystroke is model work, never a suggestion
    typed through, so the figures are the prefill's."""

    def __init__(self, client: LspProcess, trace: Trace, seed: int) -> None:
        self.client, self.trace = client, trace
        self.uri = Path(trace.path).resolve().as_uri()
        self.version = 1
        jump = trace.keystrokes[0]
        assert jump.jump
        self.jump: Keystroke | None = jump
        self.line, self.col = jump.line, jump.character
        rng = random.Random(f"{seed}:{trace.path}")
        self.text = "".join(rng.choice("bcdfghjklmnpqrstvwxz_0123456789") for _ in range(64))
        self.typed = 0

    async def open(self) -> None:
        await self.client.notify(
            "textDocument/didOpen",
            {
                "textDocument": {
                    "uri": self.uri,
                    "languageId": self.trace.language,
                    "version": 1,
                    "text": self.trace.initial_text,
                }
            },
        )

    async def change(self, edit: Edit) -> None:
        self.version += 1
        await self.client.notify(
            "textDocument/didChange",
            {
                "textDocument": {"uri": self.uri, "version": self.version},
                "contentChanges": [edit.to_lsp()],
            },
        )

    async def type_one(self) -> int:
        """One typed character and its automatic request, answered; returns its version."""
        if self.jump is not None:
            await self.change(self.jump.edit)
            self.jump = None
        ch = self.text[self.typed]
        self.typed += 1
        await self.change(Edit((self.line, self.col), (self.line, self.col), ch))
        self.col += 1
        _, answer = await self.client.request(
            "textDocument/inlineCompletion",
            {
                "textDocument": {"uri": self.uri},
                "position": {"line": self.line, "character": self.col},
                "context": {"triggerKind": 2},
            },
        )
        await asyncio.wait_for(answer, ANSWER_S)
        return self.version

    def typed_stats(self, version: int) -> Typed:
        """What the server reported for that keystroke (its model job's first token)."""
        typed = Typed(self.uri, version)
        for n in self.client.notifications:
            p = n.params if n.method == "ghostfim/stats" else None
            if p and p["uri"] == self.uri and p["version"] == version:
                typed.source = p["source"]
                typed.ttft_ms = p["ttftMs"] if p["ttftMs"] > 0 else None
                typed.reused, typed.new = p["reusedTokens"], p["newTokens"]
                typed.queue_ms = p["queueMs"]
        return typed


async def run_system(
    system: str,
    settings: dict[str, Any],
    traces: list[Trace],
    chars: int,
    dwell_s: float,
    seed: int,
    back_after_s: float | None = None,
    server: list[str] | None = None,
) -> tuple[Run, dict[str, list[Typed]]]:
    client = await LspProcess.start(server or [sys.executable, "-m", "ghostfim.lsp.main", "serve"])
    run = Run(system)
    per_doc: dict[str, list[Typed]] = {}
    try:
        await client.initialize({**settings, "debounceMs": 0})
        status = await client.wait_ready()
        assert status["state"] == "ready", status
        docs = [Document(client, t, seed) for t in traces]
        for doc in docs:
            await doc.open()
        versions: dict[str, list[tuple[Document, int]]] = {}
        for doc in docs:  # A, B, C
            versions[doc.uri] = [(doc, await doc.type_one()) for _ in range(chars)]
            # Back to A: after the dwell, or (--back-after 0) as soon as C's last keystroke is
            # answered, while its job still streams the rest of its suggestion.
            last = doc is docs[-1] and back_after_s is not None
            await asyncio.sleep(back_after_s if last else dwell_s)
        versions["back"] = [(docs[0], await docs[0].type_one()) for _ in range(4)]  # back in A
        await asyncio.sleep(2.0)  # the last jobs report their stats
        for key, typed in versions.items():
            per_doc[key] = [doc.typed_stats(v) for doc, v in typed]
            run.keystrokes.extend(per_doc[key])
        run.kv = (await client.call("ghostfim/status", None)).get("kv") or {}
    finally:
        await client.stop()
    return run, per_doc


def summarize(system: str, per_doc: dict[str, list[Typed]], kv: dict[str, Any]) -> dict[str, Any]:
    first_doc = next(iter(per_doc))
    warm = [t.ttft_ms for t in per_doc[first_doc][4:] if t.source == "model" and t.ttft_ms]
    back = per_doc["back"][0]
    warm_median = statistics.median(warm) if warm else float("nan")
    return {
        "system": system,
        "warmMedianTtftMs": round(warm_median, 1),
        "firstBackTtftMs": back.ttft_ms,
        "firstBackSource": back.source,
        "firstBackCacheShare": round(back.cache_share, 3),
        "firstBackNewTokens": back.new,
        "firstBackQueueMs": back.queue_ms,
        "ratioToWarm": round((back.ttft_ms or 0) / warm_median, 2) if warm else None,
        "snapshots": kv.get("recent", []),
        "keystrokes": {
            doc: [(t.source, t.ttft_ms, t.reused, t.new) for t in typed]
            for doc, typed in per_doc.items()
        },
    }


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| system | A warm TTFT p50 | first keystroke back: TTFT | × warm | from KV cache "
        "| new tokens |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['system']} | {r['warmMedianTtftMs']:.1f} ms | {r['firstBackTtftMs']} ms "
            f"({r['firstBackSource']}, queued {r['firstBackQueueMs']} ms) | {r['ratioToWarm']} "
            f"| {100 * r['firstBackCacheShare']:.1f}% | {r['firstBackNewTokens']} |"
        )
    for r in rows:
        events = r["snapshots"]
        if not events:
            continue
        lines.append("")
        lines.append(f"{r['system']}: snapshots (kind, tokens, bytes, ms)")
        for e in events:
            name = e["uri"].rsplit("/", 1)[-1]
            lines.append(
                f"- {e['kind']} {name}: {e['tokens']} tokens, {e['bytes'] / 1e6:.2f} MB, "
                f"{e['ms']:.2f} ms"
            )
    return "\n".join(lines)


def load_traces(seed: int) -> list[Trace]:
    """A trace (its first line) of each of the first three real source files found here."""
    traces = []
    for language, path in default_sources():
        trace = make_trace(path, language, lines_per_file=1, seed=seed)
        if trace is not None:
            traces.append(trace)
        if len(traces) == 3:
            break
    return traces


async def main_async(args: argparse.Namespace) -> int:
    traces = load_traces(args.seed)
    if len(traces) < 3:
        print("need three source files (bench/traces.py default_sources)", file=sys.stderr)
        return 2
    model = (
        {"model": {"size": args.model}}
        if args.model in ("tiny", "small", "medium")
        else {"model": {"path": args.model}}
    )
    systems: dict[str, tuple[dict[str, Any], list[str] | None]] = {
        "snapshots on": ({**model, "kvSnapshotMb": 256}, None),
        "snapshots off (before)": ({**model, "kvSnapshotMb": 0}, None),
    }
    if args.baseline_server:  # another build's server, snapshots on, side by side
        systems = {
            "this build": systems["snapshots on"],
            "baseline build": ({**model, "kvSnapshotMb": 256}, shlex.split(args.baseline_server)),
        }
    ways_back = {"after the dwell": None, "at once": 0.0}
    if args.back_after is not None:
        ways_back = {f"after {args.back_after:g} s": args.back_after}
    rows = []
    started = time.perf_counter()
    for way, back_after in ways_back.items():
        for name, (settings, server) in systems.items():
            run, per_doc = await run_system(
                f"{name}, back {way}",
                settings,
                traces,
                args.chars,
                args.dwell,
                args.seed,
                back_after,
                server,
            )
            rows.append(summarize(f"{name}, back {way}", per_doc, run.kv))
    print(
        f"files: {', '.join(Path(t.path).name for t in traces)}; model {args.model}; "
        f"{args.chars} characters typed in each; {time.perf_counter() - started:.0f} s\n"
    )
    print(table(rows))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "command": "python -m bench.file_switch " + " ".join(sys.argv[1:]),
                    "files": [t.path for t in traces],
                    "rows": rows,
                },
                indent=1,
            )
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.file_switch")
    parser.add_argument("--model", default="small")
    parser.add_argument("--chars", type=int, default=12, help="characters typed in each file")
    parser.add_argument("--dwell", type=float, default=3.0, help="seconds in each file after")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--back-after",
        type=float,
        default=None,
        help="seconds after C's last answer before going back to A (default: both after the"
        " dwell and at once)",
    )
    parser.add_argument(
        "--baseline-server",
        default="",
        help="compare with another build's server ('CMD serve'), both with snapshots on",
    )
    parser.add_argument("--json", default="")
    args = parser.parse_args(argv)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    raise SystemExit(main())
