"""`ghostfim complete FILE:LINE:COL [--type TEXT]`: the server's own path, from the command line.

The file is opened in a `CompletionService` (the object the LSP server drives), the model loads
as it does for an editor, and an explicit request is made at the position. With --type, TEXT is
then typed at the cursor one character at a time, at a typing pace, and each character is an
automatic request, as an editor sends it: typed-through reuse, the debounce, supersession, the
KV cache and the follow-ups all run. Each step prints the suggestion and where it came from
(`model` or `cache`), with its timings: how many prompt tokens came from the KV cache and how
many were decoded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from ghostfim.cli.errors import UserError, parse_location
from ghostfim.engine.config import EngineConfig
from ghostfim.engine.service.completion import Answer, CompletionService, CursorState
from ghostfim.engine.service.cursor import cursor_state
from ghostfim.engine.service.stats import RequestStats, ServiceStatus

STATS_WAIT_S = 120.0  # the longest an answer's job may run on after it was answered


def split_at(text: str, line: int, col: int, path: Path) -> int:
    """The offset of a 1-based line and column (a column one past the end is the line's end)."""
    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        raise UserError(f"{path}: line {line} is outside the file (it has {len(lines)} lines)")
    if not 1 <= col <= len(lines[line - 1]) + 1:
        raise UserError(
            f"{path}:{line}: column {col} is outside the line (1..{len(lines[line - 1]) + 1})"
        )
    return sum(len(s) + 1 for s in lines[: line - 1]) + col - 1


def read_source(path: Path) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except OSError as exc:
        raise UserError(f"{path}: {exc.strerror or exc}") from None
    if b"\0" in data[:8192]:
        raise UserError(f"{path}: looks like a binary file")
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n")


class StdoutSink:
    """The service's events for a terminal: each request's stats are kept for its step."""

    def __init__(self) -> None:
        self.by_version: dict[int, RequestStats] = {}  # each request's, by document version
        self.arrived = asyncio.Event()
        self.problems: list[str] = []

    def ghost_text(self, state: CursorState, text: str, done: bool, item_id: str) -> None:
        del state, text, done, item_id  # each step prints its final suggestion instead

    def stats(self, stats: RequestStats) -> None:
        self.by_version[stats.version] = stats
        self.arrived.set()

    def status(self, status: ServiceStatus) -> None:
        del status

    def progress(self, message: str, percentage: int | None, done: bool) -> None:
        del message, percentage, done

    def problem(self, message: str) -> None:
        self.problems.append(message)

    def notice(self, message: str) -> None:
        sys.stderr.write(message + "\n")  # stdout carries the suggestions

    async def stats_for(self, version: int) -> RequestStats | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STATS_WAIT_S
        while version not in self.by_version and loop.time() < deadline:
            self.arrived.clear()
            try:
                await asyncio.wait_for(self.arrived.wait(), deadline - loop.time())
            except asyncio.TimeoutError:
                break
        return self.by_version.get(version)


def config_of(args: argparse.Namespace) -> EngineConfig:
    model = args.model or ""
    is_preset = model.lower() in ("tiny", "small", "medium", "large")
    return EngineConfig(
        model_size=model.lower() if is_preset else None,
        model_path=None if is_preset or not model else model,
        n_gpu_layers=args.n_gpu_layers,
        max_tokens=args.max_tokens,
        multiline=args.multiline,
        postprocess=args.postprocess,
        prefix_tokens=args.prefix_tokens,
        suffix_tokens=args.suffix_tokens,
        keystroke_prefill_ms=args.keystroke_prefill_ms,
        acceptance_stats=False,  # a demonstration teaches the filter nothing about the user
    )


async def final_text(answer: Answer) -> str:
    """What the editor shows once the suggestion's job has ended."""
    suggestion = answer.suggestion
    if answer.source != "model" or suggestion is None:
        return answer.text
    if not suggestion.done:
        done = asyncio.Event()
        suggestion.listeners.append(lambda s: done.set() if s.done else None)
        await done.wait()
    return suggestion.text


def record(
    answer: Answer, text: str, stats: RequestStats | None, service: CompletionService, step: int
) -> dict[str, Any]:
    info = service.host.backend.info if service.host.backend else None
    s = stats
    return {
        "completion": text,
        "source": answer.source,
        "reason": answer.reason,
        "timings": {
            "ttft_ms": round(s.ttft_ms, 2) if s else 0.0,
            "prefill_reused_tokens": s.reused_tokens if s else 0,
            "prefill_new_tokens": s.new_tokens if s else 0,
            "prefill_ms": round(s.prefill_ms, 2) if s else 0.0,
            "decode_tokens": s.generated_tokens if s else 0,
            "decode_ms": round(s.decode_ms, 2) if s else 0.0,
            "total_ms": round(s.total_ms, 2) if s else 0.0,
            "queue_ms": round(s.queue_ms, 2) if s else 0.0,
            "prompt_ms": round(s.prompt_ms, 2) if s else 0.0,
        },
        "model": {
            "name": info.name if info else None,
            "path": info.path if info else None,
            "preset": info.preset if info else None,
            "device": info.device if info else None,
            "n_gpu_layers": info.n_gpu_layers if info else 0,
        },
        "step": step,
    }


def emit(row: dict[str, Any], typed: str, as_json: bool) -> None:
    row["typed"] = typed
    if as_json:
        sys.stdout.write(json.dumps(row) + "\n")
    else:
        t = row["timings"]
        where = row["source"] if row["source"] != "none" else f"none ({row['reason']})"
        work = (
            f"ttft {t['ttft_ms']:.0f} ms, prompt {t['prefill_reused_tokens']} cached + "
            f"{t['prefill_new_tokens']} new tokens ({t['prefill_ms']:.0f} ms), "
            f"{t['decode_tokens']} generated ({t['decode_ms']:.0f} ms)"
            if row["source"] == "model"
            else "no model work"
        )
        sys.stdout.write(
            f"{'─' * 8} step {row['step']} typed {typed!r}: {where}\n{row['completion']}\n"
            f"{'─' * 8} {work}\n"
        )
    sys.stdout.flush()


async def complete_in_service(args: argparse.Namespace) -> int:
    path, line, col = parse_location(args.location)
    text = read_source(path)
    offset = split_at(text, line, col, path)
    sink = StdoutSink()
    service = CompletionService(sink)
    try:
        if not await service.configure(config_of(args)):
            problem = service.host.error or (sink.problems[-1] if sink.problems else "")
            raise UserError(problem.removeprefix("ghostfim: ") or "the model could not be loaded")
        uri = path.resolve().as_uri()
        service.document_opened(uri, text)
        version = 1
        state = cursor_state(uri, version, None, text, offset, line - 1)
        answer = await service.complete(state, explicit=True)
        row = record(answer, await final_text(answer), await sink.stats_for(version), service, 0)
        emit(row, "", args.json)
        typed = ""
        for step, ch in enumerate(args.type_text or "", start=1):
            await asyncio.sleep(args.pace_ms / 1000)
            typed += ch
            version += 1
            text = text[:offset] + ch + text[offset:]
            offset += 1
            service.document_changed(uri, text)
            line_now = text[:offset].count("\n")
            state = cursor_state(uri, version, None, text, offset, line_now)
            answer = await service.complete(state)
            shown = await final_text(answer)
            stats = await sink.stats_for(version) if answer.source != "none" else None
            emit(record(answer, shown, stats, service, step), typed, args.json)
    finally:
        await service.shutdown()
    return 0


def run_complete(args: argparse.Namespace) -> int:
    return asyncio.run(complete_in_service(args))
