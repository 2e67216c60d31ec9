"""Reliability and safety of `ghostfim serve`: positions, bad input, lifecycle, safety.

These drive the real server over stdio with the tiny model, as a hostile or broken client
would: every bad input must be answered with a JSON-RPC error or explained with
window/showMessage, the server must stay up, and the model that served before must go on
serving. See docs/reliability.md. (The pieces, checked against independent references, are
tests/unit/lsp/test_documents.py, test_textsync.py and test_rpcguard.py.)
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from harness.lspclient import LspProcess, RpcError
from tests.support.clientdoc import TRICKY, ClientDoc, digest, rss_anon_mb, rss_mb, snippet
from tests.support.fake_http import echo_headers, free_port, http_server, serve_bytes
from tests.support.server import (
    ANSWER_S,
    MALFORMED_NOTIFICATIONS,
    MALFORMED_REQUESTS,
    SERVER,
    TINY,
    alive_and_serving,
    assert_accept_command_only,
    broken_model,
    complete,
    expect_message,
    open_doc,
    raw,
    server_text,
    shown,
    start,
    wait_for,
)


@pytest.fixture
async def server() -> AsyncIterator[LspProcess]:
    client = await start()
    yield client
    assert await client.stop() == 0, "".join(client.stderr_tail[-30:])


# --- 2. positions --------------------------------------------------------------------------------
@pytest.mark.model
@pytest.mark.parametrize("encoding", ["utf-16", "utf-8"])
async def test_astral_positions_in_both_encodings(encoding: str) -> None:
    client = await start(encodings=[encoding])
    try:
        text = "x = '😀中é'\r\ny = '🇯🇵'\u2028z\n"
        uri = "file:///pos.py"
        await open_doc(client, uri, text)
        doc = ClientDoc(uri, text, encoding)
        # Insert after each character of line 0: positions count astral characters right.
        for offset in range(len("x = '😀中é'"), 0, -1):
            doc.version += 1
            change = doc.replace(offset, offset, "|")
            await client.notify(
                "textDocument/didChange",
                {"textDocument": {"uri": uri, "version": doc.version}, "contentChanges": [change]},
            )
        got = await server_text(client, uri)
        assert got["text"] == doc.text and got["sha256"] == digest(doc.text)
        assert doc.text.startswith("x| |=| |'|😀|中|é|'")
        # Requests: inside the text, after the emoji, past the end of a line (clamped).
        for character in (0, 3, 7, 9, 500):
            assert isinstance((await complete(client, uri, 1, character))["items"], list)
    finally:
        assert await client.stop() == 0


@pytest.mark.model
async def test_invalid_positions_get_clean_errors(server: LspProcess) -> None:
    uri = "file:///dir%20with%20space/p.py"  # percent-encoded, as VS Code sends it
    await open_doc(server, uri, "def f():\n    pass\n")
    assert isinstance((await complete(server, uri, 1, 4))["items"], list)  # open: answered
    assert isinstance((await complete(server, uri, 0, 10_000))["items"], list)  # clamped
    assert isinstance((await complete(server, uri, 2, 0))["items"], list)  # end of file
    for line, character in ((4, 0), (3, 1), (99, 0), (2**31 - 1, 2**31 - 1)):
        with pytest.raises(RpcError) as err:
            await complete(server, uri, line, character)
        assert err.value.code == -32602 and "past the end" in str(err.value), err.value
    for line, character in ((-1, 0), (0, -5), (2**40, 0), ("x", 0), (None, 0)):
        with pytest.raises(RpcError) as err:
            await complete(server, uri, line, character)  # type: ignore[arg-type]
        assert err.value.code == -32602 and "position" in str(err.value), err.value
    with pytest.raises(RpcError) as err:
        await complete(server, "file:///never/opened.py", 0, 0)
    assert err.value.code == -32602 and "not open" in str(err.value)
    await alive_and_serving(server)


# --- 3. bad input --------------------------------------------------------------------------------
@pytest.mark.model
async def test_malformed_messages_are_answered_or_explained(server: LspProcess) -> None:
    for body, rid, code in MALFORMED_REQUESTS:
        with pytest.raises(RpcError) as err:
            await raw(server, body, rid)
        assert err.value.code == code, (body, err.value)
        assert err.value.error.get("message"), body
    for body, words in MALFORMED_NOTIFICATIONS:
        since = len(server.notifications)
        await raw(server, body)
        await expect_message(server, since, words)
    # Binary in a message: invalid UTF-8 is replaced, the message handled, the user warned.
    since = len(server.notifications)
    body = (
        b'{"jsonrpc":"2.0","id":9100,"method":"textDocument/didOpen_x","params":{"a":"\xff\xfe"}}'
    )
    with pytest.raises(RpcError) as err:
        await raw(server, body, 9100)
    assert err.value.code == -32601
    await expect_message(server, since, "not valid UTF-8")
    # Members JSON-RPC does not define are ignored.
    status = await raw(
        server, b'{"jsonrpc":"2.0","id":9101,"method":"ghostfim/status","x":1}', 9101
    )
    assert status["state"] == "ready"
    uri = "file:///binary.py"
    await raw(
        server,
        b'{"jsonrpc":"2.0","method":"textDocument/didOpen","params":{"textDocument":{"uri":"'
        + uri.encode()
        + b'","languageId":"python","version":1,"text":"x = \xc3\x28 + \xff\\u0000\\n"}}}',
    )
    got = await server_text(server, uri)
    assert got["text"] == "x = \ufffd( + \ufffd\x00\n", got
    assert isinstance((await complete(server, uri, 0, 4))["items"], list)
    await alive_and_serving(server)


@pytest.mark.model
async def test_requests_before_initialize_and_after_shutdown() -> None:
    client = await LspProcess.start(SERVER)
    try:
        with pytest.raises(RpcError) as err:
            await client.call("ghostfim/status", None, timeout=ANSWER_S)
        assert err.value.code == -32002
        await client.call(
            "initialize", {"processId": None, "capabilities": {}, "initializationOptions": TINY}
        )
        await client.notify("initialized", {})
        await client.call("shutdown", None, timeout=ANSWER_S)
        with pytest.raises(RpcError) as err:
            await client.call("ghostfim/status", None, timeout=ANSWER_S)
        assert err.value.code == -32600 and "shut" in str(err.value)
        await client.notify("exit", None)
        assert await asyncio.wait_for(client.proc.wait(), 5) == 0
    finally:
        if client.proc.returncode is None:
            client.proc.kill()


@pytest.mark.model
async def test_bad_settings_are_reported_and_nothing_else_changes(server: LspProcess) -> None:
    bad: list[tuple[Any, str]] = [
        ({"enable": "yes"}, "enable"),
        ({"maxTokens": -5}, "maxTokens"),
        ({"maxTokens": 1e12}, "maxTokens"),
        ({"maxTokens": "8"}, "maxTokens"),
        ({"debounceMs": "fast"}, "debounceMs"),
        ({"multiline": 3}, "multiline"),
        ({"prefixTokens": [1]}, "prefixTokens"),
        ({"model": {"size": "huge"}}, "model.size"),
        ({"model": {"path": 123}}, "model.path"),
        ({"model": 5}, "model"),
        ({"backend": "cloud"}, "backend"),
        ({"backendTimeoutMs": -1}, "backendTimeoutMs"),
        ({"noSuchSetting": 1}, "noSuchSetting"),
        ({"nGpuLayers": True}, "nGpuLayers"),
    ]
    for settings, key in bad:
        since = len(server.notifications)
        await server.notify(
            "workspace/didChangeConfiguration",
            {"settings": {"ghostfim": {**TINY, **settings}}},
        )
        await expect_message(server, since, key)
    # Not an object at all: reported, and the settings (and the model) stay as they were.
    for settings in ([1, 2], "tiny", 42, True):
        since = len(server.notifications)
        await server.notify("workspace/didChangeConfiguration", {"settings": settings})
        await expect_message(server, since, "must be an object")
    await server.notify("workspace/didChangeConfiguration", {"settings": None})
    await asyncio.sleep(0.5)
    status = await server.call("ghostfim/status", None)
    assert status["model"]["preset"] == "tiny" and status["state"] == "ready", status
    await alive_and_serving(server)


@pytest.mark.model
async def test_broken_model_files_are_reported_and_the_old_model_serves(
    server: LspProcess, tmp_path: Path
) -> None:
    truncated = broken_model(tmp_path)
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    magic_only = tmp_path / "magic.gguf"
    magic_only.write_bytes(b"GGUF")
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"GGUF" + bytes(random.Random(1).randrange(256) for _ in range(4096)))
    not_gguf = tmp_path / "notes.txt"
    not_gguf.write_text("hello")
    cases = [
        tmp_path / "missing.gguf",
        tmp_path,  # a directory
        empty,
        magic_only,
        garbage,
        truncated,
        not_gguf,
    ]
    for path in cases:
        since = len(server.notifications)
        await server.notify(
            "workspace/didChangeConfiguration",
            {"settings": {"ghostfim": {**TINY, "model": {"path": str(path)}}}},
        )
        message = await expect_message(server, since, path.name, timeout=60)
        assert "cannot load" in message or "not" in message, message
        name = path.name
        status = await wait_for(server, lambda s, name=name: name in (s.get("error") or ""))
        assert status["state"] == "ready" and status["model"]["preset"] == "tiny", status
        await alive_and_serving(server)


@pytest.mark.model
async def test_switching_back_after_a_failed_switch_loads_nothing(
    server: LspProcess, tmp_path: Path
) -> None:
    """The record of what serves follows what actually serves: after a failed switch, going
    back to the model that serves reloads nothing, and the failure's error is cleared."""

    def loads() -> list[str]:
        return [
            n.params["value"].get("message", "")
            for n in server.notifications
            if n.method == "$/progress" and n.params["value"].get("kind") in ("begin", "report")
        ]

    broken = broken_model(tmp_path)
    for _ in range(3):
        before = len(loads())
        since = len(server.notifications)
        await server.notify(
            "workspace/didChangeConfiguration",
            {"settings": {"ghostfim": {**TINY, "model": {"path": str(broken)}}}},
        )
        await expect_message(server, since, broken.name)
        await server.notify("workspace/didChangeConfiguration", {"settings": {"ghostfim": TINY}})
        status = await wait_for(server, lambda s: not s.get("error"))
        assert status["model"]["preset"] == "tiny" and not status.get("switchingTo"), status
        assert [m for m in loads()[before:] if "tiny" in m] == [], loads()[before:]
    await alive_and_serving(server)


