"""Every wait on the editor has an end (issue 28): a client that never answers the server's
requests (workspace/configuration, window/workDoneProgress/create) stalls nothing, and the
user is told once."""

from __future__ import annotations

import asyncio
import os
import time

from ghostfim.lsp.rpcguard import CLIENT_ANSWER_S
from harness.lspclient import LspProcess
from tests.support.server import DEBUG_ENV, SERVER, TINY, complete, open_doc, shown

UNANSWERED = "did not answer workspace/configuration"


async def test_a_client_that_never_answers_stalls_nothing_and_is_told_once() -> None:
    client = await LspProcess.start(SERVER, env=DEBUG_ENV)
    client.never_answer = {"workspace/configuration", "window/workDoneProgress/create"}
    try:
        await client.call(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": None,
                "capabilities": {
                    "workspace": {"configuration": True},
                    "window": {"workDoneProgress": True},
                    "textDocument": {"inlineCompletion": {}},
                },
                "initializationOptions": TINY,
            },
            timeout=10,
        )
        await client.notify("initialized", {})
        assert (await client.wait_ready(120))["state"] == "ready"

        # settings: null makes the server ask for them, twice; neither is answered.
        for _ in range(2):
            await client.notify("workspace/didChangeConfiguration", {"settings": None})
        asked = time.perf_counter()
        await open_doc(client, "file:///t.py", "def add(a, b):\n    return ")
        await complete(client, "file:///t.py", 1, 11, trigger=1)  # served meanwhile
        assert time.perf_counter() - asked < CLIENT_ANSWER_S  # not behind the wait
        assert client.server_requests.count("workspace/configuration") == 2

        # The waits end after CLIENT_ANSWER_S (5 s); the margin covers a loaded 2-core
        # machine's event loop, which is late by milliseconds, not seconds.
        deadline = asked + CLIENT_ANSWER_S + 5
        while not any(UNANSWERED in m for m in shown(client)) and time.perf_counter() < deadline:
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)  # the second wait ends too
        told = [m for m in shown(client) if UNANSWERED in m]
        assert len(told) == 1, shown(client)
        assert "keeping the current settings" in told[0]

        # The settings a client sends itself still apply, and the server still completes.
        await client.notify(
            "workspace/didChangeConfiguration",
            {"settings": {"ghostfim": {**TINY, "enable": False}}},
        )
        await asyncio.sleep(0.3)
        assert await complete(client, "file:///t.py", 1, 11, trigger=2) == {"items": []}
    finally:
        assert await client.stop() == 0
