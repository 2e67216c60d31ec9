"""engine/service/completion.py without a model: fake backends (tests/support/fakes.py),
scripted and timed, opened by a fake opener."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from ghostfim.engine.backend import CompletionRequest
from ghostfim.engine.config import EngineConfig
from ghostfim.engine.service.completion import CompletionService, CursorState
from ghostfim.engine.service.filter import too_much_after_cursor
from ghostfim.engine.service.keystroke import grow
from ghostfim.engine.service.scheduler import Priority
from ghostfim.engine.service.suggestions import Suggestion
from ghostfim.engine.tuning import GIVE_UP_BELOW
from ghostfim.lsp.settings import parse_settings
from ghostfim.lsp.wire import status_json
from tests.support.fakes import (
    FIXED_DEBOUNCE,
    FakeBackend,
    FakeOpener,
    NoEvents,
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


def test_who_waits_on_a_suggestion_hears_every_growth_and_its_end() -> None:
    seen: list[tuple[str, bool]] = []
    s = Suggestion()
    s.listeners.append(lambda x: seen.append((x.text, x.done)))
    grow(s, "a")
    grow(s, "ab", done=True)
    assert seen == [("a", False), ("ab", True)]
    s.update("abc")  # the data alone: nobody is told (only the service grows suggestions)
    assert seen == [("a", False), ("ab", True)]


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


async def test_typed_through_answers_are_cache_rows_with_no_model_work(cleanup: list) -> None:
    backend = FakeBackend(script=lambda r: "width * height")
    service, events = await serving(backend)
    cleanup.append(service)
    await service.complete(cursor(DOC), explicit=True)
    await settle(service)
    answer = await service.complete(cursor(DOC + "wid", version=2))
    assert answer.source == "cache" and answer.text == "th * height"
    row = events.stats_seen[-1]
    assert (row["source"], row["version"], row["generatedTokens"], row["newTokens"]) == (
        "cache",
        2,
        0,
        0,
    )


# --- what is shown: the confidence rule where the user stands -----------------------------------
async def test_ghost_text_ends_where_the_model_is_unsure_and_typing_past_it_shows_the_rest(
    cleanup: list,
) -> None:
    """The whole suggestion is generated and kept; what shows ends before the unsure piece.
    Typing past it shows the sure text after it from the same suggestion: no model work."""
    text = "for f in fields if f.compare]"  # pieces: "for ", "f in", " fie", "lds ", "if f", ...
    backend = FakeBackend(
        script=lambda r: text, piece_chars=4, piece_prob=lambda p: 0.001 if p == "if f" else 0.99
    )
    service, events = await serving(backend)
    cleanup.append(service)
    doc = "def match(fields):\n    return [f "
    first = await service.complete(cursor(doc))
    await settle(service)
    assert first.source == "model" and text.startswith(first.text)
    assert events.ghost[-1][1:] == ("for f in fields", True)  # not the unsure "if f..."
    asked = backend.model_requests()
    typed = "for f in fields if f"
    answer = await service.complete(cursor(doc + typed, version=2))
    assert (answer.source, answer.text) == ("cache", ".compare]")
    assert backend.model_requests() == asked


async def test_inside_an_unsure_token_the_model_is_asked_after_a_typical_gap(
    cleanup: list,
) -> None:
    """A user who stopped inside the unsure piece is asked afresh, waiting the typing rhythm
    (engine/service/scheduler.py `mid_token`): the next key would supersede it for free."""
    text = "for f in fields if f.compare]"  # pieces: "for ", "f in", " fie", "lds ", "if f", ...
    backend = FakeBackend(
        script=lambda r: text, piece_chars=4, piece_prob=lambda p: 0.001 if p == "if f" else 0.99
    )
    service, events = await serving(backend, replace(FIXED_DEBOUNCE, debounce_ms=None))
    cleanup.append(service)
    doc = "def match(fields):\n    return [f "
    for i in range(6):  # a rhythm of 150 ms between keys
        service.debounce.keystroke(i * 0.150)
    await service.complete(cursor(doc))
    await settle(service)
    asked = backend.model_requests()
    answer = await service.complete(cursor(doc + "for f in fields i", version=2))
    await settle(service)
    assert answer.source == "model" and backend.model_requests() == asked + 1
    assert events.stats_seen[-1]["version"] == 2
    assert events.stats_seen[-1]["debounceMs"] >= 100  # waited for a next key that never came
    await service.complete(cursor(doc + "for f in fields if f", version=3))
    await settle(service)
    assert events.stats_seen[-1]["version"] == 3
    assert events.stats_seen[-1]["debounceMs"] < 100  # on a boundary: no such wait


async def test_with_the_filter_off_the_whole_suggestion_shows(cleanup: list) -> None:
    text = "for f in fields if f.compare]"
    backend = FakeBackend(
        script=lambda r: text, piece_chars=4, piece_prob=lambda p: 0.001 if p == "if f" else 0.99
    )
    service, events = await serving(backend, replace(FIXED_DEBOUNCE, filter="off"))
    cleanup.append(service)
    await service.complete(cursor("def match(fields):\n    return [f "))
    await settle(service)
    assert events.ghost[-1][1:] == (text, True)


async def test_automatic_requests_give_up_on_unsure_text_and_explicit_ones_do_not(
    cleanup: list,
) -> None:
    """The filter's CPU saving: the engine stops generating where the model's chance of the
    text falls below GIVE_UP_BELOW; with the filter off, or asked for, it never does."""
    for mode, automatic in (("adaptive", GIVE_UP_BELOW), ("fixed", GIVE_UP_BELOW), ("off", 0.0)):
        backend = FakeBackend(script=lambda r: "x")
        service, _ = await serving(backend, replace(FIXED_DEBOUNCE, filter=mode))
        cleanup.append(service)
        await service.complete(cursor(DOC))
        await service.complete(cursor(DOC + "y", version=2), explicit=True)
        await settle(service)
        asked = [r for r in backend.requests if not r.background]
        assert [r.give_up_below for r in asked] == [automatic, 0.0], mode


# --- supersession and streaming ----------------------------------------------------------------
async def test_a_newer_request_supersedes_and_cancels_the_older(cleanup: list) -> None:
    backend = FakeBackend(script=lambda r: "x" * 40, piece_chars=1, prefill_s=0.3)
    service, events = await serving(backend)
    cleanup.append(service)
    older = asyncio.ensure_future(service.complete(cursor(DOC + "w")))
    await asyncio.sleep(0.1)  # its job is in its prefill
    newer = await service.complete(cursor(DOC + "wi", version=2))
    assert (await older).text == "" and newer.text.startswith("x")
    await settle(service)
    stats = [s for s in events.stats_seen if s["source"] == "model"]
    assert stats[0]["cancelled"] and stats[0]["generatedTokens"] == 0  # no compute spent
    recent = [s for s in service.latency.recent if s.source == "model"]
    assert recent[0].cancelled and recent[0].generated_tokens == 0  # the status keeps it too


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


async def test_an_edit_that_leaves_a_running_suggestion_cancels_it(cleanup: list) -> None:
    backend = FakeBackend(script=lambda r: "x" * 400, piece_chars=1, piece_s=0.01)
    service, _ = await serving(backend)
    cleanup.append(service)
    state = cursor(DOC)
    answer = await service.complete(state)  # answered at its first text; it streams on
    assert answer.text
    service.document_changed(state.doc_id, DOC + "#" + state.suffix)  # not the suggestion
    await settle(service)
    assert backend.decode_steps < 300  # stopped, not generated to its end


# --- the rules before the model -----------------------------------------------------------------
async def test_automatic_requests_with_code_after_the_cursor_are_answered_empty(
    cleanup: list,
) -> None:
    backend = FakeBackend(script=lambda r: "x")
    service, _ = await serving(backend)
    cleanup.append(service)
    text = DOC + "width * height  # the area\n"
    state = cursor(text, len(DOC))
    answer = await service.complete(state)
    assert (answer.text, answer.source, answer.reason) == ("", "none", "rest of line")
    assert backend.model_requests() == 0
    assert (await service.complete(state, explicit=True)).source == "model"  # asked: answered


def test_rest_of_line_limit_follows_llama_vim() -> None:
    assert not too_much_after_cursor(")", 8)
    assert not too_much_after_cursor("12345678", 8)
    assert too_much_after_cursor("123456789", 8)
    assert too_much_after_cursor("    return x", 8)  # the cursor in the indentation
    assert not too_much_after_cursor("x)      ", 8)  # trailing whitespace is invisible
    assert not too_much_after_cursor("        ", 8)  # a line of whitespace is empty
    assert too_much_after_cursor(")", 0) and not too_much_after_cursor("", 0)


async def test_disabled_answers_empty_without_the_model(cleanup: list) -> None:
    backend = FakeBackend()
    service, _ = await serving(backend, replace(FIXED_DEBOUNCE, enable=False))
    cleanup.append(service)
    answer = await service.complete(cursor(DOC), explicit=True)
    assert (answer.source, answer.reason) == ("none", "disabled")
    assert backend.model_requests() == 0


async def test_switched_off_shows_nothing_from_the_cache_either(cleanup: list) -> None:
    backend = FakeBackend(script=lambda r: "width * height")
    service, _ = await serving(backend)
    cleanup.append(service)
    assert (await service.complete(cursor(DOC), explicit=True)).text == "width * height"
    assert (await service.complete(cursor(DOC + "w", version=2))).source == "cache"
    service.set_options(replace(FIXED_DEBOUNCE, enable=False))
    answer = await service.complete(cursor(DOC + "wi", version=3))
    assert (answer.text, answer.reason) == ("", "disabled")


# --- deadlines ------------------------------------------------------------------------------------
async def test_a_request_past_its_deadline_is_answered_empty_and_stopped(
    cleanup: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GHOSTFIM_REQUEST_DEADLINE_S", "0.3")
    backend = FakeBackend(script=lambda r: "late", prefill_s=5.0)
    service, _ = await serving(backend)
    cleanup.append(service)
    started = time.perf_counter()
    answer = await service.complete(cursor(DOC))
    assert answer.text == "" and answer.reason == "deadline"
    assert time.perf_counter() - started < 1.0
    await settle(service)  # the job was cancelled, not left running for 5 s


async def test_the_wait_for_a_stalled_suggestion_typed_into_ends_at_the_deadline(
    cleanup: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Typed as far as a streaming suggestion has grown, the request waits for more of it;
    a stream that stalls must not hold the request past the automatic deadline."""
    monkeypatch.setenv("GHOSTFIM_REQUEST_DEADLINE_S", "0.5")
    backend = FakeBackend(script=lambda r: "width * height", piece_chars=6, piece_s=30.0)
    service, _ = await serving(backend)
    cleanup.append(service)
    first = await service.complete(cursor(DOC))
    assert first.text == "width", first  # its first piece, "width "; the next is 30 s off
    started = time.perf_counter()
    typed = await service.complete(cursor(DOC + "width ", version=2))
    waited = time.perf_counter() - started
    # 0.5 s plus the event loop's wake-up: a loaded 2-core machine adds tens of ms, not 1.5 s.
    assert (typed.text, typed.reason) == ("", "deadline") and waited < 2.0, (typed, waited)


