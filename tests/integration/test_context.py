"""Context from other files over LSP: `ghostfim serve` on a self-made tiny model with
extraContext on; opened, saved and sent text reaches the full prompt."""

from __future__ import annotations

import asyncio
from pathlib import Path

from harness.lspclient import LspProcess
from tests.support.server import SERVER


def code(name: str, n: int = 20, start: int = 0) -> str:
    """n distinct lines of code about `name`."""
    return "".join(
        f"    {name}_{i} = compute_{name}({i}, {i * 7})\n" for i in range(start, start + n)
    )


OTHER = "def helper(values):\n" + code("h", 12) + "    return values\n"
CURRENT = "import os\n\n\ndef main():\n    total = helper([1, 2])\n    "


async def test_lsp_a_second_opened_file_reaches_the_full_prompt(tiny_gguf: Path) -> None:
    client = await LspProcess.start(SERVER)
    try:
        options = {"model": {"path": str(tiny_gguf)}, "maxTokens": 4, "extraContext": True}
        await client.initialize(options)
        assert (await client.wait_ready())["state"] == "ready"
        for uri, text in (("file:///p/util.py", OTHER), ("file:///p/main.py", CURRENT)):
            item = {"uri": uri, "languageId": "python", "version": 1, "text": text}
            await client.notify("textDocument/didOpen", {"textDocument": item})
        await client.notify("textDocument/didSave", {"textDocument": {"uri": "file:///p/util.py"}})
        await client.notify("ghostfim/context", {"text": code("yank", 8)})
        lines = CURRENT.split("\n")
        position = {"line": len(lines) - 1, "character": len(lines[-1])}
        await client.call(
            "textDocument/inlineCompletion",
            {
                "textDocument": {"uri": "file:///p/main.py"},
                "position": position,
                "context": {"triggerKind": 1},  # explicit: the full prompt
            },
        )
        for _ in range(100):
            stats = [n.params for n in client.notifications if n.method == "ghostfim/stats"]
            if stats:
                break
            await asyncio.sleep(0.05)
        assert stats and stats[-1]["extraTokens"] > 0, stats
        context = (await client.call("ghostfim/status", None))["context"]
        assert {"util.py", "snippet"} <= set(context["files"]), context
        problems = [n for n in client.notifications if n.method == "window/showMessage"]
        assert not problems, problems
    finally:
        assert await client.stop() == 0
