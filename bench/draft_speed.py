"""The target model alone against the target with a draft, on the same multi-line suggestions.

    python -m bench.draft_speed [--target medium] [--draft small] [--positions 12]

In one process and one run, at positions in real files (the start of a line in a function
body, where a block is suggested), each request goes to the target alone and to the target
with the draft (engine/local/drafted.py), both with warm KV caches (each position is asked
twice; the second answer is timed). Printed per system: whether the text equals the target
alone's, the time to the whole suggestion, the tokens per second while it streams (generated
tokens over the decode time, the draft's own time included), and the draft's acceptance.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.traces import default_sources
from ghostfim.engine.backend import Completion, CompletionBackend, CompletionRequest


def positions(count: int) -> list[tuple[str, str, str]]:
    """(name, prefix, suffix): the start of a body line after a line that opens a block."""
    found: list[tuple[str, str, str]] = []
    for _language, path in default_sources():
        lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
        for i in range(20, len(lines) - 5):
            opener, body = lines[i - 1].rstrip(), lines[i]
            if not opener.endswith((":", "{")) or not body.strip():
                continue
            indent = body[: len(body) - len(body.lstrip())]
            prefix = "\n".join(lines[:i]) + "\n" + indent
            suffix = "\n" + "\n".join(lines[i + 1 :])
            found.append((f"{path.name}:{i + 1}", prefix, suffix))
            if len(found) % max(1, count // 6) == 0:
                break  # a few per file
        if len(found) >= count:
            break
    return found[:count]


def timed(backend: CompletionBackend, request: CompletionRequest) -> tuple[Completion, float]:
    backend.complete(request)  # warm the KV cache for this state
    started = time.perf_counter()
    completion = backend.complete(request)
    return completion, (time.perf_counter() - started) * 1000


def main(argv: list[str] | None = None) -> int:
    from ghostfim.engine.local.drafted import DraftedSession
    from ghostfim.engine.local.loading import load_session

    parser = argparse.ArgumentParser(prog="python -m bench.draft_speed")
    parser.add_argument("--target", default="medium")
    parser.add_argument("--draft", default="small")
    parser.add_argument("--positions", type=int, default=12)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--json", default="")
    args = parser.parse_args(argv)
    alone = load_session(args.target, progress=False)
    both = DraftedSession(
        load_session(args.target, progress=False), load_session(args.draft, progress=False)
    )
    rows: list[dict[str, Any]] = []
    for name, prefix, suffix in positions(args.positions):
        request = CompletionRequest(
            prefix,
            suffix,
            doc_id=name,
            mode="keystroke",
            max_tokens=args.max_tokens,
            multiline="always",
        )
        a, a_ms = timed(alone, request)
        b, b_ms = timed(both, request)
        rows.append(
            {
                "position": name,
                "same": a.raw_text == b.raw_text,
                "lines": a.raw_text.count("\n") + 1,
                "tokens": a.timings.decode_tokens,
                "alone_ms": round(a_ms, 1),
                "drafted_ms": round(b_ms, 1),
                "alone_tok_s": round(1000 * a.timings.decode_tokens / a_ms, 1) if a_ms else None,
                "drafted_tok_s": round(1000 * b.timings.decode_tokens / b_ms, 1) if b_ms else None,
                "draft_kept": f"{b.timings.draft_accepted}/{b.timings.draft_tokens}",
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    same = sum(r["same"] for r in rows)
    print(
        f"\n{len(rows)} positions, {args.target} alone vs {args.target}+{args.draft}: "
        f"same text {same}/{len(rows)}; time to the whole suggestion p50 "
        f"{statistics.median(r['alone_ms'] for r in rows):.0f} vs "
        f"{statistics.median(r['drafted_ms'] for r in rows):.0f} ms; tokens/s p50 "
        f"{statistics.median(r['alone_tok_s'] for r in rows)} vs "
        f"{statistics.median(r['drafted_tok_s'] for r in rows)}; draft acceptance "
        f"{both.accepted}/{both.proposed}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"command": sys.argv, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
