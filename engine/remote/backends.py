"""Remote backends: the model runs on an inference server, ghostfim keeps the client side.

A team shares one server with continuous batching and prefix caching (llama-server, vLLM,
llama-cpp-python's server, LM Studio, Ollama); each editor keeps what makes ghostfim fast to
use: prompt building (the sticky prefix window keeps the server's prefix cache warm), the
debounce, supersession and cancellation, typed-through reuse, the stop rules, clean-up and the
stats. These classes implement `ghostfim.engine.backend.CompletionBackend` over HTTP:

    llama-server  POST /infill            input_prefix/input_suffix, cache_prompt, streaming
    openai        POST /v1/completions    a FIM prompt built here from the family's token texts
    ollama        POST /api/generate      raw FIM prompt (known family) or prompt + suffix

Every request streams. Each streamed piece is checked against
`ghostfim.engine.text.stops.StopPolicy`; when a stop rule fires (or the request is cancelled) the
response is closed at once, and the server, seeing the connection drop, stops generating: that
is the compute a stop rule saves.

The service calls `complete` on its single model thread. Each backend owns a private asyncio
loop that runs only inside `complete` (and `open`/`close`), so the HTTP exchange can be a task
that is cancelled the moment the CancelToken is set, even while it waits for a slow server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import socket
import threading
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit, urlunsplit

import httpx

from ghostfim.engine.backend import (
    NEVER_CANCELLED,
    CancelToken,
    Completion,
    CompletionRequest,
    ModelInfo,
    OnText,
    finish,
    stop_policy,
)
from ghostfim.engine.config import DEFAULTS
from ghostfim.engine.prompt.builder import PromptBuilder
from ghostfim.engine.prompt.fim import FimTemplate, Layout
from ghostfim.engine.text.stops import StopPolicy
from ghostfim.engine.timings import Timings

log = logging.getLogger("ghostfim.remote")

RemoteKind = Literal["llama-server", "openai", "ollama"]

# Each server's own default port on this machine (what its docs start it with).
DEFAULT_URLS: dict[str, str] = {
    "llama-server": "http://127.0.0.1:8080",
    "openai": "http://127.0.0.1:8000",  # vLLM's default
    "ollama": "http://127.0.0.1:11434",
}

# There is no tokenizer on this side, so prompt budgets count characters: code averages 3.5 to
# 4 characters a token with the coder models' BPE vocabularies; 3.5 errs towards shorter prompts.
CHARS_PER_TOKEN = 3.5
# How often the supervisor looks at the CancelToken while the exchange waits on the network:
# the longest a cancel waits before the connection is closed.
CANCEL_POLL_S = 0.01
ERROR_BODY_CHARS = 300
STRAY_CHARS = 4000  # of a 200 answer that is not a stream: kept to tell what it was
EXCERPT_CHARS = 40  # of an unexpected answer, in a message (short: one message per cause)


# --- errors ---------------------------------------------------------------------------------
class RemoteBackendError(RuntimeError):
    """The server could not serve this request; the message is meant for the status line."""


class RemoteUnavailable(RemoteBackendError):
    """No connection (refused, reset, unknown host): the server is down or unreachable."""


class RemoteTimeout(RemoteBackendError):
    """The server accepted the request but did not answer (or stream) within the timeout."""


# --- configuration --------------------------------------------------------------------------
@dataclass(frozen=True)
class RemoteConfig:
    kind: RemoteKind
    url: str = ""  # empty: the server's default port on 127.0.0.1
    model: str = ""  # empty: ask the server (llama-server, openai); required for ollama
    api_key_env: str = ""  # name of the environment variable holding the key (never the key)
    timeout_ms: float = DEFAULTS.backend_timeout_ms
    prefix_tokens: int = DEFAULTS.prefix_tokens
    suffix_tokens: int = DEFAULTS.suffix_tokens

    @property
    def base_url(self) -> str:
        url = (self.url or DEFAULT_URLS[self.kind]).strip().rstrip("/")
        if "://" not in url:
            url = "http://" + url
        if self.kind == "openai" and url.endswith("/v1"):
            url = url[: -len("/v1")]  # users copy the OpenAI base URL, which ends in /v1
        return url

    @property
    def shown_url(self) -> str:
        """The URL without user:password@ (it goes into the status and the logs)."""
        parts = urlsplit(self.base_url)
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        return urlunsplit((parts.scheme, host, parts.path, "", ""))

    @property
    def timeout_s(self) -> float:
        return self.timeout_ms / 1000.0


# --- FIM prompt text ------------------------------------------------------------------------
@dataclass(frozen=True)
class FimText:
    """A FIM template as text, for servers that take a prompt string (no token ids here)."""

    family: str
    layout: Layout
    pre: str = ""
    suf: str = ""
    mid: str = ""
    stops: tuple[str, ...] = ()  # texts that end the middle when a server leaves them in

    def prompt(self, prefix: str, suffix: str) -> str:
        if self.layout == "prefix":
            return prefix
        if self.layout == "spm":
            return f"{self.suf}{suffix}{self.pre}{prefix}"
        return f"{self.pre}{prefix}{self.suf}{suffix}{self.mid}"


# The same families engine/prompt/fim.py detects from a vocabulary, here by their tokens' texts.
FIM_TEXTS: dict[str, FimText] = {
    "qwen": FimText(
        "qwen",
        "psm",
        "<|fim_prefix|>",
        "<|fim_suffix|>",
        "<|fim_middle|>",
        ("<|endoftext|>", "<|file_sep|>", "<|fim_pad|>", "<|repo_name|>"),
    ),
    "codegemma": FimText(
        "codegemma",
        "psm",
        "<|fim_prefix|>",
        "<|fim_suffix|>",
        "<|fim_middle|>",
        ("<|file_separator|>", "<eos>"),
    ),
    "starcoder": FimText(
        "starcoder",
        "psm",
        "<fim_prefix>",
        "<fim_suffix>",
        "<fim_middle>",
        ("<|endoftext|>", "<file_sep>"),
    ),
    "deepseek": FimText(
        "deepseek",
        "psm",
        "<｜fim▁begin｜>",
        "<｜fim▁hole｜>",
        "<｜fim▁end｜>",
        ("<｜end▁of▁sentence｜>", "<|EOT|>"),
    ),
    "codellama": FimText("codellama", "psm", "<PRE> ", " <SUF>", " <MID>", ("<EOT>",)),
    "codestral": FimText("codestral", "spm", "[PREFIX]", "[SUFFIX]", "", ("</s>",)),
    "prefix-only": FimText("prefix-only", "prefix"),
}

# (words that must all appear in the lower-cased model name, family); first match wins.
_FAMILY_HINTS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("codegemma",), "codegemma"),
    (("qwen", "coder"), "qwen"),
    (("starcoder",), "starcoder"),
    (("deepseek", "coder"), "deepseek"),
    (("codellama",), "codellama"),
    (("code-llama",), "codellama"),
    (("codestral",), "codestral"),
)


def fim_text_for(model_name: str) -> FimText:
    """The FIM template a model name implies; plain prefix completion when none is known.

    The server holds the tokenizer, so the family comes from the name (a GGUF file name, a
    Hugging Face id or an Ollama tag all carry it).
    """
    name = model_name.lower()
    for words, family in _FAMILY_HINTS:
        if all(w in name for w in words):
            return FIM_TEXTS[family]
    return FIM_TEXTS["prefix-only"]


def approx_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _approx_tokenize(text: str) -> list[int]:
    """PromptBuilder counts tokens with len(tokenize(text)); ids are never used here."""
    return [0] * approx_tokens(text)


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


def _sse_payload(line: str) -> str | None:
    """The data of one server-sent-events line (None for blank lines, comments, pings)."""
    if line.startswith("data:"):
        return line[5:].strip()
    if line.startswith("error:"):  # llama-server reports a failed stream this way
        return json.dumps({"error": line[6:].strip()})
    return None


def _error_text(value: Any) -> str:
    """The message in an error body: {"error": {"message"}} (OpenAI, llama-server),
    {"error": "..."} (Ollama), {"message"} (vLLM), {"detail"} (FastAPI), or the text."""
    if isinstance(value, dict):
        for key in ("error", "message", "detail"):
            if value.get(key):
                return _error_text(value[key])
        return json.dumps(value)
    if isinstance(value, str):
        try:
            return _error_text(json.loads(value))
        except ValueError:
            return value
    return str(value)


# --- the streamed run of one request --------------------------------------------------------
class _Run:
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
            self.on_text(self.text)
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


# --- the backends ---------------------------------------------------------------------------
class RemoteBackend:
    """What the three protocols share: prompt text, streaming, cancel, timeouts, errors."""

    kind: ClassVar[RemoteKind]
    endpoint: ClassVar[str]
    sse: ClassVar[bool] = True  # server-sent events; False: one JSON object a line (Ollama)
    event_keys: ClassVar[tuple[str, ...]] = ()  # an event has at least one of these

    def __init__(self, config: RemoteConfig) -> None:
        self.config = config
        self.fim = fim_text_for(config.model)
        self.info = ModelInfo(
            name=config.model or "(asking the server)",
            path=config.shown_url,
            preset=None,
            device=f"remote ({config.shown_url})",
            n_gpu_layers=0,
            family=self._family(),
            n_ctx=0,
        )
        self.decode_steps = 0  # pieces of text streamed (about one token each)
        self.prefill_chunks = 0  # requests sent
        self.server_model = config.model  # what the request's "model" field names
        self.identified = False
        self.set_budgets(config.prefix_tokens, config.suffix_tokens, 0.0)
        self._loop = asyncio.new_event_loop()
        self._client: httpx.AsyncClient | None = None
        self._lock = threading.Lock()
        self._closed = False

    # --- lifecycle ------------------------------------------------------------------------
    def open(self) -> RemoteBackend:
        """Ask the server what it serves; an unreachable server is not fatal (it may start
        later, and the next request tries again), so this never raises for the network."""
        with self._lock:
            try:
                identify = asyncio.wait_for(self._identify(), self.config.timeout_s)
                self._loop.run_until_complete(identify)
            except asyncio.TimeoutError:
                log.warning("%s at %s: no answer yet", self.kind, self.config.shown_url)
            except RemoteBackendError as exc:
                log.warning("%s (will retry on the next request)", exc)
        return self

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._client is not None:
                self._loop.run_until_complete(self._client.aclose())
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    def forget_document(self, doc_id: str) -> None:
        del doc_id  # the server keeps no state of ours per document

    def kv_status(self) -> dict[str, object] | None:
        return None

    def expected_prefill_ms(self, n_tokens: int) -> float | None:
        return None  # the server's speed is its own: requests keep the automatic deadline

    def set_budgets(
        self,
        prefix_tokens: int,
        suffix_tokens: int,
        keystroke_prefill_ms: float,
        snapshot_bytes: int = 0,
    ) -> None:
        """Every request carries the whole suffix budget (the server's prefix cache keeps the
        text before the cursor; a shorter keystroke prompt would save it little), so
        completions never report a cut suffix and the service never refreshes at a pause."""
        del keystroke_prefill_ms, snapshot_bytes  # the server decides its own processing
        self.builder = PromptBuilder(
            _approx_tokenize,
            FimTemplate(family=self.fim.family, layout=self.fim.layout),
            prefix_tokens=prefix_tokens,
            suffix_tokens=suffix_tokens,
        )

    # --- the request ----------------------------------------------------------------------
    def complete(
        self,
        request: CompletionRequest,
        cancel: CancelToken | None = None,
        on_text: OnText | None = None,
    ) -> Completion:
        cancel = cancel or NEVER_CANCELLED
        with self._lock:
            if self._closed:
                raise RemoteBackendError(f"{self.kind} backend is closed")
            return self._loop.run_until_complete(self._complete(request, cancel, on_text))

    async def _complete(
        self, request: CompletionRequest, cancel: CancelToken, on_text: OnText | None
    ) -> Completion:
        timings = RemoteTimings()
        ctx, policy = stop_policy(request)
        run = _Run(policy, on_text, timings, time.perf_counter(), request.max_tokens)
        reason = await self._supervise(self._attempt(request, run), run, cancel)
        if request.max_tokens <= 0 and reason != "cancelled":
            reason = "prefill_only"
        run.finish(reason)
        return finish(request, ctx, "" if reason == "prefill_only" else run.text, reason, timings)

    async def _attempt(self, request: CompletionRequest, run: _Run) -> str:
        """Everything that may wait on the network, so that a cancel or the timeout stops it
        all: asking the server what it serves (once), then the request itself."""
        if not self.identified:
            await self._identify()
        start = time.perf_counter()
        prefix, suffix, suffix_tokens = self._prompt_text(request)
        body = self._body(prefix, suffix, request.max_tokens)
        run.timings.suffix_tokens = suffix_tokens
        run.timings.prompt_ms = (time.perf_counter() - start) * 1000
        run.stop_texts = self.fim.stops
        return await self._exchange(body, run)

    def _prompt_text(self, request: CompletionRequest) -> tuple[str, str, int]:
        """Prefix and suffix within the budgets (the prompt builder's sticky prefix window
        keeps the server's prefix cache valid while typing), and the suffix's token estimate."""
        prefix, _ = self.builder.choose_prefix(request.doc_id, request.prefix, request.line)
        if not self._uses_suffix():
            return prefix, "", 0
        units, counts = self.builder.suffix_units(request.suffix)
        return prefix, "".join(units), sum(counts)

    def _uses_suffix(self) -> bool:
        return not (self.fim.layout == "prefix" and self._sends_fim_text())

    async def _supervise(self, exchange: Any, run: _Run, cancel: CancelToken) -> str:
        """Run the exchange as a task; cancel it (closing the connection) on a cancel or
        when the server stays silent for the timeout. Returns the stop reason."""
        task: asyncio.Task[str] = asyncio.ensure_future(exchange)
        timeout_s = self.config.timeout_s
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=CANCEL_POLL_S)
                if done:
                    return task.result()
                if cancel.cancelled:
                    return "cancelled"
                silent = time.perf_counter() - run.last_activity
                if silent > timeout_s:
                    what = "no answer" if run.first_at is None else "the stream stopped"
                    raise RemoteTimeout(
                        f"{self.kind} at {self.config.shown_url}: {what} for "
                        f"{self.config.timeout_ms:.0f} ms (backendTimeoutMs)"
                    )
        finally:
            if not task.done():
                task.cancel()  # httpx closes the connection: the server stops generating
                await asyncio.wait({task})
            elif not task.cancelled():
                task.exception()  # retrieved: an error after a cancel is not news

    async def _exchange(self, body: dict[str, Any], run: _Run) -> str:
        """POST the request and read its stream until a stop reason; map network errors."""
        url = self.config.base_url + self.endpoint
        headers = self._headers()
        self.prefill_chunks += 1
        sent = time.perf_counter()
        try:
            async with self._http().stream("POST", url, json=body, headers=headers) as response:
                run.headers()
                run.timings.network_ms = (time.perf_counter() - sent) * 1000
                if response.status_code != 200:
                    raise await self._status_error(response)
                return await self._read_stream(response, run)
            # Leaving the `async with` before the body ends closes the connection (an HTTP/1.1
            # connection with unread body cannot be reused), which the server sees as a drop.
        except httpx.TimeoutException:
            raise RemoteTimeout(
                f"{self.kind} at {self.config.shown_url}: no answer within "
                f"{self.config.timeout_ms:.0f} ms (backendTimeoutMs)"
            ) from None
        except httpx.ConnectError as exc:
            raise RemoteUnavailable(
                f"cannot connect to {self.kind} at {self.config.shown_url}: {_reason(exc)}"
            ) from None
        except httpx.TransportError as exc:
            raise RemoteUnavailable(
                f"connection to {self.kind} at {self.config.shown_url} lost: {_reason(exc)}"
            ) from None

    async def _read_stream(self, response: httpx.Response, run: _Run) -> str:
        """Feed the stream's events to run until a stop reason. A 200 answer that is not this
        protocol's stream (an HTML page, a proxy's error, a server that ignores `stream`, JSON
        of another API) is an error with a message, never an empty suggestion."""
        events = 0
        stray: list[str] = []  # lines that are not events (the start of them), for the message
        stray_chars = 0
        # aclosing: a stop rule leaves the loop early, and the line iterator must be closed
        # now, on this loop, not by a finalizer after the loop stopped running.
        async with contextlib.aclosing(_lines(response)) as lines:
            async for line in lines:
                payload = _sse_payload(line) if self.sse else line.strip() or None
                if payload is None:
                    if self.sse and not events and stray_chars < STRAY_CHARS and line.strip():
                        stray.append(line)  # a comment or an event/id field, or not SSE at all
                        stray_chars += len(line)
                    continue
                if payload == "[DONE]":
                    return "eog"
                try:
                    data = json.loads(payload)
                except (ValueError, RecursionError):
                    raise RemoteBackendError(
                        f"{self._where()} sent something that is not JSON: {_excerpt(payload)}"
                    ) from None
                event = self._event(data)
                events += 1
                if event.text:
                    self.decode_steps += 1
                reason = run.feed(event)
                if reason is not None:
                    return reason
        if events:
            return "eog"  # the stream ended without its final event: what came is the answer
        text = "\n".join(stray)
        whole = _json_or_none(text)
        if isinstance(whole, dict) and any(k in whole for k in self.event_keys):
            # One JSON answer instead of a stream (a server that ignores "stream": true).
            event = self._event(whole)
            reason = run.feed(replace(event, done=True, finish=event.finish or "stop"))
            return reason or "eog"
        kind = response.headers.get("content-type", "no content type")
        what = "server-sent events" if self.sse else "JSON lines"
        detail = f": {_excerpt(text)}" if text else " (an empty body)"
        raise RemoteBackendError(
            f"{self._where()} answered 200 ({kind}) but not with a stream of {what}{detail}"
        )

    def _event(self, data: Any) -> StreamEvent:
        """One parsed event, or a clear error when it is not this protocol's shape."""
        if not isinstance(data, dict):
            raise RemoteBackendError(
                f"{self._where()} sent JSON of an unexpected shape: a {_json_type(data)}, "
                "not an object"
            )
        if not any(key in data for key in self.event_keys):
            raise RemoteBackendError(
                f"{self._where()} sent JSON of an unexpected shape: expected "
                f"{' or '.join(repr(k) for k in self.event_keys)}, got keys "
                f"{sorted(str(k) for k in data)[:8]} (is this the right backend kind?)"
            )
        try:
            return self._parse(data)
        except (AttributeError, TypeError, ValueError, IndexError, KeyError) as exc:
            raise RemoteBackendError(
                f"{self._where()} sent JSON of an unexpected shape ({type(exc).__name__})"
            ) from None

    def _where(self) -> str:
        return f"{self.kind} at {self.config.shown_url}"

    async def _status_error(self, response: httpx.Response) -> RemoteBackendError:
        await response.aread()
        detail = _error_text(response.text[:2000]).strip()[:ERROR_BODY_CHARS]
        where = f"{self.kind} at {self.config.shown_url}"
        if response.status_code in (401, 403):
            env = self.config.api_key_env
            hint = (
                f"check the key in ${env} (backendApiKeyEnv)"
                if env
                else "set backendApiKeyEnv to the environment variable holding the key"
            )
            return RemoteBackendError(
                f"{where} refused the request ({response.status_code}): {hint}"
            )
        return RemoteBackendError(f"{where} answered {response.status_code}: {detail}")

    # --- HTTP -----------------------------------------------------------------------------
    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            timeout = self.config.timeout_s
            self._client = httpx.AsyncClient(
                # The supervisor enforces the timeout between events (and cancels sooner);
                # httpx's own read timeout is only a backstop.
                timeout=httpx.Timeout(timeout, read=2 * timeout),
                limits=httpx.Limits(max_connections=4, max_keepalive_connections=2),
            )
        return self._client

    def _headers(self) -> dict[str, str]:
        """Read the key at request time (it may be rotated); it only ever goes into this
        header, never into a log line, a message or the status."""
        env = self.config.api_key_env
        if not env:
            return {}
        key = os.environ.get(env, "")
        if not key:
            raise RemoteBackendError(
                f"the environment variable {env} (backendApiKeyEnv) is not set or empty"
            )
        return {"Authorization": f"Bearer {key}"}

    async def _get_json(self, path: str) -> Any:
        url = self.config.base_url + path
        try:
            response = await self._http().get(url, headers=self._headers())
        except httpx.TimeoutException:
            raise RemoteTimeout(
                f"{self.kind} at {self.config.shown_url}: no answer to {path} within "
                f"{self.config.timeout_ms:.0f} ms (backendTimeoutMs)"
            ) from None
        except httpx.TransportError as exc:
            raise RemoteUnavailable(
                f"cannot connect to {self.kind} at {self.config.shown_url}: {_reason(exc)}"
            ) from None
        if response.status_code != 200:
            raise await self._status_error(response)
        data = _json_or_none(response.text)
        if not isinstance(data, dict):
            raise RemoteBackendError(
                f"{self._where()} answered {path} with "
                + ("something that is not JSON" if data is None else f"a JSON {_json_type(data)}")
                + f" (expected an object): {_excerpt(response.text)}"
            )
        return data

    # --- what differs between protocols ---------------------------------------------------
    def _family(self) -> str:
        return self.fim.family

    def _sends_fim_text(self) -> bool:
        """Whether ghostfim writes the FIM prompt itself (else the server applies its own)."""
        return True

    def _identified_as(self, name: str, n_ctx: int = 0) -> None:
        shown = name
        if "/" in name or name.endswith(".gguf"):
            shown = PurePosixPath(name).name.removesuffix(".gguf")
        if not self.config.model:
            self.fim = fim_text_for(name)
            self.builder.template = FimTemplate(family=self.fim.family, layout=self.fim.layout)
        self.info = replace(
            self.info, name=self.config.model or shown, family=self._family(), n_ctx=n_ctx
        )
        self.identified = True

    async def _identify(self) -> None:
        raise NotImplementedError

    def _body(self, prefix: str, suffix: str, max_tokens: int) -> dict[str, Any]:
        raise NotImplementedError

    def _parse(self, data: dict[str, Any]) -> StreamEvent:
        raise NotImplementedError


