"""Calibrate the confidence filter: the token probability below which a suggestion is cut.

    python -m bench.calibrate_filter collect [--model small]
        [--out bench/results/filter-calibration.jsonl]
    python -m bench.calibrate_filter choose [bench/results/filter-calibration.jsonl]
    python -m bench.calibrate_filter places [bench/results/filter-calibration.jsonl]
    python -m bench.calibrate_filter give-up [bench/results/filter-calibration.jsonl]

`collect` types lines of real files (bench/traces.py, other lines than the replay's: another
seed and more files) into the real model in one process, keystroke by keystroke, with the KV
cache warm as in the server, and at every state the accepting user would read (the next
keystroke comes at least the reaction time later: a pause) it records the suggestion the
server would show with the filter off: its raw text, each token's probability and where its
text ends, and the shown (cleaned) text for every cut point. That file is committed: it is
what the thresholds were chosen on, and tests/unit/bench/test_calibration.py checks the
choice against it.

`choose` replays that record for each candidate threshold: the cut suggestion (or nothing,
when even its first word is unsure), what a Tab-only user and a user who also takes words
(bench/accepting_user.py) would take of it, and what they would refuse. The threshold kept is
the one that saves a Tab-only user the most keystrokes while the words user loses at most
MAX_LOST_SHARE of the characters they would have accepted with the filter off.

`give-up` chooses where the engine stops generating a suggestion (engine/service/filter.py
GIVE_UP_BELOW): the most tokens left ungenerated while what the users take of the suggestions,
from their start and typed into, stays within GIVE_UP_MAX_LOST.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.accepting_user import decide, keystrokes_saved
from bench.traces import THINK_RATES, Trace, make_trace
from ghostfim.engine.service.suggestions import shown_part
from ghostfim.engine.text.confidence import Confidence, ConfidenceCut

DEFAULT_DATASET = Path(__file__).resolve().parent / "results" / "filter-calibration.jsonl"
REACTION_MS = 300.0  # the accepting user's reaction time (bench/user_replay.py's default)
MAX_LOST_SHARE = 0.05  # of the keystrokes a words user saves with the filter off, at most
TAB_GAIN = 1.3  # the keystrokes a Tab-only user saves, at least, against the filter off
# The rule is chosen with this much to spare on the words user: other lines than these.
MARGIN = 0.02
CALIBRATION_SEED = 11  # the replay uses seed 7: these are other lines


# --- collect ------------------------------------------------------------------------------
def calibration_sources() -> list[tuple[str, Path]]:
    """Real files this project did not write (more of them than the replay's)."""
    import glob
    import os

    site = Path(next(p for p in sys.path if p.endswith("site-packages")))
    patterns = [
        ("python", str(site / "pygls" / "server.py")),
        ("python", str(site / "cachetools" / "func.py")),
        ("python", str(site / "httpx" / "_client.py")),
        ("python", str(site / "lsprotocol" / "_hooks.py")),
        ("javascript", "/usr/lib/node_modules/npm/lib/commands/*.js"),
        ("javascript", "/usr/lib/node_modules/npm/lib/npm.js"),
        ("lua", "/usr/share/nvim/runtime/lua/vim/lsp/util.lua"),
        ("c", os.path.expanduser("~/.cache/ghostfim/bench/llama.cpp/ggml/src/ggml-quants.c")),
    ]
    found = []
    for language, pattern in patterns:
        matches = sorted(glob.glob(pattern))
        if matches:
            found.append((language, Path(matches[len(matches) // 2])))
    return found


def collect(model: str, out: Path, lines_per_file: int) -> int:
    from ghostfim.engine.backend import CompletionRequest
    from ghostfim.engine.local.loading import load_session
    from ghostfim.engine.text.cursor import CursorContext
    from ghostfim.engine.text.place import place_of
    from ghostfim.engine.text.postprocess import clean_suggestion

    traces: list[Trace] = []
    for language, path in calibration_sources():
        trace = make_trace(
            path,
            language,
            lines_per_file=lines_per_file,
            seed=CALIBRATION_SEED,
            think_rate=THINK_RATES["thinking"],
        )
        if trace is not None:
            traces.append(trace)
    session = load_session(model, progress=False)
    started = time.perf_counter()
    written = 0
    with out.open("w", encoding="utf-8") as f:
        for trace in traces:
            for index, k in enumerate(trace.keystrokes):
                prefix, suffix = k.text[: k.offset], k.text[k.offset :]
                read = k.gap_ms >= REACTION_MS
                request = CompletionRequest(
                    prefix=prefix,
                    suffix=suffix,
                    doc_id=trace.name,
                    cursor_line=k.line,
                    mode="keystroke",
                    max_tokens=64 if read else 0,
                )
                c = session.complete(request)
                if not read:
                    continue
                ctx = CursorContext.around(prefix, suffix)
                ends = [min(e, len(c.raw_text)) for e in c.token_ends]
                shown_at = [""] + [clean_suggestion(c.raw_text[:e], ctx) for e in ends]
                place = place_of(trace.language, prefix, suffix)
                row = {
                    "trace": trace.name,
                    "index": index,
                    "place": place.where,
                    "rest_of_line": k.rest_of_line,
                    "raw": c.raw_text,
                    "shown": c.text,
                    "probs": [round(p, 4) for p in c.token_probs],
                    "ends": ends,
                    "shown_at": shown_at,
                    "stop": c.stop_reason,
                }
                f.write(json.dumps(row) + "\n")
                written += 1
    session.close()
    sys.stderr.write(
        f"{written} read states from {len(traces)} traces in {time.perf_counter() - started:.0f} s"
        f" -> {out}\n"
    )
    return written


# --- choose -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Outcome:
    """What the two users do with the suggestions of one rule, summed over the record."""

    rule: Rule | None  # None: the filter off
    shown: int  # suggestions on screen (non-empty)
    tab_saved: int
    tab_accepts: int
    tab_refused: int
    words_chars: int
    words_saved: int
    words_refused: int

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


Rule = tuple[float, float, float]  # refusal cost, sharpness, first word's floor
OFF: Rule | None = None


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def rule_for(row: dict[str, Any], rule: Rule) -> Confidence:
    """The engine's rule as the filter builds it for an automatic request at the row's place."""
    position, _, after = str(row.get("place", "end|word")).partition("|")
    return Confidence(
        *rule,
        drop_unsure_start=True,
        drop_line_break_start=position == "end" and after != "indent",
    )


def cut_point(row: dict[str, Any], rule: Rule) -> int | None:
    """Tokens kept (None: dropped): the engine's own rule (engine/text/confidence.py) applied
    to the recorded probabilities, token by token as the service applies it."""
    cut = ConfidenceCut(rule_for(row, rule))
    raw, ends = row["raw"], row["ends"]
    start = 0
    for i, (prob, end) in enumerate(zip(row["probs"], ends, strict=True)):
        verdict = cut.judge(raw[:start], raw[start:end], prob)
        if verdict == "cut":
            return i
        if verdict == "drop":
            return None
        start = end
    return len(ends) if cut.final(raw[:start]) else None


def shown_under(row: dict[str, Any], rule: Rule | None) -> str:
    if rule is None:
        return str(row["shown"])
    k = cut_point(row, rule)
    return "" if k is None else str(row["shown_at"][k])


def evaluate(rows: Iterable[dict[str, Any]], rule: Rule | None) -> Outcome:
    shown = tab_saved = tab_accepts = tab_refused = 0
    words_chars = words_saved = words_refused = 0
    for row in rows:
        text = shown_under(row, rule)
        if not text:
            continue
        shown += 1
        tab = decide("tab", text, row["rest_of_line"])
        words = decide("words", text, row["rest_of_line"])
        if tab.accepted:
            tab_accepts += 1
            tab_saved += keystrokes_saved(tab.chars, tab.keys)
        else:
            tab_refused += 1
        if words.accepted:
            words_chars += words.chars
            words_saved += keystrokes_saved(words.chars, words.keys)
        else:
            words_refused += 1
    return Outcome(
        rule,
        shown,
        tab_saved,
        tab_accepts,
        tab_refused,
        words_chars,
        words_saved,
        words_refused,
    )


GRID: list[Rule] = [
    (cost, sharpness, first)
    for cost in (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
    for sharpness in (0.25, 0.35, 0.5, 0.75, 1.0)
    for first in (0.0, 0.1, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5)
]


def choose(rows: Sequence[dict[str, Any]], grid: Sequence[Rule] = GRID) -> Outcome:
    """Of the rules that keep a words user at 95% (and MARGIN) of the keystrokes they save with
    the filter off and save a Tab user 1.3x as many, the one with the fewest refusals (then the most
    saved); when none saves the Tab user that much, the one that saves them most."""
    off = evaluate(rows, OFF)
    keeps_words = [
        o
        for o in (evaluate(rows, t) for t in grid)
        if o.words_saved >= (1 - MAX_LOST_SHARE + MARGIN) * off.words_saved
    ]
    gains = [o for o in keeps_words if o.tab_saved >= TAB_GAIN * off.tab_saved]
    if gains:
        return min(gains, key=lambda o: (o.tab_refused, -o.words_saved, -o.tab_saved))
    return max(keeps_words, key=lambda o: (o.tab_saved, -o.tab_refused))


# --- give up: where generating a suggestion stops being worth it ---------------------------
GIVE_UP_GRID = (0.0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3)
GIVE_UP_MAX_LOST = 0.0  # of the keystrokes either user saves: none lost on the record


@dataclass(frozen=True)
class GiveUp:
    """What generating a suggestion only while the model's chance of it stays above `below`
    keeps: the tokens generated, and the keystrokes the users save, reading it from its start
    and from every point of it a user could have typed to (the text so far is what they type)."""

    below: float
    tokens: int
    tab_saved: int
    words_saved: int

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def tokens_before_giving_up(probs: Sequence[float], below: float) -> int:
    """How many tokens the engine generates (engine/local/session.py `decode_n_tokens`): it
    stops after the token whose probability takes the running product under `below`."""
    chance = 1.0
    for i, prob in enumerate(probs):
        chance *= prob
        if chance < below:
            return i + 1
    return len(probs)


def evaluate_give_up(rows: Iterable[dict[str, Any]], below: float, rule: Rule) -> GiveUp:
    """The engine's own rule (engine/service/suggestions.py `shown_part`) on the recorded text
    as far as it would be generated, at the suggestion's start and at every token boundary the
    user's own text passes through (as the server shows it to a user typing into it). Raw
    text: the cleaning the engine adds is left out on both sides of the comparison."""
    tokens = tab_saved = words_saved = 0
    for row in rows:
        n = tokens_before_giving_up(row["probs"], below)
        tokens += n
        if n == 0:
            continue
        text = row["raw"][: row["ends"][n - 1]]
        marks = tuple(zip(row["ends"][:n], row["probs"][:n], strict=True))
        truth = row["rest_of_line"]
        confidence = rule_for(row, rule)
        for typed_to in (0, *row["ends"][: n - 1]):
            typed = text[:typed_to]
            if not truth.startswith(typed):
                break
            shown = shown_part(text, marks, confidence, typed)
            if shown:
                tab_saved += saved_by("tab", shown, truth[typed_to:])
                words_saved += saved_by("words", shown, truth[typed_to:])
    return GiveUp(below, tokens, tab_saved, words_saved)


def saved_by(user: str, shown: str, rest_of_line: str) -> int:
    """The keystrokes `user` saves on reading `shown` (0 when they refuse it)."""
    d = decide(user, shown, rest_of_line)
    return keystrokes_saved(d.chars, d.keys) if d.accepted else 0


def give_up_outcomes(
    rows: Sequence[dict[str, Any]], rule: Rule, grid: Sequence[float] = GIVE_UP_GRID
) -> list[GiveUp]:
    """Each point of `grid`, and first (if the grid lacks it) never giving up."""
    points = grid if 0.0 in grid else (0.0, *grid)
    return [evaluate_give_up(rows, below, rule) for below in points]


def pick_give_up(outcomes: Sequence[GiveUp]) -> GiveUp:
    """The point that generates the fewest tokens while both users keep all but
    GIVE_UP_MAX_LOST of the keystrokes they save when every suggestion is generated whole."""
    whole = next(o for o in outcomes if o.below == 0.0)
    keeps = [
        o
        for o in outcomes
        if o.tab_saved >= (1 - GIVE_UP_MAX_LOST) * whole.tab_saved
        and o.words_saved >= (1 - GIVE_UP_MAX_LOST) * whole.words_saved
    ]
    return min(keeps, key=lambda o: (o.tokens, -o.below))


def choose_give_up(
    rows: Sequence[dict[str, Any]], rule: Rule, grid: Sequence[float] = GIVE_UP_GRID
) -> GiveUp:
    return pick_give_up(give_up_outcomes(rows, rule, grid))


def give_up_report(rows: Sequence[dict[str, Any]], rule: Rule, outcomes: Sequence[GiveUp]) -> str:
    whole = next(o for o in outcomes if o.below == 0.0)
    chosen = pick_give_up(outcomes)
    lines = [
        f"{len(rows)} read states, rule {rule}",
        "| give up below | tokens generated | Tab saved | words saved |",
        "|---|---|---|---|",
    ]
    for o in outcomes:
        mark = " (chosen)" if o is chosen else ""
        lines.append(
            f"| {o.below:g}{mark} | {o.tokens} ({o.tokens / whole.tokens:.0%}) "
            f"| {o.tab_saved} ({o.tab_saved / whole.tab_saved:.3f}x) "
            f"| {o.words_saved} ({o.words_saved / whole.words_saved:.3f}x) |"
        )
    return "\n".join(lines)


def report(rows: Sequence[dict[str, Any]]) -> str:
    off = evaluate(rows, OFF)
    best = choose(rows)

    def line(name: str, o: Outcome) -> str:
        return (
            f"{name:<22} {o.shown:5d}  {o.tab_saved:9d} ({o.tab_saved / off.tab_saved:4.2f}x)  "
            f"{o.tab_refused:5d} ({o.tab_refused / off.tab_refused:4.2f}x)  "
            f"{o.words_saved:9d} ({o.words_saved / off.words_saved:4.2f}x)"
        )

    lines = [
        f"{len(rows)} read states",
        f"{'rule':<22} shown  tab saved          refused         words saved",
        line("off", off),
        line("chosen " + str(best.rule), best),
    ]
    for t in ((0.0, 0.0, 0.0), (1e9, 1.0, 1.0)):  # nothing cut; everything cut
        lines.append(line("extreme " + str(t), evaluate(rows, t)))
    return "\n".join(lines)


def by_place(rows: Sequence[dict[str, Any]], rule: Rule) -> str:
    """A Markdown table: per kind of place, what `off` and `rule` show and a Tab user takes."""
    places: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        places.setdefault(str(row.get("place", "?")), []).append(row)
    lines = [
        "| place (position, after) | read states | off: Tab accepts / refused "
        "| rule: shown / Tab accepts / refused |",
        "|---|---|---|---|",
    ]
    for place, group in sorted(places.items(), key=lambda kv: -len(kv[1])):
        o, r = evaluate(group, OFF), evaluate(group, rule)
        lines.append(
            f"| {place} | {len(group)} | {o.tab_accepts} / {o.tab_refused} "
            f"| {r.shown} / {r.tab_accepts} / {r.tab_refused} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.calibrate_filter")
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--model", default="small")
    c.add_argument("--out", type=Path, default=DEFAULT_DATASET)
    c.add_argument("--lines", type=int, default=8, help="lines typed per file")
    ch = sub.add_parser("choose")
    ch.add_argument("dataset", type=Path, nargs="?", default=DEFAULT_DATASET)
    pl = sub.add_parser("places", help="the chosen rule's outcome by kind of place")
    pl.add_argument("dataset", type=Path, nargs="?", default=DEFAULT_DATASET)
    gu = sub.add_parser("give-up", help="where the engine stops generating a suggestion")
    gu.add_argument("dataset", type=Path, nargs="?", default=DEFAULT_DATASET)
    args = parser.parse_args(argv)
    if args.command == "collect":
        collect(args.model, args.out, args.lines)
        return 0
    rows = load(args.dataset)
    if args.command == "places":
        print(by_place(rows, choose(rows).rule or OFF))
        return 0
    if args.command == "give-up":
        rule = choose(rows).rule
        assert rule is not None  # the grid holds no "off"
        outcomes = give_up_outcomes(rows, rule)
        print(give_up_report(rows, rule, outcomes))
        print(json.dumps(pick_give_up(outcomes).as_dict()))
        return 0
    print(report(rows))
    print(json.dumps(choose(rows).as_dict()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
