"""cli/main.py: the command line's parsing and its one-line errors, in process (the commands as
subprocesses are tests/integration/test_cli.py's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ghostfim.cli.errors import UserError, parse_location
from ghostfim.cli.main import EXIT_USAGE, main


def test_locations_are_file_line_column() -> None:
    assert parse_location("a.py:3:7") == (Path("a.py"), 3, 7)
    assert parse_location("C:/dir:x/a.py:1:1") == (Path("C:/dir:x/a.py"), 1, 1)  # ':' in paths
    for bad in ("a.py", "a.py:3", "a.py:x:1", "a.py:1:y"):
        with pytest.raises(UserError, match="FILE:LINE:COL"):
            parse_location(bad)


def test_models_json_lists_every_preset(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GHOSTFIM_CACHE_DIR", str(tmp_path))  # nothing fetched
    assert main(["models", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["preset"] for r in rows] == ["tiny", "small", "medium", "large"]
    assert not any(r["present"] for r in rows)
    assert main(["models"]) == 0
    assert "(not fetched: ghostfim models --fetch tiny)" in capsys.readouterr().out


def test_a_user_error_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "--fetch", "gigantic"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("ghostfim: error:") == 1 and "gigantic" in err and "Traceback" not in err
    assert main(["complete", "nowhere.py"]) == EXIT_USAGE
    assert "FILE:LINE:COL" in capsys.readouterr().err


def test_an_unexpected_failure_is_one_line_unless_debugging(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ghostfim.cli import main as main_module

    def broken(_args: object) -> int:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(main_module, "_run_models", broken)
    monkeypatch.delenv("GHOSTFIM_DEBUG", raising=False)
    assert main(["models"]) == 1
    assert capsys.readouterr().err.strip() == "ghostfim: error: disk on fire"
    monkeypatch.setenv("GHOSTFIM_DEBUG", "1")
    with pytest.raises(RuntimeError, match="disk on fire"):
        main(["models"])