# --- requests while the backend loads ---------------------------------------------------------
async def test_requests_while_loading_are_held_and_answered(cleanup: list) -> None:
    # One piece: an automatic answer (at the first visible text) is the whole suggestion.
    backend = FakeBackend(script=lambda r: "width * height", piece_chars=64)
    release = threading.Event()

    def open_slowly() -> FakeBackend:
        assert release.wait(10)
        return backend

    service = CompletionService(RecordingEvents(), opener=FakeOpener({"fake": open_slowly}))
    cleanup.append(service)
    load = service.configure(FIXED_DEBOUNCE)
    explicit = asyncio.ensure_future(service.complete(cursor(DOC, doc_id="e"), explicit=True))
    older = asyncio.ensure_future(service.complete(cursor(DOC + "w", doc_id="a")))
    await asyncio.sleep(0.05)
    newest = asyncio.ensure_future(service.complete(cursor(DOC + "wi", doc_id="a", version=2)))
    assert (await asyncio.wait_for(older, 5)).reason == "superseded"  # not held
    await asyncio.sleep(0.2)
    assert not explicit.done() and not newest.done() and service.status().state == "loading"
    release.set()
    assert await load
    assert (await asyncio.wait_for(explicit, 20)).text == "width * height"
    assert (await asyncio.wait_for(newest, 20)).text.startswith("width")


