"""The JSON-RPC edge, hardened: every request is answered, every bad message is explained.

What pygls 2.1 does with bad input, and what we do instead:

- a request whose params do not fit the method's type: pygls shows "Invalid Params" and never
  answers (the client waits forever); we answer -32602 naming the bad field.
- a request without `"jsonrpc": "2.0"`: an AttributeError popup or nothing, and no answer; we
  answer -32600.
- unparseable JSON: a popup and no answer; we answer -32700 with the request's id when it can
  still be found (else id null), and explain.
- a body that is not valid UTF-8: dropped; we decode it with U+FFFD, handle it and warn.
- JSON that is not an object (`[]`, `42`): an AttributeError popup; a clear one here.
- a request after `shutdown`: dropped without an answer; we answer -32600.
- a request before `initialize`: the handler crashes (-32603); we answer -32002. A second
  `initialize` reset the workspace (open documents lost); we answer -32600.
- didChange with a negative or oversized position: dropped, so the document drifted from the
  editor's; we clamp it like any out-of-range position, and warn.
- a notification with an unknown method: silently ignored; we warn once per method name (`$/`
  ones and real LSP notifications we do not use stay silent).
- writing after `exit` closed stdout: every write fails and pygls reports the failure by writing
  again, recursing until the process is killed; we drop writes once the stream is closed.
- `exit`: pygls waits for every thread still running (a model load); we exit at once (0 after
  shutdown, else 1). stdin closing: the same wait; we exit after a short grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import re
import sys
import threading
import uuid
from collections.abc import Generator
from concurrent.futures import Future
from typing import Any, BinaryIO

import cattrs
from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcParseError,
    JsonRpcServerNotInitialized,
)
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from ghostfim.engine.memory import WARNED_METHODS_BYTES, ByteLRU, str_bytes
from ghostfim.lsp.redaction import RedactingWriter, json_forms, settings_secrets

log = logging.getLogger("ghostfim.rpc")

UINTEGER_MAX = 2**31 - 1
STDIN_EOF_GRACE_S = 2.0  # after stdin closes: time for in-flight answers before we exit
# How long a request to the editor (workspace/configuration, window/workDoneProgress/create)
# may go unanswered: editors answer in milliseconds; one that does not must not stall a
# settings change, nor leave the request pending for ever.
CLIENT_ANSWER_S = 5.0


_SHOWN_LIMIT = 120  # characters of a bad message quoted back to the user

_MESSAGE_KEYS = frozenset(("jsonrpc", "id", "method", "params", "result", "error"))
# Tokens of a JSON text that matter for finding the top-level "id": strings and brackets.
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]]', re.DOTALL)
# An integer id (not the start of 1.5 or 1e3, which JSON-RPC does not allow) or a string.
_ID_VALUE = re.compile(r'\s*:\s*(-?\d+(?![\d.eE])|"(?:[^"\\]|\\.)*")')


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= _SHOWN_LIMIT else text[:_SHOWN_LIMIT] + "…"


def top_level_id(text: str) -> int | str | None:
    """The "id" member of the outermost object of a (possibly broken) JSON text, if any.

    Only depth 1 counts: `$/cancelRequest` carries an "id" in its params, and answering that
    id would resolve the wrong request in the client.
    """
    depth = 0
    for m in _JSON_TOKENS.finditer(text):
        token = m.group()
        if token in "{[":
            depth += 1
        elif token in "}]":
            depth -= 1
        elif depth == 1 and token == '"id"':
            value = _ID_VALUE.match(text, m.end())
            if value is not None:
                raw = value.group(1)
                try:
                    parsed = json.loads(raw)
                except ValueError:
                    return None
                return parsed if isinstance(parsed, (int, str)) else None
    return None


def _validation_detail(exc: BaseException) -> str:
    """cattrs' structuring errors as `$.path: problem` lines, for the user."""
    cause = exc.__cause__ or exc
    if isinstance(cause, (cattrs.ClassValidationError, cattrs.IterableValidationError)):
        try:
            return "; ".join(cattrs.transform_error(cause, path="$"))
        except Exception:  # the detail is a nicety: never fail on it
            pass
    return str(cause) or type(cause).__name__


