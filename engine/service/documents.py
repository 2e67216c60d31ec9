"""What the service knows of one document: one record, instead of a dict per idea."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from ghostfim.engine.service.cursor import CursorState
from ghostfim.engine.service.screen import GhostTarget, Screen
from ghostfim.engine.service.suggestions import Suggestion


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
class DocumentRecord:
    screen: Screen  # what the editor shows for it
    latest: int = 0  # the newest request's number (supersession)
    newer: asyncio.Event = field(default_factory=asyncio.Event)  # set when superseded
    job: DocJob | None = None
    mid_token: bool = False  # the newest request stands inside a token its suggestion hid

    def next_request(self, number: int) -> None:
        """A new request for this document: earlier ones are superseded."""
        self.latest = number
        self.mid_token = False
        self.newer.set()
        self.newer = asyncio.Event()

    def supersede_job(self) -> None:
        """Stop the job still generating for this document (its text stays in the cache)."""
        job, self.job = self.job, None
        if job is not None and not job.suggestion.done:
            job.cancel()