async def test_the_workspace_index_waits_while_a_model_loads(cleanup: list, tmp_path: Path) -> None:
    """A load times the model's prefill, which sizes every keystroke window: the index
    reads no file beside it, and builds once the model serves."""
    (tmp_path / "a.py").write_text("def f(): ...\n")
    release = threading.Event()

    def open_slowly() -> FakeBackend:
        assert release.wait(10)
        return FakeBackend(script=lambda r: "x")

    service = CompletionService(RecordingEvents(), opener=FakeOpener({"fake": open_slowly}))
    cleanup.append(service)
    load = service.configure(replace(FIXED_DEBOUNCE, workspace_context="auto"))
    for _ in range(100):  # the load starts in the background: the hold comes with its start
        if service.status().state == "loading":
            break
        await asyncio.sleep(0.05)
    service.set_workspace_roots([str(tmp_path)])
    await asyncio.sleep(0.5)
    assert service.status().state == "loading"
    assert (service.workspace.status().state, service.workspace.status().files) == (
        "indexing",
        0,
    )
    release.set()
    assert await load
    index = service.workspace.index
    assert await asyncio.get_running_loop().run_in_executor(None, index.wait, 10)
    assert (index.status().state, index.status().files) == ("ready", 1)


async def test_a_failed_first_load_releases_held_requests(cleanup: list) -> None:
    def broken() -> FakeBackend:
        time.sleep(0.1)
        raise RuntimeError("no such model")

    service = CompletionService(RecordingEvents(), opener=FakeOpener({"broken": broken}))
    cleanup.append(service)
    load = service.configure(replace(FIXED_DEBOUNCE, model_path="broken"))
    answer = await asyncio.wait_for(service.complete(cursor(DOC), explicit=True), 5)
    assert answer.text == "" and answer.reason == "error"
    assert not await load and "no such model" in (service.host.error or "")
    assert status_json(service.status())["state"] == "error"


