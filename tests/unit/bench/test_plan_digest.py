"""bench/plan_digest.py: the same requests give the same digest, and a different plan a
different one (on a self-made tiny model: the digest is about mechanics, not quality)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.plan_digest import plans_digest
from ghostfim.engine.backend import CompletionRequest
from ghostfim.engine.local.plan import Planner


def test_the_digest_is_the_plans_and_only_the_plans(
    tiny_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "".join(f"def f_{i}(x):\n    return x * {i} + f_{i - 1}(x)\n" for i in range(40)),
        encoding="utf-8",
    )
    n, first = plans_digest(str(tiny_gguf), sample)
    assert n > 50
    assert plans_digest(str(tiny_gguf), sample) == (n, first)  # the machine's speed is pinned
    windows_for = Planner.windows_for

    def narrow_first(self: Planner, request: CompletionRequest) -> tuple[int, ...]:
        return tuple(reversed(windows_for(self, request)))

    monkeypatch.setattr(Planner, "windows_for", narrow_first)
    assert plans_digest(str(tiny_gguf), sample)[1] != first
