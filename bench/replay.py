"""Keystroke-replay benchmark: ghostfim vs. llama-server (llama.vim's pattern) vs. naive, and
what a user who reads the ghost text takes of it.

    python -m bench.replay [--systems ghostfim,ghostfim-off,llama-server,naive]
                           [--users none|tab,words] [--reaction-ms 300] [--model small|PATH]
                           [--files 6] [--lines 3] [--pauses auto] [--json FILE]
                           [--ghostfim-server 'CMD serve'] [--baseline-server 'CMD serve']

Every system replays the same traces (bench/traces.py: lines of real files typed at a human
pace) in real time on the same model, one after another in one run, and is scored the same way:

- shown: share of keystroke states with ghost text on screen before the next keystroke;
- time to ghost text at pauses (p50/p95/p99; a pause that never got ghost text counts as
  infinite), and the share of pauses whose ghost text is a correct start of the rest of the line;
- TTFT of model requests (p50/p95/p99), prompt tokens decoded per request, tokens generated for
  requests that were then cancelled (wasted), the server's peak RSS and CPU time.

Editors keep showing a suggestion while the user types into it, so each client does the same:
after a keystroke that matches the start of the ghost text on screen, the rest stays on screen.

Users (`--users`, bench/accepting_user.py, bench/user_replay.py): `none` types every character
(the latency benchmark as it always was); `tab` and `words` read the ghost text once it has been
on screen `--reaction-ms` before their next keystroke and accept it when it is exactly what they
were about to type (tab: all of it, or its first line; words: also a run of whole words), in
the editor, with ghostfim's accept signals (docs/protocol.md); then they type on from there. An
accepting user changes what the server sees, so each (system, user) is its own pass, with its
own server process. Reported per pass: share of the characters written by accepted ghost text,
keystrokes saved and suggestions read and refused per 100 characters, the accept rate of what
was read, the server's CPU seconds per 100 characters, and for ghostfim its own `ghostfim/status`
acceptance counts next to the simulator's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import shlex
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.accepting_user import USERS, signal_counts, user_summary
from bench.traces import THINK_RATES, Keystroke, Record, Trace, build_traces, new_record
from bench.user_replay import GhostfimEditor, Pace, Read, replay_with_user
from ghostfim.engine.timings import percentile
from harness.lspclient import LspProcess, RpcError


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


def status_mb(pid: int, field: str) -> float | None:
    """A memory field of /proc/<pid>/status (VmHWM: the peak RSS, VmRSS: the RSS now), in MB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def peak_rss_mb(pid: int) -> float | None:
    return status_mb(pid, "VmHWM")


def cpu_seconds(pid: int, tid: int | None = None) -> float | None:
    """User plus system CPU time so far (/proc/<pid>/stat): of the process, all its threads,
    or of its thread `tid` (the main thread's id is the pid)."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    try:
        fields = Path(path).read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    utime, stime = int(fields[11]), int(fields[12])  # the stat file's fields 14 and 15
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


@dataclass
class Pass:
    """One system replaying every trace for one user."""

    records: list[Record] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    rss_mb: float | None = None
    cpu_s: float | None = None  # the server's, from ready to the end of the last trace
    server_acceptance: dict[str, Any] | None = None  # ghostfim/status at the end
    model_work: dict[str, Any] | None = None  # its decode steps and prefill chunks
    loop_cpu_s: float | None = None  # of cpu_s, the server's main thread (its event loop)
    unsignalled_accepts: int = 0  # accepts the simulator had no item for (no signal sent)


class CpuMeter:
    """A process's CPU time from now on; of ghostfim's server, also its main thread's (the
    event loop: the LSP layer and the service's Python), the rest being the model's."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.start = cpu_seconds(pid)
        self.main_start = cpu_seconds(pid, pid)

    def spent(self) -> float | None:
        end = cpu_seconds(self.pid)
        return None if end is None or self.start is None else end - self.start

    def main_thread_spent(self) -> float | None:
        end = cpu_seconds(self.pid, self.pid)
        return None if end is None or self.main_start is None else end - self.main_start


async def typed_in_real_time(trace: Trace) -> AsyncIterator[tuple[int, Keystroke]]:
    """Each keystroke of the trace when it is due, on the trace's own clock."""
    start = time.perf_counter()
    for i, k in enumerate(trace.keystrokes):
        delay = start + k.at_ms / 1000 - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        yield i, k


