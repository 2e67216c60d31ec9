"""The local statistics file: bounded, off when switched off, readable after damage."""

from __future__ import annotations

from pathlib import Path

import pytest

from ghostfim.engine.service import localstats
from ghostfim.engine.service.acceptance import Outcome
from ghostfim.engine.service.localstats import LocalStats
from ghostfim.engine.text.place import Place

OUTCOME = Outcome("accepted", Place("python", "end", "word"), 7, 7, 55.5, False)


def test_records_round_trip(tmp_path: Path) -> None:
    store = LocalStats(tmp_path / "a.jsonl")
    store.record(OUTCOME, now=1000.0)
    (r,) = store.records()
    assert (r.language, r.position, r.after, r.kind, r.chars, r.ttgt_ms) == (
        "python",
        "end",
        "word",
        "accepted",
        7,
        55.5,
    )
    assert r.place_key == "python|end|word"


def test_switched_off_writes_nothing(tmp_path: Path) -> None:
    store = LocalStats(tmp_path / "a.jsonl", enabled=False)
    store.record(OUTCOME)
    assert not (tmp_path / "a.jsonl").exists()


def test_the_file_stays_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(localstats, "MAX_RECORDS", 10)
    store = LocalStats(tmp_path / "a.jsonl")
    for i in range(35):
        store.record(OUTCOME, now=float(i))
    kept = store.records()
    assert len(kept) <= 10 and kept[-1].time == 34.0  # the newest survive


def test_a_damaged_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    store = LocalStats(path)
    store.record(OUTCOME, now=1.0)
    with path.open("a") as f:
        f.write("{not json\n")
    store.record(OUTCOME, now=2.0)
    assert [r.time for r in LocalStats(path).records()] == [1.0, 2.0]


def test_an_unwritable_place_is_told_once_and_never_raises(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    store = LocalStats(blocker / "sub" / "a.jsonl")  # a file where a directory must be
    store.record(OUTCOME)
    store.record(OUTCOME)
    assert store.records() == []


def test_the_default_path_is_the_state_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GHOSTFIM_STATE_DIR", "/tmp/somewhere")
    assert localstats.default_path() == Path("/tmp/somewhere/acceptance.jsonl")
