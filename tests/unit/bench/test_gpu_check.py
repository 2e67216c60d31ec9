"""bench/gpu/check.py: the GPU run's verdicts from a replay's JSON and the server's trace."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

CHECK = Path(__file__).resolve().parents[3] / "bench" / "gpu" / "check.py"


def load_check():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("gpu_check", CHECK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


JOB_LINE = (
    "12:00:0{} ghostfim.session DEBUG {} slot {}: {} prompt tokens, {} reused, {} new, "
    "2 generated, eos, 9.0 ms"
)
BLOCK_LINE = "12:00:0{} ghostfim.session DEBUG definitions: {} tokens: a.py:foo, b.py:Bar"
TRACE = "\n".join(
    [
        JOB_LINE.format(1, "keystroke", "1", 900, 899, 1),
        BLOCK_LINE.format(1, 212),
        JOB_LINE.format(2, "keystroke", "1", 901, 900, 1),
        JOB_LINE.format(3, "keystroke", "2 narrow", 300, 0, 300),
        BLOCK_LINE.format(3, 180),
        JOB_LINE.format(4, "full", "3", 1400, 0, 1400),
        BLOCK_LINE.format(4, 400),
    ]
)


def write_report(tmp_path: Path, system: str, p50: float, p95: float) -> Path:
    report = {
        "model": "m.gguf",
        "results": {system: {"states": 3, "model_requests": 3, "ttft_p50": p50, "ttft_p95": p95}},
        "records": {system: [{"suffix_cut": False}, {"suffix_cut": False}]},
    }
    path = tmp_path / "replay.json"
    path.write_text(json.dumps(report))
    return path


def test_the_block_is_counted_per_keystroke_prompt(tmp_path: Path) -> None:
    trace = tmp_path / "trace.log"
    trace.write_text(TRACE)
    jobs = load_check().trace_jobs(trace)
    assert [(j["mode"], j["narrow"], j["block"]) for j in jobs] == [
        ("keystroke", False, 212),
        ("keystroke", False, 0),
        ("keystroke", True, 180),
        ("full", False, 400),
    ]


def test_a_workspace_replay_is_judged_by_its_system(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "trace.log"
    trace.write_text(TRACE)
    report = write_report(tmp_path, "ghostfim-workspace", 9.0, 30.0)
    check = load_check()
    assert check.main([str(report), str(trace), "--system", "ghostfim-workspace"]) == 0
    out = capsys.readouterr().out
    assert "[ok] TTFT" in out
    assert "[MISS] keystroke windows: 3 keystroke prompts, 1 in the narrow window" in out
    assert "workspace block: in 2 of 3 keystroke prompts, median 196 tokens" in out
    assert "some targets MISSED" in out
    with pytest.raises(KeyError):
        check.main([str(report), str(trace)])  # no "ghostfim" system in this replay
