"""A keystroke-replay client that behaves like llama.vim in front of llama-server `/infill`.

This is the comparison anchor of the latency benchmark: it replays a `bench.traces.Trace` in
real time and, on every keystroke, does what llama.vim (ggml-org/llama.vim, autoload/llama.vim)
does in insert mode with its default settings. Written from a reading of that plugin, not copied.

What is reproduced (per keystroke, i.e. per `CursorMovedI`):
  1. `s:on_move`: hide the hint, then try to show one from the client cache: the exact context
     hash, or "typed-through" reuse (a cached answer for a context up to 128 characters back
     whose text starts with the characters typed since). Showing a hint triggers the
     speculative request (context as if the hint were accepted, t_max_predict_ms 1000).
  2. `llama#fim` (auto): if a request is in flight, do NOT cancel it: (re)arm a single 100 ms
     timer that retries with the cursor position of when it fires. Otherwise skip if any of the
     context's four hashes (full prefix and the prefix minus its first 1-3 lines) is cached,
     else send one non-streamed /infill request: 256 prefix lines, 64 suffix lines, the
     current line's text before the cursor in `prompt`, n_predict 128, t_max_predict_ms 250 for a
     first request, n_indent, top_k 40 / top_p 0.90, samplers [top_k, top_p, infill],
     cache_prompt, id_slot 0.
  3. On the answer: cache it under the request's hashes (LRU, 250 keys) and, if no acceptable
     hint is showing, try to show one for wherever the cursor is now (which is how an answer to
     an old state still helps when the user typed what it predicted). The job slot is freed only
     after that (Vim runs on_stdout before on_exit), so a speculative request triggered by the
     answer waits for the 100 ms timer like llama.vim's does.
  4. The hint filters of `s:fim_render` (trim the indentation of whitespace-only lines, drop
     answers that repeat the suffix or the next lines).

Accepting a hint (bench/user_replay.py's accepting users, through `LlamaVimEditor`) inserts
the accepted text at the cursor and moves it there, which is what `llama#fim_accept` leaves
behind; the next `CursorMovedI` then shows the rest from the cache (typed-through) or the
speculative answer for the accepted text. The accept is client-side only: llama.vim tells the
server nothing.

Left out: the ring buffer of extra chunks (`input_extra` is always empty; llama.vim only moves
queued chunks into it in normal mode or after 3 s without cursor movement, and sends them with
a separate warm-up request), the info text, llama.vim's own word rule for accepting a word
(the accepting user splits words one way for every system), and Vim's byte-based columns (we
index characters; identical for ASCII).

Time to ghost text is measured from when the keystroke was processed to when a non-empty,
acceptable hint for that keystroke's state is displayed.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.traces import Edit, Keystroke, Record, Trace, new_record
from bench.user_replay import AcceptSignal, Screen, replay_with_user

HASH_SEPARATOR = "Î"  # what llama.vim puts between prefix+middle and suffix before hashing
_LEADING_WS = re.compile(r"[ \t]*")  # Vim's \s is space and tab only


@dataclass(frozen=True)
class Settings:
    """llama.vim's defaults (`s:default_config`) and the constants hard-coded in `llama#fim`."""

    n_prefix: int = 256
    n_suffix: int = 64
    n_predict: int = 128
    stop_strings: tuple[str, ...] = ()
    t_max_prompt_ms: int = 500  # sent, but llama-server ignores it (a TODO there too)
    t_max_predict_ms: int = 1000  # speculative requests
    t_max_predict_first_ms: int = 250  # "the first request is quick"
    max_line_suffix: int = 8
    max_cache_keys: int = 250
    retry_ms: float = 100.0  # the timer that waits for the in-flight request
    typed_through_chars: int = 128
    trimmed_prefix_hashes: int = 3
    top_k: int = 40
    top_p: float = 0.90
    http_timeout_s: float = 120.0


