"""engine/service/host.py: what serves, one load at a time, newest wins; budgets in place and
their clamps reported. Fake backends from a fake opener (tests/support/fakes.py)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from ghostfim.engine.config import EngineConfig
from ghostfim.engine.service.completion import CompletionService
from ghostfim.lsp.settings import parse_settings
from ghostfim.lsp.wire import status_json
from tests.support.fakes import FakeBackend, FakeOpener, RecordingEvents, cursor, settle


def config(model: str | None, **changes: object) -> EngineConfig:
    return replace(EngineConfig(debounce_ms=0), model_path=model, **changes)  # type: ignore[arg-type]


async def test_model_switches_are_serialized_and_coalesced() -> None:
    """One load at a time; switches asked for during a load wait, and only the newest of
    them loads; a skipped one is still checked; what serves is always on record."""
    log: list[str] = []
    gate = threading.Event()

    def backend(name: str, wait: bool = False) -> Callable[[], FakeBackend]:
        def open_backend() -> FakeBackend:
            if wait:
                gate.wait(10)
            return FakeBackend(name=name, log=log)

        return open_backend

    opener = FakeOpener(
        {"t": backend("t"), "a": backend("a", wait=True), "c": backend("c")},
        broken={"broken-b": "broken-b is broken", "x": "x is broken"},
    )
    events = RecordingEvents()
    service = CompletionService(events, opener=opener)
    host = service.host
    try:
        assert await service.configure(config("t"))
        assert host.serving is not None and host.serving.model == "t" and host.switching is None
        slow = service.configure(config("a"))
        await asyncio.sleep(0.05)
        assert host.switching is not None and host.switching.model == "a"
        assert status_json(service.status())["switchingTo"] == "a"
        skipped = service.configure(config("broken-b"))
        newest = service.configure(config("c"))
        assert await asyncio.wait_for(skipped, 5) is False  # replaced before it started
        assert host.switching.model == "c"
        gate.set()
        assert await asyncio.wait_for(slow, 10) is False  # superseded: opened, then closed
        assert await asyncio.wait_for(newest, 10) is True
        assert host.serving.model == "c" and host.switching is None
        assert opener.most_at_once == 1, "two loads ran at once"
        assert log == ["open t", "open a", "close a", "open c", "close t"], log
        await asyncio.sleep(0.1)
        assert any("broken-b is broken" in p for p in events.problems), events.problems
        assert "broken-b" not in opener.models_opened()  # checked, never opened

        # A failed switch: the old backend serves and stays on record; going back to it
        # loads nothing and drops the failure's message.
        assert not await service.configure(config("x"))
        assert host.serving.model == "c" and "x is broken" in (host.error or "")
        assert host.state == "ready" and host.backend is not None
        assert host.backend.info.name == "c"
        opened = len(opener.opened)
        assert await service.configure(config("c"))
        assert host.error is None and host.state == "ready" and len(opener.opened) == opened

        # Back to what serves while a switch loads: the load is abandoned when it ends.
        gate.clear()
        opener.factories["d"] = backend("d", wait=True)
        abandoned = service.configure(config("d"))
        await asyncio.sleep(0.05)
        assert await service.configure(config("c"))
        assert host.switching is None
        gate.set()
        assert await asyncio.wait_for(abandoned, 10) is False
        assert host.serving.model == "c" and log[-2:] == ["open d", "close d"], log

        # Away, back and away again while the first load runs: that load is wanted again.
        gate.clear()
        opener.factories["e"] = backend("e", wait=True)
        first = service.configure(config("e"))
        await asyncio.sleep(0.05)
        assert await service.configure(config("c"))
        again = service.configure(config("e"))
        assert host.switching is not None and host.switching.model == "e"
        gate.set()
        assert await asyncio.wait_for(again, 10) is True and first.result() is True
        assert host.serving.model == "e" and log[-2:] == ["open e", "close c"], log
    finally:
        gate.set()
        await service.shutdown()
    assert log[-1] == "close e", log


async def test_a_preset_and_its_cached_file_are_one_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`{"size": "tiny"}` and the path of the cached tiny file name the same file: switching
    between them loads nothing."""
    from ghostfim.engine.setup.presets import PRESETS

    monkeypatch.setenv("GHOSTFIM_CACHE_DIR", str(tmp_path))
    file = tmp_path / "models" / PRESETS["tiny"].filename
    file.parent.mkdir()
    file.write_bytes(b"GGUF")
    opener = FakeOpener({"tiny": lambda: FakeBackend(name="tiny")})
    service = CompletionService(RecordingEvents(), opener=opener)
    try:
        assert await service.configure(EngineConfig(model_size="tiny", debounce_ms=0))
        assert await service.configure(EngineConfig(model_path=str(file), debounce_ms=0))
        assert opener.models_opened() == ["tiny"]
    finally:
        await service.shutdown()


async def test_the_default_model_is_asked_for_only_when_nothing_is_named() -> None:
    opener = FakeOpener(
        {None: lambda: FakeBackend(name="default"), "named": lambda: FakeBackend(name="n")}
    )
    service = CompletionService(RecordingEvents(), opener=opener)
    try:
        assert await service.configure(EngineConfig(debounce_ms=0))
        assert service.host.serving is not None and service.host.serving.label == "default model"
        assert await service.configure(EngineConfig(debounce_ms=0), default_model="named")
        assert opener.models_opened() == [None, "named"]  # the server's --model
        assert service.host.backend is not None and service.host.backend.info.name == "n"
    finally:
        await service.shutdown()


