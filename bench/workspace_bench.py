"""Workspace context on and off, through the real server, on code the model has not seen
(issue 31, part 6).

    python -m bench.workspace_bench [--systems on,off] [--part explicit,replay,dwell]
                                    [--users tab,words] [--model small] [--picks N]
                                    [--replay-picks M] [--json FILE]

The corpus is bench/workspace_corpus.py's: packages first published in 2025 or later, with
picked lines cut back to their indentation on disk, and workspace-manifest.json naming each pick
(package, kind, file, 0-based line, indentation, the original line). "cross" lines use a name
that another module of the package defines; "plain" lines use none. Nothing is written into the
workspace: files are opened from their real paths and typed into in the editor's buffer only
(didChange), never on disk.

Each system is its own `ghostfim serve` process per pass, with its own empty acceptance
statistics (GHOSTFIM_STATE_DIR in a fresh temporary folder): `on` has `workspaceContext: auto`,
`off` has `workspaceContext: off`. Its `initialize` names every package folder of the corpus as
a workspace folder (rootUri: the first), as an editor opened on them sends. Before the first
request the pass waits for the model and for `ghostfim/status` `workspace.state` to leave
`indexing` (ready, off or capped; 20 s at most; a server that reports no `workspace` is not
waited for): the time from `initialize` to then is the index's ready time, and the RSS then is
the memory with the index built. Model load and index build are outside every per-request and
per-character figure: the server's CPU is metered from then on.

Parts (`--part`):

- `explicit`: per pick, open the file (didOpen with its text from disk), wait `--settle-ms`,
  put the cursor at the end of the cut line's indentation and send an invoked
  (triggerKind 1) textDocument/inlineCompletion. Scored on the answer's first line against the
  picked line after its indentation (trailing spaces ignored on both): `exact` when equal;
  `share right` = length of their longest common prefix / length of the expected text (1.0
  for an exact line; a right start then a wrong tail scores its right part). Per kind (cross,
  plain, all), with the request's latency (send to answer, p50/p95) and the server's CPU per
  request.
- `replay`: per pick (the first `--replay-picks` of the sample), open the file, place the
  cursor at the end of the cut line's indentation (an empty didChange and an automatic
  request, as an editor asks when the cursor arrives), dwell `--dwell-ms` (the user reads;
  ghost text on screen 300 ms by then is read and may be accepted), then type the picked line
  at a human pace (bench/traces.py's typing model, thinking pauses) with bench/user_replay.py's
  accepting users (`tab`, `words`). Per (system, user): keystrokes saved, suggestions read and
  refused per 100 characters, accept rate, TTFT p50/p95/p99 while typing, the median share of
  each prompt served from the KV cache, the server's CPU seconds per 100 characters, peak RSS.
- `dwell`: the replay's first state only, for many picks at little cost: open the file, place
  the cursor, and read what comes on screen within `--dwell-ms` (the same users and reaction
  time); nothing is accepted or typed, and the document closes. Per (system, user): the picks
  whose suggestion was accepted at the dwell and the keystrokes that saved (per 100 characters
  of the picked lines, per kind), when the first suggestion went on screen (p50, p90) and its
  prompt's size. The dwell is where a line's start is read, where the Tab user takes whole
  lines (about 40% of the replay's saved keystrokes).

The picks are a seeded sample (`--picks N`, all by default), interleaved so that every prefix
has each package and both kinds in turn. The last table gives each figure's ratio on/off.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import platform
import random
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.accepting_user import USERS, per_100, user_summary
from bench.replay import CpuMeter, first_line, peak_rss_mb, server_status, status_mb, summarize
from bench.traces import (
    END_OF_LINE_PAUSE_MS,
    THINK_RATES,
    Edit,
    Keystroke,
    Record,
    Trace,
    TypingModel,
    utf16_len,
)
from bench.user_replay import GhostfimEditor, Pace, Read, UserReplay
from ghostfim.engine.timings import percentile
from harness.lspclient import LspProcess, Notification, RpcError

# system -> its workspaceContext setting; `baseline` is another build's server (--baseline-server)
# with the context on, side by side with this checkout's on and off
SYSTEMS = {"on": "auto", "off": "off", "baseline": "auto"}
PARTS = ("explicit", "replay", "dwell")
KINDS = ("cross", "plain")
READY_STATES = ("ready", "off", "capped")  # workspace.state once indexing is over
INDEX_WAIT_S = 20.0
LANGUAGES = {
    ".py": "python",
    ".ts": "typescript",
    ".tsx": "typescriptreact",
    ".js": "javascript",
    ".jsx": "javascriptreact",
}
Pick = dict[str, Any]


# --- the picks (pure) -----------------------------------------------------------------------------
def default_manifest() -> Path:
    from ghostfim.engine import env

    return env.cache_dir() / "bench" / "workspace-manifest.json"


def pick_id(pick: Pick) -> str:
    """A pick's name: its file and 1-based line."""
    return f"{pick['file']}:{pick['line'] + 1}"


