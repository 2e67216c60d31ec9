"""Remote backends (engine/remote.py): the model on an inference server, ghostfim's client side.

Fast tests run against small fake servers on 127.0.0.1 that speak each protocol (streaming,
silence, refusals) and record what reaches them, including the moment the client drops the
connection. The `model`/`slow` tests start real servers on the loopback address:
`python -m llama_cpp.server` (llama-cpp-python's OpenAI-compatible server) and llama.cpp's
`llama-server` (skipped until `python -m bench.llama_server` has built it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from ghostfim.engine.backend import CancelToken, CompletionRequest
from ghostfim.engine.remote.backends import (
    FIM_TEXTS,
    RemoteBackend,
    RemoteBackendError,
    RemoteConfig,
    RemoteTimeout,
    RemoteUnavailable,
    fim_text_for,
    open_remote_backend,
)

LOOPBACK = "127.0.0.1"
QWEN_GGUF = "/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"

# The cursor after "return math.sq" in stddev(), as the editor tests use it.
PREFIX = (
    "import math\n\n\ndef variance(values):\n    m = sum(values) / len(values)\n"
    "    return sum((v - m) ** 2 for v in values) / len(values)\n\n\n"
    'def stddev(values):\n    """Population standard deviation."""\n    return math.sq'
)
SUFFIX = "\n\n\ndef median(values):\n    return sorted(values)[len(values) // 2]\n"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def request(**changes: Any) -> CompletionRequest:
    fields = {"prefix": PREFIX, "suffix": SUFFIX, "doc_id": "file:///stats.py", **changes}
    return CompletionRequest(**fields)


# --- a fake inference server ----------------------------------------------------------------
@dataclass
class Script:
    """What the fake server does with the next completion requests."""

    pieces: list[str] = field(default_factory=lambda: ["rt", "(", "variance", "(values))"])
    delay_s: float = 0.0  # between pieces
    status: int = 200
    silent: bool = False  # accept the request, never answer
    stall: bool = False  # send the headers, then nothing
    api_key: str | None = None  # require "Authorization: Bearer <key>"
    model_id: str = QWEN_GGUF


class FakeServer:
    """One protocol (llama-server, openai or ollama) on a loopback port, in a thread."""

    def __init__(self, kind: str, script: Script | None = None, port: int = 0) -> None:
        self.kind = kind
        self.script = script or Script()
        self.requests: list[tuple[str, dict[str, str], Any]] = []
        self.pieces_sent = 0
        self.disconnected = threading.Event()  # a write failed: the client closed the stream
        self.disconnected_at = 0.0
        self.release = threading.Event()  # ends silent and stalled answers
        self.httpd = ThreadingHTTPServer((LOOPBACK, port), self._handler())
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://{LOOPBACK}:{self.port}"
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # --- protocol ---------------------------------------------------------------------------
    def piece(self, text: str) -> bytes:
        if self.kind == "openai":
            data = {"choices": [{"text": text, "finish_reason": None}]}
        elif self.kind == "llama-server":
            timings = {"prompt_ms": 12.5, "cache_n": 40, "prompt_n": 7}
            data = {"content": text, "stop": False, "timings": timings}
        else:
            return json.dumps({"response": text, "done": False}).encode() + b"\n"
        return b"data: " + json.dumps(data).encode() + b"\n\n"

    def final(self) -> bytes:
        if self.kind == "openai":
            end = {"choices": [{"text": "", "finish_reason": "length"}]}
            return b"data: " + json.dumps(end).encode() + b"\n\ndata: [DONE]\n\n"
        if self.kind == "llama-server":
            end = {"content": "", "stop": True, "stop_type": "limit", "timings": {}}
            return b"data: " + json.dumps(end).encode() + b"\n\n"
        end = {"response": "", "done": True, "done_reason": "length", "prompt_eval_count": 7}
        return json.dumps(end).encode() + b"\n"

    def get(self, path: str) -> Any:
        if path == "/v1/models":
            return {"object": "list", "data": [{"id": self.script.model_id}]}
        if path == "/props":
            return {
                "model_path": self.script.model_id,
                "default_generation_settings": {"n_ctx": 4096},
            }
        return None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args: object) -> None:
                pass

            def _authorized(self) -> bool:
                key = fake.script.api_key
                if key is None or self.headers.get("Authorization") == f"Bearer {key}":
                    return True
                self._json(401, {"error": {"message": "Invalid API key"}})
                return False

            def _json(self, status: int, data: Any) -> None:
                body = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                fake.requests.append((self.path, dict(self.headers), None))
                if not self._authorized():
                    return
                data = fake.get(self.path)
                self._json(200 if data is not None else 404, data or {"error": "not found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                fake.requests.append((self.path, dict(self.headers), body))
                if not self._authorized():
                    return
                script = fake.script
                if script.silent:
                    fake.release.wait(30)
                    return
                if script.status != 200:
                    self._json(script.status, {"error": {"message": "model not loaded"}})
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.wfile.flush()
                if script.stall:
                    fake.release.wait(30)
                    return
                try:
                    for text in script.pieces:
                        if script.delay_s:
                            time.sleep(script.delay_s)
                        self._chunk(fake.piece(text))
                        fake.pieces_sent += 1
                    self._chunk(fake.final())
                    self._chunk(b"")
                except (BrokenPipeError, ConnectionResetError):
                    fake.disconnected_at = time.perf_counter()
                    fake.disconnected.set()
                    self.close_connection = True

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

        return Handler


def backend_for(server: FakeServer, **config: Any) -> RemoteBackend:
    return open_remote_backend(RemoteConfig(server.kind, server.url, **config))  # type: ignore[arg-type]


# --- prompt text and configuration -----------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("/root/.cache/ghostfim/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "qwen"),
        ("Qwen/Qwen2.5-Coder-1.5B", "qwen"),
        ("qwen2.5-coder:1.5b-base", "qwen"),
        ("bigcode/starcoder2-3b", "starcoder"),
        ("deepseek-ai/deepseek-coder-1.3b-base", "deepseek"),
        ("codellama:7b-code", "codellama"),
        ("mistralai/Codestral-22B-v0.1", "codestral"),
        ("google/codegemma-2b", "codegemma"),
        ("smollm2-135m-instruct-q4_1", "prefix-only"),
        ("", "prefix-only"),
    ],
)
def test_the_fim_family_comes_from_the_model_name(name: str, family: str) -> None:
    assert fim_text_for(name).family == family


def test_fim_prompts_put_the_cursor_where_each_family_expects_it() -> None:
    assert FIM_TEXTS["qwen"].prompt("a", "b") == "<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>"
    assert FIM_TEXTS["codestral"].prompt("a", "b") == "[SUFFIX]b[PREFIX]a"
    assert FIM_TEXTS["prefix-only"].prompt("a", "b") == "a"


def test_urls_default_per_server_and_never_show_credentials() -> None:
    assert RemoteConfig("llama-server").base_url == "http://127.0.0.1:8080"
    assert RemoteConfig("ollama").base_url == "http://127.0.0.1:11434"
    assert RemoteConfig("openai", "http://gpu-box:8000/v1/").base_url == "http://gpu-box:8000"
    assert RemoteConfig("openai", "gpu-box:8000").base_url == "http://gpu-box:8000"
    shown = RemoteConfig("openai", "https://me:secret@gpu-box:8443").shown_url
    assert shown == "https://gpu-box:8443"


def test_ollama_needs_a_model_name() -> None:
    with pytest.raises(RemoteBackendError, match="backendModel"):
        open_remote_backend(RemoteConfig("ollama", "http://127.0.0.1:9"))


# --- requests and streaming ------------------------------------------------------------------
def test_openai_sends_a_fim_prompt_and_streams_the_suggestion() -> None:
    with FakeServer("openai") as server:
        backend = backend_for(server)
        try:
            assert backend.info.name == "qwen2.5-coder-0.5b-instruct-q4_k_m"
            assert backend.info.device == f"remote ({server.url})"
            assert backend.info.family == "qwen"
            seen: list[str] = []
            completion = backend.complete(request(), on_text=seen.append)
        finally:
            backend.close()
    assert completion.text == "rt(variance(values))"
    assert seen[-1] == completion.text and len(seen) == 4  # streamed piece by piece
    path, _, body = server.requests[-1]
    assert path == "/v1/completions" and body["stream"] is True
    assert body["model"] == QWEN_GGUF
    assert body["prompt"].startswith("<|fim_prefix|>import math")
    assert "return math.sq<|fim_suffix|>\n\n\ndef median" in body["prompt"]
    assert body["prompt"].endswith("<|fim_middle|>")
    t = completion.timings
    assert t.ttft_ms > 0 and t.network_ms > 0 and t.decode_tokens == 4  # type: ignore[attr-defined]
    assert t.suffix_tokens > 0 and not completion.suffix_cut  # never a pause refresh


def test_llama_server_uses_infill_with_cache_prompt_and_reports_server_timings() -> None:
    with FakeServer("llama-server") as server:
        backend = backend_for(server)
        try:
            completion = backend.complete(request())
            warm = backend.complete(request(max_tokens=0))
        finally:
            backend.close()
    assert completion.text == "rt(variance(values))"
    assert backend.info.n_ctx == 4096 and backend.info.family == "server (/infill)"
    _, _, body = server.requests[-2]
    assert body["input_prefix"].endswith("return math.sq") and body["input_suffix"] == SUFFIX
    assert body["cache_prompt"] is True and body["stream"] is True and body["prompt"] == ""
    t = completion.timings
    assert (t.prefill_ms, t.prefill_reused_tokens, t.prefill_new_tokens) == (12.5, 40, 7)
    assert server.requests[-1][2]["n_predict"] == 0  # a warm-up only fills the server's cache
    assert warm.stop_reason == "prefill_only" and warm.text == ""


@pytest.mark.parametrize(
    ("model", "raw"), [("qwen2.5-coder:1.5b-base", True), ("mystery-model:7b", False)]
)
def test_ollama_sends_raw_fim_text_or_prompt_and_suffix(model: str, raw: bool) -> None:
    with FakeServer("ollama") as server:
        backend = backend_for(server, model=model)
        try:
            completion = backend.complete(request())
        finally:
            backend.close()
    assert completion.text == "rt(variance(values))"
    _, _, body = server.requests[-1]
    assert body["model"] == model and body["stream"] is True
    if raw:
        assert body["raw"] is True and body["prompt"].startswith("<|fim_prefix|>")
        assert "suffix" not in body
    else:
        assert "raw" not in body and body["suffix"] == SUFFIX
        assert body["prompt"].endswith("return math.sq")


def test_a_stop_rule_closes_the_stream_so_the_server_stops_generating() -> None:
    # One-line mode: the newline ends the suggestion; the server had 200 more pieces to send.
    pieces = ["rt(", "x)", "\n", "    y = 1", *[" + 1"] * 200]
    with FakeServer("openai", Script(pieces=pieces, delay_s=0.01)) as server:
        backend = backend_for(server)
        try:
            completion = backend.complete(request(multiline="never"))
            assert server.disconnected.wait(5), "the server never saw the stream close"
        finally:
            backend.close()
    assert completion.text == "rt(x)" and completion.stop_reason == "newline"
    assert server.pieces_sent < 20


def test_special_token_text_left_in_the_stream_ends_the_suggestion() -> None:
    script = Script(pieces=["rt(x)", "<|file_sep|>", "other_file.py"])
    with FakeServer("openai", script) as server:
        backend = backend_for(server)
        try:
            completion = backend.complete(request())
        finally:
            backend.close()
    assert completion.text == "rt(x)" and completion.stop_reason == "eog"


@pytest.mark.parametrize("kind", ["llama-server", "openai", "ollama"])
def test_cancel_mid_stream_drops_the_connection(kind: str) -> None:
    with FakeServer(kind, Script(pieces=["x"] * 500, delay_s=0.02)) as server:
        backend = backend_for(server, model="qwen2.5-coder:1.5b")
        cancel = CancelToken()

        def on_text(text: str) -> None:
            if len(text) == 3:
                cancel.cancel()

        try:
            completion = backend.complete(request(multiline="always"), cancel, on_text)
            returned = time.perf_counter()
            assert server.disconnected.wait(5), "the server never saw the client go"
        finally:
            backend.close()
    assert completion.cancelled and completion.stop_reason == "cancelled"
    assert server.disconnected_at - returned < 1.0
    assert server.pieces_sent < 100  # of 500


# --- failures: dead, silent and refusing servers ----------------------------------------------
def test_a_dead_server_is_a_quick_clear_error() -> None:
    port = free_port()
    backend = open_remote_backend(RemoteConfig("openai", f"http://{LOOPBACK}:{port}"))
    try:
        assert backend.info.name == "(asking the server)"  # opening does not need the server
        start = time.perf_counter()
        with pytest.raises(RemoteUnavailable, match=f"cannot connect to openai at .*:{port}"):
            backend.complete(request())
        assert time.perf_counter() - start < 2.0
    finally:
        backend.close()


@pytest.mark.parametrize("how", ["silent", "stall"])
def test_a_silent_server_times_out(how: str) -> None:
    with FakeServer("llama-server", Script(**{how: True})) as server:
        backend = backend_for(server, timeout_ms=300)
        try:
            start = time.perf_counter()
            with pytest.raises(RemoteTimeout, match="300 ms"):
                backend.complete(request())
            assert time.perf_counter() - start < 3.0
        finally:
            backend.close()


def test_cancel_does_not_wait_for_a_silent_server() -> None:
    with FakeServer("openai", Script(silent=True)) as server:
        backend = backend_for(server, timeout_ms=30_000)
        cancel = CancelToken()
        threading.Timer(0.2, cancel.cancel).start()
        try:
            start = time.perf_counter()
            completion = backend.complete(request(), cancel)
            assert time.perf_counter() - start < 2.0
        finally:
            backend.close()
    assert completion.cancelled


def test_an_error_status_is_reported_with_the_servers_message() -> None:
    with FakeServer("openai", Script(status=503)) as server:
        backend = backend_for(server)
        try:
            with pytest.raises(RemoteBackendError, match="answered 503: model not loaded"):
                backend.complete(request())
        finally:
            backend.close()


def test_completions_resume_when_the_server_comes_back() -> None:
    server = FakeServer("openai")
    port = server.port
    backend = backend_for(server)
    try:
        assert backend.complete(request()).text == "rt(variance(values))"
        server.stop()
        with pytest.raises(RemoteUnavailable):
            backend.complete(request())
        server = FakeServer("openai", port=port)
        assert backend.complete(request()).text == "rt(variance(values))"
    finally:
        server.stop()
        backend.close()


# --- the API key -------------------------------------------------------------------------------
KEY = "sk-ghostfim-test-7c1d9e"  # a marker: it must reach the server and nothing else


def test_the_api_key_is_sent_and_never_logged_or_reported(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("GHOSTFIM_TEST_KEY", KEY)
    caplog.set_level(logging.DEBUG)  # every logger, httpx and httpcore included
    said: list[str] = []
    with FakeServer("openai", Script(api_key=KEY)) as server:
        backend = backend_for(server, api_key_env="GHOSTFIM_TEST_KEY")
        try:
            completion = backend.complete(request())
            said += [json.dumps(backend.info.to_dict()), repr(backend.config)]
            said.append(json.dumps(completion.timings.to_dict()))
            monkeypatch.setenv("GHOSTFIM_TEST_KEY", KEY + "-rotated")  # read per request
            with pytest.raises(RemoteBackendError, match=r"\$GHOSTFIM_TEST_KEY") as refused:
                backend.complete(request())
            said.append(str(refused.value))
        finally:
            backend.close()
    assert completion.text == "rt(variance(values))"
    assert server.requests[-2][1]["Authorization"] == f"Bearer {KEY}"
    assert all(KEY not in text for text in [*said, caplog.text])


def test_a_missing_key_variable_is_named_in_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GHOSTFIM_NO_SUCH_KEY", raising=False)
    with FakeServer("openai") as server:
        backend = backend_for(server, api_key_env="GHOSTFIM_NO_SUCH_KEY")
        try:
            with pytest.raises(RemoteBackendError, match="GHOSTFIM_NO_SUCH_KEY"):
                backend.complete(request())
        finally:
            backend.close()


class RecordingEvents:
    """The service's Events, kept as JSON text (what an editor would receive)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []
        self.stats_seen = asyncio.Event()

    def ghost_text(self, state: Any, text: str, done: bool) -> None:
        self.sent.append(("ghostText", text))

    def stats(self, payload: dict[str, Any]) -> None:
        self.sent.append(("stats", json.dumps(payload)))
        self.stats_seen.set()

    def status(self, payload: dict[str, Any]) -> None:
        self.sent.append(("status", json.dumps(payload)))

    def progress(self, message: str, percentage: int | None, done: bool) -> None:
        self.sent.append(("progress", message))

    def problem(self, message: str) -> None:
        self.sent.append(("problem", message))


