"""Memory under abuse: 10,000 fuzz events against `ghostfim serve` (tiny model), with large,
minified and binary documents among ordinary ones, and RSS read at 3,000 and at 10,000 events.

Issue 28 (part 4) measured a fuzz client like this one growing the server by 114 MB over 3,000
events: caches bounded by a count of entries whose size the input decides (8,192 whole lines of
a minified file as keys), cached suggestions holding their requests' text, per-model KV
snapshot budgets, and glibc's moving mmap threshold keeping the heap at its high-water mark.
Every cache is now bounded in bytes (engine/memory.py lists them and their limits) and
`ghostfim/status` reports each one's bytes against its limit; a document over `maxDocumentMb`
gets no whole-document work. On HEAD ba441b7 this test measured +19 MB between the two
readings (docs/reliability.md, "Memory bounds").

The documents: a few small ones full of what breaks position arithmetic (tests/support/
clientdoc.py), one larger than the document-size limit (2.5 MB of code), one minified (a few
lines of 100-300 kB each), one binary (random bytes read as Latin-1: NUL and every control
character, plus lone surrogates). Events: typing, words, pastes, deletes, cursor moves, whole-
document changes, saves, `ghostfim/context` with big or binary text, `ghostfim/status`, and
documents closed and opened again (new text, and often a new URI); three events in four are
followed by a completion request (15% explicit), most cancelled by the next event; every 50
events the last answer is awaited and every 500 the user pauses (an explicit request runs the
model). The KV snapshot store is set small
(`kvSnapshotMb: 16`): a store filling up to its limit is not a leak.

Checked: every request is answered within 10 s (a result, -32800 for a cancelled one, -32602
for a position an edit sent meanwhile took out of the document); the server's text of every
open document equals the client's every 1,000 events and at the end; RSS grows by less than
10 MB between event 3,000 and event 10,000; at the end, RSS above what it was once the model
had served its first request, less the caches' configured limits, is under 30 MB; every cache
in `ghostfim/status` is within its limit; the server said once per large document that it is
over the limit, and nothing else was shown; it exits with 0.

GHOSTFIM_MEMORY_EVENTS (default 10000) and GHOSTFIM_MEMORY_SEED change the run (the checkpoint
is at 30% of the events); the summary line, with RSS every 500 events, goes to stdout:
`.venv/bin/pytest tests/integration/test_memory.py -s`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from harness.lspclient import LspProcess, RpcError
from tests.support.clientdoc import CODE, TRICKY, ClientDoc, rss_mb, snippet
from tests.support.server import ANSWER_S, TINY, compare, open_doc, shown, start

EVENTS = int(os.environ.get("GHOSTFIM_MEMORY_EVENTS", "10000"))
SEED = int(os.environ.get("GHOSTFIM_MEMORY_SEED", "28"))
# A small snapshot store (filling it is not a leak), the model's work kept small as in the soak
# (a fixed 20 ms debounce: automatic requests the next event supersedes never reach the model).
SETTINGS = {**TINY, "debounceMs": 20, "prefixTokens": 256, "suffixTokens": 64, "kvSnapshotMb": 16}
GROWTH_LIMIT_MB = 10.0  # between the checkpoint (30% of the events) and the end
BEYOND_LIMITS_MB = 30.0  # at the end, over the first served request's RSS and the cache limits
PAUSE_EVERY = 500
WAIT_EVERY = 50  # events between waits for the last answer (the model gets to run)
CHECK_EVERY = 1000
LARGE_CHARS = 2_500_000  # over the default maxDocumentMb (2 MB)

CODE_LINES = [
    "def handler_{i}(request, value={i}):",
    "    result = compute(value, request.items[{i} % 7])",
    "    if result > {i}:",
    "        return result - {i}",
    "    logger.info('handled %s', request.id)",
    "class Model{i}(Base):",
    "    name = 'model_{i}'",
    "",
]
MINIFIED_PIECES = [
    "function f{i}(a,b){{return a+b*{i}}}",
    "var v{i}=document.getElementById('x{i}');",
    "if(v{i}){{v{i}.style.width={i}+'px'}}",
    "const k{i}=[1,2,{i}].map(function(x){{return x*2}});",
    "for(var i=0;i<{i};i++){{s+=i}}",
]


class AsciiDoc(ClientDoc):
    """A client document of ASCII text whose lines end with \\n only: positions in C-speed
    string searches, not a regex walk over a 2.5 MB text per edit."""

    def position(self, offset: int) -> dict[str, int]:
        line = self.text.count("\n", 0, offset)
        start = self.text.rfind("\n", 0, offset) + 1
        return {"line": line, "character": offset - start}

    def line_count(self) -> int:
        return self.text.count("\n") + 1

    def snap(self, offset: int) -> int:
        return max(0, min(offset, len(self.text)))


def large_text(rng: random.Random, chars: int) -> str:
    lines, i, total = [], rng.randint(0, 10_000), 0
    while total < chars:
        i += 1
        line = rng.choice(CODE_LINES).format(i=i)
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines) + "\n"


def minified_text(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(2, 4)):
        target, parts, total, i = rng.randint(100_000, 300_000), [], 0, rng.randint(0, 99)
        while total < target:
            i += 1
            part = rng.choice(MINIFIED_PIECES).format(i=i)
            parts.append(part)
            total += len(part)
        lines.append("".join(parts))
    return "\n".join(lines)


def binary_text(rng: random.Random) -> str:
    """Random bytes read as Latin-1 (NUL, every control character, CR, lone LF), with lone
    surrogates here and there, as an editor sends a binary file it opened as text."""
    data = rng.randbytes(rng.randint(30_000, 80_000)).decode("latin-1")
    pieces = [data[i : i + 997] for i in range(0, len(data), 997)]
    return "\ud800".join(pieces[:40]) + "".join(pieces[40:])


def binary_piece(rng: random.Random, n: int) -> str:
    return rng.randbytes(n).decode("latin-1")


@dataclass
class Sent:
    fut: asyncio.Future[Any]
    at: float
    what: str
    answered: float | None = None


@dataclass
class Doc:
    kind: str  # code, large, minified, binary
    client: ClientDoc
    cursor: int = 0


@dataclass
class MemoryFuzz:
    client: LspProcess
    rng: random.Random
    docs: dict[str, Doc] = field(default_factory=dict)
    closed: list[Doc] = field(default_factory=list)
    sent: list[Sent] = field(default_factory=list)
    last_completion: tuple[int, Sent] | None = None
    counts: dict[str, int] = field(default_factory=dict)
    opened: int = 0
    large_opened: set[str] = field(default_factory=set)  # URIs opened over the size limit
    slowest: tuple[float, str] = (0.0, "")  # the slowest answer, and what it answered

    def count(self, kind: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1

    # --- documents ---------------------------------------------------------------------------
    def new_text(self, kind: str) -> str:
        rng = self.rng
        if kind == "large":
            return large_text(rng, LARGE_CHARS + rng.randint(0, 200_000))
        if kind == "minified":
            return minified_text(rng)
        if kind == "binary":
            return binary_text(rng)
        return snippet(rng, rng.randint(50, 400))

    async def open(self, kind: str, uri: str | None = None) -> None:
        self.opened += 1
        ext = {"minified": "js", "binary": "bin.py"}.get(kind, "py")
        uri = uri or f"file:///mem/{kind}-{self.opened}.{ext}"
        text = self.new_text(kind)
        doc_type = AsciiDoc if kind in ("large", "minified") else ClientDoc
        doc = Doc(kind, doc_type(uri, text, "utf-16"), self.rng.randint(0, len(text)))
        doc.cursor = doc.client.snap(doc.cursor)
        self.docs[uri] = doc
        if len(text) > 2 * 1024 * 1024:  # characters: the limit counts them
            self.large_opened.add(uri)
        language = "javascript" if kind == "minified" else "python"
        await open_doc(self.client, uri, text, language=language)

    async def change(self, doc: Doc, changes: list[dict[str, Any]]) -> None:
        doc.client.version += 1
        await self.client.notify(
            "textDocument/didChange",
            {
                "textDocument": {"uri": doc.client.uri, "version": doc.client.version},
                "contentChanges": changes,
            },
        )

    def inserted_text(self, doc: Doc, size: int) -> str:
        rng = self.rng
        if doc.kind in ("large", "minified"):  # ASCII, \n only (AsciiDoc's positions)
            pieces = MINIFIED_PIECES if doc.kind == "minified" else CODE_LINES
            text = "".join(
                rng.choice(pieces).format(i=rng.randint(0, 999)) for _ in range(1 + size // 30)
            )
            return text[:size]
        if doc.kind == "binary":
            return binary_piece(rng, size)
        return "".join(rng.choice(TRICKY + CODE) for _ in range(max(1, size // 4)))[:size]

    # --- one event ---------------------------------------------------------------------------
    async def event(self) -> None:
        rng = self.rng
        roll = rng.random()
        if roll < 0.015 or not self.docs:
            await self.close_or_reopen()
            return
        if roll < 0.025:
            await self.status()
            return
        if roll < 0.03:
            await self.client_context()
            return
        uri = rng.choices(
            sorted(self.docs),
            weights=[
                {"code": 3, "large": 2, "minified": 2, "binary": 1.5}[self.docs[u].kind]
                for u in sorted(self.docs)
            ],
        )[0]
        doc = self.docs[uri]
        kind = rng.choices(
            ["type", "word", "paste", "delete", "move", "replace", "save"],
            weights=[40, 12, 5, 10, 25, 1, 2],
        )[0]
        if doc.kind == "large" and kind == "replace":
            kind = "paste"  # 2.5 MB over the pipe per event would be the test's time
        if doc.kind == "large" and len(doc.client.text) > LARGE_CHARS + 400_000:
            kind = "delete"
        self.count(f"{doc.kind} {kind}")
        c, at = doc.client, doc.client.snap(doc.cursor)
        if kind == "move":
            at = c.snap(rng.randint(0, len(c.text)))
            if rng.random() < 0.5:  # to the end of its line, where automatic requests go on
                ends = [c.text.find(eol, at) for eol in "\r\n"]
                at = c.snap(min([e for e in ends if e >= 0], default=len(c.text)))
        elif kind in ("type", "word", "paste"):
            size = {"type": rng.randint(1, 2), "word": rng.randint(3, 12)}.get(
                kind, rng.randint(100, 3000)
            )
            new = self.inserted_text(doc, size)
            await self.change(doc, [c.replace(at, at, new)])
            at = c.snap(at + len(new))
        elif kind == "delete":
            start = c.snap(at - rng.randint(1, 2000))
            await self.change(doc, [c.replace(start, at, "")])
            at = start
        elif kind == "replace":  # a whole-document change (undo to a fresh text, a reload)
            c.text = self.new_text(doc.kind)
            await self.change(doc, [{"text": c.text}])
            at = c.snap(rng.randint(0, len(c.text)))
        elif kind == "save":
            await self.client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
        doc.cursor = c.snap(at)
        if rng.random() < 0.75:
            await self.complete(doc, trigger=1 if rng.random() < 0.15 else 2)

    async def close_or_reopen(self) -> None:
        rng = self.rng
        if self.closed and (rng.random() < 0.6 or len(self.docs) < 3):
            doc = self.closed.pop(rng.randrange(len(self.closed)))
            self.count(f"reopen {doc.kind}")
            # Often under a new name: what the server keeps per document must go on close.
            await self.open(doc.kind, None if rng.random() < 0.5 else doc.client.uri)
        elif self.docs:
            uri = rng.choice(sorted(self.docs))
            self.count(f"close {self.docs[uri].kind}")
            self.closed.append(self.docs.pop(uri))
            await self.client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})

    async def status(self) -> None:
        self.count("status")
        _, fut = await self.client.request("ghostfim/status", None)
        self.track(fut, "status")

    async def client_context(self) -> None:
        """`ghostfim/context` with big minified or binary text."""
        rng = self.rng
        kind = rng.choice(["minified", "binary"])
        self.count(f"context {kind}")
        text = minified_text(rng)[:200_000] if kind == "minified" else binary_text(rng)
        await self.client.notify("ghostfim/context", {"uri": "file:///mem/yank.js", "text": text})

    async def complete(self, doc: Doc, trigger: int) -> None:
        rng = self.rng
        if self.last_completion is not None and rng.random() < 0.8:
            rid, last = self.last_completion
            if last.answered is None:
                await self.client.cancel(rid)  # the next keystroke cancels
        position = doc.client.position(doc.cursor)
        rid, fut = await self.client.request(
            "textDocument/inlineCompletion",
            {
                "textDocument": {"uri": doc.client.uri},
                "position": position,
                "context": {"triggerKind": trigger},
            },
        )
        self.last_completion = (rid, self.track(fut, f"complete {doc.kind} {position}"))

    def track(self, fut: asyncio.Future[Any], what: str) -> Sent:
        sent = Sent(fut, time.perf_counter(), what)
        fut.add_done_callback(lambda _f, s=sent: setattr(s, "answered", time.perf_counter()))
        self.sent.append(sent)
        return sent

    async def wait_last(self) -> None:
        if self.last_completion is not None:
            with contextlib.suppress(RpcError, asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.last_completion[1].fut), ANSWER_S)

    async def pause(self) -> None:
        """The user stops: the last request answered, then an explicit one at the cursor of an
        ordinary document (the model runs now and then)."""
        code = [d for d in self.docs.values() if d.kind == "code"]
        if code:
            await self.complete(self.rng.choice(code), trigger=1)
        await self.wait_last()

    # --- checks ------------------------------------------------------------------------------
    async def settle(self) -> float:
        """Every request answered, each within the limit and rightly; the slowest answer."""
        slowest = 0.0
        for sent in self.sent:
            if sent.answered is None:
                left = sent.at + ANSWER_S - time.perf_counter()
                try:
                    await asyncio.wait_for(asyncio.shield(sent.fut), max(0.05, left))
                except RpcError:
                    pass
                except asyncio.TimeoutError:
                    raise AssertionError(f"no answer within {ANSWER_S} s: {sent.what}") from None
            assert sent.answered is not None
            took = sent.answered - sent.at
            slowest = max(slowest, took)
            if took > self.slowest[0]:
                self.slowest = (took, sent.what)
            assert took < ANSWER_S, f"answered after {took:.1f} s: {sent.what}"
            exc = sent.fut.exception()
            if exc is not None:
                # cancelled, or a position an edit sent after the request took out of the
                # document (pygls starts a request's handler after the messages read with it)
                assert isinstance(exc, RpcError) and exc.code in (-32800, -32602), (sent, exc)
                self.count("answered with " + str(exc.code))
            elif sent.what.startswith("complete"):
                self.count("answered with items" if sent.fut.result()["items"] else "answered")
        self.sent = []
        return slowest

    async def check_documents(self) -> None:
        for doc in list(self.docs.values()):
            await compare(self.client, doc.client)


async def quiet_rss(client: LspProcess, fuzz: MemoryFuzz) -> float:
    """RSS once every answer is in and the background work after it has settled."""
    await fuzz.settle()
    await asyncio.sleep(1.0)
    return rss_mb(client.proc.pid)


def cached_mb(status: dict[str, Any]) -> float:
    """What the caches hold now (MB), from ghostfim/status."""
    caches = (status.get("memory") or {}).get("caches", {})
    return float(sum(c["bytes"] for c in caches.values())) / 2**20


def over_limit_messages(client: LspProcess) -> list[str]:
    return [m for m in shown(client) if "maxDocumentMb" in m]


async def run_memory_fuzz(events: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    client = await start(SETTINGS)
    started = time.perf_counter()
    pid = client.proc.pid
    try:
        fuzz = MemoryFuzz(client, rng)
        for kind in ("code", "code", "code", "large", "minified", "binary"):
            await fuzz.open(kind)
        await fuzz.pause()  # the model has served: its compute buffers are in RSS
        rss_base = await quiet_rss(client, fuzz)
        checkpoint = int(events * 0.3)
        rss_checkpoint: float | None = None
        cached_checkpoint = 0.0
        samples: list[int] = []
        slowest = 0.0
        for i in range(1, events + 1):
            await fuzz.event()
            if i % WAIT_EVERY == 0:
                await fuzz.wait_last()
            if i % PAUSE_EVERY == 0:
                await fuzz.pause()
                slowest = max(slowest, await fuzz.settle())
                samples.append(round(rss_mb(pid)))
                sys.stderr.write(
                    f"memory fuzz: {i} events, RSS {samples[-1]} MB, "
                    f"{time.perf_counter() - started:.0f} s\n"
                )
            if i % CHECK_EVERY == 0:
                await fuzz.check_documents()
            if i == checkpoint:
                rss_checkpoint = await quiet_rss(client, fuzz)
                at_checkpoint = await client.call("ghostfim/status", None, timeout=ANSWER_S)
                cached_checkpoint = cached_mb(at_checkpoint)
        slowest = max(slowest, await fuzz.settle())
        await fuzz.check_documents()
        rss_end = await quiet_rss(client, fuzz)
        status = await client.call("ghostfim/status", None, timeout=ANSWER_S)
        caches = (status.get("memory") or {}).get("caches", {})
        limits_mb = sum(c["limit"] for c in caches.values()) / 2**20
        assert rss_checkpoint is not None
        summary = {
            "seed": seed,
            "events": events,
            "rss_base_mb": round(rss_base),
            "rss_checkpoint_mb": round(rss_checkpoint),
            "rss_end_mb": round(rss_end),
            "growth_mb": round(rss_end - rss_checkpoint, 1),
            "cache_growth_mb": round(cached_mb(status) - cached_checkpoint, 1),
            "cache_limits_mb": round(limits_mb, 1),
            "beyond_limits_mb": round(rss_end - rss_base - limits_mb, 1),
            "caches": {name: [c["bytes"], c["limit"]] for name, c in caches.items()},
            "slowest_s": round(slowest, 2),
            "slowest": fuzz.slowest[1],
            "duration_s": round(time.perf_counter() - started),
            "rss_every_500": samples,
            "counts": dict(sorted(fuzz.counts.items())),
        }
        print("\nmemory " + json.dumps(summary))
        assert caches, status
        for name, cache in caches.items():
            assert 0 <= cache["bytes"] <= cache["limit"], (name, cache)
        assert status["state"] == "ready" and status["model"]["preset"] == "tiny", status
        growth = rss_end - rss_checkpoint
        assert growth < GROWTH_LIMIT_MB, f"RSS grew {growth:.1f} MB after the checkpoint"
        beyond = rss_end - rss_base - limits_mb
        assert beyond < BEYOND_LIMITS_MB, f"RSS {beyond:.1f} MB beyond the caches' limits"
        # Said once per document over the limit, and nothing else was shown.
        told = over_limit_messages(client)
        assert len(told) == len(fuzz.large_opened), (told, fuzz.large_opened)
        for uri in fuzz.large_opened:
            name = uri.rsplit("/", 1)[-1]
            assert sum(m.startswith(f"ghostfim: {name} is ") for m in told) == 1, (uri, told)
        others = [m for m in shown(client) if "maxDocumentMb" not in m]
        assert not others, others[:5]
        return summary
    finally:
        code = await client.stop()
        assert code == 0, "".join(client.stderr_tail[-30:])


@pytest.mark.model
@pytest.mark.slow
async def test_memory_stays_flat_under_abuse() -> None:
    await run_memory_fuzz(EVENTS, SEED)


if __name__ == "__main__":  # python -m tests.integration.test_memory [events]
    asyncio.run(run_memory_fuzz(int(sys.argv[1]) if len(sys.argv) > 1 else EVENTS, SEED))
