"""Follow-ups: the background work a suggestion leads to, all droppable, all in one place.

- widen: the keystroke used the narrow start window (a new place, on a CPU): prepare the wide
  one (engine/local/plan.py decides the windows) in the user's next lull;
- refresh: at a pause, when the keystroke prompt cut the suffix, the full prompt's suggestion
  replaces the one on screen;
- prefetch: the suggestion after this one (as if it were accepted or typed through) is ready
  before it is asked for;
- warm-up: a new backend prefills the last document's context, so its first keystroke is warm;
- block switch: full prompts moved on to new workspace context (engine/service/workspace.py);
  the keystrokes' KV cache gets it in the user's next lull, and only then do keystrokes use it.
  It prefills the start window behind the new block (on a CPU half the wide window's prefill);
  the widen follows at a later lull.

Each runs at its own priority (engine/service/scheduler.py): refresh > prefetch > widen and
warm-up; any keystroke drops them (an interactive job preempts background work), losing the
prefill chunk in progress. So the long ones wait for the user to stop: the refresh for a pause
(PAUSE_REFRESH_S), the widen for a lull (LULL_S, longer than most gaps between keys), and a
keystroke that comes first makes them unwanted. (Started at once, the widen's chunks were
aborted by the next key nearly every time: on the accepting-user replay the model spent about
as long on them as on the keystrokes.) The prefetch, a short decode, starts at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ghostfim.engine.backend import Completion, CompletionRequest
from ghostfim.engine.service.cursor import CursorState
from ghostfim.engine.service.documents import DocumentRecord
from ghostfim.engine.service.requests import Requests
from ghostfim.engine.service.scheduler import JobDropped, ModelWorker, Priority, Serving
from ghostfim.engine.service.suggestions import (
    Suggestion,
    SuggestionCache,
    shown_part,
    visible,
)
from ghostfim.engine.text.confidence import Confidence
from ghostfim.engine.tuning import LULL_S, PAUSE_REFRESH_S, PREFETCH_MAX_TOKENS

log = logging.getLogger("ghostfim.followups")


class FollowUps:
    def __init__(
        self,
        worker: ModelWorker,
        serving: Serving,
        cache: SuggestionCache,
        requests: Requests,
    ) -> None:
        self.worker = worker
        self.serving = serving
        self.cache = cache
        self.requests = requests
        self._tasks: set[asyncio.Future[Any]] = set()
        self._waiting: set[asyncio.TimerHandle] = set()  # follow-ups waiting for their lull
        self._widening = False
        self._switching = False
        self._stopped = False  # the service shut down: nothing new starts

    @property
    def idle(self) -> bool:
        """No follow-up runs or waits for its lull."""
        return not self._tasks and not self._waiting

    def after_job(
        self,
        state: CursorState,
        record: DocumentRecord,
        completion: Completion | None,
        explicit: bool,
    ) -> None:
        """A suggestion's job ended (completion None or cancelled: it was stopped)."""
        if completion is None or self._stopped:
            return
        number = record.latest
        if self.requests.block_switch(state) is not None:
            # The switch first (it prefills the start window behind the new block); the widen
            # at a later lull, behind the block (a widen now would prefill the wide window
            # without the block, soon out of use).
            self._after(LULL_S, record, number, lambda: self.switch_block(state))
        elif completion.widen:
            # At the first lull; at a pause it runs before the refresh is asked for, which
            # then waits for it (as a keystroke there soon will use the wide window).
            self._after(LULL_S, record, number, lambda: self.widen(state))
        if completion.cancelled:
            return
        refresh = not explicit and completion.suffix_cut

        def at_pause() -> None:
            if refresh:
                self._spawn(self._refresh(state, record, number))
            elif completion.text and self._shown_whole(state, completion, explicit):
                self._spawn(self._prefetch(state, record, completion.text, number))

        self._after(PAUSE_REFRESH_S if refresh else 0.0, record, number, at_pause)

    def _after(
        self, delay_s: float, record: DocumentRecord, number: int, follow_up: Callable[[], None]
    ) -> None:
        """`follow_up` in `delay_s`, unless the user typed on meanwhile (the next job asks)."""

        def run() -> None:
            self._waiting.discard(handle)
            if record.latest == number:
                follow_up()

        handle = asyncio.get_running_loop().call_later(delay_s, run)
        self._waiting.add(handle)

    def stop(self) -> None:
        """The service shuts down: nothing waiting starts, nothing running goes on, and a
        job that ends after this (its callback comes later) asks for nothing."""
        self._stopped = True
        for handle in self._waiting:
            handle.cancel()
        self._waiting.clear()
        for task in self._tasks:
            task.cancel()

    def _shown_whole(self, state: CursorState, completion: Completion, explicit: bool) -> bool:
        """The whole suggestion is on screen, so a Tab may take all of it: only then is the
        state after it worth preparing. Of one the filter showed a part of, a Tab takes that
        part, and the rest of the suggestion itself serves what comes next."""
        rule = None if explicit else self.requests.rule_for(state)
        return shown_part(completion.text, completion.marks, rule) == visible(completion.text)

    async def _refresh(self, state: CursorState, record: DocumentRecord, number: int) -> None:
        request = self.requests.request_for(state, "full")
        result = await self._background(request, Priority.REFRESH)
        if result is None or record.latest != number:
            return
        suggestion = _finished(result, self.requests.rule_for(state))
        self.cache.put(state.prefix, state.suffix, suggestion)
        record.screen.refreshed(state, suggestion)
        if result.text and self._shown_whole(state, result, explicit=False):
            await self._prefetch(state, record, result.text, number)

    async def _prefetch(
        self, state: CursorState, record: DocumentRecord, text: str, number: int
    ) -> None:
        accepted = replace(
            state, prefix=state.prefix + text, cursor_line=state.cursor_line + text.count("\n")
        )
        request = self.requests.request_for(accepted, "keystroke", PREFETCH_MAX_TOKENS)
        result = await self._background(request, Priority.SPECULATIVE)
        if result is None or record.latest != number:
            return
        rule = self.requests.rule_for(accepted)
        self.cache.put(accepted.prefix, accepted.suffix, _finished(result, rule))

    def widen(self, state: CursorState) -> None:
        """Prepare the wide keystroke window for the job's own cursor state. Droppable; asked
        for again after the next keystroke that still uses the narrow one."""
        if self._widening:
            return
        self._widening = True
        request = replace(self.requests.request_for(state, "keystroke"), max_tokens=0)

        async def run() -> None:
            try:
                await self._background(request, Priority.WARMUP)
            finally:
                self._widening = False

        self._spawn(run())

    def switch_block(self, state: CursorState) -> None:
        """Prefill the workspace context full prompts moved on to for the keystrokes' prompts;
        they take it once that is done. Droppable: asked for again after the next job."""
        switch = self.requests.block_switch(state)
        if switch is None or self._switching:
            return
        self._switching = True

        async def run() -> None:
            try:
                if await self._background(switch.request, Priority.WARMUP) is not None:
                    switch.done()
            finally:
                self._switching = False

        self._spawn(run())

    def warm(self, state: CursorState) -> None:
        """Prefill a document's context so its first keystroke is not a cold prompt."""
        for mode in ("keystroke", "full"):  # each has its own KV slot; keystrokes first
            request = replace(self.requests.request_for(state, mode), max_tokens=0)
            self._spawn(self._background(request, Priority.WARMUP))

    def _spawn(self, coro: Any) -> None:
        if self._stopped:
            coro.close()
            return
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _background(
        self, request: CompletionRequest, priority: Priority
    ) -> Completion | None:
        request = replace(request, background=True)
        job = self.worker.submit_completion(
            self.serving, request, priority, label=priority.name.lower()
        )
        assert job.future is not None
        try:
            result: Completion = await job.future
        except (JobDropped, asyncio.CancelledError):
            return None
        except Exception as exc:
            log.warning("background job failed: %s", exc)
            return None
        return None if result.cancelled else result


def _finished(result: Completion, rule: Confidence | None) -> Suggestion:
    """A background job's suggestion, shown by the rule of its place."""
    return Suggestion(text=result.text, done=True, marks=result.marks, rule=rule)