def cursor(text: str = PREFIX + SUFFIX, offset: int = len(PREFIX)) -> Any:
    from ghostfim.engine.service.completion import CursorState

    prefix, suffix = text[:offset], text[offset:]
    return CursorState(
        "file:///stats.py", 1, None, prefix, suffix, prefix.count("\n"), offset, len(text)
    )


async def test_the_service_answers_from_a_remote_backend_and_never_shows_the_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ghostfim.engine.remote.backends import remote_factory
    from ghostfim.engine.service.completion import CompletionService

    monkeypatch.setenv("GHOSTFIM_TEST_KEY", KEY)
    events = RecordingEvents()
    service = CompletionService(events)
    with FakeServer("openai", Script(api_key=KEY)) as server:
        config = RemoteConfig("openai", server.url, api_key_env="GHOSTFIM_TEST_KEY")
        try:
            assert await service.load_backend("openai", remote_factory(config))
            answer = await service.complete(cursor(), explicit=True)
            await asyncio.wait_for(events.stats_seen.wait(), 10)
            status = json.dumps(service.status())
        finally:
            await service.shutdown()
    # Answered with the first visible characters; the rest streams as ghost text.
    assert answer.text and "rt(variance(values))".startswith(answer.text), answer
    assert answer.source == "model"
    stats = json.loads(next(text for kind, text in events.sent if kind == "stats"))
    assert stats["model"] == "qwen2.5-coder-0.5b-instruct-q4_k_m" and stats["ttftMs"] > 0
    assert '"device": "remote (http://127.0.0.1:' in status
    assert all(KEY not in text for _, text in events.sent) and KEY not in status