def _clamp_positions(value: Any) -> tuple[Any, bool]:
    """A copy of a didChange's params with out-of-range line/character numbers clamped."""
    if isinstance(value, dict):
        changed = False
        out: dict[str, Any] = {}
        for key, item in value.items():
            if (
                key in ("line", "character")
                and isinstance(item, int)
                and not isinstance(item, bool)
            ):
                clamped = min(max(item, 0), UINTEGER_MAX)
                changed |= clamped != item
                out[key] = clamped
            else:
                out[key], sub = _clamp_positions(item)
                changed |= sub
        line = value.get("line")
        if isinstance(line, int) and not isinstance(line, bool) and line < 0 and "character" in out:
            out["character"] = 0  # a line before the first is the document's start (as
            # vscode-languageserver-textdocument's offsetAt has it), whatever the character
        return out, changed
    if isinstance(value, list):
        items = [_clamp_positions(item) for item in value]
        return [item for item, _ in items], any(sub for _, sub in items)
    return value, False


class Rejected:
    """A message that could not be turned into its LSP type (handled by handle_message)."""

    jsonrpc = "rejected"  # never "2.0": pygls' own code would drop it, were it to see one

    def __init__(self, data: dict[str, Any], reason: str) -> None:
        self.data = data
        self.reason = reason


