"""Remote backends: the model runs on an inference server, ghostfim keeps the client side.

A team shares one server with continuous batching and prefix caching (llama-server, vLLM,
llama-cpp-python's server, LM Studio, Ollama); each editor keeps what makes ghostfim fast to
use: prompt building (the sticky prefix window keeps the server's prefix cache warm), the
debounce, supersession and cancellation, typed-through reuse, the stop rules, clean-up and the
stats. `RemoteBackend` (here) implements `ghostfim.engine.backend.CompletionBackend` over HTTP;
each server's protocol is a subclass in engine/remote/servers.py:

    llama-server  POST /infill            input_prefix/input_suffix, cache_prompt, streaming
    openai        POST /v1/completions    a FIM prompt built here from the family's token texts
    ollama        POST /api/generate      raw FIM prompt (known family) or prompt + suffix

The workspace's definitions (CompletionRequest.definitions, engine/context/definitions.py) go
into every request, keystroke and full alike, laid out as one setting says (`place_definitions`):
by default as comments at the top of the prefix text, as the local backend does.

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
import threading
import time
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Any, ClassVar, Literal
from urllib.parse import unquote, urlsplit

import httpx

from ghostfim.engine import env
from ghostfim.engine.backend import (
    NEVER_CANCELLED,
    CancelToken,
    Completion,
    CompletionRequest,
    KvStatus,
    ModelInfo,
    OnText,
)
from ghostfim.engine.config import Budgets, BudgetsInEffect
from ghostfim.engine.context.definitions import DefinitionBlock
from ghostfim.engine.prompt.builder import PromptBuilder
from ghostfim.engine.prompt.fim import FimFamily, FimTemplate, family_for_name
from ghostfim.engine.remote.config import (
    DEFAULT_URLS,
    RemoteBackendError,
    RemoteConfig,
    RemoteContextStyle,
    RemoteKind,
    RemoteTimeout,
    RemoteUnavailable,
    approx_tokenize,
)
from ghostfim.engine.remote.stream import (
    CANCEL_POLL_S,
    ERROR_BODY_CHARS,
    STRAY_CHARS,
    RemoteTimings,
    StreamEvent,
    StreamRun,
    error_text,
    excerpt,
    json_or_none,
    json_type,
    lines_of,
    reason_of,
    sse_payload,
)
from ghostfim.engine.text.finish import finish, stop_policy, streaming
from ghostfim.engine.tuning import DEFINITIONS_AUTO_MAX_TOKENS

log = logging.getLogger("ghostfim.remote")

__all__ = [
    "DEFAULT_URLS",
    "RemoteBackend",
    "RemoteBackendError",
    "RemoteConfig",
    "RemoteTimeout",
    "RemoteUnavailable",
]


# --- the workspace's definitions in a request ----------------------------------------------
# Where a request's definitions go:
#   "comment"      DefinitionBlock.prompt_text() at the top of the prefix text (after the FIM
#                  prefix token where ghostfim writes the FIM text; the top of /infill's
#                  input_prefix; the top of Ollama's `prompt` when Ollama applies the template)
#   "input_extra"  llama-server's input_extra, {"filename", "text"} per file: the server lays
#                  them out in its model's repository-level form
#   "file_sep"     `<file_sep>file\nstubs\n` per file, then `<file_sep>name\n` naming the
#                  document, before the FIM prompt: the family's repository-level layout
Placement = Literal["comment", "input_extra", "file_sep"]


def place_definitions(style: RemoteContextStyle, *, takes_files: bool, file_sep: str) -> Placement:
    """Where the definitions go, from one value, `style` (RemoteConfig.style). "comment": as
    comments, whatever the protocol. "repo": the repository-level layout, which is input_extra
    for a server that takes files (`takes_files`: llama-server), the family's file separator
    layout where ghostfim writes the FIM text of a family that has one (`file_sep`, its text),
    and otherwise "comment" after all (a family without a file separator has no such layout)."""
    if style == "repo" and takes_files:
        return "input_extra"
    if style == "repo" and file_sep:
        return "file_sep"
    return "comment"


@dataclass(frozen=True)
class RemotePrompt:
    """What a request's body is built from."""

    prefix: str  # the text before the cursor (the prefix window), comment block at its top
    suffix: str
    head: str = ""  # before the FIM prompt: the definitions as repository-level files
    files: tuple[tuple[str, str], ...] = ()  # the definitions as (file, stubs): input_extra

    def fim_text(self, fim: FimFamily) -> str:
        """The prompt as text, for the protocols where ghostfim writes it."""
        return self.head + fim.prompt(self.prefix, self.suffix)


