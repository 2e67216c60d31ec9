"""Two `ghostfim serve` (two editor windows) keep their statistics in one file at the same time:
every outcome each server counted is a line of it, every line parses, the file is private, and
a language id of any length is stored cut short (engine/service/localstats.py). The race itself,
appends against compactions, is hammered in tests/unit/engine/service/test_localstats.py; this
checks the wiring with real servers."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest

from ghostfim.engine.service import localstats
from ghostfim.engine.service.localstats import LocalStats
from harness.lspclient import LspProcess
from tests.support.server import TINY, complete, open_doc, start, status

# Shown whatever the model writes (the filter would hide some); statistics on, as by default.
OPTIONS = {**TINY, "filter": "off", "acceptanceStats": True}
ACCEPTS = 8  # per server: enough to interleave the two servers' writes, a few seconds on a CPU
LONG_LANGUAGE = "l" * 10_000  # an editor may send any languageId


async def accept_suggestions(client: LspProcess, language: str) -> dict[str, int]:
    """Ask for a suggestion and take it, ACCEPTS times, as an editor's Tab does; the server's
    acceptance counts after."""
    uri = f"file:///work/{len(language)}.py"
    await open_doc(client, uri, "import math\n\n\ndef area(r):\n    return ", language=language)
    for _ in range(ACCEPTS):
        items = (await complete(client, uri, 4, 11, trigger=1))["items"]
        if items:
            item_id = items[0]["command"]["arguments"][0]
            await client.call(
                "workspace/executeCommand",
                {"command": "ghostfim.accepted", "arguments": [item_id]},
            )
    counts: dict[str, int] = (await status(client))["acceptance"]
    return counts


@pytest.mark.model
async def test_two_servers_share_one_statistics_file(private_state_dir: Path) -> None:
    a, b = await asyncio.gather(start(OPTIONS), start(OPTIONS))
    try:
        counts = await asyncio.gather(
            accept_suggestions(a, "python"), accept_suggestions(b, LONG_LANGUAGE)
        )
    finally:
        assert await a.stop() == 0
        assert await b.stop() == 0
    for c in counts:
        assert c["accepted"] >= ACCEPTS // 2, c  # the tiny model answered most requests
        assert c["partial"] == c["refused"] == 0, c  # each was taken at once
    path = private_state_dir / localstats.FILE_NAME
    lines = path.read_text(encoding="utf-8").splitlines()
    records = LocalStats(path).records()
    assert len(records) == len(lines), "a line that does not parse"
    by_language = {r.language: 0 for r in records}
    for r in records:
        by_language[r.language] += 1
    assert by_language == {
        "python": counts[0]["accepted"],
        LONG_LANGUAGE[: localstats.MAX_FIELD]: counts[1]["accepted"],
    }
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