async def test_a_switch_reruns_the_request_it_cancelled(cleanup: list) -> None:
    old = FakeBackend(script=lambda r: "old " * 30, piece_chars=1, piece_s=0.02, name="old")
    new = FakeBackend(script=lambda r: "new answer", name="new")
    service = CompletionService(
        RecordingEvents(), opener=FakeOpener({"old": lambda: old, "new": lambda: new})
    )
    cleanup.append(service)
    assert await service.configure(replace(FIXED_DEBOUNCE, model_path="old"))
    request = asyncio.ensure_future(service.complete(cursor(DOC), explicit=True))
    while old.decode_steps < 3:  # generating on the old backend
        await asyncio.sleep(0.005)
    assert await service.configure(replace(FIXED_DEBOUNCE, model_path="new"))
    answer = await asyncio.wait_for(request, 20)
    assert answer.text == "new answer" and old.closed


async def test_a_switch_reruns_a_request_whose_job_was_still_queued(cleanup: list) -> None:
    """A request whose job still waits for the model thread when a switch drops it (before
    the swap has run) runs again on the new backend, like one whose job was running."""
    old = FakeBackend(script=lambda r: "old answer", name="old")
    new = FakeBackend(script=lambda r: "new answer", name="new")
    service = CompletionService(
        RecordingEvents(), opener=FakeOpener({"old": lambda: old, "new": lambda: new})
    )
    cleanup.append(service)
    assert await service.configure(replace(FIXED_DEBOUNCE, model_path="old"))
    # The model thread is busy with work no cancel stops (a budgets change, say) ...
    busy = service.worker.submit(lambda _cancel: time.sleep(0.4), Priority.INTERACTIVE, "busy")
    await asyncio.sleep(0.05)
    queued = asyncio.ensure_future(service.complete(cursor(DOC), explicit=True))
    await asyncio.sleep(0.05)  # ... so the request's job waits behind it
    assert service.worker.running is not None and not queued.done()
    assert await service.configure(replace(FIXED_DEBOUNCE, model_path="new"))
    assert (await asyncio.wait_for(queued, 20)).text == "new answer"
    assert busy.future is not None


