"""engine/remote/stream.py: one streamed response whatever the protocol: its events, the stop
rules applied to the text as it arrives, and its timings."""

from __future__ import annotations

import errno
import json
import socket

import pytest

from ghostfim.engine.backend import CompletionRequest
from ghostfim.engine.remote.config import RemoteBackendError
from ghostfim.engine.remote.stream import (
    EXCERPT_CHARS,
    RemoteTimings,
    StreamEvent,
    StreamRun,
    as_float,
    as_int,
    error_text,
    excerpt,
    json_or_none,
    json_type,
    reason_of,
    sse_payload,
)
from ghostfim.engine.text.finish import stop_policy


def run(multiline: str = "auto", max_tokens: int = 64, seen: list[str] | None = None) -> StreamRun:
    request = CompletionRequest(prefix="x = f(", suffix=")\n", multiline=multiline)  # type: ignore[arg-type]
    _, policy = stop_policy(request)
    on_text = None if seen is None else (lambda text, _: seen.append(text))
    return StreamRun(policy, on_text, RemoteTimings(), 0.0, max_tokens)


def test_server_sent_event_lines() -> None:
    assert sse_payload('data: {"a": 1}') == '{"a": 1}'
    assert sse_payload("data:[DONE]") == "[DONE]"
    assert json.loads(sse_payload("error: model crashed") or "") == {"error": "model crashed"}
    for line in ("", ": ping", "event: message", "id: 3"):
        assert sse_payload(line) is None


def test_error_bodies_of_every_server_say_their_message() -> None:
    assert error_text({"error": {"message": "bad key"}}) == "bad key"  # OpenAI, llama-server
    assert error_text({"error": "no such model"}) == "no such model"  # Ollama
    assert error_text({"message": "overloaded"}) == "overloaded"  # vLLM
    assert error_text({"detail": "Not Found"}) == "Not Found"  # FastAPI
    assert error_text('{"error": "as text"}') == "as text"
    assert error_text("plain words") == "plain words"
    assert error_text({"other": 1}) == '{"other": 1}'
    assert error_text(42) == "42"


def test_text_is_streamed_until_a_stop_rule_fires() -> None:
    seen: list[str] = []
    r = run(multiline="never", seen=seen)
    assert r.feed(StreamEvent(text="a, ")) is None
    assert r.feed(StreamEvent(text="b")) is None
    assert seen == ["a, ", "a, b"] and r.timings.ttft_ms >= 0
    assert r.feed(StreamEvent(text="\nmore")) == "newline"
    assert r.text == "a, b" and r.pieces == 3


def test_special_token_text_and_the_servers_end() -> None:
    r = run()
    r.stop_texts = ("<|file_sep|>",)
    assert r.feed(StreamEvent(text="a<|file_sep|>other.py")) == "eog" and r.text == "a"
    assert run().feed(StreamEvent(done=True, finish="length")) == "max_tokens"
    assert run().feed(StreamEvent(done=True, finish="stop")) == "eog"
    with pytest.raises(RemoteBackendError, match="overloaded"):
        run().feed(StreamEvent(error="overloaded"))


def test_server_timings_are_taken_and_the_rest_measured() -> None:
    r = run()
    r.headers()
    r.feed(StreamEvent(text="a", server_prefill_ms=12.5, reused_tokens=40, new_tokens=7))
    r.finish("eog")
    t = r.timings
    assert (t.prefill_ms, t.prefill_reused_tokens, t.prefill_new_tokens) == (12.5, 40, 7)
    assert t.decode_tokens == 1 and t.total_ms >= t.decode_ms >= 0
    warm = run(max_tokens=0)
    warm.headers()
    assert warm.feed(StreamEvent(text="ignored", done=True)) == "eog" and warm.text == ""
    warm.finish("prefill_only")
    assert warm.timings.ttft_ms == warm.timings.total_ms
    assert warm.timings.prefill_ms >= 0  # measured: headers to the end


def test_the_small_helpers() -> None:
    reset = OSError(errno.EHOSTUNREACH, "unreachable")
    wrapped = RuntimeError("outer")
    wrapped.__cause__ = ConnectionRefusedError()
    assert "connection refused" in reason_of(wrapped)
    assert reason_of(reset) == "no route to host"  # the errno, not asyncio's wording
    assert reason_of(socket.gaierror(-2, "Name or service not known")).startswith("unknown host")
    assert json_or_none("[1]") == [1] and json_or_none("{") is None
    assert json_or_none("[" * 100_000) is None  # nested too deeply
    assert [json_type(v) for v in (None, [], "", True, 1, 1.5, {})] == [
        "null", "array", "string", "boolean", "number", "number", "dict",
    ]  # fmt: skip
    long = "x" * 100
    assert excerpt(long) == repr("x" * EXCERPT_CHARS) + "…" and excerpt(" ab\n") == "'ab'"
    assert as_float(3) == 3.0 and as_float(True) is None and as_float("3") is None
    assert as_int(3.9) == 3 and as_int(False) is None
