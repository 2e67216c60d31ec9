"""Putting a completion into the document as the editor would, and scoring the result.

Every system's answer is applied the way its editor applies it, and scored on the resulting
document against the original file:

- ghostfim (LSP): `insertText` is inserted at the cursor (the item's range is empty).
- llama.vim: its hint is rendered (`bench.llamavim.render_hint`: trailing empty lines dropped,
  repeats of the next lines discarded, indentation of a blank line taken over from the answer)
  and accepted in full as `llama#fim_accept('full')` does: the cursor line becomes the line's
  text before the cursor (on a whitespace-only line: the answer's own indentation, up to the
  line's) plus the first hint line, and the other hint lines are appended below it.

Scores (lines compared without trailing whitespace):
- first_line_em: the cursor line of the result equals the original line;
- span_em: the whole result equals the original file (nothing missing, nothing extra);
- edit_sim: difflib similarity of the lines the completion produced and the span's lines;
- passed: (execution tasks) the function's doctests pass on the result.
"""

from __future__ import annotations

import difflib
import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from bench.llamavim import is_blank, leading_ws, render_hint
from bench.quality.tasks import Task
from ghostfim.engine.timings import percentile

Record = dict[str, Any]


# --- applying answers -----------------------------------------------------------------------
def insert_at_cursor(task: Task, text: str) -> str:
    """The document after an editor inserts `text` at the cursor (LSP inline completion)."""
    doc = task.document
    return doc[: task.start] + text + doc[task.start :]


def llamavim_accept(task: Task, content: str) -> str:
    """The document after llama.vim renders `content` (the /infill answer) and the user
    accepts it in full; unchanged when llama.vim would not offer it."""
    lines = task.document.split("\n")
    x, y = task.character, task.line
    hint = render_hint(content, lines, x, y)
    if not hint.can_accept:
        return task.document
    line_cur = lines[y]
    if is_blank(line_cur):
        # s:fim_render replaces a whitespace-only line by the answer's own indentation, up to
        # the line's length; llama#fim_accept then keeps line_cur[:x] of that.
        parts = content.split("\n")
        while parts and parts[-1] == "":
            parts.pop()
        first = parts[0] if parts else ""
        line_cur = first[: min(len(leading_ws(first)), len(line_cur))]
    head = line_cur[:x] if x > 0 else line_cur  # Vim's line_cur[:x-1] is all of it for x == 0
    new = [head + hint.content[0], *hint.content[1:]]
    return "\n".join([*lines[:y], *new, *lines[y + 1 :]])


# --- scores ---------------------------------------------------------------------------------
def _rstripped(text: str) -> list[str]:
    return [line.rstrip() for line in text.split("\n")]


def produced_lines(task: Task, result: str) -> list[str]:
    """The lines of the result that the completion wrote, from the cursor line on."""
    doc_lines = task.document.count("\n") + 1
    res = result.split("\n")
    extra = len(res) - doc_lines
    return res[task.line : task.line + extra + 1] if extra >= 0 else res[task.line : task.line + 1]


def score(task: Task, result: str | None) -> dict[str, Any]:
    """Scores of one result document (None: the system failed to answer)."""
    if result is None:
        return {"first_line_em": False, "span_em": False, "edit_sim": 0.0, "accepted": None}
    original = _rstripped(task.text)
    got = _rstripped(result)
    y = task.line
    first_ok = y < len(got) and got[y] == original[y]
    expected_region = original[y : y + task.expected.count("\n") + 1]
    region = [line.rstrip() for line in produced_lines(task, result)]
    head = task.document.split("\n")[y][: task.character]
    a, b = "\n".join(expected_region), "\n".join(region)
    if head and a.startswith(head) and b.startswith(head):
        a, b = a[len(head) :], b[len(head) :]
    return {
        "first_line_em": first_ok,
        "span_em": got == original,
        "edit_sim": round(difflib.SequenceMatcher(None, a, b, autojunk=False).ratio(), 3),
        "accepted": "\n".join(produced_lines(task, result)),
    }


# --- summaries ------------------------------------------------------------------------------
def _share(values: Sequence[bool]) -> float | None:
    return round(sum(values) / len(values), 3) if values else None


def _pct(values: Sequence[float], q: float) -> float | None:
    v = percentile(list(values), q) if values else math.nan
    return None if math.isnan(v) else round(v, 1)


