"""bench/pool_accepting.py: sums over runs of either replay benchmark, divided by all their
characters (a per-100 figure is not averaged over runs of different lengths)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.pool_accepting import pool


def summary(chars: int, saved_per_100: float, accepts: int) -> dict[str, object]:
    return {
        "user": "tab",
        "chars_written": chars,
        "keystrokes_saved_per_100": saved_per_100,
        "refused": 2,
        "cpu_s": 10.0,
        "accepts": accepts,
        "reads": accepts + 2,
    }


def test_runs_of_both_benchmarks_pool_by_characters(tmp_path: Path) -> None:
    replay = tmp_path / "replay.json"  # bench/replay.py
    replay.write_text(json.dumps({"results": {"on/tab": summary(100, 50.0, 5)}}))
    workspace = tmp_path / "workspace.json"  # bench/workspace_bench.py
    workspace.write_text(
        json.dumps({"replay": {"on/tab": {"summary": summary(300, 10.0, 3), "records": []}}})
    )
    [(name, p)] = pool([replay, workspace]).items()
    assert name == "on/tab" and (p.runs, p.chars, p.accepts) == (2, 400, 8)
    assert p.per_100(p.saved) == 20.0  # (50 + 30) saved over 400 characters, not (50 + 10) / 2
    assert p.per_100(p.refused) == 1.0


def test_a_file_of_several_runs_pools_each(tmp_path: Path) -> None:
    """bench/results/ keeps a multi-seed run as one file, its reports under `runs` (a list,
    or a dict by seed)."""
    one = {"results": {"on/tab": summary(100, 50.0, 5)}}
    two = {"results": {"on/tab": summary(300, 10.0, 3)}}
    as_list, by_seed = tmp_path / "list.json", tmp_path / "seeds.json"
    as_list.write_text(json.dumps({"command": "...", "runs": [one, two]}))
    by_seed.write_text(json.dumps({"command": "...", "runs": {"7": one, "11": two}}))
    for path in (as_list, by_seed):
        [(_, p)] = pool([path]).items()
        assert (p.runs, p.chars, p.accepts) == (2, 400, 8) and p.per_100(p.saved) == 20.0