# --- `ghostfim serve` with a remote backend, as an editor drives it -----------------------------
def notes(client: Any, method: str) -> list[Any]:
    return [n.params for n in client.notifications if n.method == method]


async def until(condition: Callable[[], object], timeout_s: float) -> None:
    deadline = time.perf_counter() + timeout_s
    while not condition():
        if time.perf_counter() > deadline:
            raise AssertionError(f"still not true after {timeout_s:.0f} s")
        await asyncio.sleep(0.1)


async def wait_for_status(client: Any, state: str, timeout_s: float) -> dict[str, Any]:
    deadline = time.perf_counter() + timeout_s
    while True:
        status: dict[str, Any] = await client.call("ghostfim/status", None)
        if status["state"] == state or time.perf_counter() > deadline:
            return status
        await asyncio.sleep(0.1)


async def test_serve_opens_the_remote_backend_and_reopens_it_when_settings_change() -> None:
    """`ghostfim serve` with `backend: openai` (fake servers: no model needed)."""
    from test_lsp import SERVER, Editor, items

    from tests.support.lspclient import LspProcess

    with FakeServer("openai") as first, FakeServer("openai") as second:
        client = await LspProcess.start(SERVER)
        try:
            await client.initialize({"backend": "openai", "backendUrl": first.url})
            status = await wait_for_status(client, "ready", 30)
            assert status["model"]["device"] == f"remote ({first.url})", status
            text = PREFIX + SUFFIX
            editor = Editor(client, text, PREFIX.count("\n"), len(PREFIX.rsplit("\n", 1)[1]))
            await editor.open()
            _, fut = await editor.request(trigger=1)
            answer = items(await asyncio.wait_for(fut, 30))
            assert answer and "rt(variance(values))".startswith(answer[0]), answer

            settings = {"backend": "openai", "backendUrl": second.url, "backendTimeoutMs": 900}
            await client.notify(
                "workspace/didChangeConfiguration", {"settings": {"ghostfim": settings}}
            )
            deadline = time.perf_counter() + 30
            while status["model"]["device"] != f"remote ({second.url})":
                assert time.perf_counter() < deadline, status
                await asyncio.sleep(0.1)
                status = await client.call("ghostfim/status", None)
            assert second.requests[0][0] == "/v1/models"  # the new backend asked the server
        finally:
            assert await client.stop() == 0


