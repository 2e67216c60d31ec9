"""Keystroke-replay latency benchmark: ghostfim vs. llama-server (llama.vim's pattern) vs. naive.

    python -m bench.replay [--systems ghostfim,llama-server,naive] [--model small|PATH]
                           [--files 6] [--lines 3] [--json docs/benchmarks.json]

Every system replays the same traces (bench/traces.py: lines of real files typed at a human
pace) in real time on the same model, one after another in one run, and is scored the same way:

- shown: share of keystroke states with ghost text on screen before the next keystroke;
- time to ghost text at pauses (p50/p95/p99; a pause that never got ghost text counts as
  infinite), and the share of pauses whose ghost text is a correct start of the rest of the line;
- TTFT of model requests (p50/p95/p99), prompt tokens decoded per request, tokens generated for
  requests that were then cancelled (wasted), the server's peak RSS.

Editors keep showing a suggestion while the user types into it, so each client does the same:
after a keystroke that matches the start of the ghost text on screen, the rest stays on screen.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import platform
import shlex
import statistics
import sys
import threading
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from bench.traces import Keystroke, Record, Trace, build_traces, new_record
from ghostfim.engine.timings import percentile
from tests.support.lspclient import LspProcess, Notification


# --- shared scoring -------------------------------------------------------------------------------
def first_line(text: str) -> str:
    return text.split("\n", 1)[0]


def is_correct(shown: str, rest_of_line: str) -> bool:
    line = first_line(shown).rstrip()
    return bool(line) and rest_of_line.startswith(line)


def summarize(records: list[Record], *, rss_mb: float | None) -> dict[str, Any]:
    states = records
    shown = [r for r in states if r["shown_at_ms"] is not None and r["shown_at_ms"] <= r["gap_ms"]]
    pauses = [r for r in states if r["is_pause"]]
    ttgt = [
        r["shown_at_ms"]
        if r["shown_at_ms"] is not None and r["shown_at_ms"] <= r["gap_ms"]
        else math.inf
        for r in pauses
    ]
    model = [r for r in states if r["source"] == "model"]
    answered = [r for r in model if not r["cancelled"] and r["ttft_ms"] is not None]
    cancelled = [r for r in model if r["cancelled"] and r["generated_tokens"] is not None]
    decoded = [r["prompt_tokens"] for r in model if r["prompt_tokens"] is not None]
    # Share of each model request's prompt served from the KV cache (requests that got as far
    # as a prompt: a request dropped before it ran has none).
    kv_share = [
        r["reused_tokens"] / (r["reused_tokens"] + r["prompt_tokens"])
        for r in model
        if r.get("reused_tokens") is not None
        and r["prompt_tokens"] is not None
        and r["reused_tokens"] + r["prompt_tokens"] > 0
    ]

    def pct(values: Sequence[float], q: float) -> float | None:
        v = percentile(list(values), q) if values else None
        return None if v is None or math.isinf(v) else round(v, 1)

    return {
        "states": len(states),
        "shown_share": round(len(shown) / len(states), 3) if states else None,
        "pauses": len(pauses),
        "pause_ttgt_p50": pct(ttgt, 50),
        "pause_ttgt_p95": pct(ttgt, 95),
        "pause_ttgt_p99": pct(ttgt, 99),
        "pause_correct_share": round(
            sum(is_correct(r["shown_text"], r["rest_of_line"]) for r in pauses) / len(pauses), 3
        )
        if pauses
        else None,
        "model_requests": len(model),
        "ttft_p50": pct([r["ttft_ms"] for r in answered], 50),
        "ttft_p95": pct([r["ttft_ms"] for r in answered], 95),
        "ttft_p99": pct([r["ttft_ms"] for r in answered], 99),
        "prompt_tokens_mean": round(statistics.mean(decoded), 1) if decoded else None,
        "prompt_tokens_median": statistics.median(decoded) if decoded else None,
        "kv_cache_share_median": round(statistics.median(kv_share), 3) if kv_share else None,
        "cancelled_requests": len(cancelled),
        "wasted_tokens_median": statistics.median([r["generated_tokens"] for r in cancelled])
        if cancelled
        else 0,
        "wasted_tokens_mean": round(statistics.mean([r["generated_tokens"] for r in cancelled]), 2)
        if cancelled
        else 0,
        "peak_rss_mb": rss_mb,
    }


def peak_rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


async def typed_in_real_time(trace: Trace) -> AsyncIterator[tuple[int, Keystroke]]:
    """Each keystroke of the trace when it is due, on the trace's own clock."""
    start = time.perf_counter()
    for i, k in enumerate(trace.keystrokes):
        delay = start + k.at_ms / 1000 - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        yield i, k