def sample_picks(picks: Sequence[Pick], n: int, seed: int) -> list[Pick]:
    """`n` picks (all for n <= 0), seeded, in an order whose every prefix is balanced: each
    (package, kind) group is shuffled, and the groups take turns, one pick each, in an order
    where packages alternate and each package alternates kinds."""
    packages = list(dict.fromkeys(p["package"] for p in picks))
    kinds = [k for k in KINDS if any(p["kind"] == k for p in picks)]
    kinds += sorted({p["kind"] for p in picks} - set(kinds))
    groups: list[list[Pick]] = []
    for i in range(len(packages) * len(kinds)):
        package = packages[i % len(packages)]
        kind = kinds[(i % len(packages) + i // len(packages)) % len(kinds)]
        group = [p for p in picks if p["package"] == package and p["kind"] == kind]
        seeded = _rng(f"{seed}:{package}:{kind}")
        seeded.shuffle(group)
        groups.append(group)
    order: list[Pick] = []
    for r in range(max((len(g) for g in groups), default=0)):
        order += [g[r] for g in groups if r < len(g)]
    return order if n <= 0 else order[:n]


def _rng(key: str) -> random.Random:
    return random.Random(_seed_of(key))


def _seed_of(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")


def language_of(path: str) -> str:
    return LANGUAGES.get(Path(path).suffix, "plaintext")


def read_cut_file(workspace: Path, pick: Pick) -> tuple[str, int]:
    """The pick's file as it is on disk, and the offset of its cut line's start; the line must
    be the pick's indentation alone (the corpus cut it)."""
    text = (workspace / pick["file"]).read_bytes().decode("utf-8")
    lines = text.split("\n")
    line = pick["line"]
    if line >= len(lines) or lines[line] != pick["indent"]:
        raise ValueError(
            f"{pick_id(pick)} is not cut back to its indentation on disk: rebuild the corpus "
            "(python -m bench.workspace_corpus)"
        )
    return text, sum(len(s) + 1 for s in lines[:line])


def expected_text(pick: Pick) -> str:
    """What the user types on the cut line: the picked line after its indentation."""
    text: str = pick["text"]
    if not text.startswith(pick["indent"]):
        raise ValueError(f"{pick_id(pick)}: the line does not start with its indentation")
    return text[len(pick["indent"]) :]


def pick_trace(
    pick: Pick,
    workspace: Path,
    *,
    seed: int,
    think_rate: float = THINK_RATES["thinking"],
    dwell_ms: float = 2000.0,
) -> Trace:
    """The pick typed back: state 0 is the cursor arriving at the end of the cut line's
    indentation (an empty edit: the document is the file on disk), `dwell_ms` before the first
    character; then one state per character of the line, on a seeded typing model of its own.
    State i (i >= 1) has typed the line's first i characters, as bench/user_replay.py's Walk
    needs (an accept of n characters from state i reaches state i + n)."""
    text, line_start = read_cut_file(workspace, pick)
    body = expected_text(pick)
    line, indent = pick["line"], pick["indent"]
    col = utf16_len(indent)
    cursor = line_start + len(indent)
    typing = TypingModel(_seed_of(f"{seed}:{pick_id(pick)}"), think_rate=think_rate)
    arrive = Edit((line, col), (line, col), "")
    keys = [Keystroke(0.0, arrive, text, line, col, cursor, body, dwell_ms)]
    now = dwell_ms
    for i, ch in enumerate(body):
        before = col + utf16_len(body[:i])
        gap = END_OF_LINE_PAUSE_MS if i == len(body) - 1 else typing.gap_after(ch)
        keys.append(
            Keystroke(
                now,
                Edit((line, before), (line, before), ch),
                text[:cursor] + body[: i + 1] + text[cursor:],
                line,
                before + utf16_len(ch),
                cursor + i + 1,
                body[i + 1 :],
                gap,
            )
        )
        now += gap
    path = str(workspace / pick["file"])
    return Trace(pick_id(pick), language_of(path), path, text, keys)


# --- scoring (pure) -------------------------------------------------------------------------------
def common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def score(answer: str, expected: str) -> dict[str, Any]:
    """An explicit answer's first line against the expected rest of the line (trailing spaces
    ignored on both): exact, and the share right = common prefix / expected length."""
    got = first_line(answer).rstrip()
    want = expected.rstrip()
    exact = got == want
    share = common_prefix(got, want) / len(want) if want else float(exact)
    return {"first_line": got, "exact": exact, "share_right": round(share, 4)}


def _pct(values: Sequence[float], q: float) -> float | None:
    return round(percentile(list(values), q), 1) if values else None


def _mean(values: Sequence[float], digits: int = 3) -> float | None:
    return round(statistics.mean(values), digits) if values else None


def explicit_summary(records: Sequence[Record]) -> dict[str, Any]:
    """Per kind and all: picks, exact first lines (share), mean share right; latencies over
    every answered request."""
    out: dict[str, Any] = {}
    for kind in (*KINDS, "all"):
        rows = [r for r in records if kind == "all" or r["kind"] == kind]
        scored = [r for r in rows if r.get("error") is None]
        out[f"picks_{kind}"] = len(rows)
        out[f"exact_{kind}"] = (
            round(sum(r["exact"] for r in scored) / len(rows), 4) if rows else None
        )
        out[f"share_right_{kind}"] = (
            round(sum(r["share_right"] for r in scored) / len(rows), 4) if rows else None
        )
    answered = [r for r in records if r.get("error") is None]
    latency = [r["latency_ms"] for r in answered]
    model = [r for r in answered if r.get("source") == "model"]  # not a cache's answer
    ttft = [r["ttft_ms"] for r in model if r.get("ttft_ms") is not None]
    prompt = [r["prompt_tokens"] for r in model if r.get("prompt_tokens") is not None]
    defs = [r["definitions"] for r in answered if r.get("definitions") is not None]
    out.update(
        errors=len(records) - len(answered),
        empty=sum(not r.get("first_line") for r in answered),
        model_answers=len(model),
        latency_p50=_pct(latency, 50),
        latency_p95=_pct(latency, 95),
        ttft_p50=_pct(ttft, 50),
        prompt_tokens_mean=_mean(prompt, 1),
        definitions_mean=_mean(defs, 2),
    )
    return out


def ratio(on: Any, off: Any) -> float | None:
    """on / off, for two numbers with off non-zero; else None."""
    numbers = (int, float)
    if isinstance(on, bool) or isinstance(off, bool):
        return None
    if not isinstance(on, numbers) or not isinstance(off, numbers) or off == 0:
        return None
    return round(on / off, 3)


def last_request(status: dict[str, Any]) -> Any:
    """What ghostfim/status says the last request's prompt got from the workspace:
    `workspace.lastRequest` (a list of {name, file}), or a top-level `lastRequest`."""
    workspace = status.get("workspace")
    if isinstance(workspace, dict) and "lastRequest" in workspace:
        return workspace["lastRequest"]
    return status.get("lastRequest")


def definitions_of(last: Any) -> int | None:
    """How many definitions that was: a list's length, a count, or a dict's `definitions`."""
    if isinstance(last, dict):
        last = last.get("definitions")
    if isinstance(last, list):
        return len(last)
    if isinstance(last, int) and not isinstance(last, bool):
        return last
    return None


# --- the server -----------------------------------------------------------------------------------
def vm_rss_mb(pid: int) -> float | None:
    return status_mb(pid, "VmRSS")


@dataclass
class Server:
    client: LspProcess
    state_dir: str
    model_ready_ms: float | None = None
    index_ready_ms: float | None = None  # initialize to workspace.state in READY_STATES
    index: dict[str, Any] | None = None  # ghostfim/status `workspace` then (None: unreported)
    rss_ready_mb: float | None = None
    messages: list[str] = field(default_factory=list)  # window/showMessage from the server

    @property
    def pid(self) -> int:
        return self.client.proc.pid

    def ready_json(self) -> dict[str, Any]:
        return {
            "model_ready_ms": self.model_ready_ms,
            "index_ready_ms": self.index_ready_ms,
            "index": self.index,
            "rss_ready_mb": self.rss_ready_mb,
            "messages": self.messages,
        }

    async def stop(self) -> None:
        await self.client.stop()
        shutil.rmtree(self.state_dir, ignore_errors=True)


def settings_for(system: str, args: argparse.Namespace) -> dict[str, Any]:
    model = args.model
    sized = model in {"tiny", "small", "medium", "large"}
    return {
        "model": {"size": model} if sized else {"path": model},
        **args.settings,
        "workspaceContext": SYSTEMS[system],
    }


async def start_server(
    system: str,
    roots: Sequence[Path],
    args: argparse.Namespace,
    listeners: Sequence[Callable[[Notification], None]] = (),
) -> Server:
    """A fresh server for one pass, initialized on the workspace folders, once its model is
    loaded and its index is ready (or INDEX_WAIT_S has passed). `listeners` hear its
    notifications from the start (the calibration's log comes while it loads)."""
    state_dir = tempfile.mkdtemp(prefix="ghostfim-wsbench-state-")
    command = shlex.split(args.server) or [sys.executable, "-m", "ghostfim.lsp.main", "serve"]
    if system == "baseline":
        if not args.baseline_server:
            raise SystemExit("the system baseline needs --baseline-server 'CMD serve'")
        command = shlex.split(args.baseline_server)
    client = await LspProcess.start(command, env={"GHOSTFIM_STATE_DIR": state_dir})
    server = Server(client, state_dir)

    def on_note(note: Notification) -> None:
        if note.method == "window/showMessage" and isinstance(note.params, dict):
            server.messages.append(str(note.params.get("message")))

    client.listeners.extend([on_note, *listeners])
    started = time.perf_counter()
    await client.call(
        "initialize",
        {
            "processId": os.getpid(),
            "rootUri": roots[0].as_uri() if roots else None,
            "workspaceFolders": [{"uri": r.as_uri(), "name": r.name} for r in roots],
            "capabilities": {
                "general": {"positionEncodings": ["utf-16"]},
                "textDocument": {"inlineCompletion": {}},
                "workspace": {"workspaceFolders": True},
                "window": {"workDoneProgress": True},
            },
            "initializationOptions": settings_for(system, args),
        },
    )
    await client.notify("initialized", {})
    while True:
        status = await client.call("ghostfim/status", None)
        elapsed_ms = (time.perf_counter() - started) * 1000
        if status["state"] == "error":
            await server.stop()
            raise RuntimeError(f"ghostfim failed to load: {status.get('error')}")
        if server.model_ready_ms is None and status["state"] != "loading":
            server.model_ready_ms = round(elapsed_ms, 1)
        workspace = status.get("workspace")
        indexed = not isinstance(workspace, dict) or workspace.get("state") in READY_STATES
        if server.index_ready_ms is None and indexed:
            server.index = workspace if isinstance(workspace, dict) else None
            server.index_ready_ms = round(elapsed_ms, 1) if server.index is not None else None
        if server.model_ready_ms is not None and (indexed or elapsed_ms > INDEX_WAIT_S * 1000):
            if not indexed:  # still indexing after INDEX_WAIT_S: say so
                server.index = workspace
            break
        if elapsed_ms > args.load_timeout_s * 1000:
            await server.stop()
            raise RuntimeError(f"ghostfim did not become ready: {status}")
        await asyncio.sleep(0.1)
    server.rss_ready_mb = vm_rss_mb(server.pid)
    return server


def _end_of_pass(status: dict[str, Any]) -> dict[str, Any]:
    return {
        "workspace": status.get("workspace"),
        "acceptance": status.get("acceptance"),
        "model": status.get("model"),
        "memory": status.get("memory"),
    }


# --- part 1: explicit requests at line starts ----------------------------------------------------
async def explicit_request(
    client: LspProcess, pick: Pick, workspace: Path, args: argparse.Namespace
) -> Record:
    path = workspace / pick["file"]
    text, _ = read_cut_file(workspace, pick)
    uri = path.as_uri()
    stats: list[dict[str, Any]] = []

    def on_note(note: Notification) -> None:
        if note.method == "ghostfim/stats" and isinstance(note.params, dict):
            stats.append(note.params)

    record: Record = {
        "pick": pick_id(pick),
        "package": pick["package"],
        "kind": pick["kind"],
        "expected": expected_text(pick),
    }
    await client.notify(
        "textDocument/didOpen",
        {
            "textDocument": {
                "uri": uri,
                "languageId": language_of(str(path)),
                "version": 1,
                "text": text,
            }
        },
    )
    await asyncio.sleep(args.settle_ms / 1000)
    client.listeners.append(on_note)
    sent = time.perf_counter()
    try:
        answer = await client.call(
            "textDocument/inlineCompletion",
            {
                "textDocument": {"uri": uri},
                "position": {"line": pick["line"], "character": utf16_len(pick["indent"])},
                "context": {"triggerKind": 1},
            },
            timeout=args.request_timeout_s,
        )
    except (RpcError, asyncio.TimeoutError, ConnectionError) as exc:
        record["error"] = str(exc) or type(exc).__name__
        answer = None
    record["latency_ms"] = round((time.perf_counter() - sent) * 1000, 1)
    deadline = time.perf_counter() + 1.0  # its ghostfim/stats may follow the answer
    while not stats and time.perf_counter() < deadline:
        await asyncio.sleep(0.02)
    client.listeners.remove(on_note)
    items = (answer or {}).get("items") or []
    insert = items[0].get("insertText", "") if items else ""
    if record.get("error") is None:
        record.update(answer=insert, **score(insert, record["expected"]))
    last = stats[-1] if stats else {}
    record.update(
        source=last.get("source"),
        ttft_ms=last.get("ttftMs"),
        prompt_tokens=last.get("newTokens"),
        reused_tokens=last.get("reusedTokens"),
    )
    record["stats"] = last  # the whole ghostfim/stats notification
    status = await server_status(client)
    record["last_request"] = last_request(status)
    record["definitions"] = definitions_of(record["last_request"])
    await client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    return record


async def explicit_pass(
    system: str, picks: Sequence[Pick], workspace: Path, roots: Sequence[Path], args: Any
) -> dict[str, Any]:
    server = await start_server(system, roots, args)
    try:
        meter = CpuMeter(server.pid)
        started = time.perf_counter()
        records = []
        for pick in picks:
            records.append(await explicit_request(server.client, pick, workspace, args))
        wall_s = time.perf_counter() - started
        cpu_s = meter.spent()
        end = _end_of_pass(await server_status(server.client))
        peak = peak_rss_mb(server.pid)
    finally:
        await server.stop()
    summary = {
        "system": system,
        **explicit_summary(records),
        "cpu_s_per_request": None
        if cpu_s is None or not records
        else round(cpu_s / len(records), 3),
        "index_ready_ms": server.index_ready_ms,
        "rss_ready_mb": server.rss_ready_mb,
        "peak_rss_mb": peak,
        "wall_s": round(wall_s, 1),
    }
    return {"summary": summary, "ready": server.ready_json(), "end": end, "records": records}


# --- part 2: the accepting-user replay ------------------------------------------------------------
def replay_summary(
    records: Sequence[Record],
    reads: Sequence[Read],
    kinds: dict[str, str],
    chars: dict[str, int],
    *,
    cpu_s: float | None,
    rss_mb: float | None,
) -> dict[str, Any]:
    """bench/replay.py's figures for one pass, plus keystrokes saved and the accept rate per
    kind. `kinds` and `chars`: each trace's kind and characters written."""
    total = sum(chars.values())
    out = {
        **summarize(list(records), rss_mb=rss_mb),
        **user_summary([r.decision for r in reads], chars_written=total, cpu_s=cpu_s),
        "reads_per_100": per_100(len(reads), total),
    }
    for kind in KINDS:
        of_kind = [r.decision for r in reads if kinds.get(r.trace) == kind]
        written = sum(n for name, n in chars.items() if kinds[name] == kind)
        figures = user_summary(of_kind, chars_written=written, cpu_s=None)
        out[f"keystrokes_saved_per_100_{kind}"] = figures["keystrokes_saved_per_100"]
        out[f"accept_rate_{kind}"] = figures["accept_rate"]
    return out


@dataclass
class Played:
    """What one pass's picks gave: each state's record, each read, and per trace its kind and
    the characters of its line."""

    records: list[Record] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    kinds: dict[str, str] = field(default_factory=dict)
    chars: dict[str, int] = field(default_factory=dict)
    unsignalled: int = 0  # accepts with no item to name

    def to_json(self) -> dict[str, Any]:
        return {
            "records": [
                {k: v for k, v in r.items() if not k.startswith("_")} for r in self.records
            ],
            "reads": [r.to_json() for r in self.reads],
        }


async def play_picks(
    server: Server,
    user: str,
    picks: Sequence[Pick],
    workspace: Path,
    args: argparse.Namespace,
    play: Callable[[UserReplay], Awaitable[tuple[list[Record], list[Read]]]],
    close_after_s: float = 2.0,
) -> Played:
    """Each pick's trace, one at a time (each state holds the whole document), in its own
    editor on `server`, played by `user` with `play` (UserReplay.run, or .dwell)."""
    pace = Pace(reaction_ms=args.reaction_ms)
    rate = THINK_RATES[args.pauses]
    played = Played()
    for pick in picks:
        trace = pick_trace(pick, workspace, seed=args.seed, think_rate=rate, dwell_ms=args.dwell_ms)
        played.kinds[trace.name] = pick["kind"]
        played.chars[trace.name] = len(expected_text(pick))
        uri = Path(trace.path).as_uri()
        editor = GhostfimEditor(server.client, uri, close_after_s=close_after_s)
        got, read = await play(UserReplay(trace, editor, user, pace))
        played.records += got
        played.reads += read
        played.unsignalled += editor.unsignalled
    return played


async def replay_pass(
    system: str,
    user: str,
    picks: Sequence[Pick],
    workspace: Path,
    roots: Sequence[Path],
    args: argparse.Namespace,
) -> dict[str, Any]:
    server = await start_server(system, roots, args)
    try:
        meter = CpuMeter(server.pid)
        started = time.perf_counter()
        played = await play_picks(server, user, picks, workspace, args, UserReplay.run)
        wall_s = time.perf_counter() - started
        cpu_s = meter.spent()
        end = _end_of_pass(await server_status(server.client))
        peak = peak_rss_mb(server.pid)
    finally:
        await server.stop()
    summary = {
        "system": system,
        "user": user,
        **replay_summary(
            played.records, played.reads, played.kinds, played.chars, cpu_s=cpu_s, rss_mb=peak
        ),
        "index_ready_ms": server.index_ready_ms,
        "rss_ready_mb": server.rss_ready_mb,
        "unsignalled_accepts": played.unsignalled,
        "wall_s": round(wall_s, 1),
    }
    return {"summary": summary, "ready": server.ready_json(), "end": end, **played.to_json()}


def dwell_summary(
    records: Sequence[Record], reads: Sequence[Read], kinds: dict[str, str], chars: dict[str, int]
) -> dict[str, Any]:
    """What the user took at the dwell alone: per kind and all, the picks where a read was
    accepted, the characters saved, per 100 characters of the picked lines; and when the
    first suggestion went on screen (ms after the cursor arrived)."""
    out: dict[str, Any] = {"picks": len(chars)}
    for kind in (*KINDS, "all"):
        names = {n for n in chars if kind == "all" or kinds[n] == kind}
        taken = [r for r in reads if r.trace in names and r.decision.accepted]
        saved = sum(r.decision.saved for r in taken)
        written = sum(chars[n] for n in names)
        out[f"accepts_{kind}"] = len(taken)
        out[f"saved_{kind}"] = saved
        out[f"saved_per_100_{kind}"] = per_100(saved, written)
    shown = [r["shown_at_ms"] for r in records if r.get("shown_at_ms") is not None]
    out["shown_p50_ms"] = _pct(shown, 50)
    out["shown_p90_ms"] = _pct(shown, 90)
    out["shown_share"] = round(len(shown) / len(chars), 3) if chars else None
    tokens = [r["prompt_tokens"] for r in records if r.get("prompt_tokens") is not None]
    out["prompt_tokens_median"] = statistics.median(tokens) if tokens else None
    out["reads"] = len(reads)
    return out


async def dwell_pass(
    system: str,
    user: str,
    picks: Sequence[Pick],
    workspace: Path,
    roots: Sequence[Path],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """The replay's first state only, for many picks: the suggestion at the dwell after a file
    opens, which the line's start gets (`--part dwell`)."""
    server = await start_server(system, roots, args)
    try:
        started = time.perf_counter()
        played = await play_picks(
            server, user, picks, workspace, args, UserReplay.dwell, close_after_s=0.3
        )
        wall_s = time.perf_counter() - started
    finally:
        await server.stop()
    summary = {
        "system": system,
        "user": user,
        **dwell_summary(played.records, played.reads, played.kinds, played.chars),
        "wall_s": round(wall_s, 1),
    }
    return {"summary": summary, **played.to_json()}


# --- tables ---------------------------------------------------------------------------------------
EXPLICIT_ROWS = [
    ("exact_cross", "first line exact, cross"),
    ("exact_plain", "first line exact, plain"),
    ("exact_all", "first line exact, all"),
    ("share_right_cross", "share of the line right (mean), cross"),
    ("share_right_plain", "share of the line right (mean), plain"),
    ("share_right_all", "share of the line right (mean), all"),
    ("latency_p50", "request latency p50 (ms)"),
    ("latency_p95", "request latency p95 (ms)"),
    ("ttft_p50", "TTFT p50 (ms)"),
    ("prompt_tokens_mean", "prompt tokens decoded per request (mean)"),
    ("definitions_mean", "definitions in the prompt (mean, lastRequest)"),
    ("cpu_s_per_request", "server CPU seconds per request"),
    ("model_answers", "answers from the model (the rest: a cache, or none)"),
    ("empty", "empty answers"),
    ("errors", "failed requests"),
    ("index_ready_ms", "index ready, from initialize (ms)"),
    ("rss_ready_mb", "RSS once ready (MB)"),
    ("peak_rss_mb", "peak RSS (MB)"),
]
REPLAY_ROWS = [
    ("keystrokes_saved_per_100", "keystrokes saved per 100 characters"),
    ("keystrokes_saved_per_100_cross", "… on cross lines"),
    ("keystrokes_saved_per_100_plain", "… on plain lines"),
    ("accepts", "accepts"),
    ("accept_rate", "accept rate of suggestions read"),
    ("reads_per_100", "suggestions read per 100 characters"),
    ("refused_per_100", "suggestions read and refused per 100 characters"),
    ("ttft_p50", "TTFT p50 (ms)"),
    ("ttft_p95", "TTFT p95 (ms)"),
    ("ttft_p99", "TTFT p99 (ms)"),
    ("kv_cache_share_median", "share of each prompt served from the KV cache (median)"),
    ("prompt_tokens_mean", "prompt tokens decoded per request (mean)"),
    ("cpu_s_per_100", "server CPU seconds per 100 characters"),
    ("peak_rss_mb", "peak RSS (MB)"),
    ("index_ready_ms", "index ready, from initialize (ms)"),
    ("rss_ready_mb", "RSS once ready (MB)"),
    ("states", "keystroke states"),
]
DWELL_ROWS = [
    ("picks", "picks"),
    ("accepts_all", "accepted at the dwell"),
    ("saved_all", "keystrokes saved at the dwell"),
    ("saved_per_100_all", "… per 100 characters of the lines"),
    ("saved_per_100_cross", "… on cross lines"),
    ("saved_per_100_plain", "… on plain lines"),
    ("accepts_cross", "accepted, cross lines"),
    ("accepts_plain", "accepted, plain lines"),
    ("shown_p50_ms", "first suggestion on screen, p50 (ms)"),
    ("shown_p90_ms", "first suggestion on screen, p90 (ms)"),
    ("shown_share", "picks with a suggestion on screen"),
    ("prompt_tokens_median", "first prompt's tokens (median)"),
    ("reads", "suggestions read"),
]
PERCENT = {"exact_cross", "exact_plain", "exact_all", "accept_rate"}


def _each_once(rows: Sequence[tuple[str, str]], leave_out: set[str]) -> list[tuple[str, str]]:
    """Each figure once, where it first comes, with that label."""
    seen: dict[str, str] = {}
    for key, label in rows:
        if key not in leave_out:
            seen.setdefault(key, label)
    return list(seen.items())


# The explicit part's own figures, then the replay's (those both have: TTFT, prompt tokens,
# memory, the index, once, in the replay's order).
RATIO_ROWS = _each_once(
    [*(r for r in EXPLICIT_ROWS if r[0] not in dict(REPLAY_ROWS)), *REPLAY_ROWS],
    {"empty", "errors", "states", "model_answers"},
)


def cell(value: Any, key: str = "") -> str:
    if value is None:
        return "—"
    if isinstance(value, float) and (key in PERCENT or key.startswith("accept_rate")):
        return f"{value:.1%}"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def table(columns: dict[str, dict[str, Any]], rows: Sequence[tuple[str, str]]) -> str:
    names = list(columns)
    lines = ["| metric | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for key, label in rows:
        lines.append(
            f"| {label} | " + " | ".join(cell(columns[n].get(key), key) for n in names) + " |"
        )
    return "\n".join(lines)


def ratio_columns(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """on/off per part (explicit) and per user (replay), for every figure of RATIO_ROWS."""
    pairs: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    explicit = report.get("explicit") or {}
    if "on" in explicit and "off" in explicit:
        pairs["explicit"] = (explicit["on"]["summary"], explicit["off"]["summary"])
    replay = report.get("replay") or {}
    for user in report.get("users", []):
        on, off = replay.get(f"on/{user}"), replay.get(f"off/{user}")
        if on and off:
            pairs[f"replay, {user} user"] = (on["summary"], off["summary"])
    return {
        name: {key: ratio(on.get(key), off.get(key)) for key, _ in RATIO_ROWS}
        for name, (on, off) in pairs.items()
    }


def ratio_table(columns: dict[str, dict[str, Any]]) -> str:
    names = list(columns)
    lines = ["| on / off | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for key, label in RATIO_ROWS:
        cells = [columns[n].get(key) for n in names]
        if all(c is None for c in cells):
            continue
        lines.append(
            f"| {label} | " + " | ".join("—" if c is None else f"{c:.2f}×" for c in cells) + " |"
        )
    return "\n".join(lines)


def render(report: dict[str, Any]) -> str:
    out = []
    if report.get("explicit"):
        columns = {name: r["summary"] for name, r in report["explicit"].items()}
        out += ["## Explicit requests at line starts", "", table(columns, EXPLICIT_ROWS), ""]
    if report.get("replay"):
        columns = {name: r["summary"] for name, r in report["replay"].items()}
        out += [
            "## The accepting-user replay (TTFT: while typing)",
            "",
            table(columns, REPLAY_ROWS),
            "",
        ]
    if report.get("dwell"):
        columns = {name: r["summary"] for name, r in report["dwell"].items()}
        out += [
            "## The dwell after a file opens (the line's start)",
            "",
            table(columns, DWELL_ROWS),
            "",
        ]
    ratios = ratio_columns(report)
    if ratios:
        out += ["## on / off", "", ratio_table(ratios), ""]
    return "\n".join(out)


# --- the run --------------------------------------------------------------------------------------
def parse_list(value: str, known: Sequence[str], what: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise SystemExit(f"unknown {what} {unknown or value!r}; known: {', '.join(known)}")
    return names


def workspace_roots(manifest: dict[str, Any], workspace: Path) -> list[Path]:
    """Every package folder of the corpus (the manifest's order), as workspace folders."""
    folders = [p["folder"] for p in manifest.get("packages", []) if p.get("folder")]
    if not folders:
        folders = sorted({Path(p["file"]).parts[0] for p in manifest["picks"]})
    return [workspace / f for f in folders if (workspace / f).is_dir()]


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    systems = parse_list(args.systems, tuple(SYSTEMS), "system")
    parts = parse_list(args.part, PARTS, "part")
    users = [u for u in parse_list(args.users, USERS, "user") if u != "none"]
    manifest = json.loads(args.manifest.read_text())
    workspace = args.workspace or Path(manifest["workspace"])
    roots = workspace_roots(manifest, workspace)
    picks = sample_picks(manifest["picks"], args.picks, args.seed)
    replay_picks = picks[: args.replay_picks] if args.replay_picks > 0 else picks
    for pick in picks:  # every pick is still cut on disk, before any server starts
        read_cut_file(workspace, pick)
    load_before = os.getloadavg()
    report: dict[str, Any] = {
        "command": "python -m bench.workspace_bench " + shlex.join(sys.argv[1:]),
        "model": args.model,
        "manifest": str(args.manifest),
        "workspace": str(workspace),
        "roots": [str(r) for r in roots],
        "seed": args.seed,
        "systems": systems,
        "users": users if "replay" in parts else [],
        "settings": {s: settings_for(s, args) for s in systems},
        "explicit_picks": [pick_id(p) for p in picks] if "explicit" in parts else [],
        "replay_picks": [pick_id(p) for p in replay_picks]
        if "replay" in parts or "dwell" in parts
        else [],
        "replay_chars": sum(len(expected_text(p)) for p in replay_picks),
        "dwell_ms": args.dwell_ms,
        "reaction_ms": args.reaction_ms,
        "think_rate": THINK_RATES[args.pauses],
        "explicit": {},
        "replay": {},
    }
    if "explicit" in parts:
        for system in systems:
            result = await explicit_pass(system, picks, workspace, roots, args)
            report["explicit"][system] = result
            s = result["summary"]
            print(
                f"explicit {system}: {len(picks)} picks, exact {cell(s['exact_all'], 'exact_all')}"
                f", index ready {s['index_ready_ms']} ms, {s['wall_s']} s",
                file=sys.stderr,
            )
    if "replay" in parts:
        for user in users:
            for system in systems:
                result = await replay_pass(system, user, replay_picks, workspace, roots, args)
                report["replay"][f"{system}/{user}"] = result
                s = result["summary"]
                print(
                    f"replay {system}/{user}: {len(replay_picks)} picks, {s['accepts']} accepts, "
                    f"{s['reads']} reads, {s['wall_s']} s",
                    file=sys.stderr,
                )
    if "dwell" in parts:
        report["dwell"] = {}
        for user in users:
            for system in systems:
                result = await dwell_pass(system, user, replay_picks, workspace, roots, args)
                report["dwell"][f"{system}/{user}"] = result
                s = result["summary"]
                print(
                    f"dwell {system}/{user}: {s['picks']} picks, {s['accepts_all']} accepts, "
                    f"saved {s['saved_all']} ({s['saved_per_100_all']} per 100), "
                    f"shown p50 {s['shown_p50_ms']} ms, {s['wall_s']} s",
                    file=sys.stderr,
                )
    report["ratios"] = ratio_columns(report)
    report["machine"] = {
        "platform": platform.platform(),
        "cpus": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "python": platform.python_version(),
        "load_before": [round(v, 2) for v in load_before],
        "load_after": [round(v, 2) for v in os.getloadavg()],
    }
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--systems", default="on,off", help="comma-separated: on, off")
    parser.add_argument(
        "--part", default="explicit,replay", help="comma-separated: explicit, replay, dwell"
    )
    parser.add_argument("--users", default="tab,words", help="the replay's users: tab, words")
    parser.add_argument(
        "--model", default="small", help="tiny, small, medium, large or a GGUF path"
    )
    parser.add_argument("--picks", type=int, default=0, help="a seeded sample of N picks (0: all)")
    parser.add_argument(
        "--replay-picks",
        type=int,
        default=40,
        help="the replay types the first M picks of the sample (0: all of it)",
    )
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--manifest", type=Path, default=default_manifest())
    parser.add_argument("--workspace", type=Path, help="default: the manifest's")
    parser.add_argument("--dwell-ms", type=float, default=2000.0, help="at the line, before typing")
    parser.add_argument("--reaction-ms", type=float, default=Pace().reaction_ms)
    parser.add_argument("--pauses", choices=list(THINK_RATES), default="thinking")
    parser.add_argument("--settle-ms", type=float, default=500.0, help="didOpen to the request")
    parser.add_argument("--request-timeout-s", type=float, default=150.0)
    parser.add_argument("--load-timeout-s", type=float, default=300.0)
    parser.add_argument(
        "--settings",
        type=json.loads,
        default={},
        help="more settings for both systems, as JSON, e.g. '{\"workspaceContextTokens\": 512}'",
    )
    parser.add_argument(
        "--server",
        default="",
        help="the command that starts ghostfim (default: this checkout's "
        "`python -m ghostfim.lsp.main serve`), e.g. a frozen copy of the tree",
    )
    parser.add_argument(
        "--baseline-server",
        default="",
        help="the system baseline: another build's server command (the context on), e.g. "
        "'env PYTHONPATH=/tmp/base python -m ghostfim.lsp.main serve'",
    )
    parser.add_argument("--json", type=Path, help="write the full report (every record) here")
    args = parser.parse_args(argv)
    report = asyncio.run(main_async(args))
    print(render(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
