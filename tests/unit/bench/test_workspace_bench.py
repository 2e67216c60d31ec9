"""bench/workspace_bench.py's pure parts: the sample of picks, the traces built from them, the
scoring of explicit answers, and the on/off ratios (no server, no model)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

import pytest

from bench.accepting_user import Decision
from bench.traces import Keystroke, Record, Trace, new_record
from bench.user_replay import AcceptSignal, Pace, Read, Screen, UserReplay, Walk
from bench.workspace_bench import (
    definitions_of,
    dwell_summary,
    expected_text,
    explicit_summary,
    last_request,
    pick_trace,
    ratio,
    ratio_columns,
    render,
    replay_summary,
    sample_picks,
    score,
)

ORIGINAL = "def f(x):\n    total = helper(x)\n    return total\n\n\ndef g():\n\tpass\n"
PICK = {
    "package": "demo",
    "kind": "cross",
    "file": "demo/mod.py",
    "line": 1,
    "indent": "    ",
    "text": "    total = helper(x)",
    "uses": [["helper", "demo/util.py", "3"]],
}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The pick's file as the corpus leaves it: the line cut back to its indentation."""
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "mod.py").write_text(ORIGINAL.replace("    total = helper(x)", "    "))
    return tmp_path


def test_trace_starts_at_the_cut_line_and_types_the_line_back(workspace: Path) -> None:
    trace = pick_trace(PICK, workspace, seed=3, dwell_ms=2000.0)
    cut = (workspace / "demo" / "mod.py").read_text()
    keys = trace.keystrokes
    assert trace.initial_text == cut
    assert trace.language == "python"
    assert trace.name == "demo/mod.py:2"
    body = "total = helper(x)"
    assert len(keys) == 1 + len(body)
    arrive = keys[0]
    # The cursor arrives at the end of the indentation, without changing the document; the
    # user dwells there, and reads what comes (not a jump: bench/user_replay.py reads it).
    assert not arrive.jump
    assert arrive.edit.text == "" and arrive.edit.start == arrive.edit.end == (1, 4)
    assert (arrive.text, arrive.line, arrive.character) == (cut, 1, 4)
    assert arrive.text[: arrive.offset].endswith("def f(x):\n    ")
    assert arrive.rest_of_line == body
    assert arrive.at_ms == 0.0 and arrive.gap_ms == 2000.0 and keys[1].at_ms == 2000.0
    for i, k in enumerate(keys[1:], start=1):
        assert k.edit.text == body[i - 1] and k.edit.start == (1, 4 + i - 1)
        assert (k.line, k.character) == (1, 4 + i)
        assert k.text == cut[: arrive.offset] + body[:i] + cut[arrive.offset :]
        assert k.text[: k.offset] == cut[: arrive.offset] + body[:i]
        assert k.rest_of_line == body[i:]
        assert k.at_ms > keys[i - 1].at_ms
    assert keys[-1].text == ORIGINAL  # the line is back as it was
    assert keys[-1].gap_ms == 1500.0
    # The same seed gives the same trace; another seed other gaps.
    assert pick_trace(PICK, workspace, seed=3).keystrokes == keys
    assert pick_trace(PICK, workspace, seed=4).keystrokes != keys


def test_an_accept_walks_the_trace_from_any_state(workspace: Path) -> None:
    keys = pick_trace(PICK, workspace, seed=3).keystrokes
    # Accepting at the line's start (state 0) and mid-line lands on the trace's own states.
    steps = Walk(keys).accept(0, ("total", " ="), 2300.0, 110.0)
    assert [index for index, _ in steps] == [5, 7]
    assert steps[-1][1].rest_of_line == " helper(x)"
    steps = Walk(keys).accept(8, ("helper(x)",), 9000.0, 110.0)
    assert steps[-1][0] == len(keys) - 1 and steps[-1][1].text == ORIGINAL


