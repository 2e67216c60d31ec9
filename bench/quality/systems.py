"""The systems under comparison, each asked for one completion per task.

- `ghostfim` / `ghostfim-raw`: one `ghostfim serve` process over stdio (bench.lspclient). The
  task's document is opened (`didOpen`), then `textDocument/inlineCompletion` with triggerKind
  Invoked (1: explicit, the full FIM prompt, no debounce). The answer is the final ghost text
  (the `ghostfim/ghostText` notification with `done: true`; the response itself may hold only
  the first part of a suggestion still growing). `ghostfim-raw` is the same server with the
  setting `postprocess: false`, switched by `workspace/didChangeConfiguration` between the two
  requests (all other settings unchanged), so both arms see the same prompt and the second one
  finds it in the KV cache: its latency is that of a warm prompt.
- `llama-server`: llama.cpp's server (bench.llama_server) with the request llama.vim sends
  (bench.llamavim: 256 lines before / 64 after, the line's text before the cursor as `prompt`,
  n_predict 128, n_indent, top_k 40 / top_p 0.90, t_max_predict_ms 250 for a first request),
  its answer rendered and accepted as llama.vim does (bench.quality.scoring).
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.quality.tasks import Task
from harness.lspclient import LspProcess, Notification

GHOSTFIM_ARMS = ("ghostfim", "ghostfim-raw")
REQUEST_TIMEOUT_S = 300.0
LANGUAGE_IDS = {"cpp": "cpp", "c": "c", "go": "go", "lua": "lua"}


@dataclass
class Outcome:
    """One system's answer to one task."""

    completion: str | None  # what the system answered (insertText / /infill content)
    result: str | None  # the document after the editor accepted it (None: no answer)
    latency_ms: float | None  # request sent -> final answer
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def model_options(model: str) -> dict[str, Any]:
    if model in {"tiny", "small", "medium", "large"}:
        return {"model": {"size": model}}
    return {"model": {"path": str(model)}}


class GhostfimSystem:
    """`ghostfim serve` driven as an editor would, with post-processing switchable."""

    def __init__(
        self, model: str, settings: dict[str, Any] | None = None, *, deadline_s: float = 900.0
    ) -> None:
        self.options = {**model_options(model), **(settings or {})}
        # The server answers a request empty after 8 s by default (lsp/rpcguard.py); a cold
        # full prompt on a slow CPU takes longer, and quality is what is measured here.
        self.env = {
            "GHOSTFIM_REQUEST_DEADLINE_S": str(deadline_s),
            "GHOSTFIM_EXPLICIT_DEADLINE_S": str(deadline_s),  # explicit requests: 60 s default
        }
        self.client: LspProcess | None = None
        self.postprocess = True
        self.status: dict[str, Any] = {}

    async def start(self) -> dict[str, Any]:
        # GHOSTFIM_BENCH_SERVER runs another build's server on the same tasks (an older
        # checkout's `.venv/bin/ghostfim serve`): the task set depends on the files this
        # venv can see, so a side-by-side comparison runs one bench with two servers.
        command = shlex.split(os.environ.get("GHOSTFIM_BENCH_SERVER", "")) or [
            sys.executable,
            "-m",
            "ghostfim.lsp.main",
            "serve",
        ]
        self.client = await LspProcess.start(command, env=self.env)
        await self.client.initialize({**self.options, "postprocess": True})
        self.status = await self.client.wait_ready(timeout=600.0)
        if self.status.get("state") != "ready":
            raise RuntimeError(f"ghostfim did not become ready: {self.status}")
        return self.status

    async def stop(self) -> None:
        if self.client is not None:
            await self.client.stop()
            self.client = None

    @property
    def warnings(self) -> list[str]:
        """The server's window/showMessage texts (e.g. an unknown setting)."""
        assert self.client is not None
        return [
            str((n.params or {}).get("message", ""))
            for n in self.client.notifications
            if n.method == "window/showMessage"
        ]

    async def set_postprocess(self, on: bool) -> None:
        assert self.client is not None
        if on == self.postprocess:
            return
        await self.client.notify(
            "workspace/didChangeConfiguration",
            {"settings": {"ghostfim": {**self.options, "postprocess": on}}},
        )
        await self.client.call("ghostfim/status", None)  # a round trip: the change is applied
        self.postprocess = on

    async def open(self, task: Task, uri: str) -> None:
        assert self.client is not None
        await self.client.notify(
            "textDocument/didOpen",
            {
                "textDocument": {
                    "uri": uri,
                    "languageId": LANGUAGE_IDS.get(task.language, task.language),
                    "version": 1,
                    "text": task.document,
                }
            },
        )

    async def close(self, uri: str) -> None:
        assert self.client is not None
        await self.client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})

    async def complete(self, task: Task, uri: str, *, postprocess: bool) -> Outcome:
        from bench.quality.scoring import insert_at_cursor

        client = self.client
        assert client is not None
        await self.set_postprocess(postprocess)
        final: list[str] = []
        stats: dict[str, Any] = {}
        got_stats = asyncio.Event()

        def on_note(n: Notification) -> None:
            p = n.params or {}
            if p.get("uri") != uri:
                return
            if n.method == "ghostfim/ghostText" and p.get("done"):
                final.append(str(p.get("insertText") or ""))
            elif n.method == "ghostfim/stats" and p.get("source") == "model":
                stats.update(p)
                stats["_at"] = n.at
                got_stats.set()

        client.listeners.append(on_note)
        sent = time.perf_counter()
        try:
            _, fut = await client.request(
                "textDocument/inlineCompletion",
                {
                    "textDocument": {"uri": uri},
                    "position": {"line": task.line, "character": task.character},
                    "context": {"triggerKind": 1},
                },
            )
            response = await asyncio.wait_for(fut, REQUEST_TIMEOUT_S)
            answered = time.perf_counter()
            await asyncio.wait_for(got_stats.wait(), REQUEST_TIMEOUT_S)
        except Exception as exc:
            return Outcome(None, None, None, error=f"{type(exc).__name__}: {exc}")
        finally:
            client.listeners.remove(on_note)
        items = (response or {}).get("items") or []
        first = str(items[0].get("insertText") or "") if items else ""
        text = final[-1] if final else first
        done_at = max(stats.get("_at", answered), answered)
        return Outcome(
            completion=text,
            result=insert_at_cursor(task, text),
            latency_ms=round((done_at - sent) * 1000, 1),
            details={
                "response_ms": round((answered - sent) * 1000, 1),
                "ttft_ms": stats.get("ttftMs"),
                "prompt_tokens": stats.get("newTokens"),
                "reused_tokens": stats.get("reusedTokens"),
                "extra_tokens": stats.get("extraTokens"),  # context from other files
                "generated_tokens": stats.get("generatedTokens"),
                "cancelled": stats.get("cancelled"),
            },
        )

    async def wait_idle(self, timeout_s: float = 60.0) -> float:
        """Wait until the model thread has been idle for three polls in a row (background
        work after a suggestion, e.g. its prefetch, must not compete with the next system);
        returns the milliseconds waited."""
        assert self.client is not None
        started = time.perf_counter()
        quiet = 0
        while quiet < 3 and time.perf_counter() - started < timeout_s:
            status = await self.client.call("ghostfim/status", None)
            running = bool((status.get("work") or {}).get("running"))
            quiet = 0 if running else quiet + 1
            await asyncio.sleep(0.1)
        return round((time.perf_counter() - started) * 1000, 1)


