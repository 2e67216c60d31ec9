"""bench/block_report.py: the block counted per server of a trace, and the reads two systems
showed differently at the same state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import block_report

JOB = "{} ghostfim.session keystroke slot 1{}: 120 prompt tokens, 119 reused, 1 new, eos, 9 ms"
TRACE = "\n".join(
    [
        "1.0 ghostfim.session keystroke slot 1: 9 prompt tokens, 0 reused, 9 new",  # before load
        "2.0 ghostfim.loading prefill cost: 27.0 ms + 3.90 ms/token; keystroke windows 120/320",
        JOB.format(3.0, " narrow"),
        JOB.format(4.0, ""),
        "4.1 ghostfim.session definitions: 240 tokens: a.py:f",
        "5.0 ghostfim.session full slot 0: 900 prompt tokens, 0 reused, 900 new, eos, 3 s",
        "5.1 ghostfim.session definitions: 300 tokens: a.py:f",
        "6.0 ghostfim.loading prefill cost: 27.0 ms + 3.90 ms/token; keystroke windows 120/320",
        JOB.format(7.0, " narrow"),
    ]
)


def read(trace: str, index: int, shown: str, decision: str, accepted: str, rest: str) -> dict:
    return {
        "trace": trace,
        "index": index,
        "shown": shown,
        "decision": decision,
        "accepted": accepted,
        "rest_of_line": rest,
    }


def test_keystroke_jobs_and_their_block_are_counted_per_server() -> None:
    servers = block_report.server_jobs(TRACE)
    assert [[(j["mode"], j["narrow"], j["block"]) for j in s] for s in servers] == [
        [("keystroke", True, 0), ("keystroke", False, 240), ("full", False, 300)],
        [("keystroke", True, 0)],
    ]
    assert block_report.jobs_report(servers) == [
        "server 0: 2 keystroke jobs, 1 held the block (50%, median 240 tokens), 1 narrow",
        "server 1: 1 keystroke jobs, 0 held the block (0%, median 0 tokens), 1 narrow",
    ]


def test_the_replay_report_lists_only_what_differs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    same = read("a.py:3", 0, "return x", "full", "return x", "return x")
    data = {
        "users": ["tab"],
        "replay_picks": ["a.py:3", "b.py:9"],
        "replay": {
            "on/tab": {"reads": [same, read("b.py:9", 4, "foo(", "refuse", "", "bar()")]},
            "off/tab": {"reads": [same, read("b.py:9", 4, "bar()", "full", "bar()", "bar()")]},
        },
    }
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    trace = tmp_path / "trace.log"
    trace.write_text(TRACE)
    assert block_report.main(["--trace", str(trace), "--replay", str(path)]) == 0
    out = capsys.readouterr().out
    assert "tab user: 2 reads (on), 2 (off); 1 differ" in out
    assert "b.py:9 @4: 'foo(' refuse / 'bar()' full | 'bar()'" in out
    assert "a.py:3 @0" not in out
    assert "accepted characters differ in 1 of 2\n  b.py:9: 0 (on) / 5 (off)" in out
