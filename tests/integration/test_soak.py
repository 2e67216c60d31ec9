"""Soak: thousands of editor events against `ghostfim serve` with the tiny model.

Each event is what an editor sends while someone edits several files: typing, backspacing,
pastes, undo-like jumps (a whole-document change, or a range covering everything), several
changes in one didChange, cursor moves, files closed and opened again. The text is full of
what breaks position arithmetic: emoji and other astral characters, CJK, combining marks, ZWJ
sequences, tabs, CRLF, lone CR, NUL, and the characters Python's splitlines treats as line
breaks but LSP does not (\\x0b \\x0c \\x1c-\\x1e \\x85 U+2028 U+2029). Most events are followed by
an inline completion request, most of which the next event cancels (as VS Code does); a few
ask at positions that are not in the document. Twice during warm-up the model is switched to a
broken file and back.

Checked: every request is answered (a result or a cancellation; an invalid position gets
-32602) within 10 s; the server's text of every document equals the client's
(`ghostfim/documentText`, GHOSTFIM_DEBUG_PROTOCOL=1) at every check and at the end; the server
never shows a message except for the broken models; RSS after warm-up grows by less than 50 MB
and the thread count by at most 4 (lazily started pool workers); the server exits with 0.

GHOSTFIM_SOAK_EVENTS (default 10000) and GHOSTFIM_SOAK_SEED set a longer or different run, e.g.
`GHOSTFIM_SOAK_EVENTS=100000 pytest tests/integration/test_soak.py -s`; the summary line goes to
stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.lspclient import LspProcess, RpcError
from tests.support.clientdoc import CODE, TRICKY, ClientDoc, rss_mb, snippet, threads
from tests.support.server import (
    SERVER,
    TINY,
    assert_accept_command_only,
    broken_model,
    compare,
    wait_for,
)

# The soak is about the protocol, the sync and the lifecycle, so model work is kept small to
# bound its time on a 2-core CI machine: a fixed 20 ms debounce (automatic requests that the
# next event supersedes, events come every few ms, never reach the model; explicit ones and
# pauses do) and short prompts.
# Explicit backend values: a key left out of a settings change keeps its last value.
SOAK_SETTINGS = {**TINY, "debounceMs": 20, "prefixTokens": 256, "suffixTokens": 64}
EVENTS = int(os.environ.get("GHOSTFIM_SOAK_EVENTS", "10000"))
SEED = int(os.environ.get("GHOSTFIM_SOAK_SEED", "20240611"))
ANSWER_LIMIT_S = 10.0
RSS_GROWTH_LIMIT_MB = 50.0
CHECK_EVERY = 250  # events between comparisons of every open document with the server's
PAUSE_EVERY = 500  # events between pauses (the last request answered, then an explicit one)
MAX_DOC_CHARS = 40_000  # past this, edits lean towards deleting (RSS must measure leaks)


@dataclass
class Request:
    rid: int
    fut: asyncio.Future[Any]
    sent: float
    position: dict[str, int]
    expect_error: int | None = None  # -32602 for a position past the end of the document
    answered: float | None = None
    uri: str = ""
    trigger: int = 2
    event: int = 0


@dataclass
class SoakStats:
    events: int = 0
    changes: int = 0
    requests: int = 0
    cancels_sent: int = 0
    answered_items: int = 0
    answered_empty: int = 0
    cancelled: int = 0
    invalid_position_errors: int = 0
    checks: int = 0
    max_answer_s: float = 0.0
    kinds: dict[str, int] = field(default_factory=dict)
    rss: list[int] = field(default_factory=list)  # MB, sampled along the run
    pause_s: float = 0.0  # time spent waiting for answers at pauses
    check_s: float = 0.0  # time spent comparing documents


class Soak:
    def __init__(self, client: LspProcess, encoding: str, rng: random.Random) -> None:
        self.client, self.encoding, self.rng = client, encoding, rng
        self.docs: dict[str, ClientDoc] = {}
        self.closed: dict[str, ClientDoc] = {}
        self.snapshots: dict[str, list[str]] = {}
        self.cursor: dict[str, int] = {}
        self.requests: list[Request] = []
        self.pending: Request | None = None
        self.stats = SoakStats()

    # --- documents ---------------------------------------------------------------------------
    async def open(self, uri: str, text: str) -> None:
        doc = ClientDoc(uri, text, self.encoding)
        self.docs[uri] = doc
        self.snapshots.setdefault(uri, [text])
        self.cursor[uri] = self.rng.randint(0, len(text))
        await self.client.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}},
        )

    async def change(self, doc: ClientDoc, changes: list[dict[str, Any]]) -> None:
        doc.version += 1
        self.stats.changes += len(changes)
        await self.client.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": doc.uri, "version": doc.version}, "contentChanges": changes},
        )

    # --- one event ---------------------------------------------------------------------------
    async def event(self) -> None:
        rng = self.rng
        if rng.random() < 0.01 and len(self.docs) > 1:
            await self._close_or_reopen()
            return
        doc = self.docs[rng.choice(sorted(self.docs))]
        kind = rng.choices(
            ["type", "word", "backspace", "delete", "paste", "jump", "multi", "move"],
            weights=[30, 10, 15, 6, 6, 4, 5, 24],
        )[0]
        if len(doc.text) > MAX_DOC_CHARS and kind in ("type", "word", "paste"):
            kind = "delete"
        self.stats.kinds[kind] = self.stats.kinds.get(kind, 0) + 1
        at = doc.snap(self.cursor.get(doc.uri, 0))
        if kind == "move":
            at = doc.snap(rng.randint(0, len(doc.text)))
        elif kind in ("type", "word", "paste"):
            text = {
                "type": lambda: rng.choice(TRICKY + CODE)[:2],
                "word": lambda: snippet(rng, rng.randint(1, 4)),
                "paste": lambda: snippet(rng, rng.randint(20, 300)),
            }[kind]()
            await self.change(doc, [doc.replace(at, at, text)])
            at += len(text)
        elif kind in ("backspace", "delete"):
            start = doc.snap(
                at - (rng.randint(1, 3) if kind == "backspace" else rng.randint(1, 400))
            )
            await self.change(doc, [doc.replace(start, at, "")])
            at = start
        elif kind == "jump":
            # Undo-like: back to an earlier state, as a whole-document change or one range.
            old = rng.choice(self.snapshots[doc.uri])
            if rng.random() < 0.5:
                doc.text = old
                await self.change(doc, [{"text": old}])
            else:
                await self.change(doc, [doc.replace(0, len(doc.text), old)])
            at = doc.snap(rng.randint(0, len(doc.text)))
        elif kind == "multi":
            # Several cursors: changes apply in order, each on the result of the previous one.
            changes = []
            for _ in range(rng.randint(2, 5)):
                a = doc.snap(rng.randint(0, len(doc.text)))
                b = doc.snap(min(len(doc.text), a + rng.randint(0, 5)))
                changes.append(doc.replace(a, b, snippet(rng, rng.randint(0, 2))))
                at = doc.snap(a)
            await self.change(doc, changes)
        self.cursor[doc.uri] = doc.snap(at)
        if kind in ("paste", "jump") or rng.random() < 0.02:
            snaps = self.snapshots[doc.uri]
            snaps.append(doc.text)
            del snaps[:-8]
        if rng.random() < 0.75:
            await self.request(doc, self.cursor[doc.uri])

    async def _close_or_reopen(self) -> None:
        rng = self.rng
        if self.closed and rng.random() < 0.6:
            uri = rng.choice(sorted(self.closed))
            old = self.closed.pop(uri)
            await self.open(uri, old.text)
        else:
            uri = rng.choice(sorted(self.docs))
            self.closed[uri] = self.docs.pop(uri)
            await self.client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})

    # --- completion requests -----------------------------------------------------------------
    async def request(self, doc: ClientDoc, offset: int, trigger: int | None = None) -> None:
        rng = self.rng
        if self.pending is not None and not self.pending.fut.done() and rng.random() < 0.8:
            await self.client.cancel(self.pending.rid)  # the next keystroke cancels
            self.stats.cancels_sent += 1
        position = doc.position(offset)
        expect_error = None
        roll = rng.random()
        if roll < 0.02:
            position = {"line": doc.line_count() + rng.randint(1, 50), "character": 0}
            expect_error = -32602
        elif roll < 0.04:
            position = {**position, "character": position["character"] + rng.randint(1, 500)}
        if trigger is None:
            trigger = 1 if rng.random() < 0.1 else 2
        else:
            position, expect_error = doc.position(offset), None
        rid, fut = await self.client.request(
            "textDocument/inlineCompletion",
            {
                "textDocument": {"uri": doc.uri},
                "position": position,
                "context": {"triggerKind": trigger},
            },
        )
        request = Request(
            rid,
            fut,
            time.perf_counter(),
            position,
            expect_error,
            uri=doc.uri,
            trigger=trigger,
            event=self.stats.events,
        )
        fut.add_done_callback(lambda _f, r=request: setattr(r, "answered", time.perf_counter()))
        self.requests.append(request)
        self.pending = request
        self.stats.requests += 1

    async def pause(self) -> None:
        """The user stops typing: the last request runs to its answer, then the user asks
        explicitly (no debounce, full prompt), so the model really runs now and then."""
        for explicit in (False, True):
            if explicit and self.docs:
                doc = self.docs[self.rng.choice(sorted(self.docs))]
                await self.request(doc, doc.snap(self.cursor.get(doc.uri, 0)), trigger=1)
            if self.pending is not None:
                # An error or a late answer is check_answers' to report, with its details.
                with contextlib.suppress(RpcError, asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(self.pending.fut), ANSWER_LIMIT_S)

    # --- checks ------------------------------------------------------------------------------
    async def check_documents(self) -> None:
        for doc in list(self.docs.values()):
            await compare(self.client, doc)
        self.stats.checks += 1

    def check_answers(self, now: float, final: bool = False) -> None:
        """Every request answered (within the limit), and answered correctly."""
        for r in self.requests:
            if r.answered is None:
                waited = now - r.sent
                assert waited < ANSWER_LIMIT_S, f"unanswered after {waited:.1f}s: {r}"
                assert not final, f"never answered: {r}"
                continue
            took = r.answered - r.sent
            self.stats.max_answer_s = max(self.stats.max_answer_s, took)
            assert took < ANSWER_LIMIT_S, f"answered after {took:.1f}s: {r}"
            exc = r.fut.exception()
            if r.expect_error is not None:
                assert isinstance(exc, RpcError) and exc.code == r.expect_error, (r, exc)
                self.stats.invalid_position_errors += 1
            elif exc is not None:
                assert isinstance(exc, RpcError) and exc.code == -32800, (r.rid, exc)
                self.stats.cancelled += 1
            else:
                result = r.fut.result()
                items = result["items"]
                for item in items:
                    assert isinstance(item["insertText"], str), item  # text, never a snippet
                    assert item["range"]["start"] == item["range"]["end"] == r.position, item
                    assert_accept_command_only(item)
                self.stats.answered_items += bool(items)
                self.stats.answered_empty += not items
        self.requests = [r for r in self.requests if r.answered is None]


def shown_messages(client: LspProcess) -> list[str]:
    return [n.params["message"] for n in client.notifications if n.method == "window/showMessage"]


async def run_soak(encoding: str, events: int, seed: int, tmp: Path) -> SoakStats:
    rng = random.Random(seed)
    client = await LspProcess.start(SERVER, env={"GHOSTFIM_DEBUG_PROTOCOL": "1"})
    started = time.perf_counter()
    try:
        offered = ["utf-8", "utf-16"] if encoding == "utf-8" else ["utf-16"]
        init = await client.initialize(
            SOAK_SETTINGS,
            capabilities={
                "general": {"positionEncodings": offered},
                "textDocument": {"inlineCompletion": {}},
                "window": {"workDoneProgress": True},
            },
        )
        assert init["capabilities"]["positionEncoding"] == encoding
        status = await client.wait_ready(120)
        assert status["state"] == "ready", status
        soak = Soak(client, encoding, rng)
        for i in range(4):
            await soak.open(f"file:///soak/doc%20{i}.py", snippet(rng, rng.randint(50, 400)))
        pid = client.proc.pid
        warm_at = min(1000, events // 10)
        # Model switches to a broken file during warm-up: a switch costs the engine memory
        # (reported; test_reliability.py::test_model_switches_do_not_grow_memory), and the RSS
        # check is about editing.
        switch_at = {int(warm_at * 0.3), int(warm_at * 0.6)}
        broken = broken_model(tmp)
        rss_warm = threads_warm = None
        expected_messages = 0
        for i in range(events):
            await soak.event()
            soak.stats.events += 1
            if i in switch_at:
                expected_messages += 1
                await switch_to_broken_and_back(client, broken)
            if i % PAUSE_EVERY == PAUSE_EVERY - 1:
                t = time.perf_counter()
                await soak.pause()
                soak.stats.pause_s += time.perf_counter() - t
            if i % CHECK_EVERY == CHECK_EVERY - 1:
                t = time.perf_counter()
                await soak.check_documents()
                soak.stats.check_s += time.perf_counter() - t
                soak.check_answers(time.perf_counter())
                soak.stats.rss.append(round(rss_mb(pid)))
            if i == warm_at:
                await soak.pause()
                rss_warm, threads_warm = rss_mb(pid), threads(pid)
        # The end: let everything finish, then check all of it once more.
        deadline = time.perf_counter() + ANSWER_LIMIT_S
        while any(r.answered is None for r in soak.requests) and time.perf_counter() < deadline:
            await asyncio.sleep(0.05)
        soak.check_answers(time.perf_counter(), final=True)
        for doc in soak.docs.values():
            await compare(client, doc)
        status = await client.call("ghostfim/status", None)
        assert status["state"] == "ready" and status["model"]["preset"] == "tiny", status
        await asyncio.sleep(1.0)  # background work after the last answer settles
        rss_end, threads_end = rss_mb(pid), threads(pid)
        shown = shown_messages(client)
        assert rss_warm is not None and threads_warm is not None
        growth = rss_end - rss_warm
        print(
            f"\nsoak[{encoding}] seed={seed} events={soak.stats.events} "
            f"changes={soak.stats.changes} requests={soak.stats.requests} "
            f"cancels_sent={soak.stats.cancels_sent} cancelled={soak.stats.cancelled} "
            f"with_items={soak.stats.answered_items} empty={soak.stats.answered_empty} "
            f"invalid_position_errors={soak.stats.invalid_position_errors} "
            f"checks={soak.stats.checks} max_answer={soak.stats.max_answer_s:.2f}s "
            f"rss warm={rss_warm:.0f}MB end={rss_end:.0f}MB growth={growth:+.1f}MB "
            f"threads {threads_warm}->{threads_end} "
            f"duration={time.perf_counter() - started:.0f}s (pauses {soak.stats.pause_s:.0f}s, "
            f"checks {soak.stats.check_s:.0f}s) kinds={soak.stats.kinds} "
            f"rss_samples={soak.stats.rss}"
        )
        unexpected = [m for m in shown if broken.name not in m]
        assert not unexpected, unexpected[:5]
        assert sum(broken.name in m for m in shown) >= expected_messages, shown
        assert growth < RSS_GROWTH_LIMIT_MB, f"RSS grew {growth:.1f} MB after warm-up"
        # Thread pools start workers lazily up to a fixed size: a few more is fine, a thread per
        # request (or per cancellation) is not.
        assert threads_end <= threads_warm + 4, (threads_warm, threads_end)
        assert soak.stats.answered_items > 0, "the model never suggested anything"
        return soak.stats
    finally:
        code = await client.stop()
        assert code == 0, "".join(client.stderr_tail[-20:])


async def switch_to_broken_and_back(client: LspProcess, broken: Path) -> None:
    """A model switch that cannot load: reported, and the tiny model keeps serving."""
    await client.notify(
        "workspace/didChangeConfiguration",
        {"settings": {"ghostfim": {**SOAK_SETTINGS, "model": {"path": str(broken)}}}},
    )
    await wait_for(client, lambda s: bool(s.get("error")) and broken.name in s["error"])
    await client.notify(
        "workspace/didChangeConfiguration", {"settings": {"ghostfim": SOAK_SETTINGS}}
    )
    await wait_for(client, lambda s: not s.get("error") and s["state"] == "ready")


@pytest.mark.model
@pytest.mark.slow
async def test_soak_utf16(tmp_path: Path) -> None:
    await run_soak("utf-16", EVENTS, SEED, tmp_path)


@pytest.mark.model
@pytest.mark.slow
async def test_soak_utf8(tmp_path: Path) -> None:
    await run_soak("utf-8", max(500, EVENTS // 10), SEED + 1, tmp_path)


if __name__ == "__main__":  # a quick manual run: python -m tests.integration.test_soak [events]
    n = int(sys.argv[1]) if len(sys.argv) > 1 else EVENTS
    tmpdir = Path("/tmp/ghostfim-soak")
    shutil.rmtree(tmpdir, ignore_errors=True)
    tmpdir.mkdir()
    asyncio.run(run_soak("utf-16", n, SEED, tmpdir))
