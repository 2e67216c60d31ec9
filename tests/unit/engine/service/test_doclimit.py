"""engine/service/doclimit.py through the service: a document over `maxDocumentMb` is completed
from the text around its cursor, gives no context picks, and the user is told once; what the
service keeps (ghostfim/status `memory`) stays within its limits."""

from __future__ import annotations

from dataclasses import replace

from ghostfim.engine.config import EngineConfig
from ghostfim.engine.service.doclimit import DocumentSizeLimit
from tests.support.fakes import (
    FIXED_DEBOUNCE,
    FakeBackend,
    cursor,
    serving,
    settle,
    shutting_down,
)

LIMITED = replace(FIXED_DEBOUNCE, max_document_mb=0.01, extra_context=True)  # 10,485 characters
CODE = "".join(f"def handler_{i}(request):\n    return respond(request, {i})\n" for i in range(400))
BIG, SMALL = "file:///big.py", "file:///small.py"


def test_the_limit_tells_once_per_document_and_follows_its_size() -> None:
    limit = DocumentSizeLimit(0.01)
    assert limit.max_chars == 10_485
    assert limit.seen(BIG, 20_000) is not None and limit.is_over(BIG)
    assert limit.seen(BIG, 30_000) is None  # told already
    assert limit.seen(BIG, 5_000) is None and not limit.is_over(BIG)  # cut below the limit
    assert limit.seen(BIG, 20_000) is None and limit.is_over(BIG)  # over again: not told again
    limit.closed(BIG)
    assert not limit.is_over(BIG)
    assert limit.seen(BIG, 20_000) is None  # opened again: this session was told
    message = limit.seen(SMALL, 2 * 1024 * 1024)
    assert message is not None
    assert "small.py" in message and "2.0 MB" in message and "maxDocumentMb" in message


async def test_a_large_document_is_completed_without_context_picks() -> None:
    backend = FakeBackend(script=lambda r: "respond(request)")
    service, events = await serving(backend, LIMITED)
    async with shutting_down(service):
        assert len(CODE) > 2 * 10_485
        service.document_opened(BIG, CODE)
        assert len(events.notices) == 1 and "big.py" in events.notices[0]
        assert service.context.status().pending == 0  # no chunk of it picked
        service.document_edited(BIG, CODE + "x = 1\n", 800)
        service.document_saved(BIG, CODE + "x = 1\n")
        assert service.context.status().pending == 0
        assert len(events.notices) == 1  # once, not per edit
        answer = await service.complete(cursor(CODE, doc_id=BIG), explicit=True)
        assert answer.text == "respond(request)"  # completed all the same
        assert backend.requests[-1].doc_id == BIG
        # Leaving it for another document picks nothing of it either.
        small = CODE[:3_000]
        service.document_opened(SMALL, small)
        assert service.context.status().pending == 1  # a document under the limit gives one
        await service.complete(cursor(small, doc_id=SMALL), explicit=True)
        await settle(service)
        ring = service.context.ring
        assert {c.doc_id for c in (*ring.chunks, *ring.pending)} == {SMALL}
        memory = service.status().memory
        assert memory is not None and memory.large_documents == 1
        service.document_closed(BIG)
        service.document_opened(BIG, CODE)
        assert len(events.notices) == 1  # this session was told about it already
        # A document that an edit takes over the limit is told of then.
        service.document_edited(SMALL, CODE, 10)
        assert len(events.notices) == 2 and "small.py" in events.notices[1]


async def test_finished_suggestions_hold_neither_their_request_nor_its_text() -> None:
    """A finished suggestion stays in the cache; the request it answered (its cursor state,
    up to 80,000 characters of the document) does not stay with it."""
    service, _ = await serving(FakeBackend(script=lambda r: "respond(request)"))
    async with shutting_down(service):
        answers = [
            await service.complete(cursor(CODE[: 1_000 + i], doc_id=BIG), explicit=True)
            for i in range(3)
        ]
        await settle(service)
        for answer in answers:
            assert answer.suggestion is not None and answer.suggestion.done
            assert answer.suggestion.listeners == []


async def test_the_status_reports_each_cache_within_its_limit() -> None:
    config = replace(EngineConfig(model_path="fake", debounce_ms=0), extra_context=True)
    service, _ = await serving(FakeBackend(script=lambda r: "x" * 40), config)
    async with shutting_down(service):
        for i in range(50):
            service.document_opened(f"file:///m{i}.py", CODE[: 2_000 + 37 * i])
            await service.complete(cursor(CODE[: 1_000 + i], doc_id=f"file:///m{i}.py"))
        await settle(service)
        memory = service.status().memory
        assert memory is not None and memory.rss_bytes is not None
        caches = {c.name: c for c in memory.caches}
        assert {"suggestions", "contextRing"} <= set(caches)  # a fake backend keeps no caches
        assert caches["suggestions"].bytes > 0 and caches["contextRing"].bytes > 0
        for cache in caches.values():
            assert 0 <= cache.bytes <= cache.limit, cache