# --- real servers on the loopback address (model, slow) ----------------------------------------
MODELS = Path(os.path.expanduser("~/.cache/ghostfim/models"))
TINY = MODELS / "smollm2-135m-instruct-q4_1.gguf"
SMALL = MODELS / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_until_idle(pid: int, timeout_s: float = 10.0) -> float:
    """Seconds until the process stops using the CPU (< 5% over a quarter second)."""
    start = time.perf_counter()
    while time.perf_counter() - start < timeout_s:
        before = cpu_seconds(pid)
        time.sleep(0.25)
        if cpu_seconds(pid) - before < 0.0125:
            return time.perf_counter() - start
    raise AssertionError(f"process {pid} still busy {timeout_s:.0f} s after the cancel")


class ServerProcess:
    """An inference server on a loopback port: start, kill (as a crash would), restart."""

    name: ClassVar[str]
    ready_path: ClassVar[str]  # answers 200 once the model is loaded
    api_suffix: ClassVar[str] = ""  # what a user appends to the URL in backendUrl
    dropped_marker: ClassVar[str]  # what the server logs when a client drops its stream

    def __init__(self, model: Path, port: int, log_path: Path) -> None:
        self.model, self.port, self.log_path = model, port, log_path
        self.url = f"http://{LOOPBACK}:{port}"
        self.process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self, timeout_s: float = 120.0) -> None:
        with self.log_path.open("ab") as log:  # appended: a restart keeps the earlier lines
            self.process = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited: see {self.log_path}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + self.ready_path, timeout=2).status_code == 200:
                    return
            time.sleep(0.2)
        self.stop()
        raise TimeoutError(f"{self.name} did not start in {timeout_s:.0f} s")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.kill()  # no goodbye to the client
        self.process.wait(10)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


