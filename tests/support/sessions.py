"""Driving a loaded ModelSession's mechanism directly (prefill of a given token list), as the
mechanics tests do, without going through the planner's prompt choice."""

from __future__ import annotations

from ghostfim.engine.backend import CancelToken
from ghostfim.engine.local.plan import PromptPlan
from ghostfim.engine.local.session import ModelSession
from ghostfim.engine.local.speed import PrefillCostModel
from ghostfim.engine.prompt.builder import Prompt


def full_plan(
    session: ModelSession,
    tokens: list[int],
    *,
    stable: int = 0,
    chunk_tokens: int | None = None,
) -> PromptPlan:
    """A plan that puts `tokens` in the full-prompt slot (tokens before `stable` finish their
    chunk on a cancel; chunks of the planner's size unless given)."""
    prompt = Prompt(list(tokens), len(tokens), 0, 0, 0, stable_tokens=stable)
    chunk = chunk_tokens or session.planner.chunk_tokens()
    return PromptPlan(prompt, session.slots.plan_full(), chunk, stable)


def prefill(
    session: ModelSession,
    tokens: list[int],
    cancel: CancelToken | None = None,
    **plan: int,
) -> tuple[int, int]:
    """Prefill `tokens` into the full-prompt slot; (reused, new) tokens."""
    _first, *_, reused, new, _ms = session.prefill(
        full_plan(session, tokens, **plan), cancel or CancelToken()
    )
    return reused, new


def set_cost(session: ModelSession, cost: PrefillCostModel) -> None:
    """The session's prefill cost model, for its prefills and its plans alike."""
    session.cost = session.planner.cost = cost
