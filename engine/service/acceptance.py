"""Whether suggestions are taken: the outcome of every suggestion an editor showed.

Every non-empty answer is an *item* with an id; the editor hands the id back when the user
takes it (docs/protocol.md, "Accept signals"):

- accepted: the item's command ran (`workspace/executeCommand` `ghostfim.accepted`), which
  every LSP client with inline completion does after a full accept;
- partial: our clients report a word or a line taken (`textDocument/didPartiallyAcceptCompletion`);
- refused: it was on screen for READ_MS or longer (long enough to read) and then the user typed
  something it did not say, dismissed it, or a different suggestion replaced it;
- neither: it was gone before READ_MS (nobody read it), or the user typed what it said (the
  next item continues the same suggestion).

The log keeps this session's counts (ghostfim/status `acceptance`) and hands each finished
outcome to its listeners: the local statistics file (engine/service/localstats.py) and the
adaptive filter (engine/service/filter.py). A refusal reaches them only once the client has sent
an accept signal (a full or partial accept): an editor that never reports accepts makes every
suggestion it shows and the user takes look refused when the text moves on, and learning from
those would show less exactly where users take the most (measured: ghost text at 27% of pauses
against 48% with `filter: fixed`). Until the first signal, refusals are held (the last
MAX_HELD_REFUSALS), and handed on when it comes. Times are monotonic seconds, passed in, so tests
need no clock.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from ghostfim.engine.text.place import Place
from ghostfim.engine.tuning import READ_MS

MAX_ITEMS = 256  # items kept for late signals (an accept arrives after the next request)
MAX_HELD_REFUSALS = 256  # refusals kept until the client shows it reports accepts

OutcomeKind = Literal["accepted", "partial", "refused"]


@dataclass
class Item:
    id: str
    doc_id: str
    text: str  # what the editor shows (grows while the suggestion streams)
    place: Place
    shown_at: float
    ttgt_ms: float  # from the keystroke to the answer
    explicit: bool
    origin: object  # the suggestion it shows: an item typed through continues the same one
    outcome: OutcomeKind | None = None
    accepted_chars: int = 0
    live: bool = True  # still on screen (as far as the server knows)
    inserted: int | None = None  # what the editor inserted of it just now (an accept's edit)


@dataclass(frozen=True)
class Outcome:
    """One item's fate, as the statistics keep it."""

    kind: OutcomeKind
    place: Place
    chars: int  # characters this event accepted (0 for a refusal)
    shown_chars: int
    ttgt_ms: float
    explicit: bool


@dataclass
class Counts:
    shown: int = 0
    accepted: int = 0
    partial: int = 0
    refused: int = 0
    accepted_chars: int = 0

    @property
    def accept_rate(self) -> float | None:
        """Items taken (whole or in part) out of the items read."""
        read = self.accepted + self.partial + self.refused
        return None if read == 0 else (self.accepted + self.partial) / read