class LlamaCppPythonServer(ServerProcess):
    """llama-cpp-python's OpenAI-compatible server (the `server` extra)."""

    name = "llama_cpp.server"
    ready_path = "/v1/models"
    api_suffix = "/v1"
    dropped_marker = "Disconnected from client"

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "llama_cpp.server", "--model", str(self.model),
            "--host", LOOPBACK, "--port", str(self.port), "--n_ctx", "2048",
            "--n_threads", "2",
        ]  # fmt: skip


class LlamaServer(ServerProcess):
    """llama.cpp's llama-server, as bench/llama_server.py builds and configures it."""

    name = "llama-server"
    ready_path = "/health"
    dropped_marker = "cancel task"

    def command(self) -> list[str]:
        from bench import llama_server as ls

        binary = ls.built_llama_server()
        assert binary is not None
        return ls.server_command(binary, self.model, port=self.port, ctx=4096, threads=2)


def llama_server_or_skip() -> None:
    from bench import llama_server as ls

    if ls.built_llama_server() is None:
        pytest.skip(
            f"llama-server is not built ({ls.BINARY} is missing): run "
            "`python -m bench.llama_server` once (builds it into ~/.cache/ghostfim/bench)"
        )


def needs(model: Path) -> None:
    if not model.exists():
        pytest.skip(f"{model.name} is not in the cache (make setup fetches it)")


