"""What the editor shows for one document, and the one object that changes it.

A document shows at most one suggestion: its *target*, the suggestion and the cursor state it
was asked at, plus what the user has typed into it since. The screen

- is pointed at a suggestion when a request answers from the model or from a typed-through
  suggestion (`answering`, `typed_through`), and when a refresh replaces it (`refreshed`);
- streams the target's growth to the editor as it is generated (`grew`), each time naming
  the acceptance item the text is (engine/service/acceptance.py);
- hears of every edit (`edited`): typing into the target keeps it, typing all of it is an
  insert (an accept or typing it out), anything else leaves it (a refusal, once it was read).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Protocol

from ghostfim.engine.service.acceptance import AcceptanceLog
from ghostfim.engine.service.cursor import CursorState
from ghostfim.engine.service.suggestions import Suggestion
from ghostfim.engine.text.place import Place


class GhostSink(Protocol):
    def ghost_text(self, state: CursorState, text: str, done: bool, item_id: str) -> None: ...


@dataclass
class GhostTarget:
    """The suggestion the editor shows for a document, the state it was asked at (and that
    state's place), and what has been typed into it since. `item_id` is its acceptance item,
    made the first time it shows text: by its answer, or by streamed growth when the request
    was cancelled before its answer (the editor shows that growth too, and its accept must
    name an item)."""

    suggestion: Suggestion
    state: CursorState
    place: Place
    typed: str = ""
    item_id: str = ""
    asked_at: float = field(default_factory=time.perf_counter)  # the keystroke's request


class Screen:
    """What one document shows; the one writer of its target."""

    def __init__(self, acceptance: AcceptanceLog, sink: GhostSink) -> None:
        self.target: GhostTarget | None = None
        self._acceptance = acceptance
        self._sink = sink

    # --- what is shown --------------------------------------------------------------------
    def answering(
        self, suggestion: Suggestion, state: CursorState, place: Place, asked_at: float
    ) -> GhostTarget:
        """A model job's suggestion for `state` is what this document shows from now on."""
        self.target = GhostTarget(suggestion, state, place, asked_at=asked_at)
        return self.target

    def typed_through(
        self,
        suggestion: Suggestion,
        state: CursorState,
        place: Place,
        typed: str,
        asked_at: float,
    ) -> GhostTarget:
        """The user typed `typed` into `suggestion`: the rest of it is shown at `state`."""
        self.target = GhostTarget(suggestion, state, place, typed, asked_at=asked_at)
        return self.target

    def refreshed(self, state: CursorState, suggestion: Suggestion) -> None:
        """The full prompt's suggestion for `state` replaces the one shown there (the item on
        screen now shows it; a new item if none was shown)."""
        target = self.target
        if target is None or target.state is not state:
            return  # the user moved on: nothing on screen is this state's
        self.target = replace(target, suggestion=suggestion)
        shown = suggestion.shown()
        self._acceptance.now_shows(state.doc_id, target.suggestion, suggestion, shown)
        self._sink.ghost_text(state, shown, True, self.item(self.target, shown, explicit=False))

    def grew(self, suggestion: Suggestion, explicit: bool) -> None:
        """`suggestion` grew (or ended): when it is what is shown, the editor sees its growth
        from where the user has typed to."""
        target = self.target
        if target is None or target.suggestion is not suggestion:
            return
        if not suggestion.text.startswith(target.typed):
            return
        shown = suggestion.shown(target.typed)
        item_id = self.item(target, shown, explicit=explicit)
        self._acceptance.grown(target.state.doc_id, suggestion, shown)
        self._sink.ghost_text(target.state, shown, suggestion.done, item_id)

    def item(self, target: GhostTarget, text: str, *, explicit: bool) -> str:
        """The id of the item `target` shows `text` as ("" while it shows nothing)."""
        if not target.item_id and text:
            state = target.state
            target.item_id = self._acceptance.show(
                state.doc_id,
                text,
                target.place,
                now=time.monotonic(),
                ttgt_ms=(time.perf_counter() - target.asked_at) * 1000,
                explicit=explicit,
                origin=target.suggestion,
            )
        return target.item_id

    # --- what the user did ----------------------------------------------------------------
    def edited(self, text: str) -> bool:
        """The document is now `text`. Typing into the target keeps it; anything else takes
        it off the screen, which this returns True for (background work for it is
        unwanted). The editor inserting all of it (an accept, whose command follows) or the
        user typing all of it is an insert, not a refusal."""
        target = self.target
        if target is None:
            return False
        state, suggestion, typed = target.state, target.suggestion, target.typed
        if typed_into(state, suggestion, text, typed):
            self._acceptance.inserted(state.doc_id, len(text) - state.doc_length)
            return False
        self.target = None
        if typed_all_of(state, suggestion, text, typed):
            self._acceptance.inserted(state.doc_id, len(text) - state.doc_length)
        else:
            self._acceptance.left(state.doc_id, time.monotonic())
        return True


def _edges_intact(state: CursorState, text: str, delta: int) -> bool:
    """The text either side of `state`'s cursor is unchanged in `text`, `delta` characters
    having been inserted at the cursor."""
    before = text[max(0, state.offset - len(state.edge_before)) : state.offset]
    after = text[state.offset + delta : state.offset + delta + len(state.edge_after)]
    return before == state.edge_before and after == state.edge_after


def typed_into(state: CursorState, suggestion: Suggestion, text: str, typed: str = "") -> bool:
    """Whether `text` (the document after an edit) is `state`'s document with characters of
    the suggestion typed at the cursor (after `typed`, already typed into it at `state`): the
    text either side of the cursor is intact."""
    delta = len(text) - state.doc_length
    return (
        delta >= 0
        and _edges_intact(state, text, delta)
        and suggestion.could_continue(typed + text[state.offset : state.offset + delta])
    )


def typed_all_of(state: CursorState, suggestion: Suggestion, text: str, typed: str = "") -> bool:
    """Whether `text` is `state`'s document with the rest of the suggestion (what it shows, no
    trailing whitespace) typed at the cursor: all of it taken."""
    delta = len(text) - state.doc_length
    inserted = typed + text[state.offset : state.offset + delta]
    shown = typed + suggestion.shown(typed)
    return (
        delta > 0
        and bool(shown)
        and inserted.rstrip() == shown
        and _edges_intact(state, text, delta)
    )