# ---------------------------------------------------------------------------------------------
# Pure logic: context, hashes, request body, cache, rendering. Positions are 0-based (line y,
# character x); llama.vim's are 1-based lines and 0-based byte columns.


@dataclass(frozen=True)
class LocalContext:
    prefix: str
    middle: str
    suffix: str
    indent: int
    line_cur: str
    line_cur_prefix: str
    line_cur_suffix: str


def leading_ws(text: str) -> str:
    match = _LEADING_WS.match(text)
    return match.group(0) if match else ""


def is_blank(text: str) -> bool:
    return len(leading_ws(text)) == len(text)


def local_context(
    lines: list[str], x: int, y: int, prev: list[str], settings: Settings, indent_last: int
) -> LocalContext:
    """`s:fim_ctx_local`: the local context at (x, y); with `prev`, as if it were accepted."""
    lines_suffix = lines[y + 1 : y + 1 + settings.n_suffix]
    if not prev:
        line_cur = lines[y]
        cur_prefix, cur_suffix = line_cur[:x], line_cur[x:]
        lines_prefix = lines[max(0, y - settings.n_prefix) : y]
        if is_blank(line_cur):
            # A whitespace-only line is sent as empty: the model writes the indentation itself.
            indent, cur_prefix, cur_suffix = 0, "", ""
        else:
            indent = len(leading_ws(line_cur))
    else:
        line_cur = lines[y] + prev[0] if len(prev) == 1 else prev[-1]
        cur_prefix, cur_suffix = line_cur, ""
        lines_prefix = lines[max(0, y - settings.n_prefix + len(prev) - 1) : y]
        if len(prev) > 1:
            lines_prefix = [*lines_prefix, lines[y] + prev[0], *prev[1:-1]]
        indent = indent_last
    return LocalContext(
        prefix="\n".join(lines_prefix) + "\n",
        middle=cur_prefix,
        suffix=cur_suffix + "\n" + "\n".join(lines_suffix) + "\n",
        indent=indent,
        line_cur=line_cur,
        line_cur_prefix=cur_prefix,
        line_cur_suffix=cur_suffix,
    )


def context_hash(prefix_and_middle: str, suffix: str) -> str:
    return hashlib.sha256((prefix_and_middle + HASH_SEPARATOR + suffix).encode()).hexdigest()


def request_hashes(ctx: LocalContext, settings: Settings) -> list[str]:
    """The keys an answer is cached under: the full context and the prefix minus 1-3 lines.

    (llama.vim's reason: after scrolling down a little the window of 256 prefix lines starts
    later, and the same answer should still be found.)
    """
    hashes = [context_hash(ctx.prefix + ctx.middle, ctx.suffix)]
    trimmed = ctx.prefix
    for _ in range(settings.trimmed_prefix_hashes):
        newline = trimmed.find("\n")
        trimmed = trimmed[newline + 1 :] if newline >= 0 else trimmed
        if not trimmed:
            break
        hashes.append(context_hash(trimmed + ctx.middle, ctx.suffix))
    return hashes


def build_request(ctx: LocalContext, t_max_predict_ms: int, settings: Settings) -> dict[str, Any]:
    """The /infill body of `llama#fim` (ring buffer left empty)."""
    return {
        "id_slot": 0,
        "input_prefix": ctx.prefix,
        "input_suffix": ctx.suffix,
        "input_extra": [],
        "prompt": ctx.middle,
        "n_predict": settings.n_predict,
        "stop": list(settings.stop_strings),
        "n_indent": ctx.indent,
        "top_k": settings.top_k,
        "top_p": settings.top_p,
        "samplers": ["top_k", "top_p", "infill"],
        "stream": False,
        "cache_prompt": True,
        "t_max_prompt_ms": settings.t_max_prompt_ms,
        "t_max_predict_ms": t_max_predict_ms,
        "response_fields": [
            "content",
            "timings/prompt_n",
            "timings/prompt_ms",
            "timings/prompt_per_token_ms",
            "timings/prompt_per_second",
            "timings/predicted_n",
            "timings/predicted_ms",
            "timings/predicted_per_token_ms",
            "timings/predicted_per_second",
            "truncated",
            "tokens_cached",
        ],
    }


