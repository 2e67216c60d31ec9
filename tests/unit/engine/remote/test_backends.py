"""engine/remote/backends.py: the model on an inference server, ghostfim's client side.

Against small fake servers on 127.0.0.1 (tests/support/fake_http.py) that speak each protocol
(streaming, silence, refusals, garbage) and record what reaches them, including the moment the
client drops the connection. The real servers are tests/integration/test_remote.py's.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from typing import Any

import pytest

from ghostfim.engine.backend import CancelToken, CompletionRequest
from ghostfim.engine.config import EngineConfig
from ghostfim.engine.remote.backends import (
    RemoteBackend,
    RemoteBackendError,
    RemoteConfig,
    RemoteTimeout,
    RemoteUnavailable,
)
from ghostfim.engine.remote.servers import open_remote_backend
from ghostfim.engine.service.completion import CompletionService, CursorState
from ghostfim.lsp.wire import model_json, status_json
from tests.support.fake_http import (
    GARBAGE_200,
    LOOPBACK,
    QWEN_GGUF,
    FakeServer,
    Script,
    free_port,
    http_server,
    serve_bytes,
)
from tests.support.fakes import RecordingEvents

# The cursor after "return math.sq" in stddev(), as the editor tests use it.
PREFIX = (
    "import math\n\n\ndef variance(values):\n    m = sum(values) / len(values)\n"
    "    return sum((v - m) ** 2 for v in values) / len(values)\n\n\n"
    'def stddev(values):\n    """Population standard deviation."""\n    return math.sq'
)
SUFFIX = "\n\n\ndef median(values):\n    return sorted(values)[len(values) // 2]\n"


def request(**changes: Any) -> CompletionRequest:
    fields = {"prefix": PREFIX, "suffix": SUFFIX, "doc_id": "file:///stats.py", **changes}
    return CompletionRequest(**fields)


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
    with FakeServer("openai", Script(model_id=name or "x")) as server:
        backend = backend_for(server, model=name)
        try:
            assert backend.fim.name == family
            assert backend.info.family == family
        finally:
            backend.close()


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
            completion = backend.complete(request(), on_text=lambda t, _: seen.append(t))
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

        def on_text(text: str, marks: tuple[tuple[int, float], ...]) -> None:
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
            said += [json.dumps(model_json(backend.info)), repr(backend.config)]
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


def cursor(text: str = PREFIX + SUFFIX, offset: int = len(PREFIX)) -> CursorState:
    prefix, suffix = text[:offset], text[offset:]
    return CursorState(
        "file:///stats.py", 1, None, prefix, suffix, prefix.count("\n"), offset, len(text)
    )


async def test_the_service_answers_from_a_remote_backend_and_never_shows_the_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GHOSTFIM_TEST_KEY", KEY)
    events = RecordingEvents()
    service = CompletionService(events)  # the real opener: it opens the remote backend
    with FakeServer("openai", Script(api_key=KEY)) as server:
        config = EngineConfig(
            backend="openai", backend_url=server.url, backend_api_key_env="GHOSTFIM_TEST_KEY"
        )
        try:
            assert await service.configure(config)
            answer = await service.complete(cursor(), explicit=True)
            await asyncio.wait_for(events.stats_arrived.wait(), 10)
            status = json.dumps(status_json(service.status()))
        finally:
            await service.shutdown()
    # Answered with the first visible characters; the rest streams as ghost text.
    assert answer.text and "rt(variance(values))".startswith(answer.text), answer
    assert answer.source == "model"
    stats = events.stats_seen[0]
    assert stats["model"] == "qwen2.5-coder-0.5b-instruct-q4_k_m" and stats["ttftMs"] > 0
    assert '"device": "remote (http://127.0.0.1:' in status
    everything = json.dumps([events.stats_seen, events.statuses, events.problems])
    everything += json.dumps([text for _, text, _ in events.ghost] + [events.progresses])
    assert KEY not in everything and KEY not in status


# --- answers that are not this protocol's stream ----------------------------------------
@pytest.mark.parametrize("what", sorted(GARBAGE_200))
def test_a_remote_answer_that_is_not_a_stream_is_an_error_that_says_so(what: str) -> None:
    servers = http_server(serve_bytes(*GARBAGE_200[what]))
    url = next(servers)
    backend = open_remote_backend(RemoteConfig("openai", url, model="m", timeout_ms=2000))
    try:
        with pytest.raises(RemoteBackendError) as info:
            backend.complete(CompletionRequest(prefix="def f():\n    return ", suffix=""))
    finally:
        backend.close()
        servers.close()
    message = str(info.value)
    assert message.startswith(f"openai at {url}"), message
    assert any(
        words in message
        for words in ("not JSON", "not with a stream", "unexpected shape", "an empty body")
    ), message
    assert len(message) < 300, message


def test_a_remote_server_that_ignores_stream_is_still_understood() -> None:
    body = json.dumps({"choices": [{"text": "42", "finish_reason": "stop"}]}).encode()
    servers = http_server(serve_bytes("application/json", body))
    backend = open_remote_backend(RemoteConfig("openai", next(servers), model="m"))
    try:
        result = backend.complete(CompletionRequest(prefix="x = ", suffix=""))
    finally:
        backend.close()
        servers.close()
    assert result.text == "42", result