@dataclass
class AcceptanceLog:
    listeners: list[Callable[[Outcome], None]] = field(default_factory=list)
    counts: Counts = field(default_factory=Counts)
    _items: OrderedDict[str, Item] = field(default_factory=OrderedDict)
    _live: dict[str, Item] = field(default_factory=dict)  # per document: the item on screen
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    # Whether the client sends accept signals; until then its refusals are held here.
    reports_accepts: bool = False
    _held: deque[Outcome] = field(default_factory=lambda: deque(maxlen=MAX_HELD_REFUSALS))

    # --- what the server showed -------------------------------------------------------------
    def show(
        self,
        doc_id: str,
        text: str,
        place: Place,
        *,
        now: float,
        ttgt_ms: float,
        explicit: bool,
        origin: object,
    ) -> str:
        """A new item on screen; the one it replaces is refused if it was read."""
        previous = self._live.get(doc_id)
        shown_at = now
        if previous is not None:
            if previous.origin is origin:
                previous.live = False  # typed through: the new item continues it,
                shown_at = previous.shown_at  # and the user has been reading it since then
            else:
                self._gone(previous, now)
        item = Item(f"g{next(self._ids)}", doc_id, text, place, shown_at, ttgt_ms, explicit, origin)
        self._items[item.id] = item
        while len(self._items) > MAX_ITEMS:
            self._items.popitem(last=False)
        self._live[doc_id] = item
        self.counts.shown += 1
        return item.id

    def grown(self, doc_id: str, origin: object, text: str) -> None:
        """The suggestion on screen streamed further: the item shows more."""
        item = self._live.get(doc_id)
        if item is not None and item.origin is origin and item.outcome is None:
            item.text = text

    def now_shows(self, doc_id: str, origin: object, new_origin: object, text: str) -> None:
        """The suggestion on screen was replaced in place (a pause refresh): same item."""
        item = self._live.get(doc_id)
        if item is not None and item.origin is origin and item.outcome is None:
            item.origin, item.text = new_origin, text

    def inserted(self, doc_id: str, chars: int) -> None:
        """The editor inserted `chars` characters of the item on screen (typing into it, or
        an accept's edit, whose command follows): an accept counts what was inserted, not
        what the suggestion may have grown to since the editor took it."""
        item = self._live.get(doc_id)
        if item is not None:
            item.inserted = chars

    def displayed(self, item_id: str, now: float) -> None:
        """The editor says the item went on screen now (`didShowCompletion`)."""
        item = self._items.get(item_id)
        if item is not None and item.outcome is None:
            item.shown_at = now

    # --- what the user did ------------------------------------------------------------------
    def accepted(self, item_id: str) -> bool:
        """A full accept; False for an id that is not known (too old, or another server's)."""
        self._client_reports_accepts()
        item = self._items.get(item_id)
        if item is None:
            return False
        live = self._live.get(item.doc_id)
        if not item.live and live is not None and live.origin is item.origin:
            item = live  # the editor still showed an item the user had typed into since
        if item.outcome != "accepted":
            whole = len(item.text) if item.inserted is None else min(len(item.text), item.inserted)
            self._finish(item, "accepted", max(item.accepted_chars, whole))
        return True

    def partially_accepted(self, item_id: str, chars: int) -> bool:
        """A word or a line of the item taken: `chars` characters of its text."""
        self._client_reports_accepts()
        item = self._items.get(item_id)
        if item is None:
            return False
        chars = max(0, min(chars, len(item.text)))
        if chars >= len(item.text):
            return self.accepted(item_id)
        if item.outcome is None or item.outcome == "partial":
            new = max(0, chars - item.accepted_chars)
            if item.outcome is None:
                self.counts.partial += 1
            item.outcome = "partial"
            item.accepted_chars = max(item.accepted_chars, chars)
            self.counts.accepted_chars += new
            self._tell(item, new)
        return True

    def dismissed(self, item_id: str, now: float) -> None:
        item = self._items.get(item_id)
        if item is not None:
            self._gone(item, now)

    def left(self, doc_id: str, now: float) -> None:
        """The user typed something the item on screen did not say (or moved away)."""
        item = self._live.pop(doc_id, None)
        if item is not None:
            self._gone(item, now)

    def closed(self, doc_id: str) -> None:
        self._live.pop(doc_id, None)

    # --- internals --------------------------------------------------------------------------
    def _gone(self, item: Item, now: float) -> None:
        """The item left the screen without being taken: refused if it was read."""
        if not item.live:
            return
        item.live = False
        if self._live.get(item.doc_id) is item:
            del self._live[item.doc_id]
        if item.outcome is None and (now - item.shown_at) * 1000 >= READ_MS:
            item.outcome = "refused"
            self.counts.refused += 1
            self._tell(item, 0)

    def _finish(self, item: Item, kind: OutcomeKind, chars: int) -> None:
        if item.outcome == "partial":
            self.counts.partial -= 1  # the partial accept became a whole one
        new = chars - item.accepted_chars
        if item.outcome == "refused":
            self.counts.refused -= 1  # an accept after all (a late signal)
        item.outcome = kind
        item.accepted_chars = chars
        item.live = False
        self.counts.accepted += 1
        self.counts.accepted_chars += max(0, new)
        self._tell(item, max(0, new))

    def _client_reports_accepts(self) -> None:
        """An accept signal came: refusals are refusals from now on, the held ones too."""
        if self.reports_accepts:
            return
        self.reports_accepts = True
        held, self._held = list(self._held), deque(maxlen=MAX_HELD_REFUSALS)
        for outcome in held:
            self._hand_on(outcome)

    def _tell(self, item: Item, chars: int) -> None:
        assert item.outcome is not None
        outcome = Outcome(
            item.outcome, item.place, chars, len(item.text), item.ttgt_ms, item.explicit
        )
        if outcome.kind == "refused" and not self.reports_accepts:
            self._held.append(outcome)  # a refusal, or an accept the client did not report
            return
        self._hand_on(outcome)

    def _hand_on(self, outcome: Outcome) -> None:
        for listener in self.listeners:
            listener(outcome)