class NaiveScreen:
    """What the naive client shows for the current state, with typed-through carry-over."""

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
async def server_status(client: LspProcess) -> dict[str, Any]:
    """ghostfim/status at the end of a pass; a failing status call is reported, not raised:
    the pass's own figures stand without it."""
    try:
        status: dict[str, Any] = await client.call("ghostfim/status", None, timeout=30)
    except (RpcError, asyncio.TimeoutError, ConnectionError) as exc:
        return {"acceptance": {"error": str(exc)}}
    return status


def package_folder(path: Path) -> Path:
    """The folder an editor would open for a file: a Python file's top package (up while the
    folder holds an __init__.py), else the file's folder's parent (npm/lib for
    npm/lib/commands/install.js)."""
    folder = path.parent
    if path.suffix == ".py":
        while (folder.parent / "__init__.py").exists():
            folder = folder.parent
        return folder
    return folder.parent


async def run_ghostfim(
    traces: list[Trace],
    model: str,
    settings: dict[str, Any] | None = None,
    command: list[str] | None = None,
    *,
    user: str = "none",
    pace: Pace | None = None,
    workspace: bool = False,
) -> Pass:
    """ghostfim over LSP (bench/user_replay.py's GhostfimEditor), a fresh server per pass;
    `command` runs another build of it (an older checkout's server). `workspace`: the files
    are opened from their real paths, their packages' folders the workspace folders, and the
    pass waits for the workspace index (20 s at most) before the first key."""
    client = await LspProcess.start(command or [sys.executable, "-m", "ghostfim.lsp.main", "serve"])
    folders = sorted({package_folder(Path(t.path)) for t in traces}) if workspace else []
    await client.initialize(
        {
            "model": {"size": model}
            if model in {"tiny", "small", "medium", "large"}
            else {"path": model},
            **(settings or {}),  # e.g. a remote backend (docs/teams.md)
        },
        **({"workspace_folders": folders} if folders else {}),
    )
    status = await client.wait_ready()
    if status["state"] != "ready":
        raise RuntimeError(f"ghostfim did not become ready: {status}")
    for _ in range(200 if folders else 0):
        if (status.get("workspace") or {}).get("state") != "indexing":
            break
        await asyncio.sleep(0.1)
        status = await server_status(client)
    result = Pass()
    meter = CpuMeter(client.proc.pid)
    for n, trace in enumerate(traces):
        uri = Path(trace.path).as_uri() if folders else f"file:///bench/{n}/{Path(trace.path).name}"
        editor = GhostfimEditor(client, uri)
        records, reads = await replay_with_user(trace, editor, user, pace)
        result.records += records
        result.reads += reads
        result.unsignalled_accepts += editor.unsignalled
    result.cpu_s = meter.spent()
    result.loop_cpu_s = meter.main_thread_spent()
    status = await server_status(client)
    result.server_acceptance = status.get("acceptance")
    work = status.get("work")  # all the model's work, background jobs included
    if work:
        result.model_work = {
            k: work.get(k) for k in ("decodeSteps", "prefillChunks", "busyMs", "stoppedMs")
        }
    result.rss_mb = peak_rss_mb(client.proc.pid)
    await client.stop()
    return result


# --- naive in-process baseline --------------------------------------------------------------------
def naive_prompt_text(llm: Any, prefix: str, suffix: str) -> str:
    """A plain Qwen FIM prompt: fresh every request, no reuse, no budgets but a char cut."""
    return f"<|fim_prefix|>{prefix[-3000:]}<|fim_suffix|>{suffix[:1000]}<|fim_middle|>"


async def run_naive(traces: list[Trace], model_path: Path) -> Pass:
    """llama-cpp-python's high-level API as a first attempt would use it: every keystroke
    starts a request from a fresh prompt (no KV reuse, no debounce); a request once started
    runs to its end (no cancellation); when one ends, the newest state is served next."""
    import resource

    from llama_cpp import Llama

    llm = Llama(str(model_path), n_ctx=4096, n_threads=2, verbose=False)
    meter = CpuMeter(os.getpid())  # in this process: the replay's own work counts too
    records: list[Record] = []
    for trace in traces:
        records += await _replay_naive(trace, llm)
    rss = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return Pass(records=records, rss_mb=rss, cpu_s=meter.spent())


