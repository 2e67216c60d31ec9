"""A minimal LSP client over a subprocess's stdio, for benchmarks and editor-like tests.

It does what an editor does and nothing else: requests, notifications, `$/cancelRequest`, and
timestamps on everything that comes back. (pygls' own client raises on responses to requests
it has cancelled, and adds overhead we would be measuring.)
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class RpcError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = error.get("code")
        self.error = error


@dataclass
class Notification:
    method: str
    params: Any
    at: float


@dataclass
class LspProcess:
    proc: asyncio.subprocess.Process
    pending: dict[int, asyncio.Future[Any]] = field(default_factory=dict)
    notifications: list[Notification] = field(default_factory=list)
    listeners: list[Callable[[Notification], None]] = field(default_factory=list)
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    stderr_tail: list[str] = field(default_factory=list)
    server_requests: list[str] = field(default_factory=list)  # methods the server asked
    never_answer: set[str] = field(default_factory=set)  # requests a broken client ignores
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @classmethod
    async def start(
        cls, cmd: Sequence[str], env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> LspProcess:
        proc = await asyncio.create_subprocess_exec(
            *cmd,
            cwd=cwd,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, **(env or {})},
            limit=64 * 1024 * 1024,
        )
        client = cls(proc)
        client._tasks = [
            asyncio.ensure_future(client._read()),
            asyncio.ensure_future(client._drain()),
        ]
        return client

    async def _drain(self) -> None:
        assert self.proc.stderr is not None
        while line := await self.proc.stderr.readline():
            self.stderr_tail = [*self.stderr_tail[-50:], line.decode(errors="replace")]

    async def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = 0
            while True:
                line = await out.readline()
                if not line:
                    for fut in self.pending.values():
                        if not fut.done():
                            fut.set_exception(ConnectionError("server exited"))
                    return
                line = line.strip()
                if not line:
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            message = json.loads(await out.readexactly(length))
            now = time.perf_counter()
            if "id" in message and ("result" in message or "error" in message):
                fut = self.pending.pop(message["id"], None)
                if fut is not None and not fut.done():
                    if "error" in message:
                        fut.set_exception(RpcError(message["error"]))
                        fut.exception()  # a cancelled request's error needs no reader
                    else:
                        fut.set_result(message.get("result"))
            elif "id" in message:  # a request from the server: answer it plainly
                self.server_requests.append(message.get("method", ""))
                if message.get("method") not in self.never_answer:
                    await self._send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            else:
                note = Notification(message.get("method", ""), message.get("params"), now)
                self.notifications.append(note)
                for listener in list(self.listeners):
                    listener(note)

    async def _send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        await self.proc.stdin.drain()

    async def request(self, method: str, params: Any) -> tuple[int, asyncio.Future[Any]]:
        """Send a request; returns its id and a future for the result."""
        rid = next(self.ids)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[rid] = fut
        await self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return rid, fut

    async def call(self, method: str, params: Any, timeout: float = 60.0) -> Any:
        _, fut = await self.request(method, params)
        return await asyncio.wait_for(fut, timeout)

    async def notify(self, method: str, params: Any) -> None:
        await self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def cancel(self, rid: int) -> None:
        await self.notify("$/cancelRequest", {"id": rid})

    async def initialize(
        self,
        options: dict[str, Any] | None = None,
        capabilities: dict[str, Any] | None = None,
        workspace_folders: Sequence[Path] = (),
    ) -> Any:
        """`workspace_folders`: sent as an editor opened on them does (rootUri: the first)."""
        result = await self.call(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": workspace_folders[0].as_uri() if workspace_folders else None,
                "workspaceFolders": [{"uri": f.as_uri(), "name": f.name} for f in workspace_folders]
                or None,
                "capabilities": capabilities
                or {
                    "general": {"positionEncodings": ["utf-16"]},
                    "textDocument": {"inlineCompletion": {}},
                    "window": {"workDoneProgress": True},
                    **({"workspace": {"workspaceFolders": True}} if workspace_folders else {}),
                },
                "initializationOptions": options or {},
            },
        )
        await self.notify("initialized", {})
        return result

    async def wait_ready(self, timeout: float = 300.0) -> dict[str, Any]:
        deadline = time.perf_counter() + timeout
        while True:
            status = await self.call("ghostfim/status", None)
            if status["state"] != "loading" or time.perf_counter() > deadline:
                return status
            await asyncio.sleep(0.1)

    async def stop(self) -> int | None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.call("shutdown", None), 10)
            await self.notify("exit", None)
        try:
            await asyncio.wait_for(self.proc.wait(), 10)
        except asyncio.TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        for task in self._tasks:
            task.cancel()
        return self.proc.returncode
