"""An editor's session against `ghostfim serve`: one open document and a cursor, changed the
way an editor changes them, with a request after each keystroke (the previous one cancelled,
as VS Code does)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from harness.lspclient import LspProcess
from harness.sample import stats_before_cursor

URI = "file:///work/stats.py"
# docs/examples/stats.py up to stddev()'s docstring, then the cursor's line: indented, empty.
SAMPLE = stats_before_cursor() + "\n"


class Editor:
    """One open document and a cursor, changed the way an editor changes them."""

    def __init__(self, client: LspProcess, text: str, line: int, col: int, uri: str = URI) -> None:
        self.client, self.text, self.line, self.col, self.version = client, text, line, col, 1
        self.uri = uri
        self.previous: tuple[int, asyncio.Future[Any]] | None = None

    async def open(self) -> None:
        await self.client.notify(
            "textDocument/didOpen",
            {
                "textDocument": {
                    "uri": self.uri,
                    "languageId": "python",
                    "version": 1,
                    "text": self.text,
                }
            },
        )

    async def type(self, ch: str) -> None:
        self.version += 1
        pos = {"line": self.line, "character": self.col}
        await self.client.notify(
            "textDocument/didChange",
            {
                "textDocument": {"uri": self.uri, "version": self.version},
                "contentChanges": [{"range": {"start": pos, "end": pos}, "text": ch}],
            },
        )
        self.col += len(ch)

    async def request(self, trigger: int = 2) -> tuple[int, asyncio.Future[Any]]:
        if self.previous is not None and not self.previous[1].done():
            await self.client.cancel(self.previous[0])  # as VS Code does on every keystroke
        self.previous = await self.client.request(
            "textDocument/inlineCompletion",
            {
                "textDocument": {"uri": self.uri},
                "position": {"line": self.line, "character": self.col},
                "context": {"triggerKind": trigger},
            },
        )
        return self.previous


def editor_at_stddev(client: LspProcess) -> Editor:
    """SAMPLE open at the start of stddev()'s body (after its docstring)."""
    lines = SAMPLE.split("\n")
    line = lines.index('    """Population standard deviation."""') + 1
    return Editor(client, SAMPLE, line, 4)


def items(result: Any) -> list[str]:
    return [item["insertText"] for item in result["items"]]


async def settle(client: LspProcess, timeout: float = 30) -> dict[str, Any]:
    """Wait until the model worker is idle and its step counter stands still."""
    deadline = time.perf_counter() + timeout
    last = None
    while time.perf_counter() < deadline:
        status: dict[str, Any] = await client.call("ghostfim/status", None)
        work = status["work"]
        if not work["running"] and last == work["decodeSteps"]:
            return status
        last = work["decodeSteps"]
        await asyncio.sleep(0.3)
    raise AssertionError("the model never went idle")