async def _replay_naive(trace: Trace, llm: Any) -> list[Record]:
    screen = NaiveScreen()
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
    traces: list[Trace], model_path: Path, *, user: str = "none", pace: Pace | None = None
) -> Pass:
    """llama-server behind llama.vim's client (bench/llamavim.py), a fresh server per pass.
    Its accepts stay in the client: llama.vim has no accept signal."""
    import httpx

    from bench import llama_server
    from bench.llamavim import LlamaVimEditor

    binary = llama_server.ensure_llama_server()
    proc, base_url = llama_server.start_llama_server(
        model_path, port=llama_server.free_port(), binary=binary
    )
    result = Pass()
    try:
        meter = CpuMeter(proc.pid)
        async with httpx.AsyncClient(timeout=60) as http:
            for trace in traces:
                editor = LlamaVimEditor(base_url, http)
                records, reads = await replay_with_user(trace, editor, user, pace)
                result.records += records
                result.reads += reads
        result.cpu_s = meter.spent()
        result.rss_mb = peak_rss_mb(proc.pid)
    finally:
        llama_server.stop_llama_server(proc)
    return result


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


# What an accepting user's table shows: what users take, then the latency figures.
ACCEPT_COLUMNS = [
    ("accepted_share", "characters written by accepted ghost text"),
    ("keystrokes_saved_per_100", "keystrokes saved per 100 characters"),
    ("accepts", "accepts (whole / line / words)"),
    ("reads", "suggestions read"),
    ("refused_per_100", "suggestions read and refused per 100 characters"),
    ("accept_rate", "accept rate of suggestions read"),
    ("cpu_s_per_100", "server CPU seconds per 100 characters"),
    ("loop_cpu_s_per_100", "… of it on the server's event loop (LSP and service Python)"),
    ("shown_share", "ghost text on screen (share of keystroke states)"),
    ("pause_ttgt_p50", "time to ghost text at pauses p50 (ms)"),
    ("pause_ttgt_p95", "… p95 (ms)"),
    ("pause_ttgt_p99", "… p99 (ms)"),
    ("ttft_p50", "TTFT p50 (ms)"),
    ("ttft_p95", "TTFT p95 (ms)"),
    ("ttft_p99", "TTFT p99 (ms)"),
    ("states", "keystroke states"),
    ("server_acceptance", "ghostfim/status: accepted / partial / refused / chars"),
    ("simulator_acceptance", "… the simulator's own count"),
    ("refused_then", "refusals, then: typed over / typed into / end of line / trace end"),
    ("model_work", "model work: decode steps / prefill chunks (model time by kind of job)"),
]
PERCENT_KEYS = {"accepted_share", "accept_rate"}
COUNT_ORDER = ("accepted", "partial", "refused", "acceptedChars")
FOLLOW_ORDER = ("typed_over", "typed_into", "end_of_line", "trace_end")


def _cell(result: dict[str, Any], key: str) -> str:
    value = result.get(key)
    if key == "accepts" and value is not None:
        kinds = (result["accepts_full"], result["accepts_line"], result["accepts_words"])
        return f"{value} ({' / '.join(map(str, kinds))})"
    if key == "refused_then" and value is not None:
        return " / ".join(str(value.get(k, 0)) for k in FOLLOW_ORDER)
    if key == "model_work" and value is not None:
        busy, stopped = value.get("busyMs") or {}, value.get("stoppedMs") or {}
        by_kind = ", ".join(
            f"{kind} {ms / 1000:.1f} s"
            + (f" ({stopped[kind] / 1000:.1f} stopped)" if kind in stopped else "")
            for kind, ms in busy.items()
        )
        return f"{value.get('decodeSteps', '?')} / {value.get('prefillChunks', '?')} ({by_kind})"
    if isinstance(value, dict) and "error" in value:
        return "(status failed)"
    if isinstance(value, dict):
        return " / ".join(str(value.get(k, "?")) for k in COUNT_ORDER)
    if value is None:
        return "—"
    if "share" in key or key in PERCENT_KEYS:
        return f"{value:.1%}"
    return f"{value:g}"


