"""Prompts from cursor context, within token budgets, cut at line boundaries.

Why the layout is what it is (measured on 100 held-out infills; README, "Why a keystroke is
cheap"): the text typed on the current line goes at the end of the prefix, before the whole
suffix. That is right for quality (the suffix is worth more than ten points of exact match)
but it puts the suffix *after* the edit point, so every keystroke the KV cache cannot serve
re-decodes the suffix. Shifting the
suffix's cached cells instead does not work in this llama.cpp (stale cells make the model ignore
new characters). So the suffix is a budget: `PromptParts` lists the suffix in line units with
their token counts, and the session keeps as many units per keystroke as its measured prefill
speed allows (all of them on a GPU), then refreshes with the whole suffix when the user pauses.

The prefix start is sticky per document (hysteresis) so that typing does not slide the window
one line at a time: a moved start line invalidates the whole cached prefix (a cold prompt).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

import xxhash

from ghostfim.engine.config import DEFAULT_BUDGETS, Budgets, BudgetsInEffect, Clamp
from ghostfim.engine.memory import (
    INT_BYTES,
    LINE_TOKENS_BYTES,
    POINTER_BYTES,
    PREFIX_ANCHORS_BYTES,
    SUFFIX_TOKENS_BYTES,
    ByteLRU,
    CacheUsage,
    ints_bytes,
    str_bytes,
)
from ghostfim.engine.prompt.fim import FimTemplate
from ghostfim.engine.tuning import (
    MIN_PREFIX_TOKENS,
    PREFIX_REANCHOR,
    PREFIX_SHARE_OF_ROOM,
    PREFIX_SLACK,
    UNSTABLE_PREFIX_TOKENS,
)

Tokenize = Callable[[str], list[int]]

# Characters looked at per budget token (generous: code averages 3-4 characters a token).
CHARS_PER_TOKEN_SCAN = 12


def fit_budgets(budgets: Budgets, prompt_room: int) -> BudgetsInEffect:
    """The budgets a prompt of at most `prompt_room` tokens can honour: the one place they
    are clamped, and every clamp said (the caller reports it)."""
    prefix_cap = int(prompt_room * PREFIX_SHARE_OF_ROOM / PREFIX_SLACK)
    prefix = max(MIN_PREFIX_TOKENS, min(budgets.prefix_tokens, prefix_cap))
    suffix = max(0, min(budgets.suffix_tokens, prompt_room - int(prefix * PREFIX_SLACK)))
    clamps: list[Clamp] = []
    if prefix != budgets.prefix_tokens:
        clamps.append(
            Clamp(
                "prefix_tokens",
                budgets.prefix_tokens,
                prefix,
                f"a KV slot holds {prompt_room} prompt tokens; the prefix window (with "
                f"{PREFIX_SLACK:g}x slack for typing) may take {PREFIX_SHARE_OF_ROOM:.0%} of them",
            )
        )
    if suffix != budgets.suffix_tokens:
        clamps.append(
            Clamp(
                "suffix_tokens",
                budgets.suffix_tokens,
                suffix,
                f"a KV slot holds {prompt_room} prompt tokens, and the prefix window takes "
                f"{int(prefix * PREFIX_SLACK)}",
            )
        )
    effective = Budgets(prefix, suffix, budgets.keystroke_prefill_ms, budgets.kv_snapshot_mb)
    return BudgetsInEffect(effective, tuple(clamps))


@dataclass(frozen=True)
class Prompt:
    tokens: list[int]
    prefix_tokens: int
    suffix_tokens: int
    suffix_units_used: int
    suffix_units_total: int
    # Tokens the next keystroke at this place will share (everything before the cursor but
    # its last tokens): worth finishing even when this request is cancelled.
    stable_tokens: int = 0
    heal: bytes = b""  # the generated text must start with this (token healing)
    narrow: bool = False  # a keystroke window narrower than the session's wide one
    extra_tokens: int = 0  # tokens of context from other files before the prefix (full prompts)
    definition_tokens: int = 0  # tokens of the workspace's definitions at the prefix's top


@dataclass(frozen=True)
class PromptParts:
    """A prompt's pieces, tokenized: what the keystroke plan (engine/local/plan.py) chooses
    between without calling the tokenizer again. `prompt()` is the FIM prompt with the whole
    suffix, `plain()` the prefix alone."""

    head: list[int]  # PSM: [bos] PRE prefix SUF   | SPM: [bos] SUF suffix PRE prefix | prefix-only
    suffix_units: list[str]  # PSM only: rest of the cursor line, then whole lines
    suffix_unit_tokens: list[int]  # token count of each unit (counted alone: an estimate)
    tail: list[int]  # PSM: [MID]
    prefix_text: str
    prefix_start_line: int
    prefix_tokens: int
    heal: bytes = b""  # text of the prefix's last token, taken out for token healing
    plain_head: tuple[int, ...] = ()  # [bos] prefix: the same prefix with no FIM tokens
    suffix_ids: tuple[int, ...] = ()  # PSM: all the suffix units, tokenized together
    extra_tokens: int = 0  # context from other files at the head's start, after BOS
    definition_tokens: int = 0  # the workspace's definitions, right before the prefix

    def prompt(self) -> Prompt:
        """The prompt with the whole suffix."""
        tokens = [*self.head, *self.suffix_ids, *self.tail]
        # head ends with the prefix (SPM, prefix-only) or with the prefix and one SUF token (PSM)
        head_prefix_end = len(self.head) - (1 if self.tail else 0)
        stable = max(0, head_prefix_end - UNSTABLE_PREFIX_TOKENS)
        n_units = len(self.suffix_units)
        return Prompt(
            tokens,
            self.prefix_tokens,
            len(self.suffix_ids),
            n_units,
            n_units,
            stable,
            self.heal,
            extra_tokens=self.extra_tokens,
            definition_tokens=self.definition_tokens,
        )

    def plain(self) -> Prompt:
        """The prefix alone, as plain code to continue: no FIM tokens after the edit point.

        A keystroke then decodes only the tokens it changed (one or two) instead of those plus
        the FIM separators and whatever suffix follows. Measured on 100 held-out infills it is
        as good as a FIM prompt without suffix (first-line exact match 0.38 vs 0.37)."""
        tokens = list(self.plain_head)
        stable = max(0, len(tokens) - UNSTABLE_PREFIX_TOKENS)
        return Prompt(
            tokens,
            self.prefix_tokens,
            0,
            0,
            len(self.suffix_units),
            stable,
            self.heal,
            definition_tokens=self.definition_tokens,
        )


@dataclass(slots=True)  # one object: its size is what sys.getsizeof says
class _Anchor:
    line: int
    text_hash: int


class PromptBuilder:
    """Builds FIM prompts for one model (its tokenizer and template)."""

    def __init__(
        self,
        tokenize: Tokenize,
        template: FimTemplate,
        *,
        piece: Callable[[int], bytes] | None = None,
        prefix_tokens: int = DEFAULT_BUDGETS.prefix_tokens,
        suffix_tokens: int = DEFAULT_BUDGETS.suffix_tokens,
    ) -> None:
        self.tokenize = tokenize
        self.template = template
        self.piece = piece
        self.prefix_budget = prefix_tokens
        self.suffix_budget = suffix_tokens
        # Bounded in bytes (engine/memory.py): the input decides how long a line is.
        self._line_tokens: ByteLRU[str, int] = ByteLRU(LINE_TOKENS_BYTES, _line_bytes)
        self._anchors: ByteLRU[tuple[int, str], _Anchor] = ByteLRU(
            PREFIX_ANCHORS_BYTES, _anchor_bytes
        )
        self._suffix_ids: ByteLRU[str, tuple[int, ...]] = ByteLRU(
            SUFFIX_TOKENS_BYTES, _suffix_bytes
        )

    # --- token counting -----------------------------------------------------------------
    def count(self, text: str) -> int:
        """Tokens in one line (cached: the same lines are counted on every keystroke)."""
        n = self._line_tokens.get(text)
        if n is None:
            n = len(self.tokenize(text)) if text else 0
            self._line_tokens[text] = n
        return n

    # --- prefix ---------------------------------------------------------------------------
    def choose_prefix(
        self, doc_id: str, prefix: str, cursor_line: int, budget: int | None = None
    ) -> tuple[str, int]:
        """The prefix text to use and the document line it starts at."""
        budget = budget or self.prefix_budget
        key = (budget, doc_id)  # each budget keeps its own sticky window
        limit = int(budget * PREFIX_SLACK)
        window = prefix[-limit * CHARS_PER_TOKEN_SCAN :]
        lines = window.split("\n")
        # The window's first line is cut unless the window reaches the document's start.
        first_whole = 0 if len(window) == len(prefix) else 1
        n = len(lines)
        first_line_no = cursor_line - (n - 1)
        counts = [self.count(line + "\n") for line in lines]
        cumulative = [0] * (n + 1)  # cumulative[i] = tokens of lines[i:]
        for i in range(n - 1, -1, -1):
            cumulative[i] = cumulative[i + 1] + counts[i]

        def earliest_start(budget: int) -> int:
            for i in range(first_whole, n):
                if cumulative[i] <= budget:
                    # At least one whole line before the cursor line, even over a small budget:
                    # the text typed on the line alone is no context.
                    return min(i, max(first_whole, n - 2))
            return n - 1

        anchor = self._anchors.get(key)
        start: int | None = None
        if anchor is not None:
            i = anchor.line - first_line_no
            if i < first_whole or (i < n and cumulative[i] > limit):
                # Typing has outgrown the window: move the start far enough to last a while.
                start = earliest_start(int(budget * PREFIX_REANCHOR))
            elif i < n and xxhash.xxh3_64_intdigest(lines[i].encode()) == anchor.text_hash:
                start = i
        if start is None:
            start = earliest_start(budget)
        self._anchors[key] = _Anchor(
            first_line_no + start, xxhash.xxh3_64_intdigest(lines[start].encode())
        )
        text = "\n".join(lines[start:])
        if start == n - 1 and cumulative[start] > limit:
            # One enormous line (minified code): keep its tail only.
            text = text[-budget * 3 :]
        return text, first_line_no + start

    # --- suffix ---------------------------------------------------------------------------
    def suffix_units(self, suffix: str) -> tuple[list[str], list[int]]:
        """Rest of the cursor line, then whole lines, while they fit the suffix budget."""
        window = suffix[: self.suffix_budget * CHARS_PER_TOKEN_SCAN]
        units: list[str] = []
        counts: list[int] = []
        total = 0
        start = 0
        while start < len(window):
            end = window.find("\n", start)
            end = len(window) if end < 0 else end + 1
            unit = window[start:end]
            n = self.count(unit)
            if total + n > self.suffix_budget:
                break
            units.append(unit)
            counts.append(n)
            total += n
            start = end
        return units, counts

    # --- assembly -------------------------------------------------------------------------
    def parts(
        self,
        doc_id: str,
        prefix: str,
        suffix: str,
        cursor_line: int,
        prefix_budget: int | None = None,
    ) -> PromptParts:
        t = self.template
        prefix_text, start_line = self.choose_prefix(doc_id, prefix, cursor_line, prefix_budget)
        prefix_ids = self.tokenize(prefix_text)
        heal = b""
        if self.piece is not None and _ends_inside_word(prefix_text):
            # Take out every token of the word fragment before the cursor (" ret" + "u"), so
            # the model can write the word in its own tokens (" return") instead of being
            # stuck with a split it never saw in training.
            while prefix_ids and len(heal) < 48:
                piece = self.piece(prefix_ids[-1])
                if not _word_fragment(piece + heal):
                    break
                heal = piece + heal
                prefix_ids.pop()
        elif self.piece is not None and prefix_ids:
            # "x = |", "os.|": BPE joins a space or a dot to the word after it (" logging",
            # ".path"), so a prompt that ends with a bare space or dot token makes the model
            # write another ("=  logging", "os. path"). Take that token out too.
            piece = self.piece(prefix_ids[-1])
            if _joins_what_follows(piece, prefix_text):
                heal = piece
                prefix_ids.pop()
        bos = [t.bos] if t.bos >= 0 else []
        n_prefix = len(prefix_ids)
        if t.layout == "prefix":
            head = [*bos, *prefix_ids]
            return PromptParts(
                head, [], [], [], prefix_text, start_line, n_prefix, heal, tuple(head)
            )
        units, counts = self.suffix_units(suffix)
        if t.layout == "spm":
            # The suffix comes first, so it is cached across keystrokes: always use all of it.
            suffix_ids = self.tokenize("".join(units))
            head = [*bos, t.suf, *suffix_ids, t.pre, *prefix_ids]
            return PromptParts(head, [], [], [], prefix_text, start_line, n_prefix, heal)
        head = [*bos, t.pre, *prefix_ids, t.suf]
        return PromptParts(
            head,
            units,
            counts,
            [t.mid],
            prefix_text,
            start_line,
            n_prefix,
            heal,
            (*bos, *prefix_ids),
            self.suffix_ids("".join(units)),
        )

    def forget(self, doc_id: str) -> None:
        """A closed document's sticky windows go (its lines' counts are not its own: other
        documents share lines, and the LRU lets them age out)."""
        for key in [k for k in self._anchors if k[1] == doc_id]:
            self._anchors.pop(key)

    def caches(self) -> tuple[CacheUsage, ...]:
        return (
            CacheUsage("lineTokens", self._line_tokens.nbytes, self._line_tokens.limit),
            CacheUsage("suffixTokens", self._suffix_ids.nbytes, self._suffix_ids.limit),
            CacheUsage("prefixAnchors", self._anchors.nbytes, self._anchors.limit),
        )

    def suffix_ids(self, suffix: str) -> tuple[int, ...]:
        """The suffix's tokens (cached: the prompts of one keystroke, and the next keystrokes
        on the same line, share the suffix)."""
        ids = self._suffix_ids.get(suffix)
        if ids is None:
            ids = self._suffix_ids[suffix] = tuple(self.tokenize(suffix)) if suffix else ()
        return ids


def _line_bytes(line: str, _count: int) -> int:
    return str_bytes(line) + POINTER_BYTES  # the count is a small int CPython shares (< 256)


def _suffix_bytes(suffix: str, ids: tuple[int, ...]) -> int:
    return str_bytes(suffix) + ints_bytes(ids)


def _anchor_bytes(key: tuple[int, str], anchor: _Anchor) -> int:
    # the key's tuple, its document id and budget, the anchor and its two ints
    return sys.getsizeof(key) + str_bytes(key[1]) + sys.getsizeof(anchor) + 3 * INT_BYTES


def _word_fragment(data: bytes) -> bool:
    """Letters, digits and underscores, optionally after one leading space."""
    text = data.decode("utf-8", errors="replace")
    body = text[1:] if text.startswith(" ") else text
    return bool(body) and all(c.isalnum() or c == "_" for c in body)


def _joins_what_follows(piece: bytes, text: str) -> bool:
    """A short token of punctuation or spaces at the end of the text (not a line break): BPE
    would have joined it to what the user types next. Indentation too: "    " then " def" is
    how "    def" is split, so a prompt ending in four spaces gets a fifth."""
    if not piece or len(piece) > 16 or b"\n" in piece:
        return False
    return not any(c.isalnum() or c == "_" for c in piece.decode("utf-8", errors="replace"))


def _ends_inside_word(text: str) -> bool:
    """The cursor follows a letter, digit or underscore: the last token may be a fragment."""
    return bool(text) and (text[-1].isalnum() or text[-1] == "_")