def test_a_pick_not_cut_on_disk_is_refused(workspace: Path) -> None:
    (workspace / "demo" / "mod.py").write_text(ORIGINAL)
    with pytest.raises(ValueError, match="not cut back"):
        pick_trace(PICK, workspace, seed=3)
    with pytest.raises(ValueError, match="indentation"):
        expected_text({**PICK, "text": "total = helper(x)"})


def test_tabs_and_wide_characters_count_in_utf16(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "m.ts").write_text("function g() {\n\t\n}\n")
    pick = {**PICK, "file": "d/m.ts", "indent": "\t", "text": "\tlet s = '😀x';"}
    keys = pick_trace(pick, tmp_path, seed=1).keystrokes
    assert pick_trace(pick, tmp_path, seed=1).language == "typescript"
    assert keys[0].character == 1
    emoji = next(k for k in keys if k.edit.text == "😀")
    after = keys[keys.index(emoji) + 1]
    assert after.edit.start == (1, emoji.character) and emoji.character == emoji.edit.start[1] + 2
    assert keys[-1].text == "function g() {\n\tlet s = '😀x';\n}\n"


def test_scoring_takes_the_first_line_and_its_right_start() -> None:
    assert score("total = helper(x)\n    return total", "total = helper(x)") == {
        "first_line": "total = helper(x)",
        "exact": True,
        "share_right": 1.0,
    }
    assert score("total = helper(x)  ", "total = helper(x)")["exact"]  # trailing spaces
    wrong_tail = score("total = other(x)", "total = helper(x)")
    assert not wrong_tail["exact"]
    assert wrong_tail["share_right"] == round(len("total = ") / len("total = helper(x)"), 4)
    longer = score("total = helper(x) + 1", "total = helper(x)")
    assert not longer["exact"] and longer["share_right"] == 1.0
    assert score("", "total") == {"first_line": "", "exact": False, "share_right": 0.0}
    assert score("\ntotal", "total")["share_right"] == 0.0  # a line break first: nothing right
    assert score("  total", "total")["share_right"] == 0.0  # more indentation is wrong


def test_explicit_summary_per_kind() -> None:
    model = {"source": "model", "ttft_ms": 50.0, "prompt_tokens": 700}
    rows = [
        {"kind": "cross", "exact": True, "share_right": 1.0, "first_line": "a", "latency_ms": 10},
        {"kind": "cross", "exact": False, "share_right": 0.5, "first_line": "b", "latency_ms": 30},
        {"kind": "plain", "exact": False, "share_right": 0.0, "first_line": "", "latency_ms": 20},
        {"kind": "plain", "error": "timeout", "latency_ms": 150000},
    ]
    rows[0].update(model)
    rows[1].update(source="cache", ttft_ms=0.3, prompt_tokens=0)
    s = explicit_summary(rows)
    assert (s["picks_cross"], s["picks_plain"], s["picks_all"]) == (2, 2, 4)
    assert (s["exact_cross"], s["exact_plain"], s["exact_all"]) == (0.5, 0.0, 0.25)
    assert (s["share_right_cross"], s["share_right_plain"]) == (0.75, 0.0)
    assert s["share_right_all"] == 0.375  # a failed request scores nothing, and counts
    assert (s["errors"], s["empty"]) == (1, 1)
    assert (s["latency_p50"], s["latency_p95"]) == (20.0, 30.0)  # answered requests only
    # TTFT and prompt tokens of the model's answers only, not a cache's.
    assert (s["model_answers"], s["ttft_p50"], s["prompt_tokens_mean"]) == (1, 50.0, 700)


def test_replay_summary_per_kind() -> None:
    def read(trace: str, decision: Decision) -> Read:
        return Read(trace, 0, 300.0, "x", "x", decision, None, "")

    reads = [
        read("a.py:1", Decision("full", ("helper(x)",))),
        read("a.py:1", Decision("refuse")),
        read("b.py:9", Decision("words", ("total", " ="))),
    ]
    kinds = {"a.py:1": "cross", "b.py:9": "plain"}
    chars = {"a.py:1": 50, "b.py:9": 50}
    s = replay_summary([], reads, kinds, chars, cpu_s=10.0, rss_mb=None)
    assert s["chars_written"] == 100 and s["accepts"] == 2 and s["reads_per_100"] == 3.0
    assert s["keystrokes_saved_per_100"] == (9 - 1) + (7 - 2)
    assert s["keystrokes_saved_per_100_cross"] == 16.0  # 8 saved of 50 characters
    assert s["keystrokes_saved_per_100_plain"] == 10.0
    assert (s["accept_rate_cross"], s["accept_rate_plain"]) == (0.5, 1.0)
    assert s["cpu_s_per_100"] == 10.0


