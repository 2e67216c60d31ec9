"""engine/service.py without a model: the fake backend of tests/fakes.py, scripted and timed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from ghostfim.engine.config import EngineConfig
from ghostfim.engine.service import deadline
from ghostfim.engine.service.completion import CompletionService
from tests.support.fakes import FakeBackend, RecordingEvents, cursor

DOC = "def area(width, height):\n    return "
FIXED_DEBOUNCE = EngineConfig(debounce_ms=0)


async def serving(
    backend: FakeBackend, config: EngineConfig = FIXED_DEBOUNCE
) -> tuple[CompletionService, RecordingEvents]:
    events = RecordingEvents()
    service = CompletionService(events, config)
    assert await service.load_backend("fake", lambda: backend, key="fake")
    return service, events


@pytest.fixture
async def cleanup() -> AsyncIterator[list[CompletionService]]:
    services: list[CompletionService] = []
    yield services
    for service in services:
        await service.shutdown()


async def settle(service: CompletionService) -> None:
    """Until the worker is idle and no follow-up is pending."""
    for _ in range(2000):
        await asyncio.sleep(0.01)
        if service.worker.running is None and not service._background_tasks:
            return
    raise AssertionError("the service never went idle")


# --- typed-through ---------------------------------------------------------------------------
async def test_typing_through_a_long_suggestion_needs_no_model_work(cleanup: list) -> None:
    """Past 128 characters too: the cache key window covers everything typed through."""
    long = "width * height + " + " + ".join(f"term_{i}" for i in range(60))
    assert len(long) > 300
    backend = FakeBackend(script=lambda r: long, piece_chars=64)
    service, _ = await serving(backend)
    cleanup.append(service)
    doc = "".join(f"value_{i} = {i}\n" for i in range(100)) + DOC  # longer than the key window
    first = await service.complete(cursor(doc), explicit=True)
    assert first.text == long and first.source == "model"
    await settle(service)
    asked = backend.model_requests(background=False)
    for typed in range(1, 250):
        answer = await service.complete(cursor(doc + long[:typed], version=typed + 1))
        assert answer.source == "cache", (typed, answer)
        assert answer.text == long[typed:].rstrip(), typed
    assert backend.model_requests(background=False) == asked  # not one more model request


async def test_typing_something_else_asks_the_model(cleanup: list) -> None:
    backend = FakeBackend(script=lambda r: "width * height")
    service, _ = await serving(backend)
    cleanup.append(service)
    await service.complete(cursor(DOC), explicit=True)
    answer = await service.complete(cursor(DOC + "max("))
    assert answer.source == "model"


# --- supersession and streaming ----------------------------------------------------------------
async def test_a_newer_request_supersedes_and_cancels_the_older(cleanup: list) -> None:
    backend = FakeBackend(script=lambda r: "x" * 40, piece_chars=1, prefill_s=0.3)
    service, _ = await serving(backend)
    cleanup.append(service)
    older = asyncio.ensure_future(service.complete(cursor(DOC + "w")))
    await asyncio.sleep(0.1)  # its job is in its prefill
    newer = await service.complete(cursor(DOC + "wi", version=2))
    assert (await older).text == "" and newer.text.startswith("x")
    await settle(service)
    stats = [s for s in service.latency.recent if s["source"] == "model"]
    assert stats[0]["cancelled"] and stats[0]["generatedTokens"] == 0  # no compute spent


async def test_automatic_answer_at_first_text_then_streams_ghost_text(cleanup: list) -> None:
    text = "width * height * depth * scale"
    backend = FakeBackend(script=lambda r: text, piece_chars=3, piece_s=0.15)
    service, events = await serving(backend)
    cleanup.append(service)
    started = time.perf_counter()
    answer = await service.complete(cursor(DOC))
    assert answer.source == "model" and 0 < len(answer.text) < len(text)
    assert time.perf_counter() - started < 1.0  # not after the whole generation (1.5 s)
    await settle(service)
    shown = [t for _, t, _ in events.ghost]
    assert shown[-1] == text and events.ghost[-1][2] is True  # done
    assert [len(t) for t in shown] == sorted(len(t) for t in shown)  # only grows


# --- follow-ups: refresh and widen ---------------------------------------------------------------
async def test_a_cut_suffix_is_refreshed_with_the_full_prompt_at_a_pause(cleanup: list) -> None:
    def script(request):  # type: ignore[no-untyped-def]
        return "full answer" if request.mode == "full" else "keystroke answer"

    backend = FakeBackend(script=script, cut_suffix=True)
    service, events = await serving(backend)
    cleanup.append(service)
    answer = await service.complete(cursor(DOC))
    assert answer.text and "keystroke answer".startswith(answer.text)  # answered early
    await asyncio.sleep(0.6)  # a pause (PAUSE_REFRESH_S)
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


# --- deadlines ------------------------------------------------------------------------------------
async def test_a_request_past_its_deadline_is_answered_empty_and_stopped(
    cleanup: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deadline, "AUTOMATIC_DEADLINE_S", 0.3)
    backend = FakeBackend(script=lambda r: "late", prefill_s=5.0)
    service, _ = await serving(backend)
    cleanup.append(service)
    started = time.perf_counter()
    answer = await service.complete(cursor(DOC))
    assert answer.text == "" and answer.reason == "deadline"
    assert time.perf_counter() - started < 1.0
    await settle(service)  # the job was cancelled, not left running for 5 s


async def test_explicit_requests_on_a_slow_model_get_longer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slow = FakeBackend(prefill_ms_per_token=21.0)
    fast = FakeBackend(prefill_ms_per_token=2.0)
    assert deadline.answer_deadline_s(True, slow, 1024) > deadline.AUTOMATIC_DEADLINE_S
    assert deadline.answer_deadline_s(True, fast, 1024) == deadline.AUTOMATIC_DEADLINE_S
    assert deadline.answer_deadline_s(False, slow, 1024) == deadline.AUTOMATIC_DEADLINE_S


# --- requests while the backend loads ---------------------------------------------------------
async def test_requests_while_loading_are_held_and_answered(cleanup: list) -> None:
    events = RecordingEvents()
    service = CompletionService(events, FIXED_DEBOUNCE)
    cleanup.append(service)
    backend = FakeBackend(script=lambda r: "width * height")
    release = asyncio.Event()
    loop = asyncio.get_running_loop()

    def open_slowly() -> FakeBackend:
        asyncio.run_coroutine_threadsafe(release.wait(), loop).result(10)
        return backend

    load = service.request_backend("fake", open_slowly, key="fake")
    explicit = asyncio.ensure_future(service.complete(cursor(DOC, doc_id="e"), explicit=True))
    older = asyncio.ensure_future(service.complete(cursor(DOC + "w", doc_id="a")))
    await asyncio.sleep(0.05)
    newest = asyncio.ensure_future(service.complete(cursor(DOC + "wi", doc_id="a", version=2)))
    assert (await asyncio.wait_for(older, 5)).reason == "superseded"  # not held
    await asyncio.sleep(0.2)
    assert not explicit.done() and not newest.done() and service.status()["state"] == "loading"
    release.set()
    assert await load
    assert (await asyncio.wait_for(explicit, 20)).text == "width * height"
    assert (await asyncio.wait_for(newest, 20)).text.startswith("width")


async def test_a_failed_first_load_releases_held_requests(cleanup: list) -> None:
    service = CompletionService(RecordingEvents(), FIXED_DEBOUNCE)
    cleanup.append(service)

    def broken() -> FakeBackend:
        time.sleep(0.1)
        raise RuntimeError("no such model")

    load = service.request_backend("broken", broken, key="broken")
    answer = await asyncio.wait_for(service.complete(cursor(DOC), explicit=True), 5)
    assert answer.text == "" and answer.reason == "error"
    assert not await load and "no such model" in (service.error or "")


async def test_a_switch_reruns_the_request_it_cancelled(cleanup: list) -> None:
    old = FakeBackend(script=lambda r: "old " * 30, piece_chars=1, piece_s=0.02, name="old")
    service, _ = await serving(old)
    cleanup.append(service)
    new = FakeBackend(script=lambda r: "new answer", name="new")
    request = asyncio.ensure_future(service.complete(cursor(DOC), explicit=True))
    await asyncio.sleep(0.1)  # generating on the old backend
    assert await service.load_backend("new", lambda: new, key="new")
    answer = await asyncio.wait_for(request, 20)
    assert answer.text == "new answer" and old.closed


async def test_budgets_change_in_place(cleanup: list) -> None:
    backend = FakeBackend()
    service, _ = await serving(backend)
    cleanup.append(service)
    service.set_options(EngineConfig(debounce_ms=0, prefix_tokens=300, suffix_tokens=40))
    await settle(service)
    assert backend.budgets[-1] == (300, 40, 80.0) and not backend.closed


async def test_an_edit_that_leaves_the_suggestion_drops_its_prefetch(cleanup: list) -> None:
    backend = FakeBackend(script=lambda r: "width * height", prefill_s=0.5)
    service, _ = await serving(backend)
    cleanup.append(service)
    state = cursor(DOC)
    assert (await service.complete(state, explicit=True)).text == "width * height"
    await asyncio.sleep(0.1)  # the prefetch of the continuation is in its prefill
    assert service.worker.running is not None
    service.document_changed(state.doc_id, DOC + "#" + state.suffix)  # not the suggestion
    await settle(service)
    prefetch = [r for r in backend.requests if r.background]
    assert prefetch and service.cache.lookup(DOC + "width * height", "") is None  # dropped
    typed = FakeBackend(script=lambda r: "width * height", prefill_s=0.3)
    service2, _ = await serving(typed)
    cleanup.append(service2)
    await service2.complete(state, explicit=True)
    service2.document_changed(state.doc_id, DOC + "wid" + state.suffix)  # typing into it
    await settle(service2)
    assert service2.cache.lookup(DOC + "width * height", "") is not None  # prefetched
