"""bench/calibration_beside_index.py reads the calibration the server logs at load."""

from __future__ import annotations

from pathlib import Path

from bench.calibration_beside_index import _CALIBRATED

LOADING = Path(__file__).resolve().parents[3] / "engine" / "local" / "loading.py"


def test_the_log_line_of_the_calibration_is_read() -> None:
    # The format the engine logs it in (engine/local/loading.py), filled in as it would be.
    fmt = "prefill cost: %.1f ms + %.2f ms/token; keystroke windows %d/%d tokens"
    assert fmt in LOADING.read_text()
    found = _CALIBRATED.search("ghostfim: " + fmt % (26.6, 4.27, 104, 320))
    assert found is not None and found.groups() == ("26.6", "4.27", "104", "320")