def repo_text(file_sep: str, files: list[tuple[str, str]], doc_id: str) -> str:
    """The definitions' files in a family's repository-level layout: each file after the
    separator and its name, then the separator and the document's own file name (the prompt's
    file; its name alone, since a request carries no workspace-relative path)."""
    name = PurePosixPath(unquote(urlsplit(doc_id).path)).name or "file"
    return "".join(f"{file_sep}{f}\n{text}\n" for f, text in files) + f"{file_sep}{name}\n"


# --- the backends ---------------------------------------------------------------------------
class RemoteBackend:
    """What the three protocols share: prompt text, streaming, cancel, timeouts, errors."""

    kind: ClassVar[RemoteKind]
    endpoint: ClassVar[str]
    sse: ClassVar[bool] = True  # server-sent events; False: one JSON object a line (Ollama)
    event_keys: ClassVar[tuple[str, ...]] = ()  # an event has at least one of these
    takes_files: ClassVar[bool] = False  # the request can carry other files (input_extra)

    def __init__(self, config: RemoteConfig) -> None:
        # A URL with no scheme, or a key about to go over plain HTTP to another machine,
        # fails the load with a message that says what to change (never the key or URL).
        config.refuse_clear_text()
        self.config = config
        self.fim = family_for_name(config.model)
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
        self.set_budgets(config.budgets)
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

    def kv_status(self) -> KvStatus | None:
        return None

    def expected_prefill_ms(self, n_tokens: int) -> float | None:
        return None  # the server's speed is its own: requests keep the automatic deadline

    def set_budgets(self, budgets: Budgets) -> BudgetsInEffect:
        """Every request carries the whole suffix budget (the server's prefix cache keeps the
        text before the cursor; a shorter keystroke prompt would save it little), so
        completions never report a cut suffix and the service never refreshes at a pause.
        The keystroke prefill time and the snapshot RAM are the server's own business."""
        self.builder = PromptBuilder(
            approx_tokenize,
            FimTemplate(family=self.fim.name, layout=self.fim.layout),
            prefix_tokens=budgets.prefix_tokens,
            suffix_tokens=budgets.suffix_tokens,
        )
        return BudgetsInEffect(budgets)

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
        stream = streaming(on_text, request, ctx)
        run = StreamRun(policy, stream, timings, time.perf_counter(), request.max_tokens)
        reason = await self._supervise(self._attempt(request, run), run, cancel)
        if request.max_tokens <= 0 and reason != "cancelled":
            reason = "prefill_only"
        run.finish(reason)
        return finish(request, ctx, "" if reason == "prefill_only" else run.text, reason, timings)

    async def _attempt(self, request: CompletionRequest, run: StreamRun) -> str:
        """Everything that may wait on the network, so that a cancel or the timeout stops it
        all: asking the server what it serves (once), then the request itself."""
        if not self.identified:
            await self._identify()
        start = time.perf_counter()
        prefix, suffix, suffix_tokens = self._prompt_text(request)
        prompt = self._with_definitions(prefix, suffix, request)
        body = self._body(prompt, request.max_tokens)
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

    def _with_definitions(
        self, prefix: str, suffix: str, request: CompletionRequest
    ) -> RemotePrompt:
        """The prompt with the request's definitions where `place_definitions` puts them (the
        block sits before the whole prefix window, so it costs the server's prefix cache
        nothing while it stays the same). No definitions: the prompt as it always was."""
        block: DefinitionBlock | None = request.definitions
        if block:
            # "auto" on a server: its most (a server's prefill is a GPU's, or not ours to time).
            budget = DEFINITIONS_AUTO_MAX_TOKENS if block.budget is None else block.budget
            block = block.fit(budget, lambda text: len(self.builder.tokenize(text)))
        if not block:
            return RemotePrompt(prefix, suffix)
        file_sep = self.fim.file_sep if self._sends_fim_text() else ""
        where = place_definitions(
            self.config.style, takes_files=self.takes_files, file_sep=file_sep
        )
        if where == "input_extra":
            return RemotePrompt(prefix, suffix, files=tuple(block.files()))
        if where == "file_sep":
            return RemotePrompt(
                prefix, suffix, head=repo_text(file_sep, block.files(), request.doc_id)
            )
        return RemotePrompt(block.prompt_text() + prefix, suffix)

    def _uses_suffix(self) -> bool:
        return not (self.fim.layout == "prefix" and self._sends_fim_text())

    async def _supervise(self, exchange: Any, run: StreamRun, cancel: CancelToken) -> str:
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

    async def _exchange(self, body: dict[str, Any], run: StreamRun) -> str:
        """POST the request and read its stream until a stop reason; map network errors."""
        url = self.config.endpoint_url(self.endpoint)
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
                f"cannot connect to {self.kind} at {self.config.shown_url}: {reason_of(exc)}"
            ) from None
        except httpx.TransportError as exc:
            raise RemoteUnavailable(
                f"connection to {self.kind} at {self.config.shown_url} lost: {reason_of(exc)}"
            ) from None

    async def _read_stream(self, response: httpx.Response, run: StreamRun) -> str:
        """Feed the stream's events to run until a stop reason. A 200 answer that is not this
        protocol's stream (an HTML page, a proxy's error, a server that ignores `stream`, JSON
        of another API) is an error with a message, never an empty suggestion."""
        events = 0
        stray: list[str] = []  # lines that are not events (the start of them), for the message
        stray_chars = 0
        # aclosing: a stop rule leaves the loop early, and the line iterator must be closed
        # now, on this loop, not by a finalizer after the loop stopped running.
        async with contextlib.aclosing(lines_of(response)) as lines:
            async for line in lines:
                payload = sse_payload(line) if self.sse else line.strip() or None
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
                        f"{self._where()} sent something that is not JSON: {excerpt(payload)}"
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
        whole = json_or_none(text)
        if isinstance(whole, dict) and any(k in whole for k in self.event_keys):
            # One JSON answer instead of a stream (a server that ignores "stream": true).
            event = self._event(whole)
            reason = run.feed(replace(event, done=True, finish=event.finish or "stop"))
            return reason or "eog"
        kind = response.headers.get("content-type", "no content type")
        what = "server-sent events" if self.sse else "JSON lines"
        detail = f": {excerpt(text)}" if text else " (an empty body)"
        raise RemoteBackendError(
            f"{self._where()} answered 200 ({kind}) but not with a stream of {what}{detail}"
        )

    def _event(self, data: Any) -> StreamEvent:
        """One parsed event, or a clear error when it is not this protocol's shape."""
        if not isinstance(data, dict):
            raise RemoteBackendError(
                f"{self._where()} sent JSON of an unexpected shape: a {json_type(data)}, "
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
        detail = error_text(response.text[:2000]).strip()[:ERROR_BODY_CHARS]
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
        self.config.refuse_clear_text()  # the variable may have been set since the load
        name = self.config.api_key_env
        if not name:
            return {}
        key = env.secret(name)
        if not key:
            raise RemoteBackendError(
                f"the environment variable {name} (backendApiKeyEnv) is not set or empty"
            )
        return {"Authorization": f"Bearer {key}"}

    async def _get_json(self, path: str) -> Any:
        url = self.config.endpoint_url(path)
        try:
            response = await self._http().get(url, headers=self._headers())
        except httpx.TimeoutException:
            raise RemoteTimeout(
                f"{self.kind} at {self.config.shown_url}: no answer to {path} within "
                f"{self.config.timeout_ms:.0f} ms (backendTimeoutMs)"
            ) from None
        except httpx.TransportError as exc:
            raise RemoteUnavailable(
                f"cannot connect to {self.kind} at {self.config.shown_url}: {reason_of(exc)}"
            ) from None
        if response.status_code != 200:
            raise await self._status_error(response)
        data = json_or_none(response.text)
        if not isinstance(data, dict):
            raise RemoteBackendError(
                f"{self._where()} answered {path} with "
                + ("something that is not JSON" if data is None else f"a JSON {json_type(data)}")
                + f" (expected an object): {excerpt(response.text)}"
            )
        return data

    # --- what differs between protocols ---------------------------------------------------
    def _family(self) -> str:
        return self.fim.name

    def _sends_fim_text(self) -> bool:
        """Whether ghostfim writes the FIM prompt itself (else the server applies its own)."""
        return True

    def _identified_as(self, name: str, n_ctx: int = 0) -> None:
        shown = name
        if "/" in name or name.endswith(".gguf"):
            shown = PurePosixPath(name).name.removesuffix(".gguf")
        if not self.config.model:
            self.fim = family_for_name(name)
            self.builder.template = FimTemplate(family=self.fim.name, layout=self.fim.layout)
        self.info = replace(
            self.info, name=self.config.model or shown, family=self._family(), n_ctx=n_ctx
        )
        self.identified = True

    async def _identify(self) -> None:
        raise NotImplementedError

    def _body(self, prompt: RemotePrompt, max_tokens: int) -> dict[str, Any]:
        raise NotImplementedError

    def _parse(self, data: dict[str, Any]) -> StreamEvent:
        raise NotImplementedError