async def test_budgets_change_in_place(cleanup: list) -> None:
    backend = FakeBackend()
    opener = FakeOpener({"fake": lambda: backend})
    service = CompletionService(RecordingEvents(), opener=opener)
    cleanup.append(service)
    assert await service.configure(FIXED_DEBOUNCE)
    assert await service.configure(replace(FIXED_DEBOUNCE, prefix_tokens=300, suffix_tokens=40))
    await settle(service)
    last = backend.budgets[-1]
    assert (last.prefix_tokens, last.suffix_tokens, last.keystroke_prefill_ms) == (300, 40, 80.0)
    assert not backend.closed and opener.models_opened() == ["fake"]  # reconfigured, not reopened
    assert service.status().budgets is not None
    assert service.status().budgets.effective.prefix_tokens == 300


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


# --- accept signals -----------------------------------------------------------------------------
async def test_a_shown_answer_is_an_item_whose_accept_counts(cleanup: list) -> None:
    backend = FakeBackend(script=lambda r: "width * height")
    service, events = await serving(backend)
    cleanup.append(service)
    answer = await service.complete(cursor(DOC), explicit=True)
    assert answer.item_id
    assert service.accepted(answer.item_id)
    assert not service.accepted("never-shown")
    acceptance = events.statuses[-1]["acceptance"]
    assert (acceptance["shown"], acceptance["accepted"]) == (1, 1)
    assert acceptance["acceptedChars"] == len("width * height")


async def test_an_answer_and_its_growth_are_one_item(cleanup: list) -> None:
    text = "width * height * depth * scale"
    backend = FakeBackend(script=lambda r: text, piece_chars=3, piece_s=0.05)
    service, events = await serving(backend)
    cleanup.append(service)
    answer = await service.complete(cursor(DOC))
    await settle(service)
    assert answer.item_id and set(events.ghost_items) == {answer.item_id}
    assert service.status().acceptance.shown == 1


async def test_growth_shown_after_its_request_was_cancelled_names_an_item(cleanup: list) -> None:
    """Under load the editor's $/cancelRequest can be handled before the text the model had
    already streamed: the request gets no answer, but that text goes on screen (the editor
    shows it over what the user types next, VS Code from ghostfim/ghostText). Its accept must
    name an item, or a Tab on it counts for nothing (a CI run's e2e failure)."""
    text = "width * height"
    backend = FakeBackend(script=lambda r: text, piece_chars=2, piece_s=0.01, prefill_s=0.2)
    service, events = await serving(backend)
    cleanup.append(service)
    request = asyncio.ensure_future(service.complete(cursor(DOC)))
    await asyncio.sleep(0.1)  # its job is in its prefill
    time.sleep(0.5)  # a busy event loop: the streamed text waits in its queue,
    request.cancel()  # behind which the cancel lands
    with pytest.raises(asyncio.CancelledError):
        await request
    await settle(service)
    shown = [
        (t, item) for (_, t, _), item in zip(events.ghost, events.ghost_items, strict=True) if t
    ]
    assert shown, "the streamed text reached the editor"
    items = {item for _, item in shown}
    assert len(items) == 1 and "" not in items
    assert service.accepted(items.pop())
    assert service.status().acceptance.accepted == 1