class Screen:
    """What the editor shows for the current state, with typed-through carry-over."""

    def __init__(self) -> None:
        self.text = ""

    def after_keystroke(self, k: Keystroke) -> str:
        """Ghost text still on screen right after typing k (the matching rest, or nothing)."""
        typed = k.edit.text
        if not k.jump and self.text.startswith(typed) and len(self.text) > len(typed):
            self.text = self.text[len(typed) :]
        else:
            self.text = ""
        return self.text


# --- ghostfim over LSP ----------------------------------------------------------------------------
async def replay_ghostfim(trace: Trace, client: LspProcess, uri: str) -> list[Record]:
    await client.notify(
        "textDocument/didOpen",
        {
            "textDocument": {
                "uri": uri,
                "languageId": trace.language,
                "version": 1,
                "text": trace.initial_text,
            }
        },
    )
    await asyncio.sleep(0.5)
    screen = Screen()
    records: list[Record] = []
    by_version: dict[int, Record] = {}
    sent_at: dict[int, float] = {}

    def on_note(n: Notification) -> None:
        p = n.params or {}
        if p.get("uri") != uri:
            return
        rec = by_version.get(p.get("version", -1))
        if rec is None:
            return
        if n.method == "ghostfim/ghostText" and p.get("insertText"):
            show(rec, p["insertText"], n.at)
        elif n.method == "ghostfim/stats":
            rec["source"] = p["source"]
            rec["cancelled"] = bool(p["cancelled"])
            rec["ttft_ms"] = p["ttftMs"] if p["source"] == "model" else None
            rec["prompt_tokens"] = p["newTokens"] if p["source"] == "model" else None
            rec["reused_tokens"] = p["reusedTokens"] if p["source"] == "model" else None
            rec["generated_tokens"] = p["generatedTokens"]
            rec["suffix_cut"] = p.get("suffixCut") if p["source"] == "model" else None

    def show(rec: Record, text: str, at: float) -> None:
        if rec["_closed"]:
            return
        if rec["shown_at_ms"] is None:
            rec["shown_at_ms"] = (at - sent_at[rec["_version"]]) * 1000
        rec["shown_text"] = text
        if rec["_version"] == version:
            screen.text = text

    client.listeners.append(on_note)
    version = 1
    previous: tuple[int, asyncio.Future[Any]] | None = None
    previous_rec: Record | None = None
    async for i, k in typed_in_real_time(trace):
        if previous_rec is not None:
            previous_rec["_closed"] = True  # what is on screen now is its final state
        version += 1
        await client.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": uri, "version": version}, "contentChanges": [k.edit.to_lsp()]},
        )
        now = time.perf_counter()
        carried = screen.after_keystroke(k)
        if previous is not None and not previous[1].done():
            await client.cancel(previous[0])
        rid, fut = await client.request(
            "textDocument/inlineCompletion",
            {
                "textDocument": {"uri": uri},
                "position": {"line": k.line, "character": k.character},
                "context": {"triggerKind": 2},
            },
        )
        previous = (rid, fut)
        sent_at[version] = now
        rec = new_record(trace, i, k, carried, _version=version)
        by_version[version] = rec
        fut.add_done_callback(lambda f, r=rec: _on_answer(f, r, show))
        previous_rec = rec
        if not k.jump:
            records.append(rec)
    await asyncio.sleep(2.0)
    client.listeners.remove(on_note)
    await client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    return records


def _on_answer(fut: asyncio.Future[Any], rec: Record, show: Any) -> None:
    if fut.cancelled() or fut.exception() is not None:
        return
    items = (fut.result() or {}).get("items") or []
    if items and items[0].get("insertText"):
        show(rec, items[0]["insertText"], time.perf_counter())