class SuggestionCache:
    """llama.vim's `g:cache_data`: context hash -> server answer, least recently used evicted."""

    def __init__(self, max_keys: int) -> None:
        self.max_keys = max_keys
        self._data: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: str) -> dict[str, Any] | None:
        answer = self._data.get(key)
        if answer is not None:
            self._data.move_to_end(key)  # a lookup refreshes the entry, as in llama.vim
        return answer

    def insert(self, key: str, answer: dict[str, Any]) -> None:
        if key not in self._data and len(self._data) >= self.max_keys:
            self._data.popitem(last=False)
        self._data[key] = answer
        self._data.move_to_end(key)

    def has_any(self, keys: list[str]) -> bool:
        return any(self.get(k) is not None for k in keys)


def lookup_suggestion(cache: SuggestionCache, ctx: LocalContext, settings: Settings) -> str | None:
    """`s:fim_try_hint`'s lookup: the cached text for this exact context, or typed-through.

    Typed-through: for i = 0..127, the context with the last i+1 characters of prefix+middle
    removed; usable if its cached text starts with exactly those characters (the rest is shown).
    The selection quirk is kept: the first hit is taken, and any later hit replaces it if longer
    than `best`, which only starts being tracked at the second hit.
    """
    exact = cache.get(context_hash(ctx.prefix + ctx.middle, ctx.suffix))
    if exact is not None:
        return str(exact.get("content", ""))
    head = ctx.prefix + ctx.middle
    found: str | None = None
    best = 0
    for i in range(min(settings.typed_through_chars, len(head))):
        cut = len(head) - (i + 1)
        answer = cache.get(context_hash(head[:cut], ctx.suffix))
        if answer is None:
            continue
        content = str(answer.get("content", ""))
        removed = head[cut:]
        if content[: i + 1] != removed:
            continue
        rest = content[i + 1 :]
        if rest:
            if found is None:
                found = rest
            elif len(rest) > best:
                best, found = len(rest), rest
    return found


@dataclass(frozen=True)
class Hint:
    content: list[str]  # lines as displayed; the last ends with the line's text after the cursor
    can_accept: bool
    line_cur_suffix: str
    x: int
    y: int

    @property
    def text(self) -> str:
        """What the hint would insert at the cursor ("" if it is not acceptable)."""
        if not self.can_accept:
            return ""
        joined = "\n".join(self.content)
        return joined[: len(joined) - len(self.line_cur_suffix)]


def _getlines(lines: list[str], first: int, last: int) -> list[str]:
    """Vim's getline(first, last) with 0-based inclusive bounds, clipped to the buffer."""
    return lines[max(0, first) : max(0, last + 1)]


def _getline(lines: list[str], y: int) -> str:
    return lines[y] if 0 <= y < len(lines) else ""


def render_hint(content_text: str, lines: list[str], x: int, y: int) -> Hint:
    """`s:fim_render`: split the answer and apply llama.vim's discard-repeats filters."""
    content = content_text.split("\n")
    while content and content[-1] == "":
        content.pop()
    can_accept = True
    if not content:
        content, can_accept = [""], False
    line_cur = _getline(lines, y)
    if is_blank(line_cur):
        lead = min(len(leading_ws(content[0])), len(line_cur))
        line_cur, content[0] = content[0][:lead], content[0][lead:]
    cur_prefix, cur_suffix = line_cur[:x], line_cur[x:]
    content = _discard_repeats(content, lines, y, cur_prefix, cur_suffix)
    content[-1] += cur_suffix
    if is_blank("\n".join(content).replace("\n", "")):
        can_accept = False
    return Hint(content, can_accept, cur_suffix, x, y)


