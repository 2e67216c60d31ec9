"""`ghostfim serve` in a subprocess, driven over stdio as a hostile or broken client would.

The reliability, soak, fuzz and LSP tests (tests/integration/) start the server with these
helpers and read what it answers: JSON-RPC errors, window/showMessage, ghostfim/status, the
documents' text (GHOSTFIM_DEBUG_PROTOCOL=1).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.lspclient import LspProcess
from tests.support.clientdoc import ClientDoc, digest

SERVER = [sys.executable, "-m", "ghostfim.lsp.main", "serve"]
DEBUG_ENV = {"GHOSTFIM_DEBUG_PROTOCOL": "1"}
ANSWER_S = 10.0  # every request is answered within this (the checks' limit)
# The tiny model with small work per request. Explicit backend values: a key left out of a
# settings change keeps its last value.
TINY = {"model": {"size": "tiny"}, "maxTokens": 8, "backend": "local", "nGpuLayers": -1}


async def start(
    options: dict[str, Any] | None = None,
    *,
    env: dict[str, str] | None = None,
    encodings: list[str] | None = None,
    ready: bool = True,
    process_id: int | None = None,
    command: list[str] | None = None,
    cwd: Path | None = None,
    root: Path | None = None,
    workspace_capabilities: dict[str, Any] | None = None,
) -> LspProcess:
    """The server, initialized with `options` (TINY when None), ready unless told not to wait;
    `root`: the workspace folder an editor opened."""
    client = await LspProcess.start(command or SERVER, env={**DEBUG_ENV, **(env or {})}, cwd=cwd)
    params = {
        "processId": os.getpid() if process_id is None else process_id,
        "rootUri": None if root is None else root.as_uri(),
        "capabilities": {
            "general": {"positionEncodings": encodings or ["utf-16"]},
            "textDocument": {"inlineCompletion": {}},
            "window": {"workDoneProgress": True},
            "workspace": workspace_capabilities or {},
        },
        "initializationOptions": TINY if options is None else options,
    }
    await client.call("initialize", params, timeout=ANSWER_S)
    await client.notify("initialized", {})
    if ready:
        status = await client.wait_ready(120)
        assert status["state"] == "ready", status
    return client


def shown(client: LspProcess, since: int = 0) -> list[str]:
    """The window/showMessage texts since notification `since`."""
    return [
        n.params["message"]
        for n in client.notifications[since:]
        if n.method == "window/showMessage"
    ]


def logged(client: LspProcess, kind: int | None = None, since: int = 0) -> list[str]:
    """The window/logMessage texts (of one MessageType: 1 error, 2 warning, 3 info)."""
    return [
        n.params["message"]
        for n in client.notifications[since:]
        if n.method == "window/logMessage" and (kind is None or n.params.get("type") == kind)
    ]


def progress_messages(client: LspProcess, since: int = 0) -> list[str]:
    """The messages of $/progress begin and report notifications (model loads)."""
    return [
        n.params["value"].get("message", "")
        for n in client.notifications[since:]
        if n.method == "$/progress" and n.params["value"].get("kind") in ("begin", "report")
    ]


async def expect_message(
    client: LspProcess, since: int, *needles: str, timeout: float = ANSWER_S
) -> str:
    """The first window/showMessage after `since` that contains every needle."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        for message in shown(client, since):
            if all(n.lower() in message.lower() for n in needles):
                return message
        await asyncio.sleep(0.05)
    raise AssertionError(f"no message with {needles}; got {shown(client, since)}")


async def raw(client: LspProcess, body: bytes, rid: int | str | None = None) -> Any:
    """Send raw bytes as one framed message; await the answer to rid (if given)."""
    fut: asyncio.Future[Any] | None = None
    if rid is not None:
        fut = asyncio.get_running_loop().create_future()
        client.pending[rid] = fut  # type: ignore[index]
    assert client.proc.stdin is not None
    client.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    await client.proc.stdin.drain()
    if fut is None:
        return None
    return await asyncio.wait_for(fut, ANSWER_S)


async def open_doc(
    client: LspProcess, uri: str, text: str, version: int = 1, language: str = "python"
) -> None:
    await client.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": uri, "languageId": language, "version": version, "text": text}},
    )


async def complete(
    client: LspProcess, uri: str, line: int, character: int, trigger: int = 1
) -> Any:
    return await client.call(
        "textDocument/inlineCompletion",
        {
            "textDocument": {"uri": uri},
            "position": {"line": line, "character": character},
            "context": {"triggerKind": trigger},
        },
        timeout=ANSWER_S,
    )


async def configure(client: LspProcess, settings: Any) -> None:
    """workspace/didChangeConfiguration with `{"ghostfim": settings}` (a dict) or as given."""
    wrapped = {"ghostfim": settings} if isinstance(settings, dict) else settings
    await client.notify("workspace/didChangeConfiguration", {"settings": wrapped})


async def server_text(client: LspProcess, uri: str) -> dict[str, Any]:
    return await client.call("ghostfim/documentText", {"uri": uri}, timeout=ANSWER_S)


async def status(client: LspProcess) -> dict[str, Any]:
    result: dict[str, Any] = await client.call("ghostfim/status", None, timeout=ANSWER_S)
    return result


async def wait_for(
    client: LspProcess, ok: Callable[[dict[str, Any]], bool], timeout: float = 60
) -> dict[str, Any]:
    """ghostfim/status until `ok` holds for it (AssertionError with the last one after)."""
    deadline = time.perf_counter() + timeout
    while True:
        current = await status(client)
        if ok(current):
            return current
        assert time.perf_counter() < deadline, current
        await asyncio.sleep(0.1)


