"""Fake inference servers on 127.0.0.1, in a thread: one speaking a protocol (llama-server,
openai, ollama) from a script, recording what reaches it and the moment the client drops the
connection; and plain ones that answer whatever bytes a test gives them.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LOOPBACK = "127.0.0.1"
QWEN_GGUF = "/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


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


# --- servers that answer what a test gives them ----------------------------------------------
class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True


Respond = Callable[[BaseHTTPRequestHandler], None]


def http_server(respond: Respond, port: int = 0) -> Iterator[str]:
    """A generator: next() starts the server and gives its URL; close() stops it."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            respond(self)

        def do_POST(self) -> None:
            # Read the request first: closing a socket with unread data in it resets the
            # connection, and the client would see a reset instead of the answer.
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            respond(self)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = _QuietServer((LOOPBACK, port), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{LOOPBACK}:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()


def echo_headers(status: int) -> Respond:
    """Answers with nonsense and echoes the request's headers (an API key among them) in the
    body, as some proxies do in their error pages."""

    def respond(handler: BaseHTTPRequestHandler) -> None:
        body = b"\x00\xffnot json{{" + str(dict(handler.headers)).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return respond


def serve_bytes(content_type: str, body: bytes) -> Respond:
    """Answers 200 with this body."""

    def respond(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return respond


# What a server answers with status 200 that is not a stream: (content type, body).
GARBAGE_200: dict[str, tuple[str, bytes]] = {
    "binary": ("application/json", b"\x00\xffnot json{{"),
    "html": ("text/html", b"<html><body>Welcome to nginx!</body></html>"),
    "empty": ("text/event-stream", b""),
    "sse, not JSON": ("text/event-stream", b"data: <html>\n\n"),
    "sse, a JSON array": ("text/event-stream", b"data: [1, 2]\n\n"),
    "sse, another API": ("text/event-stream", b'data: {"id": "x", "message": "hi"}\n\n'),
    "sse, choices of strings": ("text/event-stream", b'data: {"choices": ["a"]}\n\n'),
    "json lines": ("application/x-ndjson", b'{"response": "x", "done": true}\n'),
    "sse, nested too deeply": ("text/event-stream", b"data: " + b"[" * 100_000 + b"\n\n"),
}