def _discard_repeats(
    content: list[str], lines: list[str], y: int, cur_prefix: str, cur_suffix: str
) -> list[str]:
    n = len(content)
    if n > 1 and content[0] == "" and content[1:] == _getlines(lines, y + 1, y + n - 1):
        return [""]
    if n == 1 and content[0] == cur_suffix:
        return [""]
    cmp_y = y + 1  # the next non-blank line
    while cmp_y < len(lines) - 1 and is_blank(lines[cmp_y]):
        cmp_y += 1
    if cur_prefix + content[0] != _getline(lines, cmp_y):
        return content
    if n == 1:
        return [""]
    if n == 2 and content[-1] == _getline(lines, cmp_y + 1)[: len(content[-1])]:
        return [""]
    if n > 2 and "\n".join(content[1:]) == "\n".join(_getlines(lines, cmp_y + 1, cmp_y + n - 1)):
        return [""]
    return content


def _utf16_to_index(line: str, utf16_col: int) -> int:
    units = 0
    for i, ch in enumerate(line):
        if units >= utf16_col:
            return i
        units += 2 if ord(ch) > 0xFFFF else 1
    return len(line)


def apply_edit(lines: list[str], edit: Edit) -> list[str]:
    """Apply an LSP-style change (UTF-16 positions) to a document held as lines."""
    (l0, c0), (l1, c1) = edit.start, edit.end
    head = lines[l0][: _utf16_to_index(lines[l0], c0)]
    tail = lines[l1][_utf16_to_index(lines[l1], c1) :]
    return [*lines[:l0], *(head + edit.text + tail).split("\n"), *lines[l1 + 1 :]]


def cursor_of(lines: list[str], key: Keystroke) -> tuple[int, int]:
    return _utf16_to_index(lines[key.line], key.character), key.line


# ---------------------------------------------------------------------------------------------
# The plugin's event-driven side, on asyncio (single-threaded like Vim's main loop).


@dataclass
class Answer:
    """One finished /infill exchange."""

    content: str | None  # None if the request failed
    prompt_n: int | None
    prompt_ms: float | None
    predicted_n: int | None
    predicted_per_token_ms: float | None
    http_ms: float
    cached_n: int | None = None  # prompt tokens served from the slot's KV cache

    @property
    def ttft_ms(self) -> float | None:
        """Server-side time to first token: prompt processing plus one generation step."""
        if self.prompt_ms is None:
            return None
        per_token = self.predicted_per_token_ms if self.predicted_n else 0.0
        return self.prompt_ms + (per_token or 0.0)


def _field(data: dict[str, Any], path: str) -> Any:
    """A `response_fields` value: llama-server returns it flat, keyed by the path."""
    if path in data:
        return data[path]
    node: Any = data
    for part in path.split("/"):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def parse_answer(data: dict[str, Any], http_ms: float) -> Answer:
    def num(path: str) -> float | None:
        value = _field(data, path)
        return float(value) if isinstance(value, int | float) else None

    prompt_n, predicted_n = num("timings/prompt_n"), num("timings/predicted_n")
    in_cache = num("tokens_cached")  # the slot's tokens after the answer: prompt + generated
    cached_n = None
    if in_cache is not None and prompt_n is not None:
        cached_n = max(0, int(in_cache - (predicted_n or 0) - prompt_n))
    content = data.get("content")
    return Answer(
        content=content if isinstance(content, str) else None,
        prompt_n=int(prompt_n) if prompt_n is not None else None,
        prompt_ms=num("timings/prompt_ms"),
        predicted_n=int(predicted_n) if predicted_n is not None else None,
        predicted_per_token_ms=num("timings/predicted_per_token_ms"),
        http_ms=http_ms,
        cached_n=cached_n,
    )


@dataclass
class Request:
    speculative: bool
    sent_at: float
    answer: Answer | None = None


class Observer:
    """Hooks the replay uses to attribute plugin events to keystroke states."""

    def request_sent(self, request: Request) -> None: ...

    def request_abandoned(self, request: Request) -> None: ...

    def request_done(self, request: Request) -> None: ...

    def hint_shown(self, hint: Hint, from_answer: bool) -> None: ...


