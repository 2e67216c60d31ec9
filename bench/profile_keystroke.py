"""Where one keystroke's time goes, end to end, on a warm cache.

    python -m bench.profile_keystroke [--model small] [--keystrokes 30]

Part 1 drives `ghostfim serve` over stdio like an editor (didChange + inlineCompletion, waiting
for each answer) and splits the client-measured time to the answer into the server's own stages
(debounce, queue, prompt building + tokenization, prefill, first token) and the rest (JSON-RPC
parsing and serialization, pygls, scheduling, pipes). Part 2 profiles the engine alone
(cProfile over the same keystrokes in-process) to show what Python itself costs next to
llama.cpp's decode.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import statistics
import sys
import time
from typing import Any

from harness.lspclient import LspProcess
from harness.sample import stats_before_cursor

TEXT = stats_before_cursor()
TYPED = "return math.sqrt(variance(values)) if values else 0.0  # sample"


async def over_lsp(model: str, n: int) -> dict[str, float]:
    client = await LspProcess.start([sys.executable, "-m", "ghostfim.lsp.main", "serve"])
    await client.initialize({"model": {"size": model}, "debounceMs": 0})
    await client.wait_ready()
    uri = "file:///profile/stats.py"
    await client.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": TEXT + "\n"}},
    )
    line, col, version = TEXT.count("\n"), 4, 1
    rows: list[dict[str, float]] = []
    stats: dict[int, dict[str, Any]] = {}
    client.listeners.append(
        lambda m: (
            stats.__setitem__(m.params["version"], m.params)
            if m.method == "ghostfim/stats"
            else None
        )
    )
    for i, ch in enumerate(TYPED[: n + 1]):
        version += 1
        pos = {"line": line, "character": col}
        await client.notify(
            "textDocument/didChange",
            {
                "textDocument": {"uri": uri, "version": version},
                "contentChanges": [{"range": {"start": pos, "end": pos}, "text": ch}],
            },
        )
        col += 1
        sent = time.perf_counter()
        # Explicit requests use the full prompt; automatic ones the keystroke prompt. Profile
        # the automatic path, but defeat typed-through reuse with a fresh char each time.
        result = await client.call(
            "textDocument/inlineCompletion",
            {
                "textDocument": {"uri": uri},
                "position": {"line": line, "character": col},
                "context": {"triggerKind": 2},
            },
        )
        answered = (time.perf_counter() - sent) * 1000
        await asyncio.sleep(1.5)  # let the job and any background work finish
        s = stats.get(version)
        if i == 0 or s is None or s["source"] != "model" or not result["items"]:
            continue
        rows.append(
            {
                "answer": answered,
                "debounce": s["debounceMs"],
                "queue": s["queueMs"],
                "prompt": s["promptMs"],
                "prefill": s["prefillMs"],
                "ttft": s["ttftMs"],
            }
        )
    await client.stop()
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]} if rows else {}
    if med:
        med["first token after prefill"] = (
            med["ttft"] - med["queue"] - med["prompt"] - med["prefill"]
        )
        med["protocol, scheduling, pipes"] = med["answer"] - med["debounce"] - med["ttft"]
    med["n"] = len(rows)
    return med


def in_process(model: str, n: int) -> str:
    from ghostfim.engine.backend import CompletionRequest
    from ghostfim.engine.local.loading import load_session

    session = load_session(model, progress=False)
    prefix, suffix = TEXT, "\n"
    session.complete(CompletionRequest(prefix, suffix, doc_id="p", mode="keystroke", max_tokens=0))
    profiler = cProfile.Profile()
    for ch in TYPED[:n]:
        prefix += ch
        request = CompletionRequest(prefix, suffix, doc_id="p", mode="keystroke", max_tokens=1)
        profiler.enable()
        session.complete(request)
        profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(12)
    session.close()
    return out.getvalue()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="small")
    parser.add_argument("--keystrokes", type=int, default=20)
    args = parser.parse_args()
    med = asyncio.run(over_lsp(args.model, args.keystrokes))
    print("median ms per keystroke (warm cache, model answers):")
    for key, value in med.items():
        print(f"  {key:<28} {value:8.2f}" if key != "n" else f"  {key:<28} {value:8.0f}")
    print("\nengine alone, cProfile by own time (prefill + 1 token per keystroke):")
    print(in_process(args.model, args.keystrokes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