def test_sample_is_seeded_and_balanced_in_every_prefix() -> None:
    picks = [
        {"package": p, "kind": k, "file": f"{p}/{k}{i}.py", "line": i}
        for p in ("p1", "p2", "p3", "p4", "p5")
        for k in ("cross", "plain")
        for i in range(20)
    ]
    order = sample_picks(picks, 0, 31)
    assert sorted(map(id, order)) == sorted(map(id, picks))  # all of them, once
    assert sample_picks(picks, 0, 31) == order
    assert sample_picks(picks, 0, 32) != order
    assert sample_picks(picks, 7, 31) == order[:7]
    first = order[:10]
    assert Counter(p["package"] for p in first) == {p: 2 for p in ("p1", "p2", "p3", "p4", "p5")}
    assert Counter(p["kind"] for p in first) == {"cross": 5, "plain": 5}
    assert {(p["package"], p["kind"]) for p in first} == {
        (p, k) for p in ("p1", "p2", "p3", "p4", "p5") for k in ("cross", "plain")
    }
    four = order[:4]  # a smoke run: four packages, both kinds
    assert len({p["package"] for p in four}) == 4
    assert Counter(p["kind"] for p in four) == {"cross": 2, "plain": 2}


def test_ratios_on_over_off() -> None:
    assert ratio(3.0, 2.0) == 1.5
    assert ratio(1, 0) is None and ratio(None, 1) is None and ratio(True, 1) is None
    report = {
        "users": ["tab"],
        "explicit": {
            "on": {"summary": {"exact_all": 0.3, "latency_p50": 120.0}},
            "off": {"summary": {"exact_all": 0.2, "latency_p50": 100.0}},
        },
        "replay": {
            "on/tab": {"summary": {"keystrokes_saved_per_100": 12.0}},
            "off/tab": {"summary": {"keystrokes_saved_per_100": 8.0}},
        },
    }
    columns = ratio_columns(report)
    assert columns["explicit"]["exact_all"] == 1.5
    assert columns["explicit"]["latency_p50"] == 1.2
    assert columns["replay, tab user"]["keystrokes_saved_per_100"] == 1.5
    assert columns["replay, tab user"]["ttft_p50"] is None
    assert ratio_columns({"explicit": {"off": report["explicit"]["off"]}}) == {}


def test_definitions_from_status() -> None:
    defs = [{"name": "helper", "file": "demo/util.py"}]
    assert last_request({"workspace": {"state": "ready", "lastRequest": defs}}) == defs
    assert last_request({"lastRequest": {"definitions": 3}}) == {"definitions": 3}
    assert last_request({"state": "ready"}) is None  # a server without workspace context
    assert definitions_of(defs) == 1
    assert definitions_of({"definitions": defs}) == 1
    assert definitions_of({"definitions": 3}) == 3
    assert definitions_of(None) is None and definitions_of(True) is None


def test_render_has_every_part_and_the_ratios() -> None:
    on = {"exact_all": 0.5, "latency_p50": 120.0, "keystrokes_saved_per_100": 12.0}
    off = {"exact_all": 0.25, "latency_p50": 100.0, "keystrokes_saved_per_100": 8.0}
    text = render(
        {
            "users": ["words"],
            "explicit": {"on": {"summary": on}, "off": {"summary": off}},
            "replay": {"on/words": {"summary": on}, "off/words": {"summary": off}},
        }
    )
    assert "| first line exact, all | 50.0% | 25.0% |" in text
    assert "| metric | on/words | off/words |" in text
    assert "| on / off | explicit | replay, words user |" in text
    assert "| first line exact, all | 2.00× | 2.00× |" in text
    assert "| request latency p50 (ms) | 1.20× | 1.20× |" in text
    assert "| TTFT p95 (ms)" not in text.split("## on / off")[1]  # no figure: no row