class LlamaVim:
    """llama.vim's FIM state machine for one buffer in insert mode."""

    def __init__(
        self,
        base_url: str,
        http: httpx.AsyncClient,
        lines: list[str],
        *,
        settings: Settings | None = None,
        observer: Observer | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.url = f"{base_url.rstrip('/')}/infill"
        self.http = http
        self.lines = lines
        self.x, self.y = 0, 0
        self.settings = settings or Settings()
        self.observer = observer or Observer()
        self.clock = clock or time.monotonic  # the clock asyncio's loop uses
        self.cache = SuggestionCache(self.settings.max_cache_keys)
        self.hint: Hint | None = None  # s:fim_data while s:fim_hint_shown
        self.indent_last = -1
        self.job: asyncio.Task[None] | None = None
        self.job_request: Request | None = None
        self.closed = False
        self.timer: asyncio.TimerHandle | None = None

    # -- editor events --------------------------------------------------------------------

    def cursor_moved(self, lines: list[str], x: int, y: int) -> None:
        """A CursorMovedI: `s:on_move` then the auto `llama#fim`, in llama.vim's autocmd order."""
        self.lines, self.x, self.y = lines, x, y
        self.hint = None  # llama#fim_hide
        self.try_hint(x, y, from_answer=False)
        self.fim(None, None, prev=[])

    def visible_text(self) -> str:
        return self.hint.text if self.hint is not None else ""

    async def close(self, wait_s: float = 60.0) -> None:
        """End of the replay: no new requests; let the one in flight finish (llama.vim never
        kills it, and the server should be idle for whatever runs next)."""
        self.closed = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        job, request = self.job, self.job_request
        if job is None or request is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(job), wait_s)
        except TimeoutError:
            # Closing the connection makes llama-server drop the task.
            job.cancel()
            self.observer.request_abandoned(request)
            await asyncio.gather(job, return_exceptions=True)

    # -- the plugin ---------------------------------------------------------------------------

    def try_hint(self, x: int, y: int, *, from_answer: bool) -> None:
        """`s:fim_try_hint`: show a cached suggestion, then speculate on its acceptance."""
        ctx = local_context(self.lines, x, y, [], self.settings, self.indent_last)
        text = lookup_suggestion(self.cache, ctx, self.settings)
        if text is None:
            return
        self.hint = render_hint(text, self.lines, x, y)
        if self.hint.can_accept:
            self.observer.hint_shown(self.hint, from_answer)
        # llama.vim marks the hint shown even when it is empty, and speculates either way.
        self.fim(x, y, prev=list(self.hint.content))

    def fim(self, x: int | None, y: int | None, *, prev: list[str]) -> None:
        """`llama#fim(pos_x, pos_y, is_auto=true, prev, use_cache=true)`."""
        if self.closed:
            return
        if self.job is not None:
            # One request at a time: wait for it, retrying every 100 ms; a newer call
            # replaces the pending retry (there is a single timer).
            if self.timer is not None:
                self.timer.cancel()
            self.timer = asyncio.get_running_loop().call_later(
                self.settings.retry_ms / 1000.0, self._retry, x, y, prev
            )
            return
        px = self.x if x is None else x
        py = self.y if y is None else y
        ctx = local_context(self.lines, px, py, prev, self.settings, self.indent_last)
        if len(ctx.line_cur_suffix) > self.settings.max_line_suffix:
            return
        hashes = request_hashes(ctx, self.settings)
        if self.cache.has_any(hashes):
            return
        self.indent_last = ctx.indent
        t_max = self.settings.t_max_predict_ms if prev else self.settings.t_max_predict_first_ms
        request = Request(speculative=bool(prev), sent_at=self.clock())
        body = build_request(ctx, t_max, self.settings)
        self.job = asyncio.ensure_future(self._run(request, body, hashes))
        self.job_request = request
        self.observer.request_sent(request)

    def _retry(self, x: int | None, y: int | None, prev: list[str]) -> None:
        self.timer = None
        self.fim(x, y, prev=prev)

    async def _run(self, request: Request, body: dict[str, Any], hashes: list[str]) -> None:
        try:
            answer = await self._post(body)
            request.answer = answer
            self.observer.request_done(request)
            if answer.content is not None:
                self.on_response(hashes, answer)
        finally:
            self.job = self.job_request = None  # s:fim_on_exit runs after s:fim_on_response

    async def _post(self, body: dict[str, Any]) -> Answer:
        started = self.clock()
        try:
            response = await self.http.post(
                self.url, json=body, timeout=self.settings.http_timeout_s
            )
            data = response.json() if response.status_code == 200 else {}
        except (httpx.HTTPError, ValueError):
            data = {}
        return parse_answer(data if isinstance(data, dict) else {}, (self.clock() - started) * 1e3)

    def on_response(self, hashes: list[str], answer: Answer) -> None:
        """`s:fim_on_response`: cache the answer; show a hint if none acceptable is showing."""
        cached = {"content": answer.content}
        for key in hashes:
            self.cache.insert(key, cached)
        if self.hint is None or not self.hint.can_accept:
            self.try_hint(self.x, self.y, from_answer=True)


