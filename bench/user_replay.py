"""A trace replayed in real time by a user who reads the ghost text and accepts what is right.

The user types the trace's keystrokes on its clock. Between two keystrokes they read the ghost
text on screen once it has been there for a reaction time (`Pace.reaction_ms`, before the next
keystroke is due) and decide with bench/accepting_user.py. An accept happens in the editor:
each accept key inserts its text at the cursor, as the editor sends it (a change, then the
accept signal where the system has one, then the editor asks for a new suggestion), and costs
one ordinary inter-key gap. The user then types on from there: the trace's keystrokes for the
accepted characters are skipped (the document is then the one typing them would have made),
and the rest of the trace keeps its own gaps, shifted to start from the last accept key.

What a user can see is the editor's: `Screen` holds the ghost text on screen now, since when
(ghost text the user typed into counts from their keystroke, as the latency scoring counts
it), and whether this suggestion was read already: one the user typed into, or that grew while
streaming, is the same suggestion and is not read twice. Each system provides an `Editor`
(ghostfim over LSP here, llama.vim in bench/llamavim.py); the `none` user never reads, which is
the plain typist of the latency benchmark.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from bench.accepting_user import Decision, decide, what_followed
from bench.traces import (
    PAUSE_MS,
    TYPING_MEDIAN_MS,
    Edit,
    Keystroke,
    Record,
    Trace,
    new_record,
    utf16_len,
)
from harness.lspclient import LspProcess, Notification

DID_SHOW = "textDocument/didShowCompletion"
DID_PARTIALLY_ACCEPT = "textDocument/didPartiallyAcceptCompletion"


@dataclass(frozen=True)
class Pace:
    reaction_ms: float = 300.0  # on screen this long before the user has read it
    accept_key_ms: float = TYPING_MEDIAN_MS  # what one accept key costs: an ordinary gap


# --- where the user is in the trace ---------------------------------------------------------------
@dataclass
class Walk:
    """The user's way through a trace's keystrokes: which to type next, and when.

    Times are ms from the start of the replay. After an accept, `shift_ms` is how far the
    user's clock is from the trace's (negative: accepting was quicker than typing)."""

    keys: Sequence[Keystroke]
    next_index: int = 0
    shift_ms: float = 0.0

    def done(self) -> bool:
        return self.next_index >= len(self.keys)

    def type_next(self) -> tuple[int, Keystroke]:
        """The next keystroke of the trace, at its time on the user's clock."""
        index = self.next_index
        self.next_index += 1
        key = self.keys[index]
        return index, replace(key, at_ms=key.at_ms + self.shift_ms)

    def accept(
        self, index: int, pieces: Sequence[str], first_at_ms: float, key_gap_ms: float
    ) -> list[tuple[int, Keystroke]]:
        """The states the accept keys reach from state `index`, each key inserting one piece
        at the cursor, the first at `first_at_ms` and then one `key_gap_ms` apart. The last
        keeps its gap in the trace, and the user types on from it."""
        if not pieces:
            raise ValueError("an accept inserts something")
        steps: list[tuple[int, Keystroke]] = []
        state = self.keys[index]
        reached = index
        at_ms = first_at_ms
        for n, piece in enumerate(pieces):
            reached += len(piece)  # every keystroke of a trace types one character
            target = self._state_after(state, piece, reached)
            gap = target.gap_ms if n == len(pieces) - 1 else key_gap_ms
            edit = Edit((state.line, state.character), (state.line, state.character), piece)
            steps.append((reached, replace(target, at_ms=at_ms, gap_ms=gap, edit=edit)))
            state = target
            at_ms += key_gap_ms
        self.next_index = reached + 1
        self.shift_ms = steps[-1][1].at_ms - self.keys[reached].at_ms
        return steps

    def _state_after(self, state: Keystroke, piece: str, reached: int) -> Keystroke:
        """The trace's state that inserting `piece` at `state`'s cursor makes (it must be one)."""
        target = self.keys[reached] if reached < len(self.keys) else None
        inserted = state.text[: state.offset] + piece + state.text[state.offset :]
        if target is None or target.jump or target.text != inserted:
            raise ValueError(f"accepting {piece!r} does not lead to a state of the trace")
        return target