@pytest.fixture
def llama_cpp_server(tmp_path: Path) -> Iterator[LlamaCppPythonServer]:
    pytest.importorskip("uvicorn", reason="llama-cpp-python's server extra is not installed")
    needs(TINY)
    server = LlamaCppPythonServer(TINY, free_port(), tmp_path / "llama_cpp_server.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


# Greedy decoding counts on along this line until max_tokens (checked with both models): a
# generation that would keep the server busy for seconds if the cancel did not stop it.
COUNTING = ", ".join(str(i) for i in range(24)) + ","


@dataclass
class CancelAfter:
    """An on_text callback that sets its CancelToken once n pieces have streamed in."""

    n: int
    cancel: CancelToken = field(default_factory=CancelToken)
    seen: list[str] = field(default_factory=list)

    def __call__(self, text: str) -> None:
        self.seen.append(text)
        if len(self.seen) == self.n:
            self.cancel.cancel()


@pytest.mark.model
@pytest.mark.slow
def test_openai_backend_against_llama_cpp_server(llama_cpp_server: LlamaCppPythonServer) -> None:
    server = llama_cpp_server
    backend = open_remote_backend(RemoteConfig("openai", server.url + "/v1", timeout_ms=60_000))
    try:
        assert backend.info.name == TINY.stem and backend.info.family == "prefix-only"
        first = backend.complete(request(prefix="def add(a, b):\n    return", suffix=""))
        assert first.text.strip() and not first.cancelled, first

        # Cancel a long generation (counting on one line, 300 tokens) after 5 pieces: the
        # server notices the closed connection and stops generating.
        after5 = CancelAfter(5)
        counting = request(prefix=COUNTING, suffix="", multiline="never", max_tokens=300)
        completion = backend.complete(counting, after5.cancel, after5)
        assert completion.cancelled and len(after5.seen) == 5, completion
        wait_until_idle(server.pid)
        assert "Disconnected from client" in server.log()

        # Killed: a clear error at once. Restarted: the same backend serves again.
        server.stop()
        with pytest.raises(RemoteUnavailable, match="cannot connect"):
            backend.complete(request())
        server.start()
        again = backend.complete(request(prefix="def add(a, b):\n    return", suffix=""))
        assert again.text == first.text
    finally:
        backend.close()


@pytest.mark.model
@pytest.mark.slow
def test_llama_server_backend_against_llama_server(tmp_path: Path) -> None:
    llama_server_or_skip()
    needs(SMALL)
    server = LlamaServer(SMALL, free_port(), tmp_path / "llama-server.log")
    server.start()
    backend = open_remote_backend(RemoteConfig("llama-server", server.url, timeout_ms=60_000))
    try:
        assert backend.info.name == SMALL.stem and backend.info.n_ctx > 0
        warm = backend.complete(request(max_tokens=0))  # n_predict 0: fills the slot's cache
        assert warm.stop_reason == "prefill_only" and warm.timings.prefill_new_tokens > 50
        first = backend.complete(request())
        assert first.text.startswith("rt"), first
        assert first.timings.prefill_reused_tokens > 50  # cache_prompt: the slot's KV cache

        after5 = CancelAfter(5)
        counting = request(prefix=COUNTING, suffix="", multiline="never", max_tokens=300)
        completion = backend.complete(counting, after5.cancel, after5)
        assert completion.cancelled and len(after5.seen) == 5, completion
        wait_until_idle(server.pid, 30)  # it finishes the token in flight, then stops
        slots = httpx.get(server.url + "/slots", timeout=10).json()
        assert not any(slot.get("is_processing") for slot in slots), slots
        assert server.dropped_marker in server.log()

        server.stop()
        with pytest.raises(RemoteUnavailable, match="cannot connect to llama-server"):
            backend.complete(request())
        server.start()
        assert backend.complete(request()).text == first.text
    finally:
        backend.close()
        server.stop()


# --- `ghostfim serve` against real servers ---------------------------------------------------
@pytest.mark.model
@pytest.mark.slow
@pytest.mark.parametrize(
    ("backend", "server_class", "fim"),
    [("openai", LlamaCppPythonServer, "qwen"), ("llama-server", LlamaServer, "server (/infill)")],
)
async def test_serve_with_a_remote_backend(
    tmp_path: Path, backend: str, server_class: type[ServerProcess], fim: str
) -> None:
    """Ghost text arrives; an edit away from the suggestion stops the server's generation;
    a killed server is a status error within the timeout; its restart restores completions
    without restarting ghostfim."""
    if backend == "openai":
        pytest.importorskip("uvicorn", reason="llama-cpp-python's server extra is not installed")
    else:
        llama_server_or_skip()
    from test_lsp import SERVER, URI, Editor, items

    from tests.support.lspclient import LspProcess

    needs(SMALL)
    llm = server_class(SMALL, free_port(), tmp_path / "server.log")
    llm.start()
    timeout_s = 60.0  # a cold prompt on a busy two-core CPU server takes seconds
    # The server answers every request within a deadline (8 s by default), too short here.
    deadline = {"GHOSTFIM_REQUEST_DEADLINE_S": str(timeout_s)}
    client: LspProcess | None = None
    text = PREFIX[: -len("return math.sq")] + SUFFIX
    at_stddev = (text[: text.index(SUFFIX)].count("\n"), 4)

    opened: list[Editor] = []

    async def open_document(text: str, line: int, col: int) -> Editor:
        assert client is not None
        if opened:
            await client.notify("textDocument/didClose", {"textDocument": {"uri": URI}})
        opened.append(Editor(client, text, line, col))
        await opened[-1].open()
        return opened[-1]

    try:
        client = await LspProcess.start(SERVER, env=deadline)
        await client.initialize(
            {
                "backend": backend,
                "backendUrl": llm.url + llm.api_suffix,
                "backendTimeoutMs": timeout_s * 1000,
                "maxTokens": 256,  # long generations, so that stopping one shows
            }
        )
        status = await wait_for_status(client, "ready", 60)
        assert status["model"]["device"] == f"remote ({llm.url})", status
        assert status["model"]["name"] == SMALL.stem and status["model"]["fim"] == fim

        # Typing: ghost text arrives from the server.
        editor = await open_document(text, *at_stddev)
        for ch in "return math.sq":
            await editor.type(ch)
            await editor.request()
            await asyncio.sleep(0.1)
        assert editor.previous is not None
        final = items(await asyncio.wait_for(editor.previous[1], timeout_s))
        assert final and final[0].startswith("rt"), final

        def answered() -> list[Any]:
            stats = notes(client, "ghostfim/stats")
            return [s for s in stats if s["source"] == "model" and not s["cancelled"]]

        await until(answered, timeout_s)  # stats follow the end of the stream
        stats = [s for s in notes(client, "ghostfim/stats") if s["source"] == "model"]
        assert answered()[-1]["model"] == SMALL.stem
        assert all(s["networkMs"] >= 0 for s in stats) and answered()[-1]["ttftMs"] > 0

        # An edit that leaves the suggestion cancels it: the stream closes, generation stops.
        counting = await open_document(COUNTING + "\n", 0, len(COUNTING))
        # Automatic: answered at the first visible text while the suggestion streams on (an
        # explicit request would be answered only once the suggestion is finished).
        _, fut = await counting.request(trigger=2)
        await asyncio.wait_for(fut, timeout_s)
        disconnects = llm.log().count(llm.dropped_marker)
        await counting.type("#")  # not what the model is writing
        await asyncio.to_thread(wait_until_idle, llm.pid, 30)
        assert llm.log().count(llm.dropped_marker) > disconnects

        # Killed: a clear error in the status, within the timeout.
        llm.stop()
        killed = time.perf_counter()
        editor = await open_document(text, *at_stddev)
        await editor.type("return math.sq")
        await editor.request(trigger=1)
        status = await wait_for_status(client, "error", timeout_s)
        assert time.perf_counter() - killed < timeout_s
        assert status["state"] == "error" and f"cannot connect to {backend}" in status["error"]
        shown = [m["message"] for m in notes(client, "window/showMessage")]
        assert any(f"cannot connect to {backend}" in m for m in shown), shown

        # Restarted: completions come back, ghostfim untouched.
        llm.start()
        done_before = len(answered())
        _, fut = await editor.request(trigger=1)
        again = items(await asyncio.wait_for(fut, timeout_s))
        assert again and again[0].startswith("rt"), again
        await until(lambda: len(answered()) > done_before, timeout_s)  # the stream ended
        assert (await client.call("ghostfim/status", None))["state"] == "ready"
    finally:
        llm.stop()  # first: a failing assertion below must not leave the server running
        if client is not None:
            assert await client.stop() == 0
