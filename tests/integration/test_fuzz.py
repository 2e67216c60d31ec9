"""A fuzzing client against `ghostfim serve` with the tiny model, shaped like the checks of
issue 8: random edits (some with positions outside the document), completion requests at random
positions (valid, past the end of a line or of the file, negative, huge, of the wrong type, on
documents that are not open; half of them cancelled), malformed JSON-RPC with and without ids,
bad settings values and types, and model switches to broken files (a missing path, a truncated
GGUF, a text file named .gguf, an empty .gguf, a directory) interleaved with switches back to
the good model (by preset, and by path: a real reload).

Checked: the server never crashes (it answers to the end, exits with 0, and never answers
-32603); every request is answered within 10 s; the server's text of every open document equals
the client's (`ghostfim/documentText`, GHOSTFIM_DEBUG_PROTOCOL=1) along the run and at the end;
RSS grows by less than 50 MB between the end of warm-up and the end; each bad setting and each
broken model gets a window/showMessage that names it (and each kind of garbage one that
explains it); the good model serves at the end.

Every status answered along the run names the tiny model: no valid new model value is ever sent,
so the model never changes (a bad value, even after a failed switch, keeps what serves).

GHOSTFIM_FUZZ_EVENTS (default 2000) and GHOSTFIM_FUZZ_SEED change the run, e.g.
`GHOSTFIM_FUZZ_EVENTS=20000 pytest tests/integration/test_fuzz.py -s` (the summary line goes to
stdout).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.lspclient import LspProcess, RpcError
from tests.support.clientdoc import ClientDoc, rss_mb, snippet
from tests.support.server import (
    ANSWER_S,
    MALFORMED_NOTIFICATIONS,
    MALFORMED_REQUESTS,
    TINY,
    broken_model,
    compare,
    open_doc,
    progress_messages,
    raw,
    shown,
    start,
    tiny_model_file,
    wait_for,
)

EVENTS = int(os.environ.get("GHOSTFIM_FUZZ_EVENTS", "2000"))
SEED = int(os.environ.get("GHOSTFIM_FUZZ_SEED", "8"))
RSS_GROWTH_LIMIT_MB = 50.0
CHECK_EVERY = 400  # events between comparisons of the documents
# Small model work keeps the run short on a 2-core CI machine (see test_soak.py).
GOOD = {**TINY, "debounceMs": 20, "prefixTokens": 256, "suffixTokens": 64}

# (a bad value merged into the good settings, what the message must name)
BAD_SETTINGS: list[tuple[dict[str, Any], str]] = [
    ({"maxTokens": "x"}, "maxTokens"),
    ({"maxTokens": -1}, "maxTokens"),
    ({"maxTokens": 1e12}, "maxTokens"),
    ({"enable": "yes"}, "enable"),
    ({"debounceMs": "fast"}, "debounceMs"),
    ({"multiline": 3}, "multiline"),
    ({"prefixTokens": [1]}, "prefixTokens"),
    ({"suffixTokens": -5}, "suffixTokens"),
    ({"keystrokePrefillMs": "slow"}, "keystrokePrefillMs"),
    ({"nGpuLayers": True}, "nGpuLayers"),
    ({"backend": "cloud"}, "backend"),
    ({"backendTimeoutMs": -1}, "backendTimeoutMs"),
    ({"model": 5}, "model"),
    ({"model": {"size": "huge"}}, "model.size"),
    ({"model": {"path": 123}}, "model.path"),
    ({"noSuchSetting": 1}, "noSuchSetting"),
]
NOT_AN_OBJECT: list[Any] = [[1, 2], "tiny", 42, True]
TINY_NAME = "smollm2-135m-instruct-q4_1"  # the tiny preset's model, by preset and by path


def broken_models(tmp: Path) -> list[Path]:
    text = tmp / "readme-named.gguf"
    text.write_text("this is a text file, not a model\n")
    empty = tmp / "empty.gguf"
    empty.write_bytes(b"")
    folder = tmp / "folder.gguf"
    folder.mkdir()
    return [tmp / "missing.gguf", broken_model(tmp), text, empty, folder]


@dataclass
class Sent:
    fut: asyncio.Future[Any]
    at: float
    what: str
    ok: tuple[int, ...]  # error codes that are right for it; 0: a result
    answered: float | None = None


@dataclass
class Expect:
    """A bad input, and the words the window/showMessage it must cause contains."""

    at: int  # index into the client's notifications when it was sent
    needle: str
    distinct: bool  # one message each (bad settings); else one may cover several inputs


@dataclass
class Fuzz:
    client: LspProcess
    rng: random.Random
    broken: list[Path]
    good: list[dict[str, Any]]
    docs: dict[str, ClientDoc] = field(default_factory=dict)
    closed: dict[str, ClientDoc] = field(default_factory=dict)
    sent: list[Sent] = field(default_factory=list)
    expects: list[Expect] = field(default_factory=list)
    garbage_kinds: dict[str, int] = field(default_factory=dict)  # words -> first send
    current: dict[str, Any] = field(default_factory=lambda: dict(GOOD))
    counts: dict[str, int] = field(default_factory=dict)
    next_raw_id: int = 900_000

    def count(self, kind: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1

    async def request(self, method: str, params: Any, what: str, ok: tuple[int, ...]) -> int:
        rid, fut = await self.client.request(method, params)
        item = Sent(fut, time.perf_counter(), what, ok)
        fut.add_done_callback(lambda _f, s=item: setattr(s, "answered", time.perf_counter()))
        self.sent.append(item)
        return rid

    async def settings(self, settings: Any) -> None:
        await self.client.notify("workspace/didChangeConfiguration", {"settings": settings})

    # --- one event ---------------------------------------------------------------------------
    async def event(self) -> None:
        rng = self.rng
        roll = rng.random()
        if roll < 0.32:
            await self.edit()
        elif roll < 0.60:
            await self.complete()
        elif roll < 0.68:
            await self.malformed_request()
        elif roll < 0.77:
            await self.garbage()
        elif roll < 0.81:
            await self.close_or_reopen()
        elif roll < 0.85:
            self.count("status")
            await self.request("ghostfim/status", None, "status", (0,))
        elif roll < 0.91:
            await self.bad_settings()
        elif roll < 0.96:
            await self.switch_to_broken()
        else:
            self.count("switch good")
            self.current = rng.choice(self.good)
            await self.settings({"ghostfim": self.current})

    async def edit(self) -> None:
        rng = self.rng
        if not self.docs:
            return
        doc = self.docs[rng.choice(sorted(self.docs))]
        if rng.random() < 0.05:  # a whole-document change
            self.count("edit full")
            doc.text, doc.version = snippet(rng, rng.randint(0, 80)), doc.version + 1
            changes: list[dict[str, Any]] = [{"text": doc.text}]
        else:
            lines = doc.line_count()
            if rng.random() < 0.8:
                self.count("edit")
                a = doc.snap(rng.randint(0, len(doc.text)))
                b = doc.snap(min(len(doc.text), a + rng.randint(0, 12)))
                s, e = doc.position(a), doc.position(b)
            else:  # outside the document: applied clamped, as the reference library does
                self.count("edit out of range")
                s = {"line": rng.randint(-3, lines + 3), "character": rng.randint(-3, 40)}
                e = {"line": rng.randint(-3, lines + 3), "character": rng.randint(-3, 40)}
            a = doc.clamped_offset(s["line"], s["character"])
            b = doc.clamped_offset(e["line"], e["character"])
            a, b = min(a, b), max(a, b)
            new = snippet(rng, rng.randint(0, 4))
            doc.text, doc.version = doc.text[:a] + new + doc.text[b:], doc.version + 1
            changes = [{"range": {"start": s, "end": e}, "text": new}]
        await self.client.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": doc.uri, "version": doc.version}, "contentChanges": changes},
        )

    async def complete(self) -> None:
        rng = self.rng
        ok: tuple[int, ...] = (0, -32800)  # a result, or cancelled
        bad: tuple[int, ...] = (-32602, -32800)
        uri = rng.choice(sorted(self.docs)) if self.docs else "file:///fuzz/none.py"
        doc = self.docs.get(uri)
        kind = rng.choices(
            ["cursor", "past line end", "past file end", "negative", "huge", "unknown", "type"],
            weights=[60, 10, 8, 6, 6, 5, 5],
        )[0]
        if doc is None:
            kind = "unknown"
        self.count(f"complete {kind}")
        position: dict[str, Any]
        # pygls starts an async handler after the messages read with it: an edit sent after
        # the request may land first and take a valid position out of the document (-32602).
        expect = (*ok, -32602)
        if kind in ("cursor", "past line end"):
            assert doc is not None
            position = doc.position(doc.snap(rng.randint(0, len(doc.text))))
            if kind == "past line end":
                position["character"] += rng.randint(1, 1000)
        elif kind == "past file end":
            assert doc is not None
            # Far enough past the end that no edit sent meanwhile brings it back in.
            line = doc.line_count() + rng.randint(200, 5000)
            position, expect = {"line": line, "character": 0}, bad
        elif kind == "negative":
            position = rng.choice([{"line": -1, "character": 0}, {"line": 0, "character": -7}])
            expect = bad
        elif kind == "huge":
            position, expect = {"line": 2**40, "character": 2**40}, bad
        elif kind == "unknown":
            uri, position, expect = "file:///fuzz/never-opened.py", {"line": 0, "character": 0}, bad
        else:
            position, expect = {"line": "1", "character": None}, bad
        rid = await self.request(
            "textDocument/inlineCompletion",
            {
                "textDocument": {"uri": uri},
                "position": position,
                "context": {"triggerKind": rng.choice([1, 2, 2])},
            },
            f"complete {kind} {position}",
            expect,
        )
        if rng.random() < 0.5:
            await self.client.cancel(rid)

    async def malformed_request(self) -> None:
        self.count("malformed request")
        self.next_raw_id += 1
        body, _, code = self.rng.choice(MALFORMED_REQUESTS)
        body = re.sub(rb'"id":("?)[^,}]*', b'"id":%d' % self.next_raw_id, body, count=1)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.client.pending[self.next_raw_id] = fut
        item = Sent(fut, time.perf_counter(), body.decode(errors="replace")[:60], (code,))
        fut.add_done_callback(lambda _f, s=item: setattr(s, "answered", time.perf_counter()))
        self.sent.append(item)
        await raw(self.client, body)

    async def garbage(self) -> None:
        self.count("garbage")
        body, words = self.rng.choice(MALFORMED_NOTIFICATIONS)
        self.garbage_kinds.setdefault(words, len(self.client.notifications))
        await raw(self.client, body[:5000])

    async def close_or_reopen(self) -> None:
        rng = self.rng
        if self.closed and (rng.random() < 0.6 or len(self.docs) < 2):
            self.count("reopen")
            uri = rng.choice(sorted(self.closed))
            doc = self.closed.pop(uri)
            doc.version, doc.text = 1, snippet(rng, rng.randint(0, 60))
            self.docs[uri] = doc
            await open_doc(self.client, uri, doc.text)
        elif self.docs:
            self.count("close")
            uri = rng.choice(sorted(self.docs))
            self.closed[uri] = self.docs.pop(uri)
            await self.client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})

    async def bad_settings(self) -> None:
        rng = self.rng
        at = len(self.client.notifications)
        if rng.random() < 0.2:
            self.count("settings not an object")
            await self.settings(rng.choice(NOT_AN_OBJECT))
            self.expects.append(Expect(at, "must be an object", distinct=True))
            return
        self.count("bad setting")
        bad, key = rng.choice(BAD_SETTINGS)
        # The model stays what serves: a bad model value keeps it, and the rest names it.
        await self.settings({"ghostfim": {**self.current, **bad}})
        self.expects.append(Expect(at, f"ghostfim.{key}", distinct=True))

    async def switch_to_broken(self) -> None:
        self.count("switch broken")
        path = self.rng.choice(self.broken)
        at = len(self.client.notifications)
        await self.settings({"ghostfim": {**GOOD, "model": {"path": str(path)}}})
        self.expects.append(Expect(at, path.name, distinct=False))

    # --- checks ------------------------------------------------------------------------------
    async def check_documents(self) -> None:
        for doc in list(self.docs.values()):
            await compare(self.client, doc)

    async def settle(self) -> None:
        """Every request answered (each within the limit), and no model switch in flight."""
        for item in self.sent:
            if item.answered is None:
                left = item.at + ANSWER_S - time.perf_counter()
                try:
                    await asyncio.wait_for(asyncio.shield(item.fut), max(0.05, left))
                except RpcError:
                    pass
                except asyncio.TimeoutError:
                    raise AssertionError(f"no answer within {ANSWER_S} s: {item.what}") from None
        await wait_for(self.client, lambda s: not s.get("switchingTo"), timeout=120)

    def check_answers(self) -> float:
        slowest = 0.0
        for item in self.sent:
            assert item.answered is not None, item.what
            took = item.answered - item.at
            slowest = max(slowest, took)
            assert took < ANSWER_S, f"answered after {took:.1f} s: {item.what}"
            exc = item.fut.exception()
            code = exc.code if isinstance(exc, RpcError) else (0 if exc is None else exc)
            assert code != -32603, f"internal error for {item.what}: {exc}"
            assert code in item.ok, f"{item.what}: got {code} ({exc}), expected {item.ok}"
        return slowest

    def check_model(self, name: str) -> None:
        """The model never changed: every status answered names `name`, and no load of the
        default model (or of any other preset) was ever started."""
        statuses = [s.fut.result() for s in self.sent if s.what == "status" and s.fut.done()]
        assert statuses, "no status was asked for"
        for status in statuses:
            model = status.get("model") or {}
            assert model.get("name") == name, status
        for message in progress_messages(self.client):
            assert "default model" not in message and "loading small" not in message, message

    def check_messages(self) -> None:
        """Each bad input got its message (after it was sent)."""
        messages = shown(self.client)
        indexed = [
            (i, n.params["message"].lower())
            for i, n in enumerate(self.client.notifications)
            if n.method == "window/showMessage"
        ]
        used: set[int] = set()
        for expect in self.expects:
            needle = expect.needle.lower()
            match = next(
                (
                    i
                    for i, text in indexed
                    if i >= expect.at and needle in text and not (expect.distinct and i in used)
                ),
                None,
            )
            assert match is not None, (
                f"no message naming {expect.needle!r} after it was sent; "
                f"messages: {[m[:90] for m in messages[-8:]]}"
            )
            if expect.distinct:
                used.add(match)
        for words, at in self.garbage_kinds.items():
            assert any(i >= at and words.lower() in text for i, text in indexed), words


async def run_fuzz(tmp: Path, events: int, seed: int) -> dict[str, Any]:
    tiny = tiny_model_file()
    rng = random.Random(seed)
    client = await start(GOOD)
    started = time.perf_counter()
    good = [
        GOOD,
        {**GOOD, "model": {"path": str(tiny)}},  # the same file: nothing to load
        {**GOOD, "nGpuLayers": 0},  # the same model under another key: loaded anew
    ]
    fuzz = Fuzz(client, rng, broken_models(tmp), good)
    pid = client.proc.pid
    try:
        for i in range(3):
            uri = f"file:///fuzz/doc%20{i}.py"
            fuzz.docs[uri] = ClientDoc(uri, snippet(rng, rng.randint(20, 120)), "utf-16")
            await open_doc(client, uri, fuzz.docs[uri].text)
        warm_at = max(1, events // 5)
        rss_warm: float | None = None
        rss_samples: list[int] = []
        for i in range(events):
            await fuzz.event()
            if i % CHECK_EVERY == CHECK_EVERY - 1:
                await fuzz.check_documents()
                rss_samples.append(round(rss_mb(pid)))
            if i == warm_at:
                await fuzz.settle()
                await asyncio.sleep(0.5)
                rss_warm = rss_mb(pid)
        await fuzz.settle()
        await fuzz.check_documents()
        slowest = fuzz.check_answers()
        fuzz.check_model(TINY_NAME)
        # Back to the good model at the end: it serves.
        await fuzz.settings({"ghostfim": GOOD})
        status = await wait_for(
            client,
            lambda s: (
                s["state"] == "ready"
                and (s.get("model") or {}).get("preset") == "tiny"
                and not s.get("switchingTo")
            ),
        )
        await asyncio.sleep(1.0)  # background work after the last answer settles
        rss_end = rss_mb(pid)
        assert rss_warm is not None
        growth = rss_end - rss_warm
        fuzz.check_messages()
        summary = {
            "seed": seed,
            "events": events,
            "requests": len(fuzz.sent),
            "errors": sum(1 for s in fuzz.sent if s.fut.exception() is not None),
            "slowest_s": round(slowest, 2),
            "messages": len(shown(client)),
            "bad_inputs_checked": len(fuzz.expects) + len(fuzz.garbage_kinds),
            "rss_warm_mb": round(rss_warm),
            "rss_end_mb": round(rss_end),
            "rss_growth_mb": round(growth, 1),
            "rss_samples": rss_samples,
            "duration_s": round(time.perf_counter() - started, 1),
            "kinds": dict(sorted(fuzz.counts.items())),
        }
        print("\nfuzz " + json.dumps(summary))
        assert status["model"]["preset"] == "tiny", status
        assert growth < RSS_GROWTH_LIMIT_MB, f"RSS grew {growth:.1f} MB after warm-up"
        return summary
    finally:
        code = await client.stop()
        assert code == 0, "".join(client.stderr_tail[-30:])


@pytest.mark.model
@pytest.mark.slow
async def test_fuzzing_client(tmp_path: Path) -> None:
    await run_fuzz(tmp_path, EVENTS, SEED)


@pytest.mark.model
async def test_a_failed_path_then_a_size_typo_keeps_the_model(tmp_path: Path) -> None:
    """The fuzz's client on the tiny model, the sequence that used to load the default model:
    a model.path that does not exist (reported; tiny serves on), then an invalid model.size
    (reported; what serves is kept). Repeated: the model name never changes without a valid
    new value, nothing but tiny is ever loaded, and RSS stays put."""
    client = await start(GOOD)
    pid = client.proc.pid
    missing = str(tmp_path / "missing.gguf")
    try:
        fuzz = Fuzz(client, random.Random(SEED), [], [GOOD])
        rss_start = rss_mb(pid)
        for round_ in range(6):
            since = len(client.notifications)
            await fuzz.settings({"ghostfim": {**GOOD, "model": {"path": missing}}})
            status = await wait_for(client, lambda s: "missing.gguf" in (s.get("error") or ""))
            assert status["model"]["name"] == TINY_NAME and status["state"] == "ready", status
            await fuzz.settings({"ghostfim": {**GOOD, "model": {"size": "huge"}}})
            await asyncio.sleep(0.5)
            status = await wait_for(client, lambda s: not s.get("switchingTo"))
            assert status["model"]["name"] == TINY_NAME, (round_, status)
            assert any("model.size" in m for m in shown(client, since)), shown(client, since)
            loads = progress_messages(client, since)
            assert not any("default model" in m or "small" in m for m in loads), loads
            # A valid value again: the tiny model, which serves already (nothing loads).
            await fuzz.settings({"ghostfim": GOOD})
            status = await wait_for(client, lambda s: not s.get("error"))
            assert status["model"]["name"] == TINY_NAME, status
        await open_doc(client, "file:///typo.py", "def add(a, b):\n    return ")
        await fuzz.request(
            "textDocument/inlineCompletion",
            {
                "textDocument": {"uri": "file:///typo.py"},
                "position": {"line": 1, "character": 11},
                "context": {"triggerKind": 1},
            },
            "complete after the rounds",
            (0,),
        )
        await fuzz.settle()
        fuzz.check_answers()
        await asyncio.sleep(1.0)
        growth = rss_mb(pid) - rss_start
        assert growth < RSS_GROWTH_LIMIT_MB, f"RSS grew {growth:.1f} MB over the rounds"
    finally:
        code = await client.stop()
        assert code == 0, "".join(client.stderr_tail[-30:])