# --- what is on screen ----------------------------------------------------------------------------
class Screen:
    """The ghost text on screen, as the user sees it (times: time.perf_counter seconds)."""

    def __init__(self) -> None:
        self.text = ""
        self.since = 0.0  # when this suggestion went on screen (or the keystroke it outlived)
        self.read = False  # the user read this suggestion already
        self.origin: object = None  # which answer the text came from (the client's tag)
        self.item: dict[str, Any] | None = None  # the protocol's item for it, if any
        self.typed_into_item = ""  # typed (or accepted) since the item was shown
        self._changed = asyncio.Event()

    def after_edit(self, inserted: str, *, jump: bool, now: float) -> str:
        """An edit at the cursor: what the user typed into stays on screen (the rest of it)."""
        if not jump and self.text.startswith(inserted) and len(self.text) > len(inserted):
            self.text = self.text[len(inserted) :]
            self.typed_into_item += inserted
            self.since = now
        else:
            self.clear()
        return self.text

    def show(
        self, text: str, now: float, *, origin: object = None, item: dict[str, Any] | None = None
    ) -> None:
        """Ghost text on screen: the same suggestion (grown, continued, or an item for it) or
        a new one, which the user has not read yet."""
        if not text:
            return
        same = bool(self.text) and (text.startswith(self.text) or self.text.startswith(text))
        if not same:
            self.read, self.since, self.item, self.typed_into_item = False, now, None, ""
        # A shorter copy of the text from the same answer (the answer after its own growth
        # arrived) changes nothing on screen.
        if not (same and origin is self.origin and self.text.startswith(text)):
            self.text = text
        self.origin = origin
        if item is not None:
            self.item, self.typed_into_item = item, ""
        self._changed.set()

    def clear(self) -> None:
        self.text, self.read, self.origin = "", False, None
        self.item, self.typed_into_item = None, ""
        self._changed.set()

    def shown_item(self) -> dict[str, Any] | None:
        """The item as the editor shows it now: its insertText grown to what is on screen."""
        if self.item is None:
            return None
        return {**self.item, "insertText": self.typed_into_item + self.text}

    async def changed_before(self, deadline: float) -> bool:
        """Wait for the screen to change, until `deadline`; whether it did."""
        self._changed.clear()
        timeout = deadline - time.perf_counter()
        if timeout <= 0:
            return False
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True


@dataclass(frozen=True)
class AcceptSignal:
    """What the editor tells the server about one accept key (nothing, for llama.vim)."""

    item: dict[str, Any] | None  # the item on screen, insertText as shown
    full: bool  # a whole accept (the item's command) or a part (didPartiallyAcceptCompletion)
    accepted_units: int  # UTF-16 units of insertText taken so far


def accept_signals(
    decision: Decision, item: dict[str, Any] | None, typed_into_item: str
) -> list[AcceptSignal]:
    """One signal per accept key. A part is counted from the item's start, so what the user
    typed into the item before accepting is part of it (protocol.md: the first n units)."""
    if decision.kind == "full":
        return [AcceptSignal(item, True, utf16_len(typed_into_item + decision.text))]
    signals, taken = [], typed_into_item
    for piece in decision.pieces:
        taken += piece
        signals.append(AcceptSignal(item, False, utf16_len(taken)))
    return signals


# --- the user -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Read:
    """One suggestion the user read, and what they did with it."""

    trace: str
    index: int  # the keystroke state it was read at
    after_ms: float  # from that state's keystroke
    shown: str
    rest_of_line: str
    decision: Decision
    item_id: str | None
    typed_into_item: str  # typed into the item before this read (a carried item)
    at_trace_end: bool = False  # read at the trace's last state (the document closes next)

    @property
    def followed_by(self) -> str | None:
        """For a refusal, what the user did next (bench/accepting_user.py's what_followed)."""
        if self.decision.accepted:
            return None
        return what_followed(self.shown, self.rest_of_line, at_trace_end=self.at_trace_end)

    def to_json(self) -> dict[str, Any]:
        return {
            "trace": self.trace,
            "index": self.index,
            "after_ms": round(self.after_ms, 1),
            "shown": self.shown,
            "rest_of_line": self.rest_of_line,
            "decision": self.decision.kind,
            "accepted": self.decision.text,
            "keys": self.decision.keys,
            "item_id": self.item_id,
            "typed_into_item": self.typed_into_item,
            "followed_by": self.followed_by,
        }


class Editor(Protocol):
    screen: Screen

    async def open(self, trace: Trace) -> None: ...

    async def keystroke(
        self, trace: Trace, index: int, key: Keystroke, signal: AcceptSignal | None
    ) -> Record | None:
        """Send one edit (typed, or an accept key with its signal) and ask for ghost text;
        the new state's record (None for a jump)."""
        ...

    async def finish(self) -> None: ...


