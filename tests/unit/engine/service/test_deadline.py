"""engine/service/deadline.py: how long a request may take, read from the environment at call
time (engine/env.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ghostfim.engine import env
from ghostfim.engine.config import EngineConfig
from ghostfim.engine.service.deadline import answer_deadline_s, hold_limit_s
from ghostfim.engine.tuning import AUTO_MAX_TOKENS, DEFINITIONS_AUTO_MAX_TOKENS
from tests.support.fakes import FakeBackend, cursor, serving


class Backend:  # only what the deadline asks of a backend
    def __init__(self, per_token_ms: float | None) -> None:
        self.per_token_ms = per_token_ms

    def expected_prefill_ms(self, n_tokens: int) -> float | None:
        return None if self.per_token_ms is None else 45 + self.per_token_ms * n_tokens


def test_explicit_deadline_follows_the_measured_prefill_speed() -> None:
    automatic, explicit = env.automatic_deadline_s(), env.explicit_deadline_s()
    assert (automatic, explicit) == (8.0, 120.0)
    tokens = 1024
    assert answer_deadline_s(True, None, tokens) == automatic  # no model yet
    assert answer_deadline_s(True, Backend(None), tokens) == automatic  # remote
    assert answer_deadline_s(True, Backend(2.0), tokens) == automatic  # fast model: ~2 s
    # this machine's small model on 2 cores: a full prompt with workspace context (~1,350
    # tokens) prefills in ~6 s, which the automatic deadline cut before its first line
    assert 14.0 < answer_deadline_s(True, Backend(4.5), 1350) < 15.0  # twice 6.1 s, plus 2 s
    slow = Backend(21.0)
    assert answer_deadline_s(False, slow, tokens) == automatic  # automatic
    assert 40.0 < answer_deadline_s(True, slow, tokens) < 50.0  # ~21.5 s, twice plus 2 s
    assert answer_deadline_s(True, Backend(200.0), tokens) == explicit  # capped
    assert answer_deadline_s(True, slow, 0) == automatic  # nothing to prefill


def test_explicit_requests_on_a_slow_model_get_longer() -> None:
    slow = FakeBackend(prefill_ms_per_token=21.0)
    fast = FakeBackend(prefill_ms_per_token=2.0)
    automatic = env.automatic_deadline_s()
    assert answer_deadline_s(True, slow, 1024) > automatic
    assert answer_deadline_s(True, fast, 1024) == automatic
    assert answer_deadline_s(False, slow, 1024) == automatic


def test_the_explicit_deadline_counts_the_context_a_full_prompt_may_hold() -> None:
    plain = EngineConfig(prefix_tokens=512, suffix_tokens=128, workspace_context="off")
    assert plain.full_prompt_tokens == 640
    workspace = replace(plain, workspace_context="auto")
    assert workspace.full_prompt_tokens == 640 + DEFINITIONS_AUTO_MAX_TOKENS  # auto: its cap
    both = replace(workspace, workspace_context_tokens=200, extra_context=True)
    assert both.full_prompt_tokens == 640 + 200 + AUTO_MAX_TOKENS
    model = Backend(4.5)
    assert answer_deadline_s(True, model, workspace.full_prompt_tokens) > answer_deadline_s(
        True, model, plain.full_prompt_tokens
    )


def test_the_deadlines_are_read_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GHOSTFIM_REQUEST_DEADLINE_S", "0.3")
    monkeypatch.setenv("GHOSTFIM_EXPLICIT_DEADLINE_S", "30")
    monkeypatch.setenv("GHOSTFIM_HOLD_LIMIT_S", "2.5")
    assert answer_deadline_s(False, None, 1024) == 0.3
    assert answer_deadline_s(True, Backend(200.0), 1024) == 30.0
    assert hold_limit_s() == 2.5
    monkeypatch.setenv("GHOSTFIM_REQUEST_DEADLINE_S", "soon")  # not a number: the default
    assert answer_deadline_s(False, None, 1024) == 8.0


async def test_an_explicit_request_at_its_deadline_gets_the_whole_lines_written_so_far(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The user asked and waits for a block: at the deadline, its first whole lines are
    answered, not nothing. The line still being written is left out."""
    monkeypatch.setenv("GHOSTFIM_REQUEST_DEADLINE_S", "1.0")
    block = "total = 0\nfor v in values:\n    total += v\nreturn total / len(values)\n"
    slow = FakeBackend(script=lambda r: block, piece_chars=4, piece_s=0.1)  # 1.7 s in all
    service, _ = await serving(slow)
    try:
        answer = await service.complete(cursor("def mean(values):\n    "), explicit=True)
        assert answer.text and block.startswith(answer.text + "\n")  # whole lines only
        assert answer.text != block.rstrip()  # the deadline came first
        assert answer.source == "model" and answer.item_id
        # An explicit request with no whole line in time still answers empty.
        nothing = FakeBackend(script=lambda r: block, prefill_s=2.0)
        service2, _ = await serving(nothing)
        try:
            empty = await service2.complete(cursor("def mean(values):\n    "), explicit=True)
            assert empty.text == "" and empty.reason == "deadline"
        finally:
            await service2.shutdown()
    finally:
        await service.shutdown()
