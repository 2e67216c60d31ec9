"""What the service knows of one document: one record, instead of a dict per idea."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ghostfim.engine.service.acceptance import AcceptanceLog
from ghostfim.engine.service.suggestions import Suggestion
from ghostfim.engine.text.place import place_of

PREFIX_WINDOW_CHARS = 64_000  # text before the cursor handed to the prompt builder
SUFFIX_WINDOW_CHARS = 16_000
CONSISTENCY_CHARS = 64  # text either side of a job's cursor that must survive an edit


@dataclass(frozen=True)
class CursorState:
    doc_id: str
    version: int
    position: Any  # echoed back in ghost_text events (the LSP position)
    prefix: str  # text before the cursor, at most PREFIX_WINDOW_CHARS
    suffix: str  # text after the cursor, at most SUFFIX_WINDOW_CHARS
    cursor_line: int
    offset: int  # absolute character offset of the cursor in the document
    doc_length: int
    edge_before: str = ""  # raw document text just before / after the cursor (line ends as
    edge_after: str = ""  # the document has them): an edit elsewhere must leave these intact
    language: str = ""  # the editor's language id (acceptance statistics are kept by it)

    @property
    def rest_of_line(self) -> str:
        nl = self.suffix.find("\n")
        return self.suffix if nl < 0 else self.suffix[:nl]


@dataclass
class Answer:
    text: str
    source: Literal["model", "cache", "none"]
    reason: str = ""
    item_id: str = ""  # the shown item's id, handed back by the editor on accept
    target: GhostTarget | None = field(default=None, repr=False)  # what it shows, and where

    @property
    def suggestion(self) -> Suggestion | None:
        return None if self.target is None else self.target.suggestion


@dataclass
class DocJob:
    """The model job currently generating for a document, and what it was made for."""

    state: CursorState
    suggestion: Suggestion
    cancel: Callable[[], None]


@dataclass
class GhostTarget:
    """The suggestion the editor shows for a document, the state it was asked at and what has
    been typed into it since: `ghost_text` events stream its growth from there. `item_id` is
    the acceptance item it shows (engine/service/acceptance.py), made the first time it shows
    text: by its answer, or by streamed growth when the request was cancelled before its answer
    (the editor shows that growth too, and its accept must name an item)."""

    suggestion: Suggestion
    state: CursorState
    typed: str = ""
    item_id: str = ""
    asked_at: float = field(default_factory=time.perf_counter)  # the keystroke's request

    def item(self, acceptance: AcceptanceLog, text: str, *, explicit: bool) -> str:
        """The id of the item this target shows `text` as ("" while it shows nothing)."""
        if not self.item_id and text:
            state = self.state
            self.item_id = acceptance.show(
                state.doc_id,
                text,
                place_of(state.language, state.prefix, state.suffix),
                now=time.monotonic(),
                ttgt_ms=(time.perf_counter() - self.asked_at) * 1000,
                explicit=explicit,
                origin=self.suggestion,
            )
        return self.item_id


@dataclass
class DocumentRecord:
    latest: int = 0  # the newest request's number (supersession)
    newer: asyncio.Event = field(default_factory=asyncio.Event)  # set when superseded
    job: DocJob | None = None
    ghost: GhostTarget | None = None
    last_state: CursorState | None = None
    mid_token: bool = False  # the newest request stands inside a token its suggestion hid

    def next_request(self, number: int) -> None:
        """A new request for this document: earlier ones are superseded."""
        self.latest = number
        self.mid_token = False
        self.newer.set()
        self.newer = asyncio.Event()
