"""One streamed response, whatever the protocol: its events, the stop rules applied to the text
as it arrives, and its timings."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

import httpx

from ghostfim.engine.backend import OnText
from ghostfim.engine.remote.config import RemoteBackendError
from ghostfim.engine.text.stops import StopPolicy
from ghostfim.engine.timings import Timings

# How often the supervisor looks at the CancelToken while the exchange waits on the network:
# the longest a cancel waits before the connection is closed.
CANCEL_POLL_S = 0.01
ERROR_BODY_CHARS = 300
STRAY_CHARS = 4000  # of a 200 answer that is not a stream: kept to tell what it was
EXCERPT_CHARS = 40  # of an unexpected answer, in a message (short: one message per cause)


# --- timings --------------------------------------------------------------------------------
@dataclass
class RemoteTimings(Timings):
    # Request sent -> response headers: connection set-up (when not reused), the upload and
    # the server's queueing. The rest of ttft_ms is the server's prompt processing.
    network_ms: float = 0.0


# --- one streamed event, whatever the protocol ----------------------------------------------
@dataclass
class StreamEvent:
    text: str = ""
    done: bool = False
    finish: str = ""  # the server's reason when done: stop, length, ...
    server_prefill_ms: float | None = None
    reused_tokens: int | None = None
    new_tokens: int | None = None
    error: str | None = None


def sse_payload(line: str) -> str | None:
    """The data of one server-sent-events line (None for blank lines, comments, pings)."""
    if line.startswith("data:"):
        return line[5:].strip()
    if line.startswith("error:"):  # llama-server reports a failed stream this way
        return json.dumps({"error": line[6:].strip()})
    return None


def error_text(value: Any) -> str:
    """The message in an error body: {"error": {"message"}} (OpenAI, llama-server),
    {"error": "..."} (Ollama), {"message"} (vLLM), {"detail"} (FastAPI), or the text."""
    if isinstance(value, dict):
        for key in ("error", "message", "detail"):
            if value.get(key):
                return error_text(value[key])
        return json.dumps(value)
    if isinstance(value, str):
        try:
            return error_text(json.loads(value))
        except ValueError:
            return value
    return str(value)


# --- the streamed run of one request --------------------------------------------------------
class StreamRun:
    """Text received so far, the stop rules applied to it, and its timings."""

    def __init__(
        self,
        policy: StopPolicy,
        on_text: OnText | None,
        timings: RemoteTimings,
        start: float,
        max_tokens: int,
    ) -> None:
        self.policy = policy
        self.stop_texts: tuple[str, ...] = ()  # set once the FIM family is known
        self.on_text = on_text
        self.timings = timings
        self.start = start
        self.max_tokens = max_tokens
        self.text = ""
        self.pieces = 0
        self.last_activity = start  # the supervisor's timeout counts from here
        self.headers_at: float | None = None
        self.first_at: float | None = None

    def headers(self) -> None:
        now = time.perf_counter()
        self.headers_at = self.last_activity = now

    def feed(self, event: StreamEvent) -> str | None:
        """Take one event; returns a stop reason when the suggestion is complete."""
        self.last_activity = time.perf_counter()
        if event.error is not None:
            raise RemoteBackendError(event.error)
        self._server_timings(event)
        if event.text and self.max_tokens > 0:
            reason = self._text(event.text)
            if reason is not None:
                return reason
        if event.done:
            return "max_tokens" if event.finish in ("length", "limit") else "eog"
        return None

    def _server_timings(self, event: StreamEvent) -> None:
        t = self.timings
        if event.server_prefill_ms is not None:
            t.prefill_ms = event.server_prefill_ms
        if event.reused_tokens is not None:
            t.prefill_reused_tokens = event.reused_tokens
        if event.new_tokens is not None:
            t.prefill_new_tokens = event.new_tokens

    def _text(self, piece: str) -> str | None:
        if self.first_at is None:
            self.first_at = time.perf_counter()
            self.timings.ttft_ms = (self.first_at - self.start) * 1000
        self.pieces += 1
        self.text += piece
        for stop in self.stop_texts:  # a server that leaves special tokens in the text
            at = self.text.find(stop)
            if at >= 0:
                self.text = self.text[:at]
                return "eog"
        decision = self.policy.check(self.text)
        if decision.stop:
            if decision.keep >= 0:
                self.text = self.text[: decision.keep]
            return decision.reason
        if self.on_text is not None:
            self.on_text(self.text, ())  # a server's text comes without the model's probabilities
        # max_tokens is the server's to enforce: its final message then arrives and the
        # connection stays reusable.
        return None

    def finish(self, reason: str) -> None:
        now = time.perf_counter()
        t = self.timings
        t.decode_tokens = self.pieces
        t.total_ms = (now - self.start) * 1000
        if self.first_at is not None:
            t.decode_ms = (now - self.first_at) * 1000
        if self.headers_at is not None and not t.prefill_ms:
            # No server-reported prompt time: the wait between headers and the first token.
            end = self.first_at if self.first_at is not None else now
            t.prefill_ms = (end - self.headers_at) * 1000
        if reason == "prefill_only":
            t.ttft_ms = t.total_ms


# --- small helpers --------------------------------------------------------------------------
async def lines_of(response: httpx.Response) -> AsyncGenerator[str, None]:
    """The response's lines, as a generator that `aclosing` can close early."""
    async for line in response.aiter_lines():
        yield line


def reason_of(exc: BaseException) -> str:
    """The innermost OS-level reason (e.g. 'connection refused'), not a chain of wrappers."""
    while exc.__cause__ is not None or exc.__context__ is not None:
        inner = exc.__cause__ or exc.__context__
        assert inner is not None
        exc = inner
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (is the server running?)"
    if isinstance(exc, socket.gaierror):
        return f"unknown host ({exc.strerror})"
    if isinstance(exc, OSError) and exc.errno is not None:
        return os.strerror(exc.errno).lower()  # asyncio's own wording hides the errno
    return str(exc) or type(exc).__name__


def json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested too deeply
        return None


def json_type(value: Any) -> str:
    names = {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def excerpt(text: str) -> str:
    """The start of an unexpected answer, control characters escaped."""
    short = text.strip()[:EXCERPT_CHARS]
    more = "…" if len(text.strip()) > EXCERPT_CHARS else ""
    return repr(short) + more


def as_float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def as_int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
