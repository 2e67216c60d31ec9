"""Going back to a file while the one just left still streams its suggestion (issue 19's bug:
the keystroke back queued behind the rest of that job, 0.2-1.9 s)."""

from __future__ import annotations

import time

from tests.support.fakes import FakeBackend, cursor, serving, shutting_down

DOC = "def area(width, height):\n    return "


async def test_a_keystroke_in_another_document_stops_the_generation_left_behind() -> None:
    backend = FakeBackend(script=lambda r: "x" * 200, piece_chars=1, piece_s=0.01)  # ~2 s
    service, events = await serving(backend)
    async with shutting_down(service):
        left = await service.complete(cursor(DOC, doc_id="file:///c.py"))
        assert left.text.startswith("x") and service.worker.running is not None  # streaming
        started = time.perf_counter()
        back = await service.complete(cursor(DOC + "w", doc_id="file:///a.py"))
        assert back.source == "model" and back.text.startswith("x")
        assert time.perf_counter() - started < 0.5  # not after the rest of C's 200 pieces
        left_stats = [s for s in events.stats_seen if s["uri"] == "file:///c.py"]
        assert left_stats and left_stats[0]["cancelled"]  # stopped, not finished
        running = service.worker.running
        assert running is not None and "a.py" in running.label
