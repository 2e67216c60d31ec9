"""`ghostfim serve`: the LSP server. Handlers stay thin: get the document, ask the engine's
CompletionService, convert to protocol types. See docs/protocol.md for the surface.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Generator
from typing import Any, ClassVar

from lsprotocol import types
from pygls.protocol.language_server import lsp_method

from ghostfim.engine import env
from ghostfim.engine.memory import fix_mmap_threshold
from ghostfim.engine.service.completion import CompletionService
from ghostfim.lsp import VERSION
from ghostfim.lsp.documents import units_to_chars
from ghostfim.lsp.redaction import SecretsCut, settings_secrets
from ghostfim.lsp.rpcguard import CLIENT_ANSWER_S, GuardedProtocol, GuardedServer
from ghostfim.lsp.settings import Settings, parse_settings, unwrap_section
from ghostfim.lsp.textsync import (
    SyncedProtocol,
    cursor_of,
    encoding_name,
    register_debug_features,
)
from ghostfim.lsp.watching import file_changes, watch_workspace_files
from ghostfim.lsp.wire import ACCEPTED_COMMAND, LspEvents, accept_command, status_json

log = logging.getLogger("ghostfim.server")

# Accept signals (docs/protocol.md): the command every item carries (lsp/wire.py); our clients
# also report an item shown and a part of it taken, in the shapes GitHub Copilot's language
# server uses.
DID_SHOW = "textDocument/didShowCompletion"
DID_PARTIALLY_ACCEPT = "textDocument/didPartiallyAcceptCompletion"
DID_DISMISS = "ghostfim/didDismissCompletion"


class GhostfimProtocol(GuardedProtocol, SyncedProtocol):
    """Prefers UTF-8 positions whenever the client offers them (UTF-16 otherwise)."""

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Generator[Any, Any, Any]:
        general = params.capabilities.general
        if general is not None and general.position_encodings:
            offered = list(general.position_encodings)
            if types.PositionEncodingKind.Utf8 in offered:
                offered.remove(types.PositionEncodingKind.Utf8)
                general.position_encodings = [types.PositionEncodingKind.Utf8, *offered]
        return (yield from super().lsp_initialize(params))

    def structure_message(self, data: dict[str, Any]) -> Any:
        # JSON-RPC lets a request leave out `params` (e.g. ghostfim/status); pygls needs it.
        if isinstance(data, dict) and "method" in data and "params" not in data:
            data = {**data, "params": None}
        return super().structure_message(data)


class GhostfimServer(GuardedServer):
    def __init__(self, default_model: str | None = None) -> None:
        super().__init__(
            "ghostfim",
            VERSION,
            protocol_cls=GhostfimProtocol,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
        )
        self.settings = Settings()
        self.default_model = default_model
        self.events = LspEvents(self)
        self.service = CompletionService(self.events)
        self._init_problems: list[str] = []
        self.watcher: asyncio.Future[None] | None = None  # lsp/watching.py
        self._unanswered: set[str] = set()  # requests to the editor that timed out, told once
        self.log_handler = LspLogHandler(self)

    async def ask_client(self, method: str, params: Any) -> Any:
        """A request to the editor, answered or TimeoutError after CLIENT_ANSWER_S."""
        protocol = self.protocol
        assert isinstance(protocol, GuardedProtocol)
        return await protocol.ask(method, params, CLIENT_ANSWER_S)

    def rescan_workspace(self) -> None:
        self.service.workspace.rescan()

    def client_did_not_answer(self, method: str) -> None:
        """A request to the editor timed out: say so once per method (the settings, or the
        progress bar, stay as they are), then only log it."""
        message = (
            f"ghostfim: the editor did not answer {method} within {CLIENT_ANSWER_S:g} s; "
            "keeping the current settings"
            if method == types.WORKSPACE_CONFIGURATION
            else f"ghostfim: the editor did not answer {method} within {CLIENT_ANSWER_S:g} s"
        )
        if method in self._unanswered:
            log.info(message)
            return
        self._unanswered.add(method)
        self.window_show_message(
            types.ShowMessageParams(type=types.MessageType.Warning, message=message)
        )
        log.warning(message)

    @property
    def encoding(self) -> str:
        return encoding_name(self.workspace.position_encoding)

    # --- settings ---------------------------------------------------------------------------
    def apply_settings(self, raw: Any) -> None:
        """A settings object from the client: bad values are reported and keep their last
        valid value (a typo never switches the model); then the engine runs with them."""
        settings, problems = parse_settings(raw, self.settings)
        for problem in problems:
            self.window_show_message(
                types.ShowMessageParams(type=types.MessageType.Warning, message=problem)
            )
            log.warning(problem)
        self.settings = settings
        self.ensure_model()

    def ensure_model(self) -> None:
        """Run with the settings: the backend they name loads (or hot-switches) in the
        background; budgets change in place."""
        self.service.configure(self.settings, self.default_model)


def build_server(default_model: str | None = None) -> GhostfimServer:
    server = GhostfimServer(default_model)

    @server.feature(types.INITIALIZE)
    def initialize(ls: GhostfimServer, params: types.InitializeParams) -> None:
        settings, problems = parse_settings(params.initialization_options)
        ls.settings = settings
        ls.service.set_options(settings)
        ls._init_problems = problems
        folders = [f.uri for f in params.workspace_folders or ()]
        ls.service.set_workspace_roots(folders or [params.root_uri or params.root_path or ""])
        ls.log_handler.loop = asyncio.get_running_loop()
        if params.process_id:
            watch_parent(params.process_id)

    @server.feature(types.INITIALIZED)
    def initialized(ls: GhostfimServer, _params: types.InitializedParams) -> None:
        for problem in ls._init_problems:
            ls.window_show_message(
                types.ShowMessageParams(type=types.MessageType.Warning, message=problem)
            )
        ls.ensure_model()  # in the background: initialize never waits for a model
        ls.watcher = asyncio.ensure_future(watch_workspace_files(ls))

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(
        ls: GhostfimServer, params: types.DidChangeWatchedFilesParams
    ) -> None:
        ls.service.files_changed(file_changes(params))

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(
        ls: GhostfimServer, params: types.DidChangeConfigurationParams
    ) -> None:
        raw = params.settings
        caps = ls.client_capabilities
        if raw is None and caps and caps.workspace and caps.workspace.configuration:
            items = [types.ConfigurationItem(section="ghostfim")]
            try:
                answer = await ls.ask_client(
                    types.WORKSPACE_CONFIGURATION, types.ConfigurationParams(items)
                )
            except TimeoutError:
                ls.client_did_not_answer(types.WORKSPACE_CONFIGURATION)
                return  # keep the current settings
            except Exception as exc:  # an error answer: nothing to apply
                log.info("workspace/configuration failed: %s", exc)
                return
            raw = answer[0] if isinstance(answer, list) and answer else None
        if not isinstance(unwrap_section(raw), dict):
            # Nothing usable (null, a list, a string): keep the current settings and model.
            # Parsing it would reset every setting to its default and switch models.
            if raw is not None:
                ls.window_show_message(
                    types.ShowMessageParams(
                        type=types.MessageType.Warning,
                        message="ghostfim settings must be an object, got "
                        f"{type(unwrap_section(raw)).__name__}; settings unchanged",
                    )
                )
            return
        ls.apply_settings(raw)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: GhostfimServer, params: types.DidChangeTextDocumentParams) -> None:
        doc = ls.workspace.get_text_document(params.text_document.uri)
        ls.service.document_changed(doc.uri, doc.source)
        last = params.content_changes[-1] if params.content_changes else None
        line = (
            last.range.start.line
            if isinstance(last, types.TextDocumentContentChangePartial)
            else None
        )
        ls.service.document_edited(doc.uri, doc.source, line)  # context from other files

    # --- context from other files (engine/context/): what feeds the ring ----------------------
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: GhostfimServer, params: types.DidOpenTextDocumentParams) -> None:
        item = params.text_document
        ls.service.document_opened(item.uri, item.text)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    def did_save(ls: GhostfimServer, params: types.DidSaveTextDocumentParams) -> None:
        protocol = ls.protocol
        uri = params.text_document.uri
        doc = protocol.document(uri) if isinstance(protocol, SyncedProtocol) else None
        if doc is not None:
            ls.service.document_saved(doc.uri, doc.source)

    @server.feature("ghostfim/context")
    def client_context(ls: GhostfimServer, params: Any = None) -> None:
        """`{uri?, text}`: text the client wants the model to see (a yank, a related file)."""
        text = getattr(params, "text", None)
        if not isinstance(text, str):
            log.warning("ghostfim/context needs {text: string}; ignored")
            return
        uri = getattr(params, "uri", None)
        ls.service.client_context(text, uri if isinstance(uri, str) else None)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: GhostfimServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.service.document_closed(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(
        ls: GhostfimServer, params: types.InlineCompletionParams
    ) -> types.InlineCompletionList:
        pos = params.position
        state = cursor_of(ls, params.text_document.uri, pos)  # -32602 unless open, in it
        explicit = params.context.trigger_kind == types.InlineCompletionTriggerKind.Invoked
        # Answered in bounded time (engine/service/deadline.py); held while the model loads.
        answer = await ls.service.complete(state, explicit=explicit)
        if not answer.text:
            return types.InlineCompletionList(items=[])
        # The range is the position the request was made at: a client that shows the item
        # after more typing replaces what was typed since (no doubled text on accept).
        return types.InlineCompletionList(
            items=[
                types.InlineCompletionItem(
                    insert_text=answer.text,
                    range=types.Range(start=pos, end=pos),
                    command=accept_command(answer.item_id),
                )
            ]
        )

    @server.command(ACCEPTED_COMMAND)
    def accepted(ls: GhostfimServer, *args: Any) -> None:
        """A full accept: the item's command, run by the client with the item's id."""
        item_id = _item_id_of(args[0] if args else None)
        if item_id is None or not ls.service.accepted(item_id):
            log.info("%s for an unknown item %r", ACCEPTED_COMMAND, args[:1])

    @server.feature(DID_SHOW)
    def did_show(ls: GhostfimServer, params: Any = None) -> None:
        item_id = _item_id_of(_field(params, "item"))
        if item_id is not None:
            ls.service.displayed(item_id)

    @server.feature(DID_PARTIALLY_ACCEPT)
    def did_partially_accept(ls: GhostfimServer, params: Any = None) -> None:
        """`{item, acceptedLength}`: the first acceptedLength UTF-16 units of the item taken."""
        item = _field(params, "item")
        item_id = _item_id_of(item)
        length = _field(params, "acceptedLength")
        if item_id is None or not isinstance(length, int) or isinstance(length, bool):
            log.warning("%s needs {item, acceptedLength}; ignored", DID_PARTIALLY_ACCEPT)
            return
        insert_text = _field(item, "insertText")
        text = insert_text if isinstance(insert_text, str) else ""
        chars = units_to_chars(text, length, "utf-16") if text else length
        ls.service.partially_accepted(item_id, chars)

    @server.feature(DID_DISMISS)
    def did_dismiss(ls: GhostfimServer, params: Any = None) -> None:
        item_id = _item_id_of(_field(params, "item"))
        if item_id is not None:
            ls.service.dismissed(item_id)

    @server.feature("ghostfim/status")
    def status(ls: GhostfimServer, _params: Any = None) -> dict[str, Any]:
        return status_json(ls.service.status())

    register_debug_features(server)  # ghostfim/documentText, with GHOSTFIM_DEBUG_PROTOCOL=1

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: GhostfimServer, _params: Any = None) -> None:
        if ls.watcher is not None:
            ls.watcher.cancel()
        await ls.service.shutdown()

    return server


def _field(value: Any, name: str) -> Any:
    """A field of a notification's params (pygls hands unknown methods' params as objects)."""
    if isinstance(value, dict):
        return value.get(name)
    return getattr(value, name, None)


def _item_id_of(value: Any) -> str | None:
    """The item id in an accept signal: the id itself, or an item whose command carries it."""
    if isinstance(value, str):
        return value or None
    command = _field(value, "command")
    arguments = _field(command, "arguments")
    if isinstance(arguments, (list, tuple)) and arguments and isinstance(arguments[0], str):
        return arguments[0] or None
    return None


def watch_parent(pid: int) -> None:
    """Exit when the editor that started us is gone (no orphaned servers holding a model)."""

    def watch() -> None:
        while True:
            time.sleep(2.0)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                log.warning("client process %d is gone; exiting", pid)
                os._exit(0)
            except PermissionError:
                pass  # it exists, owned by someone else

    threading.Thread(target=watch, name="ghostfim-parent-watch", daemon=True).start()


class LspLogHandler(logging.Handler):
    """Our log records as window/logMessage (never stdout: that is the protocol stream)."""

    LEVELS: ClassVar[dict[int, types.MessageType]] = {
        logging.ERROR: types.MessageType.Error,
        logging.WARNING: types.MessageType.Warning,
        logging.INFO: types.MessageType.Info,
    }

    def __init__(self, server: GhostfimServer) -> None:
        super().__init__()
        self.server = server
        self.loop: asyncio.AbstractEventLoop | None = None  # set once the server's loop runs

    def emit(self, record: logging.LogRecord) -> None:
        if self.loop is None:
            return  # before initialize there is no one to tell
        kind = self.LEVELS.get(record.levelno, types.MessageType.Log)
        params = types.LogMessageParams(type=kind, message=self.format(record))
        with contextlib.suppress(RuntimeError):  # the loop may be closing
            self.loop.call_soon_threadsafe(self.server.window_log_message, params)


def _drop_stale_cancels(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("Cancel notification for unknown message id")


def run_server(tcp: str | None = None, model: str | None = None) -> int:
    fix_mmap_threshold()  # documents' and snapshots' blocks go back to the system when freed
    logging.getLogger("pygls").setLevel(logging.WARNING)  # it logs every message at INFO
    # A cancel that crosses its answer (the client typed on as it arrived) is normal traffic.
    logging.getLogger("pygls.protocol.json_rpc").addFilter(_drop_stale_cancels)
    server = build_server(model)
    root = logging.getLogger("ghostfim")
    root.handlers = [server.log_handler]
    root.setLevel(logging.INFO)
    root.propagate = False
    logging.getLogger("ghostfim.llama").setLevel(logging.WARNING)
    if trace_path := env.trace_path():
        # Every model job and prompt, with millisecond times, to a file (never the client).
        trace = logging.FileHandler(trace_path, encoding="utf-8")
        trace.setFormatter(logging.Formatter("%(relativeCreated).1f %(name)s %(message)s"))
        trace.addFilter(SecretsCut(lambda: settings_secrets(server.settings)))
        server.log_handler.setLevel(logging.INFO)
        root.addHandler(trace)
        root.setLevel(logging.DEBUG)
    try:
        if tcp:
            host, _, port = tcp.rpartition(":")
            server.start_tcp(host or "127.0.0.1", int(port))
        else:
            server.start_io()
    finally:
        server.service.worker.cancel_all()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # pygls may have closed them
                stream.flush()
    # Exit now: a decode still winding down on the model thread must not hold the process.
    os._exit(0)