class LlamaServerBackend(RemoteBackend):
    """llama.cpp's llama-server: /infill applies the model's own FIM template server-side,
    `cache_prompt` reuses the slot's KV cache, `timings_per_token` reports the server's
    prompt time and cache reuse with the first token (a stopped stream never sees the end)."""

    kind = "llama-server"
    endpoint = "/infill"
    event_keys = ("content", "stop", "error")

    def _family(self) -> str:
        return "server (/infill)"

    def _sends_fim_text(self) -> bool:
        return False

    async def _identify(self) -> None:
        props = await self._get_json("/props")
        settings = props.get("default_generation_settings")
        n_ctx = _int(settings.get("n_ctx")) if isinstance(settings, dict) else None
        name = str(props.get("model_alias") or props.get("model_path") or self.kind)
        self._identified_as(name, n_ctx or 0)

    def _body(self, prefix: str, suffix: str, max_tokens: int) -> dict[str, Any]:
        # ghostfim's layout: everything typed goes at the end of input_prefix (quality first,
        # see engine/prompt.py); `prompt` (text after FIM_MID) stays empty.
        return {
            "input_prefix": prefix,
            "input_suffix": suffix,
            "input_extra": [],
            "prompt": "",
            "n_predict": max(0, max_tokens),  # 0: evaluate the prompt into the cache only
            "cache_prompt": True,
            "stream": True,
            "timings_per_token": True,
            "temperature": 0.0,
            "top_k": 1,  # greedy, like the local backend
            "samplers": ["top_k"],
        }

    def _parse(self, data: dict[str, Any]) -> StreamEvent:
        if "error" in data:
            return StreamEvent(error=f"{self.kind}: {_error_text(data['error'])}")
        timings = data.get("timings")
        timings = timings if isinstance(timings, dict) else {}
        return StreamEvent(
            text=str(data.get("content") or ""),
            done=bool(data.get("stop")),
            finish=str(data.get("stop_type") or ""),
            server_prefill_ms=_float(timings.get("prompt_ms")),
            reused_tokens=_int(timings.get("cache_n")),
            new_tokens=_int(timings.get("prompt_n")),
        )


