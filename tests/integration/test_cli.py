"""`ghostfim` as a subprocess: bad input gives one line and a non-zero exit, never a traceback;
`complete` on a tiny model prints a row per step."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def ghostfim(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ghostfim.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def assert_one_line_error(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ghostfim: error:")]
    assert len(errors) == 1, proc.stderr
    for word in words:
        assert word in errors[0], errors[0]


def test_missing_model_path(tmp_path: Path) -> None:
    src = tmp_path / "a.py"
    src.write_text("x = 1\n")
    proc = ghostfim("complete", f"{src}:1:5", "--model", str(tmp_path / "nope.gguf"))
    assert_one_line_error(proc, "nope.gguf")


def test_corrupt_gguf(tmp_path: Path) -> None:
    src = tmp_path / "a.py"
    src.write_text("x = 1\n")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 64)
    proc = ghostfim("complete", f"{src}:1:5", "--model", str(bad))
    assert_one_line_error(proc, "bad.gguf")


def test_truncated_gguf(tmp_path: Path, tiny_gguf: Path) -> None:
    src = tmp_path / "a.py"
    src.write_text("x = 1\n")
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(tiny_gguf.read_bytes()[: tiny_gguf.stat().st_size // 2])
    proc = ghostfim("complete", f"{src}:1:5", "--model", str(cut))
    assert_one_line_error(proc, "cut.gguf")


@pytest.mark.parametrize("location", ["{src}:9:1", "{src}:1:99", "{src}:0:1", "{src}:x:1"])
def test_position_outside_the_file(tmp_path: Path, tiny_gguf: Path, location: str) -> None:
    src = tmp_path / "a.py"
    src.write_text("x = 1\ny = 2\n")
    proc = ghostfim("complete", location.format(src=src), "--model", str(tiny_gguf))
    assert_one_line_error(proc)


def test_missing_source_file(tmp_path: Path, tiny_gguf: Path) -> None:
    proc = ghostfim("complete", f"{tmp_path}/none.py:1:1", "--model", str(tiny_gguf))
    assert_one_line_error(proc, "none.py")


def test_complete_json_with_typing_on_tiny_model(tmp_path: Path, tiny_gguf: Path) -> None:
    src = tmp_path / "a.py"
    src.write_text("def f(x):\n    \n")
    proc = ghostfim(
        "complete",
        f"{src}:2:5",
        "--model",
        str(tiny_gguf),
        "--json",
        "--type",
        "ret",
        "--max-tokens",
        "4",
    )
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(rows) == 4
    for row in rows:
        assert set(row["timings"]) >= {
            "ttft_ms",
            "prefill_reused_tokens",
            "prefill_new_tokens",
            "prefill_ms",
            "decode_tokens",
            "decode_ms",
            "total_ms",
        }
        assert set(row["model"]) >= {"name", "path", "preset", "device", "n_gpu_layers"}
        assert isinstance(row["completion"], str)
        assert row["source"] in ("model", "cache", "none"), row
    assert rows[0]["source"] == "model" and rows[-1]["typed"] == "ret"
    # The explicit first request is a full prompt (its own KV slot); the first keystroke opens
    # the keystroke slot, and the keystrokes after it extend what that one left in the cache.
    for row in rows[2:]:
        t = row["timings"]
        if row["source"] == "model":
            assert t["prefill_reused_tokens"] > 0, row
    for row in rows[1:]:
        t = row["timings"]
        if row["source"] != "model":  # typed through (or answered empty): no model work
            assert t["prefill_new_tokens"] == 0 and t["decode_tokens"] == 0, row


def test_models_json_lists_every_preset() -> None:
    proc = ghostfim("models", "--json", timeout=60)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["preset"] for r in rows] == ["tiny", "small", "medium", "large"]
    for r in rows:
        assert set(r) >= {"preset", "name", "path", "bytes", "present"}
        assert (r["path"] is None) == (not r["present"])


def test_unknown_preset_to_fetch() -> None:
    assert_one_line_error(ghostfim("models", "--fetch", "gigantic", timeout=60), "gigantic")
