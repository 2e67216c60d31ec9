"""Document synchronisation done by the LSP rules, not pygls'.

pygls 2.1 applies incremental edits to `str.splitlines()` lines, which also break at \\x0b,
\\x0c, \\x1c-\\x1e, \\x85, U+2028 and U+2029; an LSP line ends only at \\n, \\r\\n or \\r, so a
document holding any of those was edited at the wrong place and the server's text drifted from
the editor's. It also rebuilds every line of the document for each edit, and reads a document
that is not open from disk (any path a client names, however large or binary). `SyncedProtocol`
replaces pygls' didOpen/didChange/didClose with `SyncedDocument`, which:

- applies edits at code-point offsets from `ghostfim.lsp.documents.LineIndex` (LSP line ends, the
  negotiated position encoding) and updates the line index around the edit only;
- treats out-of-range edit positions the way vscode-languageserver-textdocument does (the
  reference most clients mirror): a line past the end is the end of the document, a column past
  the end of its line is the end of the line, a reversed range is swapped; each such edit is
  reported with window/showMessage, because a client that sends one is out of step;
- never reads the disk: a document the client has not opened does not exist.

With GHOSTFIM_DEBUG_PROTOCOL=1 the server also answers `ghostfim/documentText` `{uri}` with the
text it holds (or only its digest), so tests can check it against the client's copy.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Generator, Sequence
from typing import Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import PositionCodec

from ghostfim.engine import env
from ghostfim.engine.service.cursor import CursorState, cursor_state
from ghostfim.lsp.documents import LineIndex, PositionError, chars_to_units, locate

log = logging.getLogger("ghostfim.sync")

DOCUMENT_TEXT = "ghostfim/documentText"


def encoding_name(value: object) -> str:
    """'utf-8', 'utf-16' or 'utf-32' from pygls' encoding (an enum member or a string).

    `str()` of lsprotocol's PositionEncodingKind is 'PositionEncodingKind.Utf16', not 'utf-16':
    comparing that to 'utf-16' silently picked UTF-8 widths for UTF-16 clients.
    """
    name = str(getattr(value, "value", value) or "utf-16").lower()
    return name if name in ("utf-8", "utf-16", "utf-32") else "utf-16"


def document_key(uri: str) -> str:
    """How pygls' workspace keys documents (percent-decoded URI)."""
    return unquote(uri)


class SyncedDocument(TextDocument):
    """An open document: its text, its LSP line index, and the client's position encoding."""

    def __init__(
        self,
        uri: str,
        text: str,
        version: int | None,
        language_id: str | None,
        encoding: str,
    ) -> None:
        super().__init__(
            uri,
            source=text,
            version=version,
            language_id=language_id,
            sync_kind=types.TextDocumentSyncKind.Incremental,
            position_codec=PositionCodec(encoding=encoding),
        )
        self.encoding = encoding
        self.index = LineIndex.of(text)

    # --- reading ------------------------------------------------------------------------------
    @property
    def source(self) -> str:
        return self._source or ""  # never the file on disk (pygls reads it when None)

    @property
    def lines(self) -> Sequence[str]:
        """The document's LSP lines, each with its line break (pygls' helpers use these)."""
        text, starts = self.source, [int(s) for s in self.index.starts]
        ends = [*starts[1:], len(text)]
        return tuple(text[s:e] for s, e in zip(starts, ends, strict=True) if e > s)

    def offset_at(self, line: int, character: int) -> int:
        """The offset of a request's position; PositionError when it is not in the document."""
        offset, problem = locate(self.index, self.source, line, character, self.encoding)
        if problem is not None:
            raise PositionError(problem)
        return offset

    def cursor_at(self, position: types.Position) -> CursorState:
        """What the engine needs of a request's cursor; -32602 when it is not in the document
        (a column past its line's end is the end of the line)."""
        try:
            offset = self.offset_at(position.line, position.character)
        except PositionError as exc:
            raise JsonRpcInvalidParams(f"{self.uri}: {exc}") from None
        return cursor_state(
            self.uri,
            self.version or 0,
            position,
            self.source,
            offset,
            position.line,
            self.language_id or "",
        )

    def offset_at_position(self, client_position: types.Position) -> int:
        return self.clamped_offset(client_position)[0]

    def clamped_offset(self, position: types.Position) -> tuple[int, str | None]:
        """The offset of an edit's position, clamped as vscode-languageserver-textdocument does,
        and what was wrong with it (None when the position is in the document)."""
        return locate(self.index, self.source, position.line, position.character, self.encoding)

    def position_at(self, offset: int) -> types.Position:
        """The LSP position of an offset, in the document's encoding."""
        line = self.index.line_of(offset)
        start = self.index.line_start(line)
        return types.Position(line, chars_to_units(self.source[start:offset], self.encoding))

    # --- editing ------------------------------------------------------------------------------
    def apply_change(self, change: types.TextDocumentContentChangeEvent) -> None:
        self.apply(change)

    def apply(self, change: types.TextDocumentContentChangeEvent) -> str | None:
        """Apply one content change; returns what was wrong with its range, if anything."""
        text = self.source
        if not isinstance(change, types.TextDocumentContentChangePartial):
            self._source = change.text
            self.index = LineIndex.of(change.text)
            return None
        start, start_problem = self.clamped_offset(change.range.start)
        end, end_problem = self.clamped_offset(change.range.end)
        problem = start_problem or end_problem
        if start > end:
            start, end = end, start
            problem = problem or "its range ends before it starts"
        new_text = text[:start] + change.text + text[end:]
        self.index = self.index.replaced(new_text, start, end, len(change.text))
        self._source = new_text
        return problem

    def digest(self) -> dict[str, Any]:
        text = self.source
        return {
            "uri": self.uri,
            "version": self.version,
            "length": len(text),
            "utf16Length": chars_to_units(text, "utf-16"),
            "lineCount": self.index.line_count,
            # UTF-8 with surrogatepass: JSON can carry lone surrogates (\\ud800) and so can we.
            "sha256": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
        }