# ---------------------------------------------------------------------------------------------
# The replay: keystrokes in real time, one record per non-jump keystroke state.


@dataclass
class _StateLog(Observer):
    start: float
    records: list[dict[str, Any]] = field(default_factory=list)
    current: dict[str, Any] | None = None
    current_at: float = 0.0
    owner: dict[int, dict[str, Any]] = field(default_factory=dict)
    on_hint: Callable[[], None] = lambda: None  # a hint went on screen (the editor's screen)

    def begin(self, trace: Trace, index: int, key: Keystroke, now: float) -> None:
        self.current_at = now
        if key.jump:
            self.current = None
            return
        self.current = new_record(
            trace,
            index,
            key,
            "",
            requested=False,  # llama.vim decides per keystroke whether to ask
            # Not in the shared format, kept because they explain llama.vim's numbers:
            late=False,  # this state's answer came after the next keystroke
            http_ms=None,
            speculative_requests=0,
            speculative_prompt_tokens=0,
        )
        self.records.append(self.current)

    def end(self, visible: str) -> None:
        if self.current is not None:
            self.current["shown_text"] = visible
        self.current = None

    def request_sent(self, request: Request) -> None:
        if self.current is None:
            return
        self.owner[id(request)] = self.current
        if request.speculative:
            self.current["speculative_requests"] += 1
        else:
            self.current["requested"] = True

    def request_abandoned(self, request: Request) -> None:
        record = self.owner.pop(id(request), None)
        if record is not None and not request.speculative:
            record["cancelled"] = True

    def request_done(self, request: Request) -> None:
        record = self.owner.pop(id(request), None)
        answer = request.answer
        if record is None or answer is None:
            return
        if request.speculative:
            record["speculative_prompt_tokens"] += answer.prompt_n or 0
            return
        if record["source"] == "none":
            record["source"] = "model"  # answered by the model, shown or not (late)
        record["ttft_ms"] = answer.ttft_ms
        record["prompt_tokens"] = answer.prompt_n
        record["reused_tokens"] = answer.cached_n
        record["generated_tokens"] = answer.predicted_n
        record["http_ms"] = answer.http_ms
        record["late"] = record is not self.current

    def hint_shown(self, hint: Hint, from_answer: bool) -> None:
        self.on_hint()
        if self.current is None or self.current["shown_at_ms"] is not None:
            return
        loop_now = asyncio.get_running_loop().time()
        self.current["shown_at_ms"] = (loop_now - self.current_at) * 1e3
        self.current["source"] = "model" if from_answer else "cache"