async def test_a_failed_path_then_a_size_typo_keeps_what_serves() -> None:
    """The settings as the server applies them: a model.path that does not exist fails and
    the tiny model keeps serving; then a size typo keeps what serves: no switch to the
    default model is ever asked for."""
    opener = FakeOpener(
        {"tiny": lambda: FakeBackend(name="tiny"), None: lambda: FakeBackend(name="default")}
    )
    events = RecordingEvents()
    service = CompletionService(events, opener=opener)
    try:
        settings, problems = parse_settings({"model": {"size": "tiny"}, "debounceMs": 0})
        assert problems == [] and await service.configure(settings)
        settings, problems = parse_settings({"model": {"path": "/nonexistent/x.gguf"}}, settings)
        assert problems == []
        assert not await service.configure(settings)
        host = service.host
        assert host.backend is not None and host.backend.info.name == "tiny"
        assert "x.gguf" in (host.error or "") and host.state == "ready"
        settings, problems = parse_settings({"model": {"size": "huge"}}, settings)
        assert len(problems) == 1 and "model.size" in problems[0]
        await service.configure(settings)
        await asyncio.sleep(0.2)
        assert None not in opener.models_opened(), opener.models_opened()
        assert all(spec.model is not None for spec in opener.checked)
        assert host.switching is None and host.backend.info.name == "tiny"
        assert (await service.complete(cursor("x = "), explicit=True)).source == "model"
    finally:
        await service.shutdown()


async def test_a_clamped_budget_is_in_the_status_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A backend that cannot honour prefixTokens 16384 (a KV slot of 3776 prompt tokens)
    answers with the budgets in effect; the status names the setting, what was asked, what is
    in effect and why, and the log warns once."""
    caplog.set_level(logging.WARNING, logger="ghostfim")
    backend = FakeBackend(prompt_room=3776)
    events = RecordingEvents()
    service = CompletionService(events, opener=FakeOpener({"fake": lambda: backend}))
    try:
        assert await service.configure(config("fake", prefix_tokens=16384))
        await settle(service)
        budgets = status_json(service.status())["budgets"]
        assert budgets is not None
        [clamp] = budgets["clamped"]
        assert (clamp["setting"], clamp["asked"]) == ("prefixTokens", 16384)
        assert clamp["effective"] == budgets["effective"]["prefixTokens"] < 16384
        assert "3776" in clamp["reason"]
        assert events.statuses[-1]["budgets"] == budgets  # published, not only on request
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "prefix_tokens" in warnings[0].getMessage()
        # The same budgets again: nothing new to say.
        assert await service.configure(config("fake", prefix_tokens=16384))
        await settle(service)
        assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1
        # Budgets it can honour: no clamp left.
        assert await service.configure(config("fake", prefix_tokens=512))
        await settle(service)
        assert status_json(service.status())["budgets"]["clamped"] == []
    finally:
        await service.shutdown()


async def test_loading_progress_and_state_are_reported() -> None:
    opener = FakeOpener({"fake": lambda: FakeBackend()})
    opener.progress_steps = (0.1, 0.5, 1.0)
    events = RecordingEvents()
    service = CompletionService(events, opener=opener)
    try:
        assert service.status().state == "loading" and service.status().model is None
        assert await service.configure(config("fake"))
        await asyncio.sleep(0.05)  # the load thread's progress arrives through the loop
        percentages = [p for _, p, done in events.progresses if not done]
        assert percentages[0] == 0 and 50 in percentages
        assert events.progresses[-1][2] is True and "ready on cpu" in events.progresses[-1][0]
        assert any(s["loading"] for s in events.statuses)
        status = status_json(service.status())
        assert status["state"] == "ready" and status["loading"] is None
        assert status["model"]["name"] == "fake" and status["switchingTo"] is None
    finally:
        await service.shutdown()


async def test_a_failing_request_is_an_error_once_and_a_good_one_clears_it() -> None:
    calls = [0]

    def script(_request: object) -> str:
        calls[0] += 1
        if calls[0] <= 2:
            raise RuntimeError("server down")
        return "fine"

    backend = FakeBackend(script=script)  # type: ignore[arg-type]
    events = RecordingEvents()
    service = CompletionService(events, opener=FakeOpener({"fake": lambda: backend}))
    try:
        assert await service.configure(config("fake"))
        for version in (1, 2):
            await service.complete(cursor("x = ", version=version), explicit=True)
        assert service.host.state == "error" and "server down" in (service.host.error or "")
        assert len(events.problems) == 1  # once per distinct message, not per request
        assert (await service.complete(cursor("x = ", version=3), explicit=True)).text == "fine"
        assert service.host.state == "ready" and service.host.error is None
    finally:
        await service.shutdown()


async def test_shutdown_closes_what_serves_and_refuses_new_switches() -> None:
    backend = FakeBackend()
    service = CompletionService(RecordingEvents(), opener=FakeOpener({"fake": lambda: backend}))
    assert await service.configure(config("fake"))
    await service.shutdown()
    assert backend.closed and service.host.backend is None and service.host.closed
    assert not await service.configure(config("other"))