@pytest.mark.model
async def test_huge_document_is_synced_and_answered_in_time(server: LspProcess) -> None:
    line = "    total = compute(alpha, beta) + 中文 * 2  # 😀 note\n"
    text = line * (20_000_000 // len(line))
    uri = "file:///huge.py"
    rss_before = rss_mb(server.proc.pid)
    started = time.perf_counter()
    await open_doc(server, uri, text)
    lines = text.count("\n")
    result = await complete(server, uri, lines, 0)  # at the very end
    assert isinstance(result["items"], list)
    assert time.perf_counter() - started < ANSWER_S
    for at_line in (lines // 2, 1):
        started = time.perf_counter()
        result = await complete(server, uri, at_line, 4)
        assert isinstance(result["items"], list)
        assert time.perf_counter() - started < ANSWER_S
    # Edits in the middle and at both ends keep the server's copy equal to ours.
    doc = ClientDoc(uri, text, "utf-16")
    for offset in (len(text) // 2, 0, len(text)):
        doc.version += 1
        started = time.perf_counter()
        change = doc.replace(offset, min(len(doc.text), offset + 3), "#😀\r\n")
        await server.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": uri, "version": doc.version}, "contentChanges": [change]},
        )
        got = await server.call(
            "ghostfim/documentText", {"uri": uri, "digestOnly": True}, timeout=ANSWER_S
        )
        assert time.perf_counter() - started < ANSWER_S
        assert got["sha256"] == digest(doc.text) and got["version"] == doc.version
    rss_open = rss_mb(server.proc.pid)
    await server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    await asyncio.sleep(0.5)
    rss_closed = rss_mb(server.proc.pid)
    # The text is held once or twice (plus its index), not per edit; closing frees it.
    assert rss_open - rss_before < 600, (rss_before, rss_open)
    assert rss_closed - rss_before < 150, (rss_before, rss_closed)
    await alive_and_serving(server)


@pytest.mark.model
async def test_long_lines_binary_text_and_more_than_the_context(server: LspProcess) -> None:
    cases = {
        "file:///one-line.min.js": "var a=1;" * 250_000,  # 2 MB on one line
        "file:///repeat.txt": "x" * 300_000,  # one token repeated far past the context
        "file:///controls.py": "".join(chr(c) for c in range(32)) * 200 + "\ndef f(",
        "file:///surrogates.py": "s = '\udfff\ud800'\nt = ",  # lone surrogates
        "file:///tricky.py": "".join(TRICKY) * 50 + "\nreturn ",
        "file:///snippets.py": "x = '${1:foo} $0 $(rm -rf ~)'\ncmd = ",
    }
    since = len(server.notifications)
    for uri, text in cases.items():
        await open_doc(server, uri, text)
        doc = ClientDoc(uri, text, "utf-16")
        end = doc.position(len(text))
        middle = doc.position(doc.snap(len(text) // 2))
        for pos in (end, middle):
            for trigger in (1, 2):
                result = await complete(server, uri, pos["line"], pos["character"], trigger)
                for item in result["items"]:
                    # Text only: a plain string, never a snippet object, and no command but
                    # the accept signal.
                    assert_accept_command_only(item)
                    assert item["range"]["start"] == item["range"]["end"] == pos
        got = await server_text(server, uri)
        assert got["text"] == text
    await asyncio.sleep(1.0)  # failures of the streamed rest would show up as messages
    failures = [m for m in shown(server, since) if "fail" in m.lower() or "error" in m.lower()]
    assert not failures, failures
    await alive_and_serving(server)


SECRET = "sk-ghostfim-test-0123456789abcdef"


@pytest.mark.model
@pytest.mark.parametrize(
    "kind",
    ["down", "error", "garbage"],
)
async def test_remote_backend_down_or_garbage(kind: str) -> None:
    servers = http_server(echo_headers(500 if kind == "error" else 200))
    url = f"http://127.0.0.1:{free_port()}" if kind == "down" else next(servers)
    client = await start(env={"GHOSTFIM_TEST_KEY": SECRET})
    try:
        since = len(client.notifications)
        remote = {
            **TINY,
            "backend": "openai",
            "backendUrl": url,
            "backendModel": "" if kind == "error" else "m",  # "": the server is asked
            "backendApiKeyEnv": "GHOSTFIM_TEST_KEY",
            "backendTimeoutMs": 1000,
        }
        await client.notify("workspace/didChangeConfiguration", {"settings": {"ghostfim": remote}})
        await asyncio.sleep(0.5)
        await open_doc(client, "file:///r.py", "def f():\n    return ")
        for _ in range(3):
            started = time.perf_counter()
            result = await complete(client, "file:///r.py", 1, 11)
            assert result["items"] == [] and time.perf_counter() - started < ANSWER_S
        message = await expect_message(client, since, "openai", timeout=ANSWER_S)
        assert url.split("//")[1] in message or "127.0.0.1" in message, message
        # Back to the local model: it serves again.
        await client.notify("workspace/didChangeConfiguration", {"settings": {"ghostfim": TINY}})
        await wait_for(client, lambda s: (s.get("model") or {}).get("preset") == "tiny")
        await alive_and_serving(client)
    finally:
        assert await client.stop() == 0
        servers.close()
    everything = json.dumps([(n.method, n.params) for n in client.notifications])
    everything += "".join(client.stderr_tail)
    assert SECRET not in everything, "the API key leaked into a message, the stats or the log"


@pytest.mark.model
async def test_remote_errors_are_told_once_per_cause_and_recovery_clears_them() -> None:
    """A remote backend that is down, then up but answering garbage, then healthy: one
    message per cause (not one per request), every request answered, and the error state
    cleared by the first good answer."""
    mode = ["garbage"]

    def respond(handler: BaseHTTPRequestHandler) -> None:
        if mode[0] == "garbage":
            serve_bytes("text/html", b"<html>proxy login</html>")(handler)
            return
        events = [{"choices": [{"text": "1 + 1", "finish_reason": None}]}]
        events.append({"choices": [{"text": "", "finish_reason": "stop"}]})
        body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
        serve_bytes("text/event-stream", body + b"data: [DONE]\n\n")(handler)

    port = free_port()
    client = await start()
    servers: Iterator[str] | None = None
    try:
        remote = {**TINY, "backend": "openai", "backendUrl": f"http://127.0.0.1:{port}",
                  "backendModel": "m", "backendTimeoutMs": 1000}  # fmt: skip
        since = len(client.notifications)
        await client.notify("workspace/didChangeConfiguration", {"settings": {"ghostfim": remote}})
        await wait_for(client, lambda s: (s.get("model") or {}).get("name") == "m")
        await open_doc(client, "file:///r.py", "def f():\n    return ")

        async def requests(n: int) -> None:
            for _ in range(n):
                started = time.perf_counter()
                result = await complete(client, "file:///r.py", 1, 11)
                assert isinstance(result["items"], list)
                assert time.perf_counter() - started < ANSWER_S

        await requests(4)  # down
        await expect_message(client, since, "cannot connect", "openai")
        status = await client.call("ghostfim/status", None)
        assert status["state"] == "error" and "cannot connect" in status["error"], status
        assert len(shown(client, since)) == 1, shown(client, since)

        # Up, but answering an HTML page with status 200.
        servers = http_server(respond, port)
        next(servers)
        await requests(4)
        await expect_message(client, since, "not with a stream", "text/html")
        assert len(shown(client, since)) == 2, shown(client, since)

        # Healthy: the first good answer clears the error.
        mode[0] = "ok"
        await requests(1)
        status = await wait_for(client, lambda s: s["state"] == "ready")
        assert not status.get("error"), status
        assert len(shown(client, since)) == 2, shown(client, since)
    finally:
        assert await client.stop() == 0
        if servers is not None:
            servers.close()


# --- 4. lifecycle --------------------------------------------------------------------------------
@pytest.mark.model
async def test_shutdown_and_exit_are_fast_even_while_a_model_loads() -> None:
    client = await start()
    # A model switch is loading (the small model takes a while) when the editor quits.
    await client.notify(
        "workspace/didChangeConfiguration", {"settings": {"ghostfim": {"model": {"size": "small"}}}}
    )
    await asyncio.sleep(0.2)
    started = time.perf_counter()
    await client.call("shutdown", None, timeout=ANSWER_S)
    await client.notify("exit", None)
    assert await asyncio.wait_for(client.proc.wait(), 10) == 0
    assert time.perf_counter() - started < 3.0
    # exit without shutdown: LSP says exit code 1.
    client = await start()
    await client.notify("exit", None)
    assert await asyncio.wait_for(client.proc.wait(), 10) == 1


@pytest.mark.model
async def test_exits_when_stdin_closes() -> None:
    client = await start()
    assert client.proc.stdin is not None
    client.proc.stdin.close()
    started = time.perf_counter()
    await asyncio.wait_for(client.proc.wait(), 10)
    assert time.perf_counter() - started < 6.0
    assert not Path(f"/proc/{client.proc.pid}").exists()  # no thread keeps it alive


@pytest.mark.model
async def test_exits_when_the_client_process_dies() -> None:
    editor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    client = await start(process_id=editor.pid)
    try:
        await asyncio.sleep(0.5)
        assert client.proc.returncode is None
        editor.send_signal(signal.SIGKILL)
        editor.wait()  # reaped: a zombie would still answer kill(pid, 0)
        started = time.perf_counter()
        await asyncio.wait_for(client.proc.wait(), 10)
        assert time.perf_counter() - started < 6.0
    finally:
        editor.kill()
        if client.proc.returncode is None:
            client.proc.kill()


@pytest.mark.model
async def test_a_slow_model_load_does_not_block_initialize() -> None:
    started = time.perf_counter()
    client = await start({"model": {"size": "small"}}, ready=False)
    try:
        assert time.perf_counter() - started < 5.0  # a process start, not a model load
        for _ in range(5):  # answered while the model loads
            t = time.perf_counter()
            status = await client.call("ghostfim/status", None, timeout=ANSWER_S)
            assert time.perf_counter() - t < 2.0 and status["state"] in ("loading", "ready")
        await open_doc(client, "file:///l.py", "x = ")
        assert isinstance((await complete(client, "file:///l.py", 0, 4, 2))["items"], list)
    finally:
        assert await client.stop() == 0


# --- 5. safety ------------------------------------------------------------------------------------
GUARD = """
import os, socket
_log = os.environ["GHOSTFIM_NET_LOG"]
def _record(what):
    with open(_log, "a") as f:
        f.write(what + "\\n")
_connect = socket.socket.connect
def connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6):
        _record(f"connect {address}")
        raise OSError("network use is forbidden in this test")
    return _connect(self, address)
socket.socket.connect = connect
_getaddrinfo = socket.getaddrinfo
def getaddrinfo(host, *args, **kwargs):
    _record(f"getaddrinfo {host}")
    return _getaddrinfo(host, *args, **kwargs)
socket.getaddrinfo = getaddrinfo
"""


@pytest.mark.model
async def test_nothing_leaves_the_machine_without_a_remote_backend(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(GUARD)
    netlog = tmp_path / "net.log"
    env = {
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
        "GHOSTFIM_NET_LOG": str(netlog),
    }
    client = await start(env=env)
    try:
        await open_doc(client, "file:///n.py", "import os\n\ndef main():\n    ")
        for trigger in (1, 2, 1):
            await complete(client, "file:///n.py", 3, 4, trigger)
        await client.notify(
            "workspace/didChangeConfiguration",
            {"settings": {"ghostfim": {**TINY, "maxTokens": 16, "multiline": "always"}}},
        )
        await complete(client, "file:///n.py", 3, 4)
        await asyncio.sleep(1.0)
    finally:
        assert await client.stop() == 0
    assert not netlog.exists(), netlog.read_text()


@pytest.mark.model
async def test_model_paths_from_settings_write_nothing(server: LspProcess, tmp_path: Path) -> None:
    from ghostfim.engine.setup.fetch import find_cached, models_dir

    tiny = find_cached("tiny")
    assert tiny is not None
    folder = tmp_path / "models"
    folder.mkdir()
    copy = folder / "my model.gguf"
    shutil.copyfile(tiny, copy)
    before = sorted(p.name for p in folder.iterdir())
    cache_before = {p.name for p in models_dir().iterdir()}
    sneaky = [
        str(copy),
        str(folder / ".." / "models" / "my model.gguf"),
        "../../../../../../etc/passwd",
        "~/../../proc/self/environ",
        "/dev/zero",
    ]
    for path in sneaky:
        await server.notify(
            "workspace/didChangeConfiguration",
            {"settings": {"ghostfim": {**TINY, "model": {"path": path}}}},
        )
        await asyncio.sleep(0.3)
        await wait_for(server, lambda s: s["state"] == "ready")
    status = await wait_for(server, lambda s: bool(s.get("error")))
    assert "zero" in (status.get("error") or ""), status
    assert sorted(p.name for p in folder.iterdir()) == before
    assert {p.name for p in models_dir().iterdir()} == cache_before
    everything = json.dumps([(n.method, n.params) for n in server.notifications])
    assert "GHOSTFIM_NET_LOG" not in everything and "PATH=" not in everything  # environ


@pytest.mark.model
async def test_model_switches_do_not_grow_memory(server: LspProcess) -> None:
    # The tiny model under other keys (nGpuLayers 0 and 1 both mean the CPU here): each switch
    # to one loads the model anew.
    a, b = ({**TINY, "nGpuLayers": n} for n in (0, 1))

    async def switch(settings: dict[str, Any], wait: bool = True) -> None:
        await server.notify(
            "workspace/didChangeConfiguration", {"settings": {"ghostfim": settings}}
        )
        if wait:
            await wait_for(server, lambda s: not s.get("switchingTo") and s["state"] == "ready")

    pid = server.proc.pid
    before = rss_anon_mb(pid)
    for overlap in (False, False, False, True, True):
        if overlap:  # b arrives while a loads: a is dropped when it is ready, then b loads
            await switch(a, wait=False)
        await switch(b)
        await switch(TINY)
        await asyncio.sleep(0.5)
    growth = rss_anon_mb(pid) - before
    assert growth < 40, f"model switches grew anonymous memory by {growth:.0f} MB"
    ready = [
        n
        for n in server.notifications
        if n.method == "$/progress" and "ready" in n.params["value"].get("message", "")
    ]
    assert len(ready) >= 11, len(ready)  # the first load, then two per round
    await alive_and_serving(server)


# --- everything at once, as a fuzzing client sends it ---------------------------------------------
@pytest.mark.model
async def test_mixed_fuzz_of_edits_requests_and_garbage(tmp_path: Path) -> None:
    """Random edits (some with out-of-range positions), requests at random positions (many not
    in the document), malformed messages, bad settings and switches to broken models, mixed:
    every request with an id is answered within 10 s and the documents stay equal."""
    rng = random.Random(int(os.environ.get("GHOSTFIM_FUZZ_SEED", "5")))
    broken = broken_model(tmp_path)
    client = await start()
    pending: list[tuple[asyncio.Future[Any], float, str]] = []
    docs = {f"file:///fuzz/{i}.py": ClientDoc(f"file:///fuzz/{i}.py", snippet(rng, 60), "utf-16")
            for i in range(3)}  # fmt: skip
    try:
        for doc in docs.values():
            await open_doc(client, doc.uri, doc.text)
        next_raw_id = 50_000
        for _ in range(int(os.environ.get("GHOSTFIM_FUZZ_EVENTS", "1500"))):
            doc = docs[rng.choice(sorted(docs))]
            roll = rng.random()
            if roll < 0.4:  # an edit; one in five with positions outside the document
                lines = doc.line_count()
                sl, el = rng.randint(0, lines + 2), rng.randint(0, lines + 2)
                sc, ec = rng.randint(0, 30), rng.randint(0, 30)
                if rng.random() < 0.8:
                    a = doc.snap(rng.randint(0, len(doc.text)))
                    b = doc.snap(min(len(doc.text), a + rng.randint(0, 10)))
                    s, e = doc.position(a), doc.position(b)
                    sl, sc, el, ec = s["line"], s["character"], e["line"], e["character"]
                a, b = doc.clamped_offset(sl, sc), doc.clamped_offset(el, ec)
                a, b = min(a, b), max(a, b)
                new = snippet(rng, rng.randint(0, 3))
                doc.text = doc.text[:a] + new + doc.text[b:]
                doc.version += 1
                await client.notify(
                    "textDocument/didChange",
                    {
                        "textDocument": {"uri": doc.uri, "version": doc.version},
                        "contentChanges": [
                            {
                                "range": {
                                    "start": {"line": sl, "character": sc},
                                    "end": {"line": el, "character": ec},
                                },
                                "text": new,
                            }
                        ],
                    },
                )
            elif roll < 0.75:  # a completion anywhere, valid or not
                line = rng.choice([rng.randint(0, doc.line_count()), rng.randint(-3, 10**6)])
                character = rng.choice([rng.randint(0, 40), rng.randint(-3, 10**6)])
                rid, fut = await client.request(
                    "textDocument/inlineCompletion",
                    {
                        "textDocument": {"uri": rng.choice([doc.uri, "file:///nope.py"])},
                        "position": {"line": line, "character": character},
                        "context": {"triggerKind": rng.choice([1, 2])},
                    },
                )
                pending.append((fut, time.perf_counter(), f"complete {line}:{character}"))
                if rng.random() < 0.5:
                    await client.cancel(rid)
            elif roll < 0.9:  # a malformed message with an id
                next_raw_id += 1
                body, _, _ = rng.choice(MALFORMED_REQUESTS)
                body = re.sub(rb'"id":("?)[^,}]*', b'"id":%d' % next_raw_id, body, count=1)
                fut = asyncio.get_running_loop().create_future()
                client.pending[next_raw_id] = fut
                await raw(client, body)
                pending.append((fut, time.perf_counter(), body.decode(errors="replace")[:60]))
            elif roll < 0.98:  # garbage without an id
                await raw(client, rng.choice(MALFORMED_NOTIFICATIONS)[0][:2000])
            elif roll < 0.995:  # bad settings
                await client.notify(
                    "workspace/didChangeConfiguration",
                    {"settings": {"ghostfim": {**TINY, "maxTokens": rng.choice(["x", -1, None])}}},
                )
            else:  # a switch to a model that cannot load
                await client.notify(
                    "workspace/didChangeConfiguration",
                    {"settings": {"ghostfim": {**TINY, "model": {"path": str(broken)}}}},
                )
        for fut, sent, what in pending:
            try:
                await asyncio.wait_for(
                    asyncio.shield(fut), max(0.1, sent + ANSWER_S - time.perf_counter())
                )
            except RpcError:
                pass
            except asyncio.TimeoutError:
                raise AssertionError(f"no answer within {ANSWER_S} s: {what}") from None
        for doc in docs.values():
            got = await client.call(
                "ghostfim/documentText", {"uri": doc.uri, "digestOnly": True}, timeout=ANSWER_S
            )
            assert got["sha256"] == digest(doc.text), doc.uri
        status = await client.call("ghostfim/status", None, timeout=ANSWER_S)
        assert status["model"]["preset"] == "tiny", status
    finally:
        assert await client.stop() == 0, "".join(client.stderr_tail[-30:])