async def run_ghostfim(
    traces: list[Trace],
    model: str,
    settings: dict[str, Any] | None = None,
    command: list[str] | None = None,
) -> tuple[list[Record], float | None]:
    """ghostfim over LSP; `command` runs another build of it (an older checkout's server)."""
    client = await LspProcess.start(command or [sys.executable, "-m", "ghostfim.cli.main", "serve"])
    await client.initialize(
        {
            "model": {"size": model}
            if model in {"tiny", "small", "medium", "large"}
            else {"path": model},
            **(settings or {}),  # e.g. a remote backend (docs/teams.md)
        }
    )
    status = await client.wait_ready()
    if status["state"] != "ready":
        raise RuntimeError(f"ghostfim did not become ready: {status}")
    records: list[Record] = []
    for n, trace in enumerate(traces):
        records += await replay_ghostfim(
            trace, client, f"file:///bench/{n}/{Path(trace.path).name}"
        )
    rss = peak_rss_mb(client.proc.pid)
    await client.stop()
    return records, rss


# --- naive in-process baseline --------------------------------------------------------------------
def naive_prompt_text(llm: Any, prefix: str, suffix: str) -> str:
    """A plain Qwen FIM prompt: fresh every request, no reuse, no budgets but a char cut."""
    return f"<|fim_prefix|>{prefix[-3000:]}<|fim_suffix|>{suffix[:1000]}<|fim_middle|>"


async def run_naive(traces: list[Trace], model_path: Path) -> tuple[list[Record], float | None]:
    """llama-cpp-python's high-level API as a first attempt would use it: every keystroke
    starts a request from a fresh prompt (no KV reuse, no debounce); a request once started
    runs to its end (no cancellation); when one ends, the newest state is served next."""
    import resource

    from llama_cpp import Llama

    llm = Llama(str(model_path), n_ctx=4096, n_threads=2, verbose=False)
    records: list[Record] = []
    for trace in traces:
        records += await _replay_naive(trace, llm)
    rss = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return records, rss


async def _replay_naive(trace: Trace, llm: Any) -> list[Record]:
    screen = Screen()
    records: list[Record] = []
    latest: dict[str, Any] = {}
    wake = asyncio.Event()
    loop = asyncio.get_running_loop()
    done = False
    lock = threading.Lock()

    def complete(k: Keystroke) -> tuple[str, float, int, int]:
        prompt = naive_prompt_text(llm, k.text[: k.offset], k.text[k.offset :])
        with lock:
            llm.reset()  # no reuse: a fresh prompt every time
            t0 = time.perf_counter()
            first: list[float] = []
            text = ""
            n = 0
            for chunk in llm.create_completion(
                prompt,
                max_tokens=48,
                temperature=0.0,
                stop=["\n", "<|endoftext|>", "<|file_sep|>"],
                stream=True,
            ):
                if not first:
                    first.append((time.perf_counter() - t0) * 1000)
                text += chunk["choices"][0]["text"]
                n += 1
            prompt_tokens = len(llm.tokenize(prompt.encode(), special=True))
        return text, first[0] if first else (time.perf_counter() - t0) * 1000, prompt_tokens, n

    async def worker() -> None:
        while not done:
            await wake.wait()
            wake.clear()
            job = latest.pop("job", None)
            if job is None:
                continue
            k, rec, is_current = job
            text, ttft, prompt_tokens, n = await asyncio.to_thread(complete, k)
            rec.update(
                source="model",
                ttft_ms=ttft,
                prompt_tokens=prompt_tokens,
                reused_tokens=0,  # a fresh prompt per request: nothing reused
                generated_tokens=n,
                cancelled=not is_current(),
            )
            if text.strip() and not rec["_closed"]:
                rec["shown_at_ms"] = (
                    rec["shown_at_ms"]
                    if rec["shown_at_ms"] is not None
                    else (loop.time() - rec["_t"]) * 1000
                )
                rec["shown_text"] = text
                if is_current():
                    screen.text = text

    task = asyncio.ensure_future(worker())
    current = {"i": -1}
    previous_rec: Record | None = None
    async for i, k in typed_in_real_time(trace):
        if previous_rec is not None:
            previous_rec["_closed"] = True
        current["i"] = i
        carried = screen.after_keystroke(k)
        rec = new_record(trace, i, k, carried, _t=loop.time())
        latest["job"] = (k, rec, lambda i=i: current["i"] == i)
        wake.set()
        previous_rec = rec
        if not k.jump:
            records.append(rec)
    await asyncio.sleep(2.0)
    done = True
    wake.set()
    await task
    return records