class LlamaVimEditor:
    """llama.vim in one buffer, as bench/user_replay.py drives an editor: each edit moves the
    cursor (`CursorMovedI`), and the screen is the hint llama.vim shows."""

    def __init__(
        self, base_url: str, http: httpx.AsyncClient, settings: Settings | None = None
    ) -> None:
        self.base_url, self.http, self.settings = base_url, http, settings
        self.screen = Screen()

    async def open(self, trace: Trace) -> None:
        loop = asyncio.get_running_loop()
        self.loop = loop
        self.log = _StateLog(loop.time(), on_hint=self._sync_screen)
        self.lines = trace.initial_text.split("\n")
        self.client = LlamaVim(
            self.base_url,
            self.http,
            self.lines,
            settings=self.settings,
            observer=self.log,
            clock=loop.time,
        )

    async def keystroke(
        self, trace: Trace, index: int, key: Keystroke, signal: AcceptSignal | None
    ) -> Record | None:
        """A typed key or an accept key (its text inserted): llama.vim sees only the edit."""
        self.log.end(self.client.visible_text())
        self.lines = apply_edit(self.lines, key.edit)
        x, y = cursor_of(self.lines, key)
        self.log.begin(trace, index, key, self.loop.time())
        self.screen.after_edit(key.edit.text, jump=key.jump, now=time.perf_counter())
        self.client.cursor_moved(self.lines, x, y)
        self._sync_screen()
        return self.log.current

    async def finish(self) -> None:
        self.log.end(self.client.visible_text())
        await self.client.close()

    def _sync_screen(self) -> None:
        """The screen shows llama.vim's hint: the same one continued, a new one, or none."""
        text = self.client.visible_text()
        if text:
            self.screen.show(text, time.perf_counter())
        elif self.screen.text:
            self.screen.clear()


async def replay_trace(
    trace: Trace,
    base_url: str,
    *,
    http: httpx.AsyncClient,
    settings: Settings | None = None,
    user: str = "none",
) -> list[dict[str, Any]]:
    """Type `trace` in real time into a llama.vim-like client; one record per typed state.

    `ttft_ms` is the server's own figure (prompt_ms + one predicted-token time) for the request
    sent while that state was current; `shown_at_ms` is measured here, from the keystroke.
    llama.vim never abandons a request, so `cancelled` is True only for the request still running
    a minute after the trace ended; `late` marks answers that arrived after the user typed on.
    `user` is the reader of bench/accepting_user.py (`none`: types everything).
    """
    records, _reads = await replay_with_user(trace, LlamaVimEditor(base_url, http, settings), user)
    return records


def _shown_in_time(record: dict[str, Any]) -> bool:
    """Ghost text for this state appeared before the user typed the next character."""
    at = record["shown_at_ms"]
    return at is not None and at <= record["gap_ms"]


def summarize(records: list[dict[str, Any]]) -> dict[str, float | int | None]:
    """The headline numbers: share of states with ghost text before the next keystroke, median
    time to ghost text at pauses, mean prompt tokens per request."""
    shown = [r for r in records if _shown_in_time(r)]
    pauses = sorted(r["shown_at_ms"] for r in shown if r["is_pause"])
    prompts = [r["prompt_tokens"] for r in records if r["prompt_tokens"] is not None]
    spec = sum(r["speculative_requests"] for r in records)
    return {
        "states": len(records),
        "shown_share": len(shown) / len(records) if records else None,
        "pauses": sum(1 for r in records if r["is_pause"]),
        "median_ms_to_ghost_at_pauses": pauses[len(pauses) // 2] if pauses else None,
        "requests": sum(1 for r in records if r["requested"]),
        "mean_prompt_tokens": sum(prompts) / len(prompts) if prompts else None,
        "speculative_requests": spec,
        "mean_speculative_prompt_tokens": (
            sum(r["speculative_prompt_tokens"] for r in records) / spec if spec else None
        ),
        "from_cache": sum(1 for r in records if r["source"] == "cache"),
        "late_answers": sum(1 for r in records if r["late"]),
    }