class Clock:
    """Milliseconds since the replay started, on time.perf_counter."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def ms(self, t: float) -> float:
        return (t - self.start) * 1000

    def at(self, ms: float) -> float:
        return self.start + ms / 1000

    async def until(self, ms: float) -> None:
        delay = self.at(ms) - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)


@dataclass
class UserReplay:
    """One trace, one user, one editor, in real time."""

    trace: Trace
    editor: Editor
    user: str
    pace: Pace = field(default_factory=Pace)
    records: list[Record] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    clock: Clock = field(default_factory=Clock, init=False)  # started once the editor is open

    async def run(self) -> tuple[list[Record], list[Read]]:
        await self.editor.open(self.trace)
        self.clock = Clock()
        walk = Walk(self.trace.keystrokes)
        key: Keystroke | None = None
        while not walk.done():
            index, key = walk.type_next()
            await self.clock.until(key.at_ms)
            record = await self._send(index, key, None)
            while (accept := await self._read_in_gap(index, key, record)) is not None:
                index, key, record = await self._accept(walk, index, key, record, *accept)
        if key is not None:
            await self.clock.until(key.at_ms + key.gap_ms)
        await self.editor.finish()
        return self.records, self.reads

    async def dwell(self) -> tuple[list[Record], list[Read]]:
        """Only the trace's first state: the cursor arrives, and the user reads what comes on
        screen before the first keystroke is due (its gap: the dwell). Nothing is accepted or
        typed (an accept's decision is in the reads); the document closes after the dwell."""
        await self.editor.open(self.trace)
        self.clock = Clock()
        key = self.trace.keystrokes[0]
        record = await self._send(0, key, None)
        await self._read_in_gap(0, key, record)  # reads until one is accepted
        await self.clock.until(key.at_ms + key.gap_ms)
        await self.editor.finish()
        return self.records, self.reads

    async def _send(self, index: int, key: Keystroke, signal: AcceptSignal | None) -> Record | None:
        record = await self.editor.keystroke(self.trace, index, key, signal)
        if record is not None:
            record["via"] = "type" if signal is None else "accept"
            record["reads"] = []
            self.records.append(record)
        return record

    async def _read_in_gap(
        self, index: int, key: Keystroke, record: Record | None
    ) -> tuple[float, Decision] | None:
        """The user reads what comes on screen before the next keystroke is due; the first
        suggestion they accept (when they read it, and what they take), or None."""
        if self.user == "none" or key.jump:
            return None
        screen = self.editor.screen
        while (read_at := await self._next_read(key.at_ms + key.gap_ms)) is not None:
            decision = decide(self.user, screen.text, key.rest_of_line)
            item_id = _item_id(screen.item)
            self.reads.append(
                Read(
                    self.trace.name,
                    index,
                    read_at - key.at_ms,
                    screen.text,
                    key.rest_of_line,
                    decision,
                    item_id,
                    screen.typed_into_item,
                    at_trace_end=index == len(self.trace.keystrokes) - 1,
                )
            )
            screen.read = True
            if record is not None:
                record["reads"].append(decision.kind)
            if decision.accepted:
                return read_at, decision
        return None

    async def _next_read(self, end_ms: float) -> float | None:
        """When the user reads a suggestion before `end_ms` (ms), or None if none is read."""
        screen = self.editor.screen
        while True:
            if screen.text and not screen.read:
                read_at = self.clock.ms(screen.since) + self.pace.reaction_ms
                if read_at > end_ms:
                    return None  # a change could only make it later
                if not await screen.changed_before(self.clock.at(read_at)):
                    return read_at
            elif not await screen.changed_before(self.clock.at(end_ms)):
                return None

    async def _accept(
        self,
        walk: Walk,
        index: int,
        key: Keystroke,
        record: Record | None,
        read_at: float,
        decision: Decision,
    ) -> tuple[int, Keystroke, Record | None]:
        """Press the accept keys; the state the last one reached, to read on from."""
        screen = self.editor.screen
        signals = accept_signals(decision, screen.shown_item(), screen.typed_into_item)
        gap = self.pace.accept_key_ms
        steps = walk.accept(index, decision.pieces, read_at + gap, gap)
        if record is not None:  # the user pressed a key sooner than the trace's next one
            record["gap_ms"] = steps[0][1].at_ms - key.at_ms
            record["is_pause"] = record["gap_ms"] >= PAUSE_MS
        for (state_index, state), signal in zip(steps, signals, strict=True):
            await self.clock.until(state.at_ms)
            record = await self._send(state_index, state, signal)
        last_index, last = steps[-1]
        return last_index, last, record


def _item_id(item: dict[str, Any] | None) -> str | None:
    arguments = ((item or {}).get("command") or {}).get("arguments") or []
    return arguments[0] if arguments and isinstance(arguments[0], str) else None


async def replay_with_user(
    trace: Trace, editor: Editor, user: str, pace: Pace | None = None
) -> tuple[list[Record], list[Read]]:
    return await UserReplay(trace, editor, user, pace or Pace()).run()


# --- ghostfim over LSP ----------------------------------------------------------------------------
class GhostfimEditor:
    """ghostfim as an editor drives it over LSP: each edit is a didChange followed by an
    automatic inlineCompletion request (the previous one cancelled if still open); items go on
    screen with didShowCompletion; accepts are signalled as docs/protocol.md says."""

    def __init__(self, client: LspProcess, uri: str, close_after_s: float = 2.0) -> None:
        self.client = client
        self.uri = uri
        self.close_after_s = close_after_s  # from the trace's end to didClose
        self.screen = Screen()
        self.version = 1
        self.by_version: dict[int, Record] = {}
        self.sent_at: dict[int, float] = {}
        self.pending: tuple[int, asyncio.Future[Any]] | None = None
        self.current: Record | None = None
        self.unsignalled = 0  # accepts with no item to name (the answer had not come)
        self._tasks: set[asyncio.Task[None]] = set()

    async def open(self, trace: Trace) -> None:
        await self.client.notify(
            "textDocument/didOpen",
            {
                "textDocument": {
                    "uri": self.uri,
                    "languageId": trace.language,
                    "version": 1,
                    "text": trace.initial_text,
                }
            },
        )
        self.client.listeners.append(self._on_note)
        await asyncio.sleep(0.5)

    async def keystroke(
        self, trace: Trace, index: int, key: Keystroke, signal: AcceptSignal | None
    ) -> Record | None:
        if self.current is not None:
            self.current["_closed"] = True  # what is on screen now is its final state
        self.version += 1
        await self.client.notify(
            "textDocument/didChange",
            {
                "textDocument": {"uri": self.uri, "version": self.version},
                "contentChanges": [key.edit.to_lsp()],
            },
        )
        now = time.perf_counter()
        carried = self.screen.after_edit(key.edit.text, jump=key.jump, now=now)
        if signal is not None:
            await self._signal(signal)
        if self.pending is not None and not self.pending[1].done():
            await self.client.cancel(self.pending[0])
        rid, fut = await self.client.request(
            "textDocument/inlineCompletion",
            {
                "textDocument": {"uri": self.uri},
                "position": {"line": key.line, "character": key.character},
                "context": {"triggerKind": 2},
            },
        )
        self.pending = (rid, fut)
        self.sent_at[self.version] = now
        record = new_record(trace, index, key, carried, _version=self.version)
        self.by_version[self.version] = record
        fut.add_done_callback(lambda f, r=record: self._on_answer(f, r))
        self.current = record
        return None if key.jump else record

    async def finish(self) -> None:
        if self.current is not None:
            self.current["_closed"] = True
        await asyncio.sleep(self.close_after_s)
        self.client.listeners.remove(self._on_note)
        await self.client.notify("textDocument/didClose", {"textDocument": {"uri": self.uri}})

    async def _signal(self, signal: AcceptSignal) -> None:
        command = (signal.item or {}).get("command")
        if signal.item is None or not command:
            self.unsignalled += 1
            return
        if signal.full:
            # The editor runs the item's command and does not wait for its (null) answer.
            await self.client.request(
                "workspace/executeCommand",
                {"command": command["command"], "arguments": command.get("arguments") or []},
            )
        else:
            await self.client.notify(
                DID_PARTIALLY_ACCEPT,
                {"item": signal.item, "acceptedLength": signal.accepted_units},
            )

    def _on_note(self, note: Notification) -> None:
        params = note.params or {}
        if params.get("uri") != self.uri:
            return
        record = self.by_version.get(params.get("version", -1))
        if record is None:
            return
        if note.method == "ghostfim/ghostText" and params.get("insertText"):
            self._show(record, params["insertText"], note.at)
        elif note.method == "ghostfim/stats":
            _record_stats(record, params)

    def _on_answer(self, fut: asyncio.Future[Any], record: Record) -> None:
        if fut.cancelled() or fut.exception() is not None:
            return
        items = (fut.result() or {}).get("items") or []
        if items and items[0].get("insertText"):
            self._show(record, items[0]["insertText"], time.perf_counter(), items[0])

    def _show(
        self, record: Record, text: str, at: float, item: dict[str, Any] | None = None
    ) -> None:
        if record["_closed"]:
            return
        if record["shown_at_ms"] is None:
            record["shown_at_ms"] = (at - self.sent_at[record["_version"]]) * 1000
        record["shown_text"] = text
        if record["_version"] != self.version:
            return
        self.screen.show(text, at, origin=record["_version"], item=item)
        if item is not None:
            self._later(self.client.notify(DID_SHOW, {"item": item}))

    def _later(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _record_stats(record: Record, params: dict[str, Any]) -> None:
    """A ghostfim/stats notification, into the state's record."""
    model = params["source"] == "model"
    record["source"] = params["source"]
    record["cancelled"] = bool(params["cancelled"])
    record["ttft_ms"] = params["ttftMs"] if model else None
    record["prompt_tokens"] = params["newTokens"] if model else None
    record["reused_tokens"] = params["reusedTokens"] if model else None
    record["generated_tokens"] = params["generatedTokens"]
    record["suffix_cut"] = params.get("suffixCut") if model else None
