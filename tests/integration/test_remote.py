"""Remote backends for real: `ghostfim serve` with a remote backend as an editor drives it
(against fake servers: no model needed), and real inference servers on the loopback address
(`model`/`slow`): `python -m llama_cpp.server` (llama-cpp-python's OpenAI-compatible server)
and llama.cpp's `llama-server` (skipped until `python -m bench.llama_server` has built it).
The client side against fake servers is tests/unit/engine/remote/.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from ghostfim.engine.backend import CancelToken, CompletionRequest
from ghostfim.engine.remote.config import RemoteConfig, RemoteUnavailable
from ghostfim.engine.remote.servers import open_remote_backend
from harness.lspclient import LspProcess
from tests.support.editor import URI, Editor, items
from tests.support.fake_http import LOOPBACK, FakeServer, free_port
from tests.support.server import SERVER

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

    def __call__(self, text: str, marks: tuple[tuple[int, float], ...]) -> None:
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