def _range_text(change: types.TextDocumentContentChangePartial) -> str:
    r = change.range
    return f"{r.start.line}:{r.start.character}-{r.end.line}:{r.end.character}"


class SyncedProtocol(LanguageServerProtocol):
    """didOpen/didChange/didClose kept in `SyncedDocument`s (same names as pygls' handlers,
    so these replace them)."""

    def document(self, uri: str) -> SyncedDocument | None:
        doc = self.workspace.text_documents.get(document_key(uri))
        return doc if isinstance(doc, SyncedDocument) else None

    def show_warning(self, message: str) -> None:
        self.notify(
            types.WINDOW_SHOW_MESSAGE,
            types.ShowMessageParams(type=types.MessageType.Warning, message=message),
        )
        log.warning(message)

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(
        self, params: types.DidOpenTextDocumentParams
    ) -> Generator[Any, Any, None]:
        item = params.text_document
        if self.document(item.uri) is not None:
            # The newer text wins; a client that opens twice has lost track of what it sent.
            self.show_warning(f"ghostfim: {item.uri} was opened again; using the new text")
        encoding = encoding_name(self.workspace.position_encoding)
        doc = SyncedDocument(item.uri, item.text, item.version, item.language_id, encoding)
        self.workspace.text_documents[document_key(item.uri)] = doc
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_OPEN)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(
        self, params: types.DidChangeTextDocumentParams
    ) -> Generator[Any, Any, None]:
        ident = params.text_document
        doc = self.document(ident.uri)
        if doc is None:
            self.show_warning(
                f"ghostfim: textDocument/didChange for {ident.uri}, which is not open: ignored"
            )
            return
        for change in params.content_changes:
            problem = doc.apply(change)
            if problem is not None:
                assert isinstance(change, types.TextDocumentContentChangePartial)
                self.show_warning(
                    f"ghostfim: textDocument/didChange for {ident.uri} (version {ident.version}):"
                    f" range {_range_text(change)}: {problem}; applied it clamped to the document"
                )
        if doc.version is not None and ident.version is not None and ident.version <= doc.version:
            self.show_warning(
                f"ghostfim: textDocument/didChange for {ident.uri}: version {ident.version} does"
                f" not follow {doc.version}"
            )
        doc.version = ident.version
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(
        self, params: types.DidCloseTextDocumentParams
    ) -> Generator[Any, Any, None]:
        uri = params.text_document.uri
        if self.workspace.text_documents.pop(document_key(uri), None) is None:
            self.show_warning(f"ghostfim: textDocument/didClose for {uri}, which is not open")
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CLOSE)) is not None:
            yield handler, (params,), None


def open_document(server: LanguageServer, uri: str) -> SyncedDocument:
    """The open document a request names, or the request's error (-32602)."""
    protocol = server.protocol
    doc = protocol.document(uri) if isinstance(protocol, SyncedProtocol) else None
    if doc is None:
        raise JsonRpcInvalidParams(f"document {uri} is not open")
    return doc


def cursor_of(server: LanguageServer, uri: str, position: types.Position) -> CursorState:
    """What the engine needs of a request's cursor in an open document; -32602 when the
    document is not open or the position is not in it (a long column is the line's end)."""
    return open_document(server, uri).cursor_at(position)


def register_debug_features(server: LanguageServer) -> bool:
    """`ghostfim/documentText`, only when GHOSTFIM_DEBUG_PROTOCOL=1 (tests and fuzzers use it
    to compare the server's text with the client's; editors never need it)."""
    if not env.debug_protocol():
        return False

    @server.feature(DOCUMENT_TEXT)
    def document_text(ls: LanguageServer, params: Any = None) -> dict[str, Any]:
        """`{uri, digestOnly?}` -> `{uri, version, length, utf16Length, lineCount, sha256,
        text?}`; the text is left out when digestOnly is true."""
        uri = getattr(params, "uri", None)
        if not isinstance(uri, str):
            raise JsonRpcInvalidParams(f"{DOCUMENT_TEXT} needs {{uri: string}}")
        doc = open_document(ls, uri)
        result = doc.digest()
        if not getattr(params, "digestOnly", False):
            result["text"] = doc.source
        return result

    return True