class OpenAIBackend(RemoteBackend):
    """OpenAI-compatible /v1/completions (vLLM, llama-cpp-python's server, LM Studio): the
    FIM prompt is built here from the family's special-token texts, which these servers parse
    as special tokens when they tokenize the prompt."""

    kind = "openai"
    endpoint = "/v1/completions"
    event_keys = ("choices", "error")

    async def _identify(self) -> None:
        if self.config.model:
            self._identified_as(self.config.model)
            return
        models = await self._get_json("/v1/models")
        data = models.get("data") or []
        if not isinstance(data, list) or not data or not isinstance(data[0], dict):
            raise RemoteBackendError(f"{self.kind} at {self.config.shown_url} serves no model")
        self.server_model = str(data[0].get("id") or "")
        self._identified_as(self.server_model)

    def _body(self, prefix: str, suffix: str, max_tokens: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "prompt": self.fim.prompt(prefix, suffix),
            "max_tokens": max(1, max_tokens),  # a warm-up asks for one token
            "temperature": 0.0,
            "stream": True,
        }
        if self.server_model:
            body["model"] = self.server_model
        if self.fim.stops:
            body["stop"] = list(self.fim.stops[:4])  # OpenAI's API takes at most four
        return body

    def _parse(self, data: dict[str, Any]) -> StreamEvent:
        if "error" in data:
            return StreamEvent(error=f"{self.kind}: {_error_text(data['error'])}")
        choices = data.get("choices") or [{}]
        choice = choices[0]
        if not isinstance(choice, dict):
            raise TypeError("choices[0] is not an object")
        finish = choice.get("finish_reason")
        usage = data.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        return StreamEvent(
            text=str(choice.get("text") or ""),
            done=finish is not None,
            finish=str(finish or ""),
            new_tokens=_int(usage.get("prompt_tokens")),
        )