class GuardedProtocol(LanguageServerProtocol):
    """Message-level checks in front of pygls' dispatch."""

    _transport_closed = False
    _warned_methods: ByteLRU[str, bool]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Unknown methods told of once each; a client sending ever new names must not grow the
        # server (engine/memory.py): the oldest are forgotten (and told of again).
        self._warned_methods = ByteLRU(WARNED_METHODS_BYTES, lambda name, _: str_bytes(name))
        # We tell the client about undecodable messages; pygls' tracebacks for them would
        # only flood stderr (a fuzzer sends thousands).
        for name in ("pygls.protocol.json_rpc", "pygls.io_"):
            logging.getLogger(name).addFilter(_quiet_decode_errors)

    # --- reporting ----------------------------------------------------------------------------
    def show(self, message: str, kind: types.MessageType = types.MessageType.Warning) -> None:
        self.notify(types.WINDOW_SHOW_MESSAGE, types.ShowMessageParams(type=kind, message=message))
        log.warning(message)

    def answer_error(self, msg_id: Any, error: JsonRpcException) -> None:
        """An error response; ids that are neither numbers nor strings are answered as null."""
        valid = isinstance(msg_id, (int, str)) and not isinstance(msg_id, bool)
        self._send_data(
            {"jsonrpc": "2.0", "id": msg_id if valid else None, "error": _error_body(error)}
        )

    # --- requests to the client ---------------------------------------------------------------
    def send_request_expiring(self, method: str, params: Any, timeout_s: float) -> Future[Any]:
        """A request to the client that gives up after `timeout_s`: its future then fails
        with TimeoutError and pygls forgets it. pygls keeps a request's future until an
        answer comes, so a client that never answers would stall whoever awaits it and leak
        one entry per request."""
        msg_id = str(uuid.uuid4())
        future = self.send_request(method, params, msg_id=msg_id)

        def expire() -> None:
            if future.done():
                return
            self._request_futures.pop(msg_id, None)
            self._result_types.pop(msg_id, None)
            future.set_exception(
                TimeoutError(f"the editor did not answer {method} within {timeout_s:g} s")
            )

        try:
            asyncio.get_running_loop().call_later(timeout_s, expire)
        except RuntimeError:  # no event loop in this thread (unit tests): a timer thread
            timer = threading.Timer(timeout_s, expire)
            timer.daemon = True
            timer.start()
        return future

    async def ask(self, method: str, params: Any, timeout_s: float) -> Any:
        """The client's answer to a request, or TimeoutError after `timeout_s`."""
        return await asyncio.wrap_future(self.send_request_expiring(method, params, timeout_s))

    # --- decoding -----------------------------------------------------------------------------
    def structure_message(self, data: dict[str, Any]) -> Any:
        if "jsonrpc" in data and not data.keys() <= _MESSAGE_KEYS:
            # Members JSON-RPC does not define are ignored (pygls' fallback types fail on them).
            data = {key: value for key, value in data.items() if key in _MESSAGE_KEYS}
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if data.get("method") == types.TEXT_DOCUMENT_DID_CHANGE and "params" in data:
                params, changed = _clamp_positions(data["params"])
                if changed:
                    try:
                        message = super().structure_message({**data, "params": params})
                    except JsonRpcException:
                        pass
                    else:
                        uri = _short(str(_dig(params, "textDocument", "uri")))
                        self.show(
                            f"ghostfim: textDocument/didChange for {uri}: a position is negative"
                            " or too large; applied it clamped to the document"
                        )
                        return message
            return Rejected(data, _validation_detail(exc))

    # --- dispatch -----------------------------------------------------------------------------
    def handle_message(self, message: Any) -> None:
        if isinstance(message, Rejected):
            self._reject(message.data, f"invalid params ({message.reason})", JsonRpcInvalidParams)
            return
        if not isinstance(message, dict) and getattr(message, "jsonrpc", None) == "2.0":
            self._dispatch(message)
            return
        # Not a JSON-RPC 2.0 object: pygls would fail on it with an AttributeError.
        if isinstance(message, dict):
            version = message.get("jsonrpc")
            why = "no jsonrpc member" if version is None else f"jsonrpc is {_short(version)!r}"
            self._reject(message, f"not a JSON-RPC 2.0 message ({why})", JsonRpcInvalidRequest)
        elif getattr(message, "jsonrpc", None) is not None:  # structured, but not 2.0
            data = {"id": getattr(message, "id", None), "method": getattr(message, "method", "")}
            version = _short(message.jsonrpc)
            self._reject(
                data, f"not a JSON-RPC 2.0 message (jsonrpc is {version!r})", JsonRpcInvalidRequest
            )
        else:
            kind = type(message).__name__
            self.answer_error(None, JsonRpcInvalidRequest(f"expected a JSON object, got {kind}"))
            self.show(
                f"ghostfim: ignored a message that is not a JSON-RPC object: {_short(message)}"
            )

    def _reject(self, data: dict[str, Any], why: str, error: type[JsonRpcException]) -> None:
        method = data.get("method")
        label = _short(method) if isinstance(method, str) else "a message"
        if "id" in data and ("result" in data or "error" in data) and "method" not in data:
            log.warning("ignored a response from the client: %s", why)  # nobody to answer
        elif "id" in data:
            if "method" not in data:  # neither a request nor a response: answer, or it waits
                why, error = "no method, result or error", JsonRpcInvalidRequest
            self.answer_error(data["id"], error(f"{label}: {why}"))
            log.warning("answered %s with an error: %s", label, why)
        else:
            self.show(f"ghostfim: ignored {label} notification: {why}")

    def _dispatch(self, message: Any) -> None:
        method = getattr(message, "method", None)
        is_request = hasattr(message, "id") and method is not None
        if method is not None and not isinstance(method, str):
            data = {"method": method, **({"id": message.id} if is_request else {})}
            self._reject(data, "method must be a string", JsonRpcInvalidRequest)
            return
        if method == types.EXIT:
            super().handle_message(message)
            return
        if self._shutdown:
            if is_request:
                self.answer_error(
                    message.id,
                    JsonRpcInvalidRequest(
                        f"{method}: the server is shutting down (shutdown was received)"
                    ),
                )
            return
        initialized = self._workspace is not None
        if method == types.INITIALIZE and initialized and is_request:
            self.answer_error(message.id, JsonRpcInvalidRequest("initialize was already received"))
            return
        if not initialized and method not in (types.INITIALIZE, None):
            if is_request:
                self.answer_error(
                    message.id,
                    JsonRpcServerNotInitialized(f"{method}: the server is not initialized yet"),
                )
            return  # LSP: notifications before initialize are dropped
        if (
            method is not None
            and not is_request
            and not method.startswith("$/")
            and self.fm.features.get(method) is None
            and self.fm.builtin_features.get(method) is None
            and method not in types.METHOD_TO_TYPES  # a real LSP notification we do not use
            and method not in self._warned_methods
        ):
            self._warned_methods[method] = True
            self.show(f"ghostfim: ignored notification {_short(method)!r}: unknown method")
            return
        super().handle_message(message)

    def _execute_handler(
        self,
        msg_id: Any,
        handler: Any,
        callback: Any,
        args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
    ) -> None:
        is_answer = (
            isinstance(callback, functools.partial) and callback.func == self._send_handler_result
        )
        if not is_answer:
            # pygls files every handler's future under its id in _request_futures and removes
            # only requests' (when it answers them): each notification (every didChange) and
            # each step of a generator handler left a Future behind, about 2 MB per thousand
            # edits for the life of the process.
            inner = callback

            def callback(future: Any, msg_id: Any = msg_id) -> None:
                if self._request_futures.get(msg_id) is future:
                    del self._request_futures[msg_id]
                inner(future)

        super()._execute_handler(msg_id, handler, callback, args, kwargs)

    # --- output -------------------------------------------------------------------------------
    def set_writer(self, writer: Any, include_headers: bool = True) -> None:
        super().set_writer(RedactingWriter(writer, self._secrets), include_headers)

    def _secrets(self) -> list[bytes]:
        """The backend's secrets (its URL's credentials, the key in backendApiKeyEnv) as they
        appear in a JSON body: raw, and escaped the way the JSON encoder writes them."""
        return json_forms(settings_secrets(getattr(self._server, "settings", None)))

    def _send_data(self, data: Any) -> None:
        if self._transport_closed:
            return
        stream = getattr(self.writer, "_stdout", None)
        if stream is not None and stream.closed:
            # After exit closed stdout every write fails, and pygls reports that failure by
            # writing again: without this the process recursed until it was killed.
            self._transport_closed = True
            return
        try:
            super()._send_data(data)
        except (BrokenPipeError, ConnectionResetError):
            self._transport_closed = True  # the client is gone; stdin's EOF ends the process

    # --- lifecycle ----------------------------------------------------------------------------
    @lsp_method(types.EXIT)
    def lsp_exit(self, *args: Any) -> Generator[Any, Any, None]:
        """Exit now (LSP: 0 after shutdown, else 1). pygls raised SystemExit and then waited
        for every thread still running, a model load included."""
        if (handler := self.fm.features.get(types.EXIT)) is not None:
            yield handler, args, None
        code = 0 if self._shutdown else 1
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # already closed
                stream.flush()
        os._exit(code)


