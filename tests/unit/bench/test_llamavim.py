"""The llama.vim-like benchmark client: its own logic without a server, then one real replay."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench import llama_server
from bench.llamavim import (
    LlamaVim,
    Settings,
    SuggestionCache,
    apply_edit,
    build_request,
    context_hash,
    cursor_of,
    local_context,
    lookup_suggestion,
    render_hint,
    replay_trace,
    request_hashes,
    summarize,
)
from bench.traces import Trace, make_trace

RECORD_KEYS = {
    "trace", "index", "at_ms", "gap_ms", "is_pause", "rest_of_line", "shown_at_ms",
    "shown_text", "requested", "source", "ttft_ms", "prompt_tokens", "generated_tokens",
    "cancelled",
}  # fmt: skip

SOURCE = "\n".join(
    [f"line_{i} = {i}" for i in range(300)]
    + ["def area(width, height):", "    return width * height", ""]
    + [f"tail_{i} = {i}" for i in range(100)]
)
CUR = 301  # "    return width * height"


def doc() -> list[str]:
    return SOURCE.split("\n")


# --- the request llama.vim builds -------------------------------------------------------------


def test_context_windows_and_prompt_is_the_line_before_the_cursor() -> None:
    lines = doc()
    ctx = local_context(lines, len("    return wid"), CUR, [], Settings(), -1)
    prefix_lines = ctx.prefix.split("\n")
    assert ctx.prefix.endswith("def area(width, height):\n")
    assert len(prefix_lines) - 1 == 256  # n_prefix lines, each ending with "\n"
    assert prefix_lines[0] == lines[CUR - 256]
    assert ctx.middle == "    return wid"
    assert ctx.suffix.startswith("th * height\n\ntail_0 = 0\n")
    assert ctx.suffix.count("\n") == 1 + 64  # rest of the line, then n_suffix lines
    assert ctx.indent == 4


def test_whitespace_only_line_is_sent_empty_with_no_indent() -> None:
    lines = doc()
    lines[CUR] = "    "
    ctx = local_context(lines, 4, CUR, [], Settings(), -1)
    assert ctx.middle == ""
    assert ctx.suffix.startswith("\n\ntail_0")
    assert ctx.indent == 0


def test_request_body_matches_llama_vim() -> None:
    ctx = local_context(doc(), len("    return wid"), CUR, [], Settings(), -1)
    body = build_request(ctx, 250, Settings())
    assert body["input_prefix"] == ctx.prefix
    assert body["input_suffix"] == ctx.suffix
    assert body["prompt"] == "    return wid"
    assert body["input_extra"] == []
    assert body["n_predict"] == 128
    assert body["n_indent"] == 4
    assert body["samplers"] == ["top_k", "top_p", "infill"]
    assert (body["top_k"], body["top_p"]) == (40, 0.90)
    assert body["cache_prompt"] is True and body["stream"] is False
    assert (body["t_max_prompt_ms"], body["t_max_predict_ms"]) == (500, 250)
    assert "timings/prompt_n" in body["response_fields"]
    json.dumps(body)  # serialisable


def test_speculative_context_is_as_if_the_hint_were_accepted() -> None:
    lines = doc()
    lines[CUR] = "    return wid"
    ctx = local_context(lines, len(lines[CUR]), CUR, ["th * height"], Settings(), 4)
    assert ctx.middle == "    return width * height"
    assert ctx.suffix.startswith("\n\ntail_0")
    assert ctx.indent == 4  # the indent of the last request sent
    multi = local_context(lines, len(lines[CUR]), CUR, ["th", "    x = 1", "    y"], Settings(), 4)
    assert multi.prefix.endswith("    return width\n    x = 1\n")
    assert multi.middle == "    y"


def test_hashes_cover_the_prefix_minus_up_to_three_lines() -> None:
    ctx = local_context(doc(), 5, CUR, [], Settings(), -1)
    hashes = request_hashes(ctx, Settings())
    assert len(hashes) == 4 and len(set(hashes)) == 4
    trimmed = ctx.prefix.split("\n", 2)[2]
    assert hashes[2] == context_hash(trimmed + ctx.middle, ctx.suffix)


# --- the client cache -------------------------------------------------------------------------


def _typed(lines: list[str], text: str) -> tuple[list[str], int]:
    out = list(lines)
    out[CUR] = "    " + text
    return out, len(out[CUR])


def test_exact_hit_and_typed_through_reuse() -> None:
    settings = Settings()
    cache = SuggestionCache(settings.max_cache_keys)
    lines, x = _typed(doc(), "return wi")
    ctx = local_context(lines, x, CUR, [], settings, -1)
    for key in request_hashes(ctx, settings):
        cache.insert(key, {"content": "dth * height"})
    assert lookup_suggestion(cache, ctx, settings) == "dth * height"
    # The user typed "dt", which the suggestion predicted: the rest is reused.
    lines, x = _typed(doc(), "return widt")
    later = local_context(lines, x, CUR, [], settings, -1)
    assert lookup_suggestion(cache, later, settings) == "h * height"
    # A character the suggestion did not predict: no reuse.
    lines, x = _typed(doc(), "return wix")
    other = local_context(lines, x, CUR, [], settings, -1)
    assert lookup_suggestion(cache, other, settings) is None


def test_typed_through_the_whole_suggestion_gives_nothing() -> None:
    settings = Settings()
    cache = SuggestionCache(10)
    lines, x = _typed(doc(), "return wi")
    ctx = local_context(lines, x, CUR, [], settings, -1)
    cache.insert(request_hashes(ctx, settings)[0], {"content": "dth"})
    lines, x = _typed(doc(), "return width")
    done = local_context(lines, x, CUR, [], settings, -1)
    assert lookup_suggestion(cache, done, settings) is None


def test_cache_evicts_the_least_recently_used() -> None:
    cache = SuggestionCache(2)
    cache.insert("a", {"content": "1"})
    cache.insert("b", {"content": "2"})
    assert cache.get("a") is not None  # refreshes "a"
    cache.insert("c", {"content": "3"})
    assert cache.get("b") is None and cache.get("a") is not None and len(cache) == 2


# --- rendering ----------------------------------------------------------------------------------


def test_render_discards_a_repeat_of_the_next_line() -> None:
    lines = doc()
    lines[CUR] = "    ret"
    hint = render_hint("urn width * height", lines, 7, CUR)
    assert hint.text == "urn width * height"
    lines[CUR + 1] = "    return width * height"
    assert not render_hint("urn width * height", lines, 7, CUR).can_accept


def test_render_trims_indentation_on_a_blank_line() -> None:
    lines = doc()
    lines[CUR] = "    "
    hint = render_hint("    return 0\n", lines, 4, CUR)
    assert hint.can_accept and hint.text == "return 0"


# --- documents ----------------------------------------------------------------------------------


def _trace(tmp_path: Path) -> Trace:
    path = tmp_path / "sample.py"
    path.write_text(SOURCE + "\n")
    trace = make_trace(path, "python", lines_per_file=2, seed=3)
    assert trace is not None
    return trace


def test_edits_rebuild_each_keystroke_document(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    lines = trace.initial_text.split("\n")
    for key in trace.keystrokes:
        lines = apply_edit(lines, key.edit)
        assert "\n".join(lines) == key.text
        x, y = cursor_of(lines, key)
        assert sum(len(s) + 1 for s in lines[:y]) + x == key.offset


# --- the event loop against a fake server -------------------------------------------------------


class FakeServer:
    """Answers /infill after a delay with the rest of the line it was trained on."""

    def __init__(self, target: str, delay_s: float) -> None:
        self.target, self.delay_s = target, delay_s
        self.bodies: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        await asyncio.sleep(self.delay_s)
        self.in_flight -= 1
        typed = body["prompt"].lstrip()
        rest = self.target[len(typed) :] if self.target.startswith(typed) else ""
        return httpx.Response(
            200,
            json={"content": rest, "timings/prompt_n": 7, "timings/prompt_ms": 5.0,
                  "timings/predicted_n": 3, "timings/predicted_per_token_ms": 2.0},
        )  # fmt: skip


def _fast(trace: Trace, factor: float) -> Trace:
    keys = [dataclasses.replace(k, at_ms=k.at_ms * factor, gap_ms=k.gap_ms * factor)
            for k in trace.keystrokes]  # fmt: skip
    return dataclasses.replace(trace, keystrokes=keys)


def _one_line_trace(tmp_path: Path) -> tuple[Trace, str]:
    trace = _trace(tmp_path)
    first_jump = [i for i, k in enumerate(trace.keystrokes) if k.jump][1]
    trace = dataclasses.replace(trace, keystrokes=trace.keystrokes[:first_jump])
    return _fast(trace, 0.3), trace.keystrokes[0].rest_of_line


def test_replay_keeps_one_request_in_flight_and_reuses_answers(tmp_path: Path) -> None:
    trace, target = _one_line_trace(tmp_path)
    server = FakeServer(target, delay_s=0.08)

    async def run() -> list[dict[str, Any]]:
        async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as http:
            return await replay_trace(trace, "http://127.0.0.1:1", http=http)

    records = asyncio.run(run())
    assert len(records) == len(target)
    assert all(set(r) >= RECORD_KEYS for r in records)
    assert server.max_in_flight == 1
    # The fake model is always right, so once an answer is in, typing reuses it.
    assert any(r["source"] == "cache" for r in records)
    assert not any(r["cancelled"] for r in records)
    assert all(r["shown_text"] == r["rest_of_line"] for r in records if r["shown_text"])
    requested = [r for r in records if r["requested"]]
    assert requested and all(r["prompt_tokens"] == 7 for r in requested)
    assert len(server.bodies) < len(records)  # states typed during a request send nothing
    assert any(b["t_max_predict_ms"] == 1000 for b in server.bodies)  # a speculative one
    assert summarize(records)["states"] == len(records)


def test_keystroke_during_a_request_waits_for_it() -> None:
    server = FakeServer("return width * height", delay_s=0.3)

    async def run() -> list[float]:
        loop = asyncio.get_running_loop()
        sent: list[float] = []

        async def handler(request: httpx.Request) -> httpx.Response:
            sent.append(loop.time())
            return await server(request)

        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            lines = doc()
            client = LlamaVim("http://127.0.0.1:1", http, lines, clock=loop.time)
            for text in ("    r", "    rx", "    rxy"):  # "x", "y" defeat typed-through reuse
                lines = list(lines)
                lines[CUR] = text
                client.cursor_moved(lines, len(text), CUR)
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.8)
            await client.close()
        return sent

    sent = asyncio.run(run())
    assert server.max_in_flight == 1
    assert [b["prompt"] for b in server.bodies][:2] == ["    r", "    rxy"]
    assert sent[1] - sent[0] >= 0.3  # the second went out only after the first answer


# --- a real llama-server ------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.model
def test_replay_against_llama_server(small_model_path: Path) -> None:
    binary = llama_server.built_llama_server()
    if binary is None:
        pytest.skip("llama-server is not built; run `python -m bench.llama_server` (10+ min)")
    site = Path(next(p for p in sys.path if p.endswith("site-packages")))
    source = site / "pygls" / "workspace" / "text_document.py"
    if not source.exists():
        pytest.skip(f"{source} is missing")
    trace = make_trace(source, "python", lines_per_file=2, seed=7)
    assert trace is not None
    port = llama_server.free_port()

    async def run(base_url: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        async with httpx.AsyncClient() as http:
            # llama.vim's body as it is, once: the server must accept it and report timings.
            lines = trace.initial_text.split("\n")
            ctx = local_context(lines, 0, len(lines) // 2, [], Settings(), -1)
            body = build_request(ctx, 250, Settings())
            direct = (await http.post(f"{base_url}/infill", json=body, timeout=300)).json()
            return direct, await replay_trace(trace, base_url, http=http)

    with llama_server.llama_server(small_model_path, port=port, binary=binary) as base_url:
        direct, records = asyncio.run(run(base_url))
    assert isinstance(direct["content"], str)
    assert direct["timings/prompt_n"] > 0
    assert len(records) == sum(not k.jump for k in trace.keystrokes)
    assert all(set(r) >= RECORD_KEYS for r in records)
    assert all(r["source"] in ("model", "cache", "none") for r in records)
    # How many states get an answer depends on the CPU; the ones that do carry the timings.
    answered = [r for r in records if r["requested"] and not r["cancelled"]]
    assert all(r["prompt_tokens"] is not None for r in answered)
