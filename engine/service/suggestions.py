"""Suggestions we already have: reuse before compute.

Every suggestion, finished or still being generated, is kept in an LRU keyed by an xxhash of
the text around the cursor it was made for. When the user types characters that match the start
of a suggestion, the new cursor state is answered from it at once, with no model work: the key
of each earlier state (the new prefix minus its last i characters) is looked up, and the
characters in between must equal the suggestion's start.

A suggestion holds all the text the model generated; what of it is shown is decided where the
user stands (`Suggestion.shown`): from there, the confidence rule (engine/text/confidence.py)
keeps the tokens the model was sure of and ends before the first it was not. A user who types
past that token meets the sure text after it at once, from the same suggestion: the cut costs
neither a new request nor the words after it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import xxhash

from ghostfim.engine.backend import Mark
from ghostfim.engine.memory import SUGGESTIONS_BYTES, ByteLRU, CacheUsage, str_bytes
from ghostfim.engine.text.confidence import Confidence, ConfidenceCut
from ghostfim.engine.tuning import MAX_TYPED_THROUGH, PREFIX_KEY_CHARS, SUFFIX_KEY_CHARS


def context_key(prefix_tail: str, suffix_head: str) -> int:
    key = prefix_tail[-PREFIX_KEY_CHARS:] + "\x00" + suffix_head[:SUFFIX_KEY_CHARS]
    return xxhash.xxh3_64_intdigest(key.encode("utf-8", "surrogatepass"))


def visible(text: str) -> str:
    """What of a partial suggestion is worth showing: no trailing whitespace."""
    return text.rstrip()


def shown_part(text: str, marks: tuple[Mark, ...], rule: Confidence | None, typed: str = "") -> str:
    """What to show of `text` once `typed` (a start of it) has been typed: the rule judges
    its tokens from there, one by one, as it did while they were generated, and the text
    ends before the first that would not be worth reading. The tokens that were on screen
    from the suggestion's own start count as sure: the user typing into ghost text they
    read sees the rest of it stay. Without a rule, or without the model's probabilities (a
    remote server), all of it."""
    start = len(typed)
    if rule is None or not marks:
        return visible(text[start:])
    seen = _judged_end(text, marks, rule, 0) if start else 0
    return visible(text[start : _judged_end(text, marks, rule, start, seen)])


def _judged_end(
    text: str, marks: tuple[Mark, ...], rule: Confidence, start: int, seen: int = 0
) -> int:
    """Where what is shown from `start` ends (`start`: nothing); tokens ending by `seen`
    count as sure."""
    cut = ConfidenceCut(rule)
    shown, at = "", start
    for end, prob in marks:
        if end <= start:
            continue
        verdict = cut.judge(shown, text[at:end], 1.0 if end <= seen else prob)
        if verdict == "drop":
            return start
        if verdict == "cut":
            break
        shown, at = shown + text[at:end], end
    return at if cut.final(shown) else start


def inside_token(marks: tuple[Mark, ...], typed: str) -> bool:
    """`typed` ends within a token of the suggestion, not on a boundary between two."""
    n = len(typed)
    return bool(marks) and n > 0 and all(end != n for end, _ in marks) and n < marks[-1][0]


@dataclass
class Suggestion:
    """A suggestion for one cursor state; `text` grows while the model generates it, and
    `marks` with it (where each token ends, and how sure the model was of it)."""

    text: str = ""
    done: bool = False
    cancelled: bool = False
    marks: tuple[Mark, ...] = ()
    rule: Confidence | None = None  # what is worth showing of it (None: all)
    # Who waits on it (the request it answers, typed-through requests); the service that
    # grows it tells them (engine/service/keystroke.py `grow`).
    listeners: list[Callable[[Suggestion], None]] = field(default_factory=list)

    def shown(self, typed: str = "") -> str:
        """What is shown once `typed`, a start of the text, has been typed into it."""
        return shown_part(self.text, self.marks, self.rule, typed)

    def hides_from(self, typed: str) -> bool:
        """Nothing of it is worth showing from `typed` on, where the user stopped inside one
        of its tokens: the model asked afresh there (with the typed part of the token healed
        into the prompt) may well write something else, so the cache does not answer."""
        return self.done and not self.shown(typed) and inside_token(self.marks, typed)

    def update(
        self,
        text: str,
        marks: tuple[Mark, ...] | None = None,
        *,
        done: bool = False,
        cancelled: bool = False,
    ) -> None:
        self.text = text
        if marks is not None:
            self.marks = marks
        self.cancelled = self.cancelled or cancelled
        self.done = self.done or done or cancelled  # a cancelled suggestion will not grow

    def could_continue(self, typed: str) -> bool:
        """Typing `typed` into this suggestion leaves something to show, now or once it grows."""
        if self.text.startswith(typed) and len(self.text) > len(typed):
            return True
        # Still generating: worth waiting for only if it already agrees with what was typed
        # (an empty suggestion still in its prefill says nothing about the next character).
        return (
            not self.done
            and bool(self.text)
            and (self.text.startswith(typed) or typed.startswith(self.text))
        )


@dataclass
class Hit:
    suggestion: Suggestion
    typed: str  # characters typed since the suggestion's state


class SuggestionCache:
    """Suggestions by the state they were made for, bounded by their bytes (engine/memory.py):
    a suggestion is as long as the model wrote it, up to `maxTokens`."""

    def __init__(self, limit: int = SUGGESTIONS_BYTES) -> None:
        self._entries: ByteLRU[int, Suggestion] = ByteLRU(limit, _suggestion_bytes)

    def put(self, prefix: str, suffix: str, suggestion: Suggestion) -> None:
        """Keep a suggestion for the state with this text before and after the cursor."""
        key = context_key(prefix, suffix)
        self._entries[key] = suggestion
        if suggestion.done:
            return

        def measure_when_done(grown: Suggestion) -> None:
            # It was measured empty: its size is known once the model stops writing it.
            if grown.done:
                grown.listeners.remove(measure_when_done)
                if self._entries.get(key) is grown:
                    self._entries[key] = grown

        suggestion.listeners.append(measure_when_done)

    def lookup(self, prefix: str, suffix: str) -> Hit | None:
        """The suggestion this state types through, if any (most recent state first).

        An earlier state's key is the last PREFIX_KEY_CHARS of its prefix, so the text looked
        at is that much plus the characters that may have been typed since."""
        prefix_tail = prefix[-(PREFIX_KEY_CHARS + MAX_TYPED_THROUGH) :]
        suffix_head = suffix[:SUFFIX_KEY_CHARS]
        limit = min(MAX_TYPED_THROUGH, len(prefix_tail))
        for i in range(limit + 1):
            base = prefix_tail[: len(prefix_tail) - i]
            found = self._entries.get(context_key(base, suffix_head))
            if found is None:
                continue
            typed = prefix_tail[len(prefix_tail) - i :]
            if found.could_continue(typed):
                return Hit(found, typed)
        return None

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def usage(self) -> CacheUsage:
        return CacheUsage("suggestions", self._entries.nbytes, self._entries.limit)


# A Suggestion and its confidence rule (objects of a few fields each), and one mark: a tuple of
# an int and a float.
SUGGESTION_OBJECT_BYTES = 400
MARK_BYTES = 112


def _suggestion_bytes(_key: int, suggestion: Suggestion) -> int:
    return (
        SUGGESTION_OBJECT_BYTES
        + str_bytes(suggestion.text)
        + sys.getsizeof(suggestion.marks)
        + MARK_BYTES * len(suggestion.marks)
    )