def _quiet_decode_errors(record: logging.LogRecord) -> bool:
    message = str(record.msg)
    return not message.startswith(("Unable to deserialize message", "Unable to handle message"))


def _error_body(error: JsonRpcException) -> dict[str, Any]:
    body: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.data is not None:
        body["data"] = error.data
    return body


def _dig(value: Any, *keys: str) -> Any:
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


class _EofWatch:
    """stdin, and an exit shortly after it reaches EOF (the client is gone).

    pygls returns from its loop at EOF but the interpreter then waits for every thread (a model
    load of many seconds); the LSP client expects us gone.
    """

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self._armed = False

    def _eof(self) -> None:
        if self._armed:
            return
        self._armed = True
        log.info("stdin closed; exiting")
        timer = threading.Timer(STDIN_EOF_GRACE_S, os._exit, (0,))
        timer.daemon = True
        timer.start()

    def readline(self) -> bytes:
        line = self.stream.readline()
        if not line:
            self._eof()
        return line

    def read(self, n: int) -> bytes:
        data = self.stream.read(n)
        if len(data) < n:
            self._eof()
        return data


class GuardedServer(LanguageServer):
    """Server-side halves of the guard: parse errors, and the stdio transport's end."""

    _reporting = False

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        super().start_io(_EofWatch(stdin or sys.stdin.buffer), stdout)  # type: ignore[arg-type]

    def report_server_error(self, error: Exception, source: Any) -> None:
        if self._reporting or getattr(self.protocol, "_transport_closed", False):
            log.debug("not reported: %s", error)  # never recurse into a failing transport
            return
        self._reporting = True
        try:
            self._report(error, source)
        finally:
            self._reporting = False

    def _report(self, error: Exception, source: Any) -> None:
        protocol = self.protocol
        assert isinstance(protocol, GuardedProtocol)
        if isinstance(error, UnicodeDecodeError) and isinstance(error.object, bytes):
            # Binary in a message: decode what we can and go on, with a warning.
            text = error.object.decode("utf-8", "replace")
            protocol.show(
                "ghostfim: a message was not valid UTF-8 (byte"
                f" {error.start}: {error.reason}); invalid bytes were replaced by U+FFFD"
            )
            try:
                message = json.loads(text, object_hook=protocol.structure_message)
            except (ValueError, RecursionError) as exc:
                self._parse_error(text, exc)
                return
            protocol.handle_message(message)
            return
        if isinstance(error, json.JSONDecodeError):
            self._parse_error(error.doc, error)
            return
        if isinstance(error, RecursionError):
            self._parse_error("", error)
            return
        super().report_server_error(error, source)

    def _parse_error(self, text: str, error: BaseException) -> None:
        protocol = self.protocol
        assert isinstance(protocol, GuardedProtocol)
        msg_id = top_level_id(text) if text else None
        detail = "nested too deeply" if isinstance(error, RecursionError) else str(error)
        protocol.answer_error(msg_id, JsonRpcParseError(f"invalid JSON: {detail}"))
        protocol.show(
            f"ghostfim: could not parse a message from the client (invalid JSON: {detail})"
            + ("" if msg_id is None else f"; answered request {msg_id!r} with an error"),
            types.MessageType.Error,
        )
