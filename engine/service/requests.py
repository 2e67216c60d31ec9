"""What a cursor state asks of the backend, and what of its answer is worth showing: the one
place that turns a `CursorState` into a `CompletionRequest` and a confidence rule.

A keystroke (engine/service/keystroke.py) asks once per request; the follow-ups
(engine/service/followups.py) ask for the states they prepare. Both read the service's current
configuration, the filter and the context from other files through this object, never the
service itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from ghostfim.engine.backend import CompletionRequest
from ghostfim.engine.config import EngineConfig
from ghostfim.engine.context.definitions import DefinitionBlock
from ghostfim.engine.context.feed import ContextFeed
from ghostfim.engine.service.cursor import CursorState
from ghostfim.engine.service.filter import ConfidenceFilter
from ghostfim.engine.service.workspace import WorkspaceContext
from ghostfim.engine.text.confidence import Confidence
from ghostfim.engine.text.place import Place, place_of

PromptMode = Literal["keystroke", "full"]


class Requests(Protocol):
    """What the follow-ups need: a request for a state, and the rule of its place."""

    def request_for(
        self,
        state: CursorState,
        mode: PromptMode,
        max_tokens: int | None = None,
        *,
        explicit: bool = False,
    ) -> CompletionRequest: ...

    def rule_for(
        self, state: CursorState, explicit: bool = False, place: Place | None = None
    ) -> Confidence | None: ...

    def block_switch(self, state: CursorState) -> BlockSwitch | None: ...


@dataclass(frozen=True)
class BlockSwitch:
    """The workspace context that full prompts moved on to and keystrokes do not use yet
    (engine/service/workspace.py): `request` prefills it for the keystrokes (a warm-up job),
    `done` then makes keystrokes take it."""

    request: CompletionRequest
    done: Callable[[], None]


class RequestFactory:
    """Requests and rules from the configuration in effect when asked."""

    def __init__(
        self,
        config: Callable[[], EngineConfig],
        confidence: ConfidenceFilter,
        context: ContextFeed,
        workspace: WorkspaceContext | None = None,
    ) -> None:
        self._config = config
        self._filter = confidence
        self._context = context
        self._workspace = workspace

    def rule_for(
        self, state: CursorState, explicit: bool = False, place: Place | None = None
    ) -> Confidence | None:
        """What is worth showing of a suggestion for this state (engine/service/filter.py)."""
        if place is None:
            place = place_of(state.language, state.prefix, state.suffix)
        return self._filter.confidence_for(place, explicit)

    def request_for(
        self,
        state: CursorState,
        mode: PromptMode,
        max_tokens: int | None = None,
        *,
        explicit: bool = False,
        block: DefinitionBlock | None = None,
    ) -> CompletionRequest:
        """A keystroke prompt (bounded prefill) or a full one (with the context from other
        files, when it is on); either with the workspace's context, when it is on (`block`:
        this one rather than the one the workspace gives the mode)."""
        c = self._config()
        extra = None
        if mode == "full":
            extra = self._context.for_prompt(state.doc_id, c.extra_context, c.extra_context_tokens)
        definitions = None
        members = (
            None
            if self._workspace is None
            else self._workspace.members_for(state.doc_id, state.cursor_line)
        )
        if self._workspace is not None and c.workspace_context_tokens != 0:
            definitions = block or self._workspace.block_for(state, full=mode == "full")
            if definitions is not None and definitions.budget != c.workspace_context_tokens:
                definitions = replace(definitions, budget=c.workspace_context_tokens)
        return CompletionRequest(
            prefix=state.prefix,
            suffix=state.suffix,
            doc_id=state.doc_id,
            cursor_line=state.cursor_line,
            mode=mode,
            max_tokens=max_tokens or c.max_tokens,
            multiline=c.multiline,
            postprocess=c.postprocess,
            extra_context=extra,
            definitions=definitions,
            members=members,
            give_up_below=self._filter.give_up_below(explicit),
        )

    def block_switch(self, state: CursorState) -> BlockSwitch | None:
        """The keystrokes' switch to the block full prompts use, when one is due."""
        workspace = self._workspace
        block = None if workspace is None else workspace.switch_due(state.doc_id)
        if workspace is None or block is None or self._config().workspace_context_tokens == 0:
            return None
        # The start window behind the block: half the prefill of the wide one on a CPU, so the
        # keystrokes take the block lulls sooner (the widen then follows, engine/local/plan.py).
        request = replace(
            self.request_for(state, "keystroke", block=block), max_tokens=0, start_window=True
        )
        return BlockSwitch(request, lambda: workspace.switched(state.doc_id, block))
