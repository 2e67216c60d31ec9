"""What feeds the ring of chunks from other files (engine/context.py), from editor events.

An opened document gives its top (imports, first definitions: LSP tells no cursor); an edited
one the chunk around the edit, at most once a CHANGE_PICK_S (the ring must not move with
typing); a saved one the chunk around its last edit or completion; a document the user leaves
(completions move to another) the chunk around its last cursor. Full prompts then take what the
ring holds, when `extra_context` is on.
"""

from __future__ import annotations

import time

from ghostfim.engine.context.ring import (
    CHANGE_PICK_S,
    ContextRing,
    ExtraContext,
    document_name,
    root_path,
)
from ghostfim.engine.service.documents import CursorState, DocumentRecord


class ContextFeed:
    def __init__(self) -> None:
        self.ring = ContextRing()
        self.workspace_roots: list[str] = []

    def set_workspace_roots(self, roots: list[str]) -> None:
        """Workspace folders (URIs or paths): chunks are named relative to them."""
        self.workspace_roots = [root_path(r) for r in roots if r]

    def _name(self, doc_id: str) -> str:
        return document_name(doc_id, self.workspace_roots)

    def _pick(self, doc_id: str, record: DocumentRecord, text: str, line: int | None) -> None:
        record.context_picked = time.monotonic()
        self.ring.pick(text, self._name(doc_id), doc_id, line)

    def opened(self, doc_id: str, record: DocumentRecord, text: str) -> None:
        self._pick(doc_id, record, text, None)

    def edited(self, doc_id: str, record: DocumentRecord, text: str, line: int | None) -> None:
        if line is not None:
            record.context_line = line
        picked = record.context_picked
        if picked is not None and time.monotonic() - picked < CHANGE_PICK_S:
            return
        self._pick(doc_id, record, text, record.context_line)

    def saved(self, doc_id: str, record: DocumentRecord, text: str) -> None:
        self._pick(doc_id, record, text, record.context_line)

    def client_text(self, text: str, doc_id: str | None = None) -> int:
        """Text the client sends (`ghostfim/context`); returns the chunks queued."""
        name = self._name(doc_id) if doc_id else "snippet"
        return self.ring.add_text(text, name, doc_id or "")

    def cursor_moved(
        self,
        state: CursorState,
        record: DocumentRecord,
        left: CursorState | None,
        left_record: DocumentRecord | None,
    ) -> None:
        """Where the user completes is where the next save's chunk is picked; a document the
        user left (still open) gives the chunk around its last cursor."""
        record.context_line = state.cursor_line
        if left is not None and left_record is not None and left.doc_id != state.doc_id:
            self._pick(left.doc_id, left_record, left.prefix + left.suffix, left.prefix.count("\n"))

    def closed(self, doc_id: str) -> None:
        self.ring.forget(doc_id)

    def for_prompt(
        self, state: CursorState, enabled: bool, budget: int | None
    ) -> ExtraContext | None:
        """What a full prompt for `state` gets from the ring (None when switched off)."""
        if not enabled or budget == 0:
            return None
        chunks = self.ring.snapshot(state.doc_id)
        if not chunks:
            return None
        roots = self.workspace_roots
        project = roots[0].rstrip("/").rsplit("/", 1)[-1] if roots else ""
        return ExtraContext(chunks, self._name(state.doc_id), project, budget)

    def status(self) -> dict[str, object]:
        return self.ring.status()