class LlamaServerSystem:
    """llama-server `/infill` with llama.vim's request, rendering and acceptance."""

    def __init__(
        self,
        model_path: Path,
        *,
        threads: int = 2,
        t_max_predict_ms: int | None = None,
        seed: int | None = None,
    ) -> None:
        from bench import llamavim

        self.model_path = model_path
        self.threads = threads
        # llama.vim samples (top_k, top_p, infill, then llama-server's random draw) with a
        # random seed; a fixed one makes a run repeatable without changing the distribution.
        self.seed = seed
        settings = llamavim.Settings()
        if t_max_predict_ms is not None:
            settings = llamavim.Settings(t_max_predict_first_ms=t_max_predict_ms)
        self.settings = settings
        self.proc: Any = None
        self.base_url = ""
        self.http: Any = None

    def start(self) -> None:
        import httpx

        from bench import llama_server

        binary = llama_server.ensure_llama_server()
        self.proc, self.base_url = llama_server.start_llama_server(
            self.model_path, port=llama_server.free_port(), threads=self.threads, binary=binary
        )
        self.http = httpx.AsyncClient(timeout=REQUEST_TIMEOUT_S)

    async def stop(self) -> None:
        from bench import llama_server

        if self.http is not None:
            await self.http.aclose()
        if self.proc is not None:
            llama_server.stop_llama_server(self.proc)
            self.proc = None

    def request_body(self, task: Task) -> dict[str, Any]:
        """What `llama#fim` sends for the task's cursor (a first request: no ring chunks)."""
        from bench import llamavim

        lines = task.document.split("\n")
        ctx = llamavim.local_context(lines, task.character, task.line, [], self.settings, -1)
        body = llamavim.build_request(ctx, self.settings.t_max_predict_first_ms, self.settings)
        if self.seed is not None:
            body["seed"] = self.seed
        return body

    async def complete(self, task: Task) -> Outcome:
        from bench import llamavim
        from bench.quality.scoring import llamavim_accept

        body = self.request_body(task)
        sent = time.perf_counter()
        try:
            response = await self.http.post(f"{self.base_url}/infill", json=body)
            elapsed = (time.perf_counter() - sent) * 1000
            data = response.json()
        except Exception as exc:
            return Outcome(None, None, None, error=f"{type(exc).__name__}: {exc}")
        if response.status_code != 200 or not isinstance(data, dict):
            message = data.get("error") if isinstance(data, dict) else data
            error = f"HTTP {response.status_code}: {message}"
            return Outcome(None, None, round(elapsed, 1), error=error)
        answer = llamavim.parse_answer(data, elapsed)
        content = answer.content or ""
        return Outcome(
            completion=content,
            result=llamavim_accept(task, content),
            latency_ms=round(elapsed, 1),
            details={
                "ttft_ms": round(answer.ttft_ms, 1) if answer.ttft_ms is not None else None,
                "prompt_tokens": answer.prompt_n,
                "reused_tokens": getattr(answer, "cached_n", None),
                "generated_tokens": answer.predicted_n,
            },
        )
