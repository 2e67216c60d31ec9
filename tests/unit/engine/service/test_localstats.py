"""The local statistics file: bounded, off when switched off, readable after damage, private,
and shared by several servers writing at once without losing what each wrote."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
import time
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path

import pytest
from filelock import FileLock

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


# --- private, bounded, and shared by several servers (issue 28) ---------------------------------
def outcome(language: str = "python", seq: int = 7) -> Outcome:
    return Outcome("accepted", Place(language, "end", "word"), seq, seq, 55.5, False)


def lines_in(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")
def test_the_file_and_its_lock_are_private_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)  # the worst umask: everything readable and writable by everyone
    try:
        store = LocalStats(tmp_path / "state" / "a.jsonl")
        store.record(OUTCOME)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "state" / "a.jsonl").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "state" / "a.jsonl.lock").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "state").stat().st_mode) == 0o700


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")
def test_a_file_an_older_version_left_readable_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text("")
    path.chmod(0o644)
    LocalStats(path).record(OUTCOME)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_every_string_field_is_bounded_written_and_read(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    store = LocalStats(path)
    store.record(outcome(language="x" * 100_000))
    assert len(path.read_bytes()) < 300  # the language id did not go in whole
    (r,) = store.records()
    assert r.language == "x" * localstats.MAX_FIELD
    # A line written by hand (or by an older version, under MAX_LINE): fields cut on reading too.
    with path.open("a") as f:
        f.write(json.dumps({"t": 1, "lang": "y" * 200, "pos": "p" * 200, "after": "a" * 200,
                            "kind": "k" * 200}) + "\n")  # fmt: skip
    last = store.records()[-1]
    assert {len(last.language), len(last.position), len(last.after), len(last.kind)} == {
        localstats.MAX_FIELD
    }


def test_a_line_longer_than_any_record_is_skipped_unread(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    store = LocalStats(path)
    store.record(OUTCOME, now=1.0)
    with path.open("a") as f:
        f.write(json.dumps({"t": 2, "lang": "z" * 50_000, "pos": "end", "after": "word",
                            "kind": "accepted"}) + "\n")  # fmt: skip
    store.record(OUTCOME, now=3.0)
    assert [r.time for r in store.records()] == [1.0, 3.0]


def test_a_line_cut_short_by_a_dead_writer_is_skipped_and_the_next_starts_anew(
    tmp_path: Path,
) -> None:
    path = tmp_path / "a.jsonl"
    LocalStats(path).record(OUTCOME, now=1.0)
    with path.open("a") as f:
        f.write('{"t": 2.0, "lang": "pyt')  # a writer killed in the middle of its line
    store = LocalStats(path)  # another server, or this one restarted
    store.record(OUTCOME, now=3.0)
    store.record(OUTCOME, now=4.0)
    assert [r.time for r in store.records()] == [1.0, 3.0, 4.0]
    assert len(lines_in(path)) == 4  # the cut line stays alone on its line


def test_compaction_writes_a_temporary_file_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(localstats, "MAX_RECORDS", 10)
    path = tmp_path / "a.jsonl"
    (tmp_path / "a.jsonl.tmp").mkdir()  # the one fixed name every server used to share
    (tmp_path / "a.jsonl.x1y2.tmp").write_text("left by a compaction that died\n")
    store = LocalStats(path)
    for i in range(25):
        store.record(OUTCOME, now=float(i))
    assert not store._broken
    assert [r.time for r in store.records()][-1] == 24.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl", "a.jsonl.lock", "a.jsonl.tmp"]


def test_each_writer_counts_the_lines_the_others_appended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two servers taking turns: the file never holds more than MAX_RECORDS lines, although
    # each server wrote only half of them.
    monkeypatch.setattr(localstats, "MAX_RECORDS", 10)
    path = tmp_path / "a.jsonl"
    a, b = LocalStats(path), LocalStats(path)
    for i in range(60):
        (a if i % 2 else b).record(OUTCOME, now=float(i))
        assert len(lines_in(path)) <= 10, i
    assert a.compacted_away + b.compacted_away + len(lines_in(path)) == 60


def test_while_another_process_holds_the_lock_outcomes_wait_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(localstats, "LOCK_WAIT_S", 0.5)
    monkeypatch.setattr(localstats, "MAX_PENDING", 3)
    path = tmp_path / "a.jsonl"
    store = LocalStats(path)
    store.record(OUTCOME, now=1.0)
    holder = multiprocessing.get_context("spawn")
    held, release = holder.Event(), holder.Event()
    stuck = holder.Process(target=_hold_lock, args=(str(path) + ".lock", held, release))
    stuck.start()
    try:
        assert held.wait(30)
        started = time.perf_counter()
        store.record(OUTCOME, now=2.0)  # waits LOCK_WAIT_S, then keeps it
        waited = time.perf_counter() - started
        for t in (3.0, 4.0, 5.0):
            store.record(OUTCOME, now=t)  # no wait: the holder is stuck
        # Had each waited too, the three would take 1.5 s: a loaded machine still does them
        # well under one wait.
        assert time.perf_counter() - started - waited < 0.5
        assert 0.4 < waited < 3.0, waited
        assert [r.time for r in store.records()] == [1.0]  # a reader waits once, reads anyway
    finally:
        release.set()
        stuck.join(30)
    assert store.dropped == 1  # 2.0: past MAX_PENDING, the oldest waiting goes
    store.record(OUTCOME, now=6.0)
    assert [r.time for r in store.records()] == [1.0, 3.0, 4.0, 5.0, 6.0]


def _hold_lock(lock_path: str, held: Event, release: Event) -> None:
    """A process stopped in the middle of a write: it holds the lock until told."""
    with FileLock(lock_path):
        held.set()
        release.wait(30)


Result = tuple[int, int, int, int, bool]  # writer, compacted away, dropped, pending, broken


def _writer(
    path: str, writer: int, count: int, max_records: int, go: Event, out: Queue[Result]
) -> None:
    """One server's statistics, writing `count` outcomes as fast as it can."""
    localstats.MAX_RECORDS = max_records
    store = LocalStats(Path(path))
    go.wait(60)
    for seq in range(count):
        store.record(outcome(language=f"w{writer}", seq=seq), now=float(seq))
    out.put((writer, store.compacted_away, store.dropped, len(store._pending), store._broken))


@pytest.mark.parametrize("max_records", [40, 1_000_000], ids=["compacting", "appending"])
def test_servers_writing_at_once_lose_nothing(tmp_path: Path, max_records: int) -> None:
    """Three processes append to one file at once, compacting often (MAX_RECORDS 40: about
    fifty compactions each) or never. Every line parses, and every outcome is either in
    the file or was removed by a compaction as the oldest: none lost to another writer."""
    writers, count = 3, 1000
    path = tmp_path / "a.jsonl"
    ctx = multiprocessing.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(str(path), w, count, max_records, go, out))
        for w in range(writers)
    ]
    for p in procs:
        p.start()
    go.set()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    lines = lines_in(path)
    records = LocalStats(path).records()
    assert len(records) == len(lines), "a line that does not parse"
    assert len(lines) <= max_records
    for _, _, dropped, pending, broken in results:
        assert (dropped, pending, broken) == (0, 0, False)
    assert len(lines) + sum(r[1] for r in results) == writers * count
    for w in range(writers):
        # Appends are in order and a compaction keeps the newest: each writer's records in
        # the file are the last ones it wrote, none missing between them.
        mine = [r.chars for r in records if r.language == f"w{w}"]
        assert mine == list(range(count - len(mine), count)), (w, mine[:5], len(mine))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl", "a.jsonl.lock"]
