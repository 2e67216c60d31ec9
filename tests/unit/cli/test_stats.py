"""`ghostfim stats`: the summary of the local statistics file."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from ghostfim.cli.stats import render, run_stats, summary
from ghostfim.engine.service.localstats import Record


def rec(kind: str, lang: str = "python", after: str = "word", chars: int = 0) -> Record:
    return Record(1_700_000_000.0, lang, "end", after, kind, chars, 10, 80.0, False)


def test_summary_by_language_and_place() -> None:
    records = [
        rec("accepted", chars=6),
        rec("partial", chars=3),
        rec("refused"),
        rec("refused", lang="lua", after="dot"),
    ]
    s = summary(records)
    assert s["overall"]["acceptRate"] == 0.5 and s["overall"]["charsAccepted"] == 9
    assert s["byLanguage"]["python"]["acceptRate"] == round(2 / 3, 3)
    assert s["byLanguage"]["lua"]["refused"] == 1
    assert s["byPlace"]["end of line, after a word"]["accepted"] == 1
    assert s["overall"]["ttgtAcceptedP50"] == 80.0
    text = render(s, "/x")
    assert "by language" in text and "after a dot" in text and "50%" in text


def test_run_stats_reads_the_state_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GHOSTFIM_STATE_DIR", str(tmp_path))
    assert run_stats(argparse.Namespace(json=True)) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["records"] == 0 and out["path"] == str(tmp_path / "acceptance.jsonl")
    assert "No acceptance statistics yet" in render(summary([]), "/x")