def summarize(records: Iterable[Record]) -> dict[str, Any]:
    """Headline numbers of one system's records."""
    rows = list(records)
    executed = [r for r in rows if r.get("passed") is not None]
    latency = [r["latency_ms"] for r in rows if r.get("latency_ms") is not None]
    return {
        "tasks": len(rows),
        "first_line_em": _share([r["first_line_em"] for r in rows]),
        "span_em": _share([r["span_em"] for r in rows]),
        "exec_tasks": len(executed),
        "pass_rate": _share([r["passed"] for r in executed]),
        "edit_sim": round(statistics.mean(r["edit_sim"] for r in rows), 3) if rows else None,
        "empty_share": _share([not (r.get("completion") or "").strip() for r in rows]),
        "errors": sum(1 for r in rows if r.get("error")),
        "latency_p50_ms": _pct(latency, 50),
        "latency_p90_ms": _pct(latency, 90),
        "latency_mean_ms": round(statistics.mean(latency), 1) if latency else None,
    }


def by_system(records: Iterable[Record], systems: Sequence[str]) -> dict[str, dict[str, Any]]:
    rows = list(records)
    return {s: summarize(r for r in rows if r["system"] == s) for s in systems}


def breakdown(
    records: Iterable[Record], systems: Sequence[str], key: str
) -> dict[str, dict[str, dict[str, Any]]]:
    """{group: {system: summary}} for key = "language" or "kind"."""
    rows = list(records)
    groups = sorted({r[key] for r in rows})
    return {
        g: {s: summarize(r for r in rows if r[key] == g and r["system"] == s) for s in systems}
        for g in groups
    }


def pairwise(records: Iterable[Record], a: str, b: str) -> dict[str, dict[str, list[str]]]:
    """Per metric, the tasks `a` gets right and `b` wrong ("a_only") and the reverse."""
    rows = list(records)
    by_task: dict[str, dict[str, Record]] = {}
    for r in rows:
        by_task.setdefault(r["task"], {})[r["system"]] = r
    out: dict[str, dict[str, list[str]]] = {}
    for metric in ("first_line_em", "span_em", "passed"):
        a_only, b_only = [], []
        for task, per in by_task.items():
            if a not in per or b not in per or per[a].get(metric) is None:
                continue
            x, y = bool(per[a][metric]), bool(per[b][metric])
            if x and not y:
                a_only.append(task)
            elif y and not x:
                b_only.append(task)
        out[metric] = {"a_only": a_only, "b_only": b_only}
    return out


COLUMNS = [
    ("tasks", "tasks"),
    ("first_line_em", "first-line exact match"),
    ("span_em", "whole-span exact match"),
    ("exec_tasks", "execution tasks"),
    ("pass_rate", "… pass rate"),
    ("edit_sim", "edit similarity (mean)"),
    ("empty_share", "no suggestion"),
    ("errors", "errors"),
    ("latency_p50_ms", "latency p50 (ms)"),
    ("latency_p90_ms", "latency p90 (ms)"),
]
_SHARES = {"first_line_em", "span_em", "pass_rate", "empty_share"}


def _cell(key: str, value: Any) -> str:
    if value is None:
        return "—"
    if key in _SHARES:
        return f"{value:.1%}"
    return f"{value:g}"


def markdown_table(results: dict[str, dict[str, Any]]) -> str:
    names = list(results)
    out = ["| metric | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for key, label in COLUMNS:
        cells = [_cell(key, results[n].get(key)) for n in names]
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def markdown_breakdown(groups: dict[str, dict[str, dict[str, Any]]], title: str) -> str:
    """One row per group: tasks, then first-line / whole-span exact match (and pass rate)."""
    if not groups:
        return ""
    systems = list(next(iter(groups.values())))
    out = [
        f"| {title} | tasks | " + " | ".join(systems) + " |",
        "|---|---|" + "---|" * len(systems),
    ]
    for group, per in groups.items():
        n = next(iter(per.values()))["tasks"]
        cells = []
        for s in systems:
            r = per[s]
            first, span = _cell("first_line_em", r["first_line_em"]), _cell("span_em", r["span_em"])
            cell = f"{first} / {span}"
            if r["exec_tasks"]:
                cell += f" (pass {_cell('pass_rate', r['pass_rate'])})"
            cells.append(cell)
        out.append(f"| {group} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(out)