# --- llama-server with llama.vim's pattern ------------------------------------------------------
async def run_llama_server(
    traces: list[Trace], model_path: Path
) -> tuple[list[Record], float | None]:
    import httpx

    from bench import llama_server, llamavim

    binary = llama_server.ensure_llama_server()
    proc, base_url = llama_server.start_llama_server(
        model_path, port=llama_server.free_port(), binary=binary
    )
    try:
        records: list[Record] = []
        async with httpx.AsyncClient(timeout=60) as http:
            for trace in traces:
                records += await llamavim.replay_trace(trace, base_url, http=http)
        rss = peak_rss_mb(proc.pid)
    finally:
        llama_server.stop_llama_server(proc)
    return records, rss


# --- the run ------------------------------------------------------------------------------------
COLUMNS = [
    ("shown_share", "ghost text on screen (share of keystrokes)"),
    ("pause_ttgt_p50", "time to ghost text at pauses p50 (ms)"),
    ("pause_ttgt_p95", "… p95 (ms)"),
    ("pause_ttgt_p99", "… p99 (ms)"),
    ("pause_correct_share", "pauses with a correct start of the line"),
    ("ttft_p50", "TTFT p50 (ms)"),
    ("ttft_p95", "TTFT p95 (ms)"),
    ("ttft_p99", "TTFT p99 (ms)"),
    ("model_requests", "model requests"),
    ("prompt_tokens_mean", "prompt tokens decoded per request (mean)"),
    ("prompt_tokens_median", "… median"),
    ("kv_cache_share_median", "share of each prompt served from the KV cache (median)"),
    ("wasted_tokens_median", "tokens generated per cancelled request (median)"),
    ("wasted_tokens_mean", "… mean"),
    ("peak_rss_mb", "peak RSS (MB)"),
]


def markdown_table(results: dict[str, dict[str, Any]]) -> str:
    names = list(results)
    lines = ["| metric | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for key, label in COLUMNS:
        cells = []
        for name in names:
            v = results[name].get(key)
            cells.append("—" if v is None else (f"{v:.1%}" if "share" in key else f"{v:g}"))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    from ghostfim.engine.setup.models import resolve_model

    traces = build_traces(files=args.files, lines_per_file=args.lines, seed=args.seed)
    model_path = resolve_model(args.model).path
    results: dict[str, dict[str, Any]] = {}
    raw: dict[str, list[Record]] = {}
    for system in args.systems.split(","):
        started = time.perf_counter()
        if system == "ghostfim":
            records, rss = await run_ghostfim(traces, args.model, args.ghostfim_settings)
        elif system == "ghostfim-baseline":
            if not args.baseline_server:
                raise SystemExit("ghostfim-baseline needs --baseline-server 'CMD serve'")
            command = shlex.split(args.baseline_server)
            records, rss = await run_ghostfim(traces, args.model, args.ghostfim_settings, command)
        elif system == "naive":
            records, rss = await run_naive(traces, model_path)
        elif system == "llama-server":
            records, rss = await run_llama_server(traces, model_path)
        else:
            raise SystemExit(f"unknown system {system!r}")
        results[system] = summarize(records, rss_mb=rss)
        raw[system] = [{k: v for k, v in r.items() if not k.startswith("_")} for r in records]
        print(
            f"{system}: {len(records)} states in {time.perf_counter() - started:.0f} s",
            file=sys.stderr,
        )
    report = {
        "machine": {
            "platform": platform.platform(),
            "cpus": _cpu_count(),
            "python": platform.python_version(),
        },
        "model": str(model_path),
        "command": "python -m bench.replay " + " ".join(sys.argv[1:]),
        "traces": [
            {"name": t.name, "path": t.path, "keystrokes": sum(not k.jump for k in t.keystrokes)}
            for t in traces
        ],
        "results": results,
        "records": raw,
    }
    return report


def _cpu_count() -> int:
    import os

    return (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 0)
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--systems", default="ghostfim,llama-server,naive")
    parser.add_argument("--model", default="small")
    parser.add_argument("--files", type=int, default=6)
    parser.add_argument("--lines", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, help="write the full report (with every record) here")
    parser.add_argument(
        "--ghostfim-settings",
        type=json.loads,
        default={},
        help="more ghostfim settings, as JSON: e.g. a remote backend "
        '\'{"backend": "llama-server", "backendUrl": "http://gpu-box:8080"}\'',
    )
    parser.add_argument(
        "--baseline-server",
        default="",
        help="the system ghostfim-baseline: another ghostfim server's command, e.g. an older "
        "checkout's '/tmp/base/.venv/bin/ghostfim serve', replayed side by side in this run",
    )
    args = parser.parse_args(argv)
    report = asyncio.run(main_async(args))
    print(markdown_table(report["results"]))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
