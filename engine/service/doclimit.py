"""Documents too large for whole-document work (the `maxDocumentMb` setting, 2 MB by default).

A minified bundle, a log or a binary file opened as text is still completed: the model only
ever sees windows of text around the cursor (engine/service/cursor.py). What such a document
does not get is what reads or copies all of it on the server's side: the context picks made when
it is opened, edited, saved or left (engine/context/feed.py, which splits the whole text into
lines each time). The editor's copy of its text and its line index (lsp/textsync.py, which
positions need) are all the server keeps of it.

The user is told once per document and session, when it is opened (or an edit first takes it
over the limit): a message that explains why suggestions there know nothing of other files,
not one per keystroke.
"""

from __future__ import annotations

from ghostfim.engine.context.ring import document_name
from ghostfim.engine.memory import MIB, TOLD_DOCUMENTS_BYTES, ByteLRU, str_bytes


class DocumentSizeLimit:
    """Which open documents are over the limit, and which the user was told of."""

    def __init__(self, max_mb: float) -> None:
        self.max_mb = max_mb
        self.over: set[str] = set()  # open documents over the limit
        # Told already (a URI stays told when its document closes and opens again), bounded.
        self._told: ByteLRU[str, bool] = ByteLRU(TOLD_DOCUMENTS_BYTES, _uri_bytes)

    @property
    def max_chars(self) -> int:
        """The limit in characters: a document's size in bytes, for ASCII text (the text is a
        Python string: its length is known without reading it, its UTF-8 size is not)."""
        return int(self.max_mb * MIB)

    def is_over(self, doc_id: str) -> bool:
        return doc_id in self.over

    def seen(self, doc_id: str, length: int) -> str | None:
        """A document of `length` characters (opened, or edited): whether it is over the
        limit now, and the message to show when the user has not been told of it yet."""
        if length <= self.max_chars:
            self.over.discard(doc_id)
            return None
        self.over.add(doc_id)
        if doc_id in self._told:
            return None
        self._told[doc_id] = True
        return (
            f"ghostfim: {document_name(doc_id)} is {length / MIB:.1f} MB, over maxDocumentMb "
            f"({self.max_mb:g} MB): completed from the text around the cursor only; none of it "
            "is read for context"
        )

    def closed(self, doc_id: str) -> None:
        self.over.discard(doc_id)


def _uri_bytes(uri: str, _told: bool) -> int:
    return str_bytes(uri)