class DelayedEditor:
    """Shows `text` (default: the rest of the line) `delay_s` after a keystroke."""

    def __init__(self, delay_s: float, text: str | None = None) -> None:
        self.delay_s, self.text = delay_s, text
        self.screen = Screen()
        self.sent: list[int] = []
        self.finished = False

    async def open(self, trace: Trace) -> None:
        pass

    async def keystroke(
        self, trace: Trace, index: int, key: Keystroke, signal: AcceptSignal | None
    ) -> Record | None:
        self.sent.append(index)
        text = key.rest_of_line if self.text is None else self.text
        asyncio.get_running_loop().call_later(
            self.delay_s, lambda: self.screen.show(text, time.perf_counter(), origin=index)
        )
        return new_record(trace, index, key, "")

    async def finish(self) -> None:
        self.finished = True


def _dwell(workspace: Path, editor: DelayedEditor) -> tuple[list[Record], list[Read]]:
    trace = pick_trace(PICK, workspace, seed=3, dwell_ms=300.0)
    replay = UserReplay(trace, editor, "tab", Pace(reaction_ms=50.0))
    return asyncio.run(replay.dwell())


def test_the_dwell_reads_what_comes_before_the_first_keystroke_and_types_nothing(
    workspace: Path,
) -> None:
    editor = DelayedEditor(0.05)
    records, reads = _dwell(workspace, editor)
    assert editor.sent == [0] and editor.finished  # the cursor's arrival only, then closed
    assert len(records) == 1 and records[0]["reads"] == ["full"]
    assert [r.decision.text for r in reads] == ["total = helper(x)"]
    assert 50.0 <= reads[0].after_ms < 300.0

    wrong, late = DelayedEditor(0.05, "total = other(x)"), DelayedEditor(0.28)
    assert [r.decision.kind for r in _dwell(workspace, wrong)[1]] == ["refuse"]
    assert _dwell(workspace, late)[1] == []  # on screen too late to be read in the dwell


def test_dwell_summary_per_kind() -> None:
    def read(trace: str, decision: Decision) -> Read:
        return Read(trace, 0, 900.0, "x", "x", decision, None, "")

    reads = [
        read("a.py:1", Decision("refuse")),
        read("a.py:1", Decision("full", ("helper(x)",))),
        read("b.py:9", Decision("refuse")),
    ]
    records = [
        {"shown_at_ms": 600.0, "prompt_tokens": 100},
        {"shown_at_ms": 1200.0, "prompt_tokens": 220},
        {"shown_at_ms": None, "prompt_tokens": None},
    ]
    kinds = {"a.py:1": "cross", "b.py:9": "plain", "c.py:3": "plain"}
    chars = {"a.py:1": 40, "b.py:9": 30, "c.py:3": 30}
    s = dwell_summary(records, reads, kinds, chars)
    assert (s["picks"], s["reads"], s["accepts_all"], s["saved_all"]) == (3, 3, 1, 8)
    assert s["saved_per_100_all"] == 8.0 and s["saved_per_100_cross"] == 20.0
    assert (s["accepts_plain"], s["saved_per_100_plain"]) == (0, 0.0)
    assert s["shown_share"] == round(2 / 3, 3) and s["prompt_tokens_median"] == 160
    assert (s["shown_p50_ms"], s["shown_p90_ms"]) == (600.0, 1200.0)  # nearest rank


def test_render_has_the_dwell_table() -> None:
    summary = {"picks": 100, "saved_all": 792, "shown_p50_ms": 1172.2}
    text = render({"users": ["tab"], "dwell": {"on/tab": {"summary": summary}}})
    assert "## The dwell after a file opens" in text
    assert "| keystrokes saved at the dwell | 792 |" in text
