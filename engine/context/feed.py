"""What feeds the ring of chunks from other files (engine/context/ring.py), from editor events.

An opened document gives its top (imports, first definitions: LSP tells no cursor); an edited
one the chunk around the edit, at most once a CHANGE_PICK_S (the ring must not move with
typing); a saved one the chunk around its last edit or completion; a document the user leaves
(completions move to another) the chunk around its last cursor. Full prompts then take what the
ring holds, when `extra_context` is on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ghostfim.engine.context.ring import (
    CHANGE_PICK_S,
    ContextRing,
    ExtraContext,
    RingStatus,
    document_name,
    root_path,
)
from ghostfim.engine.memory import CacheUsage

Left = tuple[str, str, int]  # a document the user left: its id, its text, the cursor's line


@dataclass
class _Where:
    """Per document: the line last edited or completed at, and when it last gave a chunk."""

    line: int | None = None
    picked: float | None = None  # monotonic seconds


class ContextFeed:
    def __init__(self, skip: Callable[[str], bool] = lambda _doc_id: False) -> None:
        self.ring = ContextRing()
        self.workspace_roots: list[str] = []
        self._docs: dict[str, _Where] = {}
        # Documents that give no chunks: those over the size limit (engine/service/
        # doclimit.py), whose picks would split all of their text into lines.
        self.skip = skip

    def set_workspace_roots(self, roots: list[str]) -> None:
        """Workspace folders (URIs or paths): chunks are named relative to them."""
        self.workspace_roots = [root_path(r) for r in roots if r]

    def _name(self, doc_id: str) -> str:
        return document_name(doc_id, self.workspace_roots)

    def _where(self, doc_id: str) -> _Where:
        return self._docs.setdefault(doc_id, _Where())

    def _pick(self, doc_id: str, text: str, line: int | None) -> None:
        if self.skip(doc_id):
            return
        self._where(doc_id).picked = time.monotonic()
        self.ring.pick(text, self._name(doc_id), doc_id, line)

    def opened(self, doc_id: str, text: str) -> None:
        self._pick(doc_id, text, None)

    def edited(self, doc_id: str, text: str, line: int | None) -> None:
        where = self._where(doc_id)
        if line is not None:
            where.line = line
        if where.picked is not None and time.monotonic() - where.picked < CHANGE_PICK_S:
            return
        self._pick(doc_id, text, where.line)

    def saved(self, doc_id: str, text: str) -> None:
        self._pick(doc_id, text, self._where(doc_id).line)

    def client_text(self, text: str, doc_id: str | None = None) -> int:
        """Text the client sends (`ghostfim/context`); returns the chunks queued."""
        name = self._name(doc_id) if doc_id else "snippet"
        return self.ring.add_text(text, name, doc_id or "")

    def cursor_moved(self, doc_id: str, line: int, left: Left | None = None) -> None:
        """A completion at `line` of `doc_id`: where the next save's chunk is picked. When the
        previous completion was in another (still open) document, `left` is that document, its
        text and its line then: it gives the chunk around its last cursor."""
        self._where(doc_id).line = line
        if left is not None and left[0] != doc_id and left[0] in self._docs:
            self._pick(*left)

    def closed(self, doc_id: str) -> None:
        self._docs.pop(doc_id, None)
        self.ring.forget(doc_id)

    def for_prompt(self, doc_id: str, enabled: bool, budget: int | None) -> ExtraContext | None:
        """What a full prompt in `doc_id` gets from the ring (None when switched off)."""
        if not enabled or budget == 0:
            return None
        chunks = self.ring.snapshot(doc_id)
        if not chunks:
            return None
        roots = self.workspace_roots
        project = roots[0].rstrip("/").rsplit("/", 1)[-1] if roots else ""
        return ExtraContext(chunks, self._name(doc_id), project, budget)

    def status(self) -> RingStatus:
        return self.ring.status()

    def usage(self) -> CacheUsage:
        return self.ring.usage()
