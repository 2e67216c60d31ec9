"""The workspace in the prompt: the index of the workspace's files, fed from the editor's
events, and the definitions each request takes of it (engine/context/index.py,
engine/context/definitions.py).

The index runs in its own thread; everything here only queues work for it or looks things up.
Open documents reach it from the editor's text, at most once a DOCUMENT_UPDATE_S per document
while the user types (a parse per keystroke would cost CPU the model wants); saved and closed
ones, and files the editor reports changed (`workspace/didChangeWatchedFiles`), from disk.

Which block a request gets is sticky per document, because the block sits before the whole
prefix and a new block costs the prefill of everything after it:
- a keystroke prompt takes the document's current block, even one a few lines out of date;
- a full prompt (a pause's refresh, an explicit request) looks again, and keeps the current
  block when the definitions it finds are all in it already; only new names make a new block,
  whose prefill then happens at that pause, not on a keystroke.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import unquote, urlparse

from ghostfim.engine.context.definitions import ContextEntry, DefinitionBlock, select_definitions
from ghostfim.engine.context.index import IndexStatus, WorkspaceIndex
from ghostfim.engine.memory import CacheUsage
from ghostfim.engine.service.cursor import CursorState

DOCUMENT_UPDATE_S = 3.0  # an open document's text reaches the index at most this often
FileChange = tuple[str, bool]  # (URI or path, deleted)


def path_of(doc_id: str) -> str | None:
    """A document's file path (file: URIs and plain paths); None for untitled: and others."""
    parsed = urlparse(doc_id)
    if parsed.scheme == "file":
        return unquote(parsed.path)
    if not parsed.scheme and os.path.isabs(doc_id):
        return doc_id
    return None


@dataclass
class _Document:
    path: str
    pending: str | None = None  # text not yet given to the index
    sent: float = float("-inf")  # monotonic seconds of the last update given
    block: DefinitionBlock | None = None  # the current block (sticky: see the docstring)


class WorkspaceContext:
    def __init__(
        self,
        index: WorkspaceIndex | None = None,
        clock: Callable[[], float] = time.monotonic,
        skip: Callable[[str], bool] = lambda _doc_id: False,
    ) -> None:
        self.index = index or WorkspaceIndex()
        self.clock = clock
        # Documents over the size limit (engine/service/doclimit.py): the index gets no text
        # of theirs from the editor (the index's own size cap skips them on disk too).
        self.skip = skip
        self.enabled = False
        self._roots: list[str] = []
        self._docs: dict[str, _Document] = {}
        self.last_block: DefinitionBlock | None = None  # the last request's, for the status

    # --- life ----------------------------------------------------------------------------------
    def set_roots(self, roots: Iterable[str]) -> None:
        """The workspace folders (URIs or paths): indexed now when the context is on."""
        self._roots = [p for p in (path_of(r) or "" for r in roots) if p]
        if self.enabled:
            self.index.start(self._roots)

    def set_enabled(self, enabled: bool) -> None:
        """`workspaceContext`: off stops the index and drops what it held."""
        if enabled == self.enabled:
            return
        self.enabled = enabled
        if enabled:
            self.index.start(self._roots)
            for doc in self._docs.values():
                doc.sent = float("-inf")  # the open documents' text goes in at the next edit
        else:
            self.index.stop()
            for doc in self._docs.values():
                doc.block = None
            self.last_block = None

    def stop(self) -> None:
        self.index.stop()

    def rescan(self) -> None:
        """Where the editor reports no file changes: walk the workspace for them."""
        if self.enabled:
            self.index.rescan()

    # --- the editor's events -------------------------------------------------------------------
    def opened(self, doc_id: str, text: str) -> None:
        path = path_of(doc_id)
        if path is not None:
            self._docs[doc_id] = _Document(path)
            self.edited(doc_id, text)

    def edited(self, doc_id: str, text: str) -> None:
        doc = self._docs.get(doc_id)
        if doc is None or self.skip(doc_id):
            return
        doc.pending = text
        self._flush(doc)

    def saved(self, doc_id: str) -> None:
        doc = self._docs.get(doc_id)
        if doc is not None and doc.pending is not None:
            self._send(doc)

    def closed(self, doc_id: str) -> None:
        """The file on disk is what the index keeps of a closed document."""
        doc = self._docs.pop(doc_id, None)
        if doc is not None and self.enabled:
            self.index.file_changed(doc.path)

    def files_changed(self, changes: Iterable[FileChange]) -> None:
        """Files the editor saw change on disk. Open documents keep the editor's text."""
        if not self.enabled:
            return
        open_paths = {doc.path for doc in self._docs.values()}
        for uri, deleted in changes:
            path = path_of(uri)
            if path is None or (path in open_paths and not deleted):
                continue
            if deleted:
                self.index.file_deleted(path)
            else:
                self.index.file_changed(path)

    def _flush(self, doc: _Document) -> None:
        if doc.pending is not None and self.clock() - doc.sent >= DOCUMENT_UPDATE_S:
            self._send(doc)

    def _send(self, doc: _Document) -> None:
        if self.enabled and doc.pending is not None:
            self.index.update_document(doc.path, doc.pending)
        doc.pending = None
        doc.sent = self.clock()

    # --- what a request gets -------------------------------------------------------------------
    def block_for(self, state: CursorState, full: bool) -> DefinitionBlock | None:
        """The definitions for a request at `state` (None: off, or nothing to add)."""
        doc = self._docs.get(state.doc_id)
        if not self.enabled or doc is None:
            return None
        self._flush(doc)
        if doc.block is None or full:
            doc.block = self._choose(doc, state)
        self.last_block = doc.block
        return doc.block or None

    def _choose(self, doc: _Document, state: CursorState) -> DefinitionBlock:
        # The cursor's windows of text (the document's start may be cut off): its line there.
        text = state.prefix + state.suffix
        picked = select_definitions(
            self.index,
            doc.path,
            text,
            state.cursor_line,
            self._relative,
            text_line=state.prefix.count("\n"),
        )
        entries = tuple(entry for _, entry in picked)
        block = DefinitionBlock(state.language, entries)
        current = doc.block
        if (
            current is not None
            and current.language == block.language
            and _within(entries, current.entries)
        ):
            return current
        return block

    def _relative(self, path: str) -> str:
        for root in sorted(self._roots, key=len, reverse=True):
            real = os.path.realpath(root)
            for base in (root, real):
                if path.startswith(base.rstrip("/") + "/"):
                    return path[len(base.rstrip("/")) + 1 :]
        return os.path.basename(path)

    # --- status --------------------------------------------------------------------------------
    def status(self) -> IndexStatus:
        return self.index.status()

    def usage(self) -> CacheUsage:
        return self.index.usage()


def _within(new: tuple[ContextEntry, ...], current: tuple[ContextEntry, ...]) -> bool:
    """Every definition found now is in the current block already (or none was found)."""
    return {(e.file, e.name) for e in new} <= {(e.file, e.name) for e in current}