# --- the request the service builds ---------------------------------------------------------------
def test_postprocess_setting_reaches_the_request() -> None:
    settings, problems = parse_settings({"postprocess": False, "maxRestOfLine": 20})
    assert problems == []
    service = CompletionService(NoEvents(), settings, opener=FakeOpener())  # type: ignore[arg-type]
    state = CursorState("file:///a.py", 1, None, "x = ", "\n", 0, 4, 5)
    request: CompletionRequest = service.requests.request_for(state, "full")
    assert request.postprocess is False and request.mode == "full"
    assert service.requests.request_for(state, "keystroke").postprocess is False


def test_completion_options_follow_the_configuration() -> None:
    config = EngineConfig(max_tokens=12, multiline="never", debounce_ms=33)
    service = CompletionService(NoEvents(), config, opener=FakeOpener())  # type: ignore[arg-type]
    state = cursor(DOC)
    request = service.requests.request_for(state, "keystroke")
    assert (request.max_tokens, request.multiline, request.doc_id) == (12, "never", state.doc_id)
    assert request.prefix == state.prefix and request.cursor_line == state.cursor_line
    assert service.requests.request_for(state, "keystroke", 5).max_tokens == 5
    assert service.debounce.fixed_ms == 33


# --- context from other files (engine/context/feed.py) -------------------------------------------
OTHER = "def helper(values):\n" + "".join(f"    h_{i} = {i}\n" for i in range(12))
CURRENT = "import os\n\n\ndef main():\n    total = helper([1, 2])\n    "


async def test_the_service_feeds_the_ring_and_only_full_requests_carry_it(
    cleanup: list,
) -> None:
    backend = FakeBackend(script=lambda r: "x")
    service, _ = await serving(backend, replace(FIXED_DEBOUNCE, extra_context=True))
    cleanup.append(service)
    service.context.ring.update_interval_s = 0.0
    service.set_workspace_roots(["file:///p"])
    service.document_opened("file:///p/pkg/util.py", OTHER)
    state = CursorState("file:///p/main.py", 1, None, CURRENT, "\n", 5, len(CURRENT), 30)
    extra = service.requests.request_for(state, "full").extra_context
    assert extra is not None and extra.project == "p" and extra.filename == "main.py"
    assert [c.filename for c in extra.chunks] == ["pkg/util.py"]
    assert service.requests.request_for(state, "keystroke").extra_context is None
    # Completions that move from one open document to another give the left one's chunk.
    b_text = "".join(f"    b_{i} = compute_b({i})\n" for i in range(60))
    service.document_opened("file:///p/b.py", b_text)
    service.context.ring.commit(force=True)
    at_b = cursor(b_text, b_text.index("    b_40"), doc_id="file:///p/b.py")
    await service.complete(at_b, explicit=True)
    await service.complete(cursor(CURRENT, doc_id="file:///p/main.py"), explicit=True)
    await settle(service)
    explicit = [r for r in backend.requests if r.mode == "full" and not r.background]
    carried = explicit[-1].extra_context  # the full prompt in main.py carried the ring ...
    assert carried is not None and carried.filename == "main.py"
    around = [c for c in carried.chunks if c.filename == "b.py" and "b_40 " in c.text]
    assert around  # ... with b.py's chunk around its last cursor, not only its top
    service.set_options(replace(service.config, extra_context=False))
    assert service.requests.request_for(state, "full").extra_context is None
    service.set_options(replace(service.config, extra_context=True, extra_context_tokens=0))
    assert service.requests.request_for(state, "full").extra_context is None
    assert service.status().context.chunks >= 1
