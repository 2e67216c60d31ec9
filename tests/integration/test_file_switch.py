"""Switching files with the real server and model: coming back to a document restores its KV
snapshot (engine/local/kvslots.py; bench/file_switch.py's run, shortened)."""

from __future__ import annotations

import pytest


@pytest.mark.model
@pytest.mark.slow
async def test_back_in_the_first_of_three_files_the_prompt_comes_from_the_kv_cache() -> None:
    """The real server and model, three real files (bench/file_switch.py's run, shortened):
    the first keystroke back in A is served from A's restored snapshot."""
    from bench.file_switch import load_traces, run_system

    traces = load_traces(seed=7)
    run, per_doc = await run_system(
        "snapshots on", {"model": {"size": "small"}}, traces, chars=6, dwell_s=1.0, seed=7
    )
    back = per_doc["back"][0]
    assert back.source == "model", back
    assert back.cache_share >= 0.9, back
    assert any(e["kind"] == "restore" for e in run.kv.get("recent", [])), run.kv
