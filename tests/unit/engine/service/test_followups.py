"""engine/service/followups.py: widen, the pause refresh, the prefetch and the warm-up, all
background work that a keystroke drops. Fake backends (tests/support/fakes.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from ghostfim.engine.backend import CompletionRequest
from ghostfim.engine.context.definitions import ContextEntry, DefinitionBlock
from ghostfim.engine.service.completion import CompletionService
from ghostfim.engine.tuning import LULL_S, PAUSE_REFRESH_S, PREFETCH_MAX_TOKENS
from tests.support.fakes import (
    FIXED_DEBOUNCE,
    FakeBackend,
    FakeOpener,
    RecordingEvents,
    cursor,
    serving,
    settle,
)

DOC = "def area(width, height):\n    return "


@pytest.fixture
async def cleanup() -> AsyncIterator[list[CompletionService]]:
    services: list[CompletionService] = []
    yield services
    for service in services:
        await service.shutdown()


async def test_a_cut_suffix_is_refreshed_with_the_full_prompt_at_a_pause(cleanup: list) -> None:
    def script(request: CompletionRequest) -> str:
        return "full answer" if request.mode == "full" else "keystroke answer"

    backend = FakeBackend(script=script, cut_suffix=True)
    service, events = await serving(backend)
    cleanup.append(service)
    answer = await service.complete(cursor(DOC))
    assert answer.text and "keystroke answer".startswith(answer.text)  # answered early
    await asyncio.sleep(PAUSE_REFRESH_S + 0.25)  # a pause
    await settle(service)
    refresh = [r for r in backend.requests if r.mode == "full"]
    assert refresh and refresh[0].background
    assert events.ghost[-1][1] == "full answer" and events.ghost[-1][2]


async def test_no_refresh_when_typing_goes_on(cleanup: list) -> None:
    backend = FakeBackend(script=lambda r: "abc", cut_suffix=True)
    service, _ = await serving(backend)
    cleanup.append(service)
    for i in range(len("width")):
        await service.complete(cursor(DOC + "width"[: i + 1], version=i + 2))
        await asyncio.sleep(0.05)  # faster than the pause refresh
    await settle(service)
    assert sum(r.mode == "full" for r in backend.requests) <= 1  # at most the last state


async def test_explicit_requests_are_never_refreshed(cleanup: list) -> None:
    backend = FakeBackend(script=lambda r: "abc", cut_suffix=True)
    service, _ = await serving(backend)
    cleanup.append(service)
    await service.complete(cursor(DOC), explicit=True)  # a full prompt: nothing was cut
    await asyncio.sleep(PAUSE_REFRESH_S + 0.25)
    await settle(service)
    assert [r.mode for r in backend.requests if r.background and r.mode == "full"] == []


async def test_widen_prepares_the_jobs_own_state(cleanup: list) -> None:
    backend = FakeBackend(script=lambda r: "abc", narrow=True)
    service, _ = await serving(backend)
    cleanup.append(service)
    state = cursor(DOC + "wid")
    await service.complete(state)
    await settle(service)
    widen = [r for r in backend.requests if r.background and r.max_tokens == 0]
    assert widen and all(r.mode == "keystroke" for r in widen)
    assert widen[0].prefix == state.prefix and widen[0].doc_id == state.doc_id


async def test_widen_waits_for_a_lull_in_typing(cleanup: list) -> None:
    """Started while the user types, the widen's chunks are aborted by the next key (model
    time for nothing): it starts once the keys stop for LULL_S, for the last state."""
    backend = FakeBackend(script=lambda r: "abc", narrow=True)
    service, _ = await serving(backend)
    cleanup.append(service)
    typed = "xyzw"
    for i in range(len(typed)):
        await service.complete(cursor(DOC + typed[: i + 1], version=i + 2))
        await asyncio.sleep(LULL_S / 2)  # typing
    assert not [r for r in backend.requests if r.background and r.max_tokens == 0]
    await settle(service)
    widen = [r for r in backend.requests if r.background and r.max_tokens == 0]
    assert [r.prefix for r in widen] == [DOC + typed]


async def test_a_follow_up_waiting_for_its_lull_does_not_start_after_shutdown() -> None:
    backend = FakeBackend(script=lambda r: "abc", narrow=True)
    service, _ = await serving(backend)
    await service.complete(cursor(DOC + "wid"))
    await service.shutdown()
    assert service.followups.idle
    await asyncio.sleep(LULL_S + 0.1)
    assert not [r for r in backend.requests if r.background]


async def test_the_continuation_is_prefetched_as_if_accepted(cleanup: list) -> None:
    backend = FakeBackend(script=lambda r: "width * height")
    service, _ = await serving(backend)
    cleanup.append(service)
    await service.complete(cursor(DOC), explicit=True)
    await settle(service)
    [prefetch] = [r for r in backend.requests if r.background]
    assert prefetch.prefix == DOC + "width * height" and prefetch.mode == "keystroke"
    assert prefetch.max_tokens == PREFETCH_MAX_TOKENS
    hit = service.cache.lookup(DOC + "width * height", "")
    assert hit is not None and hit.suggestion.text == "width * height"  # its own answer


async def test_no_continuation_is_prefetched_after_a_suggestion_shown_in_part(
    cleanup: list,
) -> None:
    """The filter showed only the sure start: a Tab takes that, and the rest of the suggestion
    itself serves the state after it; the state after all of it is not worth any model work."""
    unsure = FakeBackend(
        script=lambda r: "for f in fields if f.compare]",
        piece_prob=lambda piece: 0.001 if piece == "if f" else 0.99,
    )
    service, events = await serving(unsure)
    cleanup.append(service)
    await service.complete(cursor("def match(fields):\n    return [f "))
    await settle(service)
    assert events.ghost[-1][1] == "for f in fields"  # shown in part
    assert not [r for r in unsure.requests if r.background and r.max_tokens > 0]
    sure = FakeBackend(script=lambda r: "width * height", piece_prob=lambda piece: 0.99)
    service, _ = await serving(sure)
    cleanup.append(service)
    await service.complete(cursor(DOC))
    await settle(service)
    assert [r for r in sure.requests if r.background and r.max_tokens > 0]  # shown whole


async def test_a_keystroke_drops_background_work(cleanup: list) -> None:
    backend = FakeBackend(script=lambda r: "width * height", prefill_s=0.5)
    service, _ = await serving(backend)
    cleanup.append(service)
    await service.complete(cursor(DOC), explicit=True)
    await asyncio.sleep(0.1)  # the prefetch is in its prefill
    running = service.worker.running
    assert running is not None and running.label == "speculative"
    service.worker.preempt_background()  # what every interactive job does first
    assert running.cancel.cancelled
    await settle(service)
    assert service.cache.lookup(DOC + "width * height", "") is None  # nothing kept of it


async def test_a_new_backend_warms_the_last_document(cleanup: list) -> None:
    first, second = FakeBackend(name="first"), FakeBackend(name="second")
    service = CompletionService(
        RecordingEvents(),
        opener=FakeOpener({"first": lambda: first, "second": lambda: second}),
    )
    cleanup.append(service)
    assert await service.configure(replace(FIXED_DEBOUNCE, model_path="first"))
    state = cursor(DOC + "wi")
    await service.complete(state)
    await settle(service)
    assert await service.configure(replace(FIXED_DEBOUNCE, model_path="second"))
    await settle(service)
    warm = [r for r in second.requests if r.background and r.max_tokens == 0]
    assert sorted(r.mode for r in warm) == ["full", "keystroke"]  # each slot, keystrokes first
    assert all(r.prefix == state.prefix for r in warm)
    assert service.followups.idle


async def test_keystrokes_get_a_pauses_new_workspace_block_after_its_prefill_at_a_lull(
    cleanup: list,
) -> None:
    """Full prompts moved on to a new block: the keystrokes' slot is prefilled with it at the
    next lull (a droppable warm-up of the start window behind the block), and only then do
    keystrokes take it; the widen waits for a later lull."""
    backend = FakeBackend(script=lambda r: "abc", narrow=True)  # the keystroke asks to widen
    service, _ = await serving(backend)
    cleanup.append(service)
    new = DefinitionBlock("python", (ContextEntry("area", "geo.py", "def area(w, h): ..."),))
    switched: list[DefinitionBlock] = []
    due: list[DefinitionBlock] = [new]
    workspace = service.workspace
    workspace.switch_due = lambda doc_id: due[0] if due else None  # type: ignore[method-assign]
    workspace.switched = lambda doc_id, block: (switched.append(block), due.clear())  # type: ignore[method-assign]
    state = cursor(DOC + "wi")
    await service.complete(state)
    await asyncio.sleep(LULL_S / 2)
    assert not switched  # not while the user may still be typing
    await settle(service)
    [warm] = [r for r in backend.requests if r.background and r.definitions is new]
    assert warm.mode == "keystroke" and warm.max_tokens == 0 and warm.prefix == state.prefix
    assert warm.start_window  # the start window behind the block: a short lull finishes it
    assert switched == [new]
    # No widen beside the switch at that lull (it would prefill the wide window without the
    # block, soon out of use).
    assert [r for r in backend.requests if r.background and r.max_tokens == 0] == [warm]