async def alive_and_serving(client: LspProcess, preset: str = "tiny") -> None:
    """The server answers, its model is the one that served before, and it completes."""
    current = await status(client)
    assert current["state"] == "ready" and current["model"]["preset"] == preset, current
    await open_doc(client, "file:///alive.py", "def add(a, b):\n    return ")
    result = await complete(client, "file:///alive.py", 1, 11)
    assert isinstance(result["items"], list)


async def compare(client: LspProcess, doc: ClientDoc) -> None:
    """The server's text of doc equals the client's (digest first; the text on a mismatch)."""
    got = await client.call(
        "ghostfim/documentText", {"uri": doc.uri, "digestOnly": True}, timeout=ANSWER_S
    )
    if got["sha256"] == digest(doc.text) and got["version"] == doc.version:
        return
    full = await client.call("ghostfim/documentText", {"uri": doc.uri}, timeout=30)
    text: str = full["text"]
    at = next(
        (i for i, (a, b) in enumerate(zip(text, doc.text, strict=False)) if a != b),
        min(len(text), len(doc.text)),
    )
    raise AssertionError(
        f"{doc.uri}: server v{got['version']} != client v{doc.version}, first difference at "
        f"offset {at}: server {text[max(0, at - 20) : at + 20]!r} "
        f"client {doc.text[max(0, at - 20) : at + 20]!r}"
    )


def tiny_model_file() -> Path:
    """The real tiny model in the cache (make setup fetches it)."""
    from ghostfim.engine.setup.fetch import find_cached

    tiny = find_cached("tiny")
    assert tiny is not None, "the tiny model is not in the cache (ghostfim models --fetch tiny)"
    return tiny


def broken_model(tmp: Path) -> Path:
    """A GGUF cut short: valid magic, truncated tensors (llama.cpp must refuse it)."""
    tiny = tiny_model_file()
    path = tmp / "broken-truncated.gguf"
    with tiny.open("rb") as src, path.open("wb") as out:
        out.write(src.read(tiny.stat().st_size // 3))
    return path


def assert_accept_command_only(item: dict[str, Any]) -> None:
    """An item is text, and its only command is the accept signal naming the item's id
    (docs/protocol.md, "Accept signals"): nothing from the document becomes a command."""
    assert isinstance(item["insertText"], str), item  # never a snippet object
    command = item["command"]
    assert command["command"] == "ghostfim.accepted", item
    assert len(command["arguments"]) == 1 and isinstance(command["arguments"][0], str), item


# --- malformed input, as a hostile client sends it -------------------------------------------
MALFORMED_REQUESTS: list[tuple[bytes, int | str, int]] = [
    # (body, id, expected error code)
    (b'{"jsonrpc":"2.0","id":9001,"method":"ghostfim/status"', 9001, -32700),  # cut short
    (b'{"jsonrpc":"2.0","id":9002,"method":"no/such/method","params":{}}', 9002, -32601),
    (b'{"id":9003,"method":"ghostfim/status"}', 9003, -32600),  # no jsonrpc
    (b'{"jsonrpc":"1.0","id":9004,"method":"ghostfim/status"}', 9004, -32600),
    (b'{"jsonrpc":"2.0","id":9005}', 9005, -32600),  # no method, result or error
    (b'{"jsonrpc":"2.0","id":9006,"method":5}', 9006, -32600),
    (b'{"jsonrpc":"2.0","id":9007,"method":"textDocument/inlineCompletion","params":"x"}',
     9007, -32602),
    (b'{"jsonrpc":"2.0","id":9008,"method":"textDocument/inlineCompletion","params":'
     b'{"textDocument":{"uri":"file:///a"},"position":{"line":0,"character":0}}}', 9008, -32602),
    (b'{"jsonrpc":"2.0","id":9009,"method":"textDocument/inlineCompletion","params":'
     b'{"textDocument":{"uri":"file:///a"},"position":{"line":"x","character":0},'
     b'"context":{"triggerKind":1}}}', 9009, -32602),
    (b'{"jsonrpc":"2.0","id":"s-9010","method":"ghostfim/documentText","params":{"uri":5}}',
     "s-9010", -32602),
    (b'{"jsonrpc":"2.0","id":9011,"method":"initialize","params":{"capabilities":{}}}',
     9011, -32600),  # initialize twice
]  # fmt: skip

MALFORMED_NOTIFICATIONS: list[tuple[bytes, str]] = [
    # (body, words the message must contain)
    (b"[]", "not a JSON-RPC object"),
    (b"42", "not a JSON-RPC object"),
    (b"null", "not a JSON-RPC object"),
    (b'"just a string"', "not a JSON-RPC object"),
    (b"{not json at all", "invalid JSON"),
    (b"[" * 100_000, "invalid JSON"),  # nested too deeply for the parser
    (b'{"jsonrpc":"2.0","method":"made/up","params":{}}', "unknown method"),
    (b'{"jsonrpc":"2.0","method":"textDocument/didOpen","params":{"textDocument":5}}',
     "invalid params"),
    (b'{"jsonrpc":"2.0","method":"textDocument/didChange","params":{"textDocument":'
     b'{"uri":"file:///nope.py","version":2},"contentChanges":[{"text":"x"}]}}', "not open"),
    (b'{"jsonrpc":"2.0","method":"textDocument/didClose","params":{"textDocument":'
     b'{"uri":"file:///nope.py"}}}', "not open"),
    (b'{"jsonrpc":"2.0","method":"$/cancelRequest","params":{}}', "invalid params"),
]  # fmt: skip
