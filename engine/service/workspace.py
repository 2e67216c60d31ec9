"""The workspace in the prompt: the index of the workspace's files, fed from the editor's
events, and the definitions each request takes of it (engine/context/index.py,
engine/context/definitions.py).

The index runs in its own thread; everything here only queues work for it or looks things up.
Open documents reach it from the editor's text, at most once a DOCUMENT_UPDATE_S per document
while the user types (a parse per keystroke would cost CPU the model wants); saved and closed
ones, and files the editor reports changed (`workspace/didChangeWatchedFiles`), from disk.

A block holds the definitions of the names near the cursor and the snippets of the
workspace most like the lines before it (engine/context/snippets.py).

Which block a request gets is sticky per document, because the block sits before the whole
prefix and a new block costs the prefill of everything after it:
- a full prompt (a pause's refresh, an explicit request) looks again, and keeps its block when
  the definitions it finds are all in it already and its snippets are still about as like the
  code before the cursor as the best ones now (KEEP_SIMILARITY);
- a keystroke prompt takes the block the keystrokes' KV cache holds, even one a few lines out
  of date. A document's first prompt is cold anyway: it takes the block at once where the
  keystroke-sized block prefills within a keystroke's block budget (`first_block_fits`:
  always with the "auto" budget, which is sized so; a GPU with any budget). That first
  suggestion is the one a user reads at the dwell after a file opens, and it is where the
  block helps most (bench/results/workspace-dwell-seed41.json: keystrokes saved at the dwell
  1.47x, on screen at 1.2 s instead of 0.6 s). When full prompts moved on to a new block (or
  the first prompt went without one), a warm-up job prefills it for the keystrokes at the
  user's next lull (engine/service/followups.py), and only then do keystrokes switch to it
  (`switch_due`, `switched`): no keystroke while typing pays a block's cold prefill.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import unquote, urlparse

from ghostfim.engine.context.definitions import (
    ContextEntry,
    DefinitionBlock,
    SnippetEntry,
    select_definitions,
)
from ghostfim.engine.context.files import read_source
from ghostfim.engine.context.guide import Members
from ghostfim.engine.context.index import IndexStatus, WorkspaceIndex
from ghostfim.engine.context.snippets import (
    MIN_SIMILARITY,
    Hit,
    hide_secret_literals,
    jaccard,
    query_words,
    words,
)
from ghostfim.engine.memory import CacheUsage
from ghostfim.engine.service.cursor import CursorState

DOCUMENT_UPDATE_S = 3.0  # an open document's text reaches the index at most this often
FileChange = tuple[str, bool]  # (URI or path, deleted)
SNIPPETS = 2  # similar windows a block holds at most (the budget may keep fewer)
# Lines of the current file around the cursor that the prompt's prefix and suffix hold: its
# windows there are no snippets (about 512 tokens of prefix, 128 of suffix).
SNIPPET_SKIP_BEFORE = 60
SNIPPET_SKIP_AFTER = 20
# A block's snippets stay while they are this like the code before the cursor, against the
# best found now (new snippets cost a prefill; a slightly better one is not worth it).
KEEP_SIMILARITY = 0.8


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
    block: DefinitionBlock | None = None  # keystroke prompts' block (sticky: the docstring)
    next: DefinitionBlock | None = None  # full prompts' block: the keystrokes' next one


class WorkspaceContext:
    def __init__(
        self,
        index: WorkspaceIndex | None = None,
        clock: Callable[[], float] = time.monotonic,
        skip: Callable[[str], bool] = lambda _doc_id: False,
        first_block_fits: Callable[[], bool] = lambda: False,
    ) -> None:
        self.index = index or WorkspaceIndex()
        self.clock = clock
        # Whether a document's first prompt takes the block (engine/service/completion.py
        # decides from the budget and the serving backend's speed); else its keystrokes wait
        # for the warm-up at the first lull.
        self.first_block_fits = first_block_fits
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
                doc.block = doc.next = None
            self.last_block = None

    def stop(self) -> None:
        self.index.stop()

    def model_loading(self, loading: bool) -> None:
        """A model is loading: the index waits between files until it serves (see
        WorkspaceIndex.hold: the load times the prefill that sizes every keystroke's window)."""
        self.index.hold(loading)

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
        """The workspace context for a request at `state` (None: off, or nothing to add)."""
        doc = self._docs.get(state.doc_id)
        if not self.enabled or doc is None:
            return None
        self._flush(doc)
        if doc.block is None:
            # The first request in this document: its prompt is cold anyway, and the block adds
            # at most a keystroke block's prefill to the wait for the first ghost text (the
            # suggestion a user reads before typing). Where it would add more, keystrokes
            # start without it and take it after the warm-up at the first lull.
            doc.next = self._choose(doc, state, None)
            doc.block = doc.next if self.first_block_fits() else DefinitionBlock(state.language, ())
        elif full:
            doc.next = self._choose(doc, state, doc.next)
        block = doc.next if full else doc.block
        if block or full:  # a keystroke's deferred empty block hides no selection (status)
            self.last_block = block
        return block or None

    def members_for(self, doc_id: str, line: int) -> Members | None:
        """The lookup of the names after `a.b.` in this document at the cursor's `line`
        (engine/context/guide.py); None when the context is off or the document is no file
        of the workspace."""
        doc = self._docs.get(doc_id)
        if not self.enabled or doc is None or not self._roots:
            return None
        index, path = self.index, doc.path
        return lambda dotted: index.members(path, dotted, line)

    def switch_due(self, doc_id: str) -> DefinitionBlock | None:
        """The block full prompts moved on to that keystroke prompts do not use yet (None: no
        switch due): a warm-up job prefills it for them, then calls `switched`."""
        doc = self._docs.get(doc_id)
        if not self.enabled or doc is None or doc.next is None or doc.next is doc.block:
            return None
        return doc.next if doc.next or doc.block else None  # nothing to switch from or to

    def switched(self, doc_id: str, block: DefinitionBlock) -> None:
        """The keystrokes' KV cache holds `block` now: keystroke prompts take it."""
        doc = self._docs.get(doc_id)
        if doc is not None and doc.next is block:
            doc.block = block

    def _choose(
        self, doc: _Document, state: CursorState, current: DefinitionBlock | None
    ) -> DefinitionBlock:
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
        query = query_words(state.prefix)
        line = state.cursor_line
        skip = [(doc.path, line - SNIPPET_SKIP_BEFORE, line + SNIPPET_SKIP_AFTER)]
        hits = self.index.similar(query, SNIPPETS, skip)
        snippets = tuple(s for s in (self._read(hit, query) for hit in hits) if s is not None)
        if (
            current is not None
            and current.language == state.language
            and _within(entries, current.entries)
            and _still_like(current.snippets, snippets, query)
        ):
            return current
        return DefinitionBlock(state.language, entries, snippets=snippets)

    def _read(self, hit: Hit, query: frozenset[str]) -> SnippetEntry | None:
        """A window's lines as the file on disk has them now; None when they changed so much
        since they were indexed that they no longer match."""
        source = read_source(hit.path, self.index.limits.file_bytes)
        if source is None:
            return None
        lines = source.text.split("\n")[hit.line : hit.end]
        while lines and not lines[-1].strip():
            lines.pop()
        text = "\n".join(lines)
        if jaccard(query, words(text)) < MIN_SIMILARITY:
            return None
        return SnippetEntry(self._relative(hit.path), hit.line, hide_secret_literals(text))

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


def _still_like(
    current: tuple[SnippetEntry, ...], found: tuple[SnippetEntry, ...], query: frozenset[str]
) -> bool:
    """The current snippets are about as like the code before the cursor as the ones found
    now (or none is found now)."""
    if not found:
        return True
    if not current:
        return False
    now = sum(jaccard(query, words(s.text)) for s in found) / len(found)
    kept = sum(jaccard(query, words(s.text)) for s in current) / len(current)
    return kept >= KEEP_SIMILARITY * now


def _within(new: tuple[ContextEntry, ...], current: tuple[ContextEntry, ...]) -> bool:
    """Every definition found now is in the current block already (or none was found)."""
    return {(e.file, e.name) for e in new} <= {(e.file, e.name) for e in current}
