"""`ghostfim complete FILE:LINE:COL [--type TEXT]`: the engine from the command line.

With --type, TEXT is typed at the cursor one character at a time inside this one process, and a
completion follows each character: the smallest honest demonstration of KV reuse (each line of
JSON says how many prompt tokens came from the cache and how many were decoded).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from ghostfim.cli.main import UserError, parse_location
from ghostfim.engine.backend import Completion, CompletionRequest
from ghostfim.engine.local.loading import load_session
from ghostfim.engine.local.native import ModelLoadError
from ghostfim.engine.local.session import ModelSession
from ghostfim.engine.setup.models import ModelNotFoundError


def split_at(text: str, line: int, col: int, path: Path) -> tuple[str, str]:
    """Split text at a 1-based line and column (a column one past the end is the line's end)."""
    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        raise UserError(f"{path}: line {line} is outside the file (it has {len(lines)} lines)")
    if not 1 <= col <= len(lines[line - 1]) + 1:
        raise UserError(
            f"{path}:{line}: column {col} is outside the line (1..{len(lines[line - 1]) + 1})"
        )
    offset = sum(len(s) + 1 for s in lines[: line - 1]) + col - 1
    return text[:offset], text[offset:]


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


def completion_record(
    c: Completion, session: ModelSession, typed: str, step: int
) -> dict[str, object]:
    t = c.timings
    return {
        "completion": c.text,
        "timings": {
            "ttft_ms": round(t.ttft_ms, 2),
            "prefill_reused_tokens": t.prefill_reused_tokens,
            "prefill_new_tokens": t.prefill_new_tokens,
            "prefill_ms": round(t.prefill_ms, 2),
            "decode_tokens": t.decode_tokens,
            "decode_ms": round(t.decode_ms, 2),
            "total_ms": round(t.total_ms, 2),
            "prompt_ms": round(t.prompt_ms, 2),
            "suffix_tokens": t.suffix_tokens,
            "prefill_reuse_share": round(t.reuse_share, 4),
        },
        "model": {
            "name": session.info.name,
            "path": session.info.path,
            "preset": session.info.preset,
            "device": session.info.device,
            "n_gpu_layers": session.info.n_gpu_layers,
        },
        "step": step,
        "typed": typed,
        "mode": c.mode,
        "stop_reason": c.stop_reason,
    }


def run_complete(args: argparse.Namespace) -> int:
    path, line, col = parse_location(args.location)
    prefix, suffix = split_at(read_source(path), line, col, path)
    try:
        session = load_session(
            args.model,
            n_gpu_layers=args.n_gpu_layers,
            prefix_tokens=args.prefix_tokens,
            suffix_tokens=args.suffix_tokens,
            keystroke_prefill_ms=args.keystroke_prefill_ms,
        )
    except (ModelNotFoundError, ModelLoadError) as exc:
        raise UserError(str(exc)) from None

    def emit(c: Completion, typed: str, step: int) -> None:
        if args.json:
            sys.stdout.write(json.dumps(completion_record(c, session, typed, step)) + "\n")
        else:
            t = c.timings
            sys.stdout.write(
                f"{'─' * 8} step {step} typed {typed!r}\n{c.text}\n"
                f"{'─' * 8} ttft {t.ttft_ms:.0f} ms, prompt {t.prefill_reused_tokens} cached + "
                f"{t.prefill_new_tokens} new tokens ({t.prefill_ms:.0f} ms), "
                f"{t.decode_tokens} generated ({t.decode_ms:.0f} ms), total {t.total_ms:.0f} ms\n"
            )
        sys.stdout.flush()

    doc_id = str(path.resolve())
    request = CompletionRequest(
        prefix=prefix,
        suffix=suffix,
        doc_id=doc_id,
        cursor_line=line - 1,
        mode="full",
        max_tokens=args.max_tokens,
        multiline=args.multiline,
        postprocess=args.postprocess,
    )
    emit(session.complete(request), "", 0)
    if args.type_text:
        # Keystrokes use their own KV slots (engine/session.py); prepare the wide keystroke
        # window as the server does in the background, so the first typed character is warm.
        session.complete(replace(request, mode="keystroke", max_tokens=0, background=True))
    typed = ""
    for step, ch in enumerate(args.type_text or "", start=1):
        typed += ch
        request = CompletionRequest(
            prefix=prefix + typed,
            suffix=suffix,
            doc_id=doc_id,
            cursor_line=line - 1 + typed.count("\n"),
            mode="keystroke",
            max_tokens=args.max_tokens,
            multiline=args.multiline,
            postprocess=args.postprocess,
        )
        emit(session.complete(request), typed, step)
    session.close()
    return 0
