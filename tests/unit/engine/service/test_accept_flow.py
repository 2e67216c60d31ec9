"""Accept signals through the service, with a fake backend: what the editor's accept sends
(the inserted text, then the item's command) is one accept, never a refusal first."""

from __future__ import annotations

import asyncio

from ghostfim.engine.service.acceptance import Outcome
from tests.support.fakes import FakeBackend, cursor, serving, settle, shutting_down

DOC = "def area(width, height):\n    return "


async def test_an_accept_is_not_first_counted_as_a_refusal() -> None:
    service, _ = await serving(FakeBackend(script=lambda r: "width * height"))
    outcomes: list[Outcome] = []
    service.acceptance.listeners.append(outcomes.append)
    async with shutting_down(service):
        answer = await service.complete(cursor(DOC), explicit=True)
        assert answer.text == "width * height" and answer.item_id
        await settle(service)
        await asyncio.sleep(0.3)  # read
        service.document_changed("file:///a.py", DOC + answer.text)  # the editor inserts it
        assert service.accepted(answer.item_id)  # then runs the item's command
        assert [o.kind for o in outcomes] == ["accepted"]
        counts = service.acceptance.counts
        assert (counts.accepted, counts.refused, counts.accepted_chars) == (1, 0, 14)


async def test_typing_something_else_after_reading_is_a_refusal() -> None:
    service, _ = await serving(FakeBackend(script=lambda r: "width * height"))
    async with shutting_down(service):
        await service.complete(cursor(DOC), explicit=True)
        await settle(service)
        await asyncio.sleep(0.3)
        service.document_changed("file:///a.py", DOC + "max(")
        assert service.acceptance.counts.refused == 1