class OllamaBackend(RemoteBackend):
    """Ollama's /api/generate, one JSON object a line. For a known FIM family the prompt is
    ghostfim's FIM text sent `raw` (no chat template); otherwise `prompt` + `suffix` and the
    model's own template does the FIM (Ollama refuses a suffix for models without one)."""

    kind = "ollama"
    endpoint = "/api/generate"
    sse = False
    event_keys = ("response", "done", "error")

    def __init__(self, config: RemoteConfig) -> None:
        if not config.model:
            raise RemoteBackendError("ollama needs backendModel (e.g. qwen2.5-coder:1.5b-base)")
        super().__init__(config)

    def _family(self) -> str:
        return self.fim.family if self._sends_fim_text() else "server (suffix)"

    def _sends_fim_text(self) -> bool:
        return self.fim.layout != "prefix"

    async def _identify(self) -> None:
        self._identified_as(self.config.model)

    def _body(self, prefix: str, suffix: str, max_tokens: int) -> dict[str, Any]:
        options: dict[str, Any] = {
            "num_predict": max(1, max_tokens),
            "temperature": 0.0,
            "top_k": 1,
        }
        body: dict[str, Any] = {"model": self.config.model, "stream": True, "options": options}
        if self._sends_fim_text():
            body.update(prompt=self.fim.prompt(prefix, suffix), raw=True)
            options["stop"] = list(self.fim.stops)
        else:
            body.update(prompt=prefix, suffix=suffix)
        return body

    def _parse(self, data: dict[str, Any]) -> StreamEvent:
        if "error" in data:
            return StreamEvent(error=f"{self.kind}: {_error_text(data['error'])}")
        done = bool(data.get("done"))
        prompt_ns = _float(data.get("prompt_eval_duration"))
        return StreamEvent(
            text=str(data.get("response") or ""),
            done=done,
            finish=str(data.get("done_reason") or ""),
            server_prefill_ms=prompt_ns / 1e6 if done and prompt_ns is not None else None,
            new_tokens=_int(data.get("prompt_eval_count")) if done else None,
        )


BACKEND_CLASSES: dict[str, type[RemoteBackend]] = {
    "llama-server": LlamaServerBackend,
    "openai": OpenAIBackend,
    "ollama": OllamaBackend,
}


def open_remote_backend(config: RemoteConfig) -> RemoteBackend:
    """A backend for config, its server asked what it serves (if it is up yet)."""
    return BACKEND_CLASSES[config.kind](config).open()


def remote_factory(config: RemoteConfig) -> Callable[[], RemoteBackend]:
    """For CompletionService.load_backend, which runs it off the event loop."""
    return lambda: open_remote_backend(config)


# --- small helpers --------------------------------------------------------------------------
async def _lines(response: httpx.Response) -> AsyncGenerator[str, None]:
    """The response's lines, as a generator that `aclosing` can close early."""
    async for line in response.aiter_lines():
        yield line


def _reason(exc: BaseException) -> str:
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


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested too deeply
        return None


def _json_type(value: Any) -> str:
    names = {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _excerpt(text: str) -> str:
    """The start of an unexpected answer, control characters escaped."""
    short = text.strip()[:EXCERPT_CHARS]
    more = "…" if len(text.strip()) > EXCERPT_CHARS else ""
    return repr(short) + more


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