def markdown_table(results: dict[str, dict[str, Any]]) -> str:
    names = list(results)
    accepting = any(r.get("user", "none") != "none" for r in results.values())
    columns = ACCEPT_COLUMNS if accepting else COLUMNS
    lines = ["| metric | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for key, label in columns:
        cells = [_cell(results[name], key) for name in names]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ghostfim with a model of its own, whatever --model says: the CPU default's candidates
# (issue 18): the small model alone, the medium alone, and the medium with the small as draft.
MODEL_SYSTEMS = {
    "ghostfim-small": {"model": {"size": "small", "draft": "none"}},
    "ghostfim-medium": {"model": {"size": "medium", "draft": "none"}},
    "ghostfim-medium+small": {"model": {"size": "medium", "draft": "small"}},
}
# ghostfim with the workspace in the prompt on and off (issue 31; use with --workspace, which
# opens each file from its real path with its package's folder as a workspace folder).
WORKSPACE_SYSTEMS = {
    "ghostfim-workspace": {"workspaceContext": "auto"},
    "ghostfim-noworkspace": {"workspaceContext": "off"},
}
GHOSTFIM_SYSTEMS = (
    "ghostfim",
    "ghostfim-off",
    "ghostfim-baseline",
    *MODEL_SYSTEMS,
    *WORKSPACE_SYSTEMS,
)
SYSTEMS = (*GHOSTFIM_SYSTEMS, "llama-server", "naive")


def pass_name(system: str, user: str) -> str:
    """A result's name: the system alone for the plain typist (as reports always had it)."""
    return system if user == "none" else f"{system}/{user}"


def parse_list(value: str, known: Sequence[str], what: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise SystemExit(f"unknown {what} {unknown or value!r}; known: {', '.join(known)}")
    return names


def think_rate(pauses: str, users: Sequence[str]) -> float:
    """The typing model's thinking pauses: `auto` gives accepting users the thinking traces
    (the classic ones pause mid-line too rarely to read much) and the plain typist the
    classic traces of every earlier latency table."""
    if pauses == "auto":
        pauses = "thinking" if any(u != "none" for u in users) else "classic"
    return THINK_RATES[pauses]


async def run_pass(
    system: str,
    user: str,
    traces: list[Trace],
    model_path: Path,
    args: argparse.Namespace,
    pace: Pace,
) -> Pass:
    settings = dict(args.ghostfim_settings)
    server = shlex.split(args.ghostfim_server) or None
    if system == "ghostfim":
        return await run_ghostfim(traces, args.model, settings, server, user=user, pace=pace)
    if system == "ghostfim-off":
        settings["filter"] = "off"  # the adaptive filter's setting (unknown to older servers)
        return await run_ghostfim(traces, args.model, settings, server, user=user, pace=pace)
    if system in MODEL_SYSTEMS or system in WORKSPACE_SYSTEMS:
        settings.update(MODEL_SYSTEMS.get(system) or WORKSPACE_SYSTEMS[system])
        return await run_ghostfim(
            traces, args.model, settings, server, user=user, pace=pace, workspace=args.workspace
        )
    if system == "ghostfim-baseline":
        if not args.baseline_server:
            raise SystemExit("ghostfim-baseline needs --baseline-server 'CMD serve'")
        command = shlex.split(args.baseline_server)
        return await run_ghostfim(
            traces, args.model, settings, command, user=user, pace=pace, workspace=args.workspace
        )
    if system == "llama-server":
        return await run_llama_server(traces, model_path, user=user, pace=pace)
    if user != "none":
        raise SystemExit("naive replays the plain typist only (--users none)")
    return await run_naive(traces, model_path)


def pass_summary(
    system: str, user: str, result: Pass, chars_written: int, wall_s: float
) -> dict[str, Any]:
    decisions = [read.decision for read in result.reads]
    return {
        "system": system,
        "user": user,
        **summarize(result.records, rss_mb=result.rss_mb),
        **user_summary(decisions, chars_written=chars_written, cpu_s=result.cpu_s),
        "simulator_acceptance": signal_counts(decisions) if user != "none" else None,
        "refused_then": dict(
            Counter(r.followed_by for r in result.reads if r.followed_by is not None)
        ),
        "server_acceptance": result.server_acceptance if system in GHOSTFIM_SYSTEMS else None,
        "model_work": result.model_work,
        "loop_cpu_s_per_100": None
        if result.loop_cpu_s is None or not chars_written
        else round(100 * result.loop_cpu_s / chars_written, 2),
        "unsignalled_accepts": result.unsignalled_accepts,
        "wall_s": round(wall_s, 1),
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    from ghostfim.engine.setup.fetch import resolve_model

    systems = parse_list(args.systems, SYSTEMS, "system")
    users = parse_list(args.users, USERS, "user")
    rate = think_rate(args.pauses, users)
    traces = build_traces(
        files=args.files, lines_per_file=args.lines, seed=args.seed, think_rate=rate
    )
    chars_written = sum(not k.jump for t in traces for k in t.keystrokes)
    model_path = resolve_model(args.model).path
    pace = Pace(reaction_ms=args.reaction_ms)
    load_before = os.getloadavg()
    results: dict[str, dict[str, Any]] = {}
    raw: dict[str, list[Record]] = {}
    reads: dict[str, list[dict[str, Any]]] = {}
    for user in users:  # the systems side by side for each user
        for system in systems:
            name = pass_name(system, user)
            started = time.perf_counter()
            result = await run_pass(system, user, traces, model_path, args, pace)
            wall_s = time.perf_counter() - started
            results[name] = pass_summary(system, user, result, chars_written, wall_s)
            raw[name] = [
                {k: v for k, v in r.items() if not k.startswith("_")} for r in result.records
            ]
            reads[name] = [read.to_json() for read in result.reads]
            print(
                f"{name}: {len(result.records)} states, {len(result.reads)} reads, "
                f"{results[name]['accepts']} accepts in {wall_s:.0f} s",
                file=sys.stderr,
            )
    report = {
        "machine": {
            "platform": platform.platform(),
            "cpus": _cpu_count(),
            "python": platform.python_version(),
            "load_before": [round(v, 2) for v in load_before],
            "load_after": [round(v, 2) for v in os.getloadavg()],
        },
        "model": str(model_path),
        "command": "python -m bench.replay " + shlex.join(sys.argv[1:]),
        "think_rate": rate,
        "reaction_ms": pace.reaction_ms,
        "accept_key_ms": pace.accept_key_ms,
        "chars_written": chars_written,
        "traces": [
            {"name": t.name, "path": t.path, "keystrokes": sum(not k.jump for k in t.keystrokes)}
            for t in traces
        ],
        "results": results,
        "records": raw,
        "reads": reads,
    }
    return report


def _cpu_count() -> int:
    return (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 0)
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--systems",
        default="ghostfim,llama-server,naive",
        help=f"comma-separated, in this order: {', '.join(SYSTEMS)}",
    )
    parser.add_argument(
        "--users",
        default="none",
        help="comma-separated: none (types everything), tab (accepts all or the first line), "
        "words (also whole words); each (system, user) is its own pass",
    )
    parser.add_argument(
        "--reaction-ms",
        type=float,
        default=Pace().reaction_ms,
        help="ghost text on screen this long before the next keystroke is read",
    )
    parser.add_argument(
        "--pauses",
        choices=["auto", *THINK_RATES],
        default="auto",
        help="the typing model's thinking pauses (bench/traces.py): classic "
        f"({THINK_RATES['classic']} after a word, every earlier table), thinking "
        f"({THINK_RATES['thinking']}); auto: thinking when a user accepts, else classic",
    )
    parser.add_argument("--model", default="small")
    parser.add_argument("--files", type=int, default=6)
    parser.add_argument("--lines", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, help="write the full report (with every record) here")
    parser.add_argument(
        "--workspace",
        action="store_true",
        help="ghostfim-workspace, ghostfim-noworkspace and ghostfim-baseline open each file from "
        "its real path with its package's folder as a workspace folder (issue 31)",
    )
    parser.add_argument(
        "--ghostfim-settings",
        type=json.loads,
        default={},
        help="more ghostfim settings, as JSON: e.g. a remote backend "
        '\'{"backend": "llama-server", "backendUrl": "http://gpu-box:8080"}\'',
    )
    parser.add_argument(
        "--ghostfim-server",
        default="",
        help="the command that starts ghostfim for the systems ghostfim and ghostfim-off "
        "(default: this checkout's `python -m ghostfim.lsp.main serve`), e.g. a frozen copy "
        "of the tree while others edit it: 'env PYTHONPATH=/tmp/snap python -m ghostfim.lsp.main "
        "serve'",
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
