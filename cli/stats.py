"""`ghostfim stats [--json]`: what this machine's acceptance statistics say.

Reads the local file (engine/service/localstats.py; never sent anywhere) and prints the accept
rate, the characters accepted and the refusals, overall, by language and by the kind of place
the cursor was at, with the time to ghost text of the suggestions that were taken.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ghostfim.engine.service.localstats import LocalStats, Record
from ghostfim.engine.timings import percentile

POSITIONS = {"end": "end of line", "closers": "before closing brackets", "mid": "mid-line"}
AFTER = {
    "indent": "at the indentation",
    "word": "after a word",
    "space": "after a space",
    "dot": "after a dot",
    "open": "after an opening bracket or comma",
    "operator": "after an operator",
    "colon": "after a colon",
    "quote": "after a quote",
    "other": "after other punctuation",
}


@dataclass
class Tally:
    accepted: int = 0
    partial: int = 0
    refused: int = 0
    chars: int = 0
    ttgt_taken: list[float] = field(default_factory=list)

    def add(self, r: Record) -> None:
        if r.kind == "accepted":
            self.accepted += 1
        elif r.kind == "partial":
            self.partial += 1
        else:
            self.refused += 1
        self.chars += r.chars
        if r.kind != "refused":
            self.ttgt_taken.append(r.ttgt_ms)

    @property
    def events(self) -> int:
        return self.accepted + self.partial + self.refused

    @property
    def accept_rate(self) -> float | None:
        return None if self.events == 0 else (self.accepted + self.partial) / self.events

    def as_json(self) -> dict[str, Any]:
        taken = self.ttgt_taken
        return {
            "accepted": self.accepted,
            "partial": self.partial,
            "refused": self.refused,
            "acceptRate": None if self.accept_rate is None else round(self.accept_rate, 3),
            "charsAccepted": self.chars,
            "ttgtAcceptedP50": round(percentile(taken, 50), 1) if taken else None,
            "ttgtAcceptedP95": round(percentile(taken, 95), 1) if taken else None,
        }


def tally(records: Iterable[Record], key: Callable[[Record], str]) -> dict[str, Tally]:
    groups: dict[str, Tally] = {}
    for r in records:
        groups.setdefault(key(r), Tally()).add(r)
    return dict(sorted(groups.items(), key=lambda kv: -kv[1].events))


def place_name(r: Record) -> str:
    return f"{POSITIONS.get(r.position, r.position)}, {AFTER.get(r.after, r.after)}"


def summary(records: list[Record]) -> dict[str, Any]:
    overall = Tally()
    for r in records:
        overall.add(r)
    return {
        "records": len(records),
        "since": records[0].time if records else None,
        "overall": overall.as_json(),
        "byLanguage": {k: v.as_json() for k, v in tally(records, lambda r: r.language).items()},
        "byPlace": {k: v.as_json() for k, v in tally(records, place_name).items()},
    }


def _row(name: str, t: dict[str, Any]) -> str:
    rate = "-" if t["acceptRate"] is None else f"{100 * t['acceptRate']:.0f}%"
    ttgt = "-" if t["ttgtAcceptedP50"] is None else f"{t['ttgtAcceptedP50']:.0f} ms"
    return (
        f"  {name:<52} {rate:>5} {t['accepted']:>8} {t['partial']:>7} {t['refused']:>7} "
        f"{t['charsAccepted']:>7} {ttgt:>9}"
    )


def render(s: dict[str, Any], path: str) -> str:
    if not s["records"]:
        return (
            f"No acceptance statistics yet ({path}).\n"
            "They are kept while you use ghostfim with the setting acceptanceStats on."
        )
    since = time.strftime("%Y-%m-%d", time.localtime(s["since"]))
    o = s["overall"]
    rate = "-" if o["acceptRate"] is None else f"{100 * o['acceptRate']:.0f}%"
    header = (
        f"  {'':<52} {'rate':>5} {'accepted':>8} {'partial':>7} {'refused':>7} "
        f"{'chars':>7} {'ttgt p50':>9}"
    )
    lines = [
        f"ghostfim acceptance statistics, kept only on this machine ({path})",
        f"since {since}: {s['records']} outcomes; accept rate {rate}; "
        f"{o['charsAccepted']} characters written by accepted ghost text; "
        f"{o['refused']} suggestions read and refused",
    ]
    if o["ttgtAcceptedP50"] is not None:
        lines.append(
            f"time to ghost text of the ones taken: p50 {o['ttgtAcceptedP50']:.0f} ms, "
            f"p95 {o['ttgtAcceptedP95']:.0f} ms"
        )
    lines += ["", "by language", header]
    lines += [_row(k or "(unknown)", v) for k, v in s["byLanguage"].items()]
    lines += ["", "by where the cursor was", header]
    lines += [_row(k, v) for k, v in s["byPlace"].items()]
    return "\n".join(lines)


def run_stats(args: argparse.Namespace) -> int:
    store = LocalStats()
    s = summary(store.records())
    if args.json:
        sys.stdout.write(json.dumps({"path": str(store.path), **s}, indent=2) + "\n")
    else:
        sys.stdout.write(render(s, str(store.path)) + "\n")
    return 0
