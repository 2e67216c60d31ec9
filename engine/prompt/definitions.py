"""The workspace's context in a prompt (engine/context/definitions.py: definitions and
snippets of similar code; engine/service/workspace.py chooses them): the
block's tokens at the top of the prefix, in every prompt a request builds (the keystroke's
plain prefix and its FIM prompt alike), so that what the KV cache holds for the block and the
prefix is the same for every keystroke at this place.

Where the block goes in each layout: `[bos] PRE <block> prefix SUF suffix MID` (PSM),
`[bos] SUF suffix PRE <block> prefix` (SPM), `[bos] <block> prefix` (the plain prefix and
prefix-only models): always right before the prefix's own tokens. The block is text of the
document's language (definitions as comments, snippets as code under a comment naming their
place), so it reads as the top of the file the model continues.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from ghostfim.engine.context.definitions import ContextStyle, DefinitionBlock
from ghostfim.engine.memory import (
    DEFINITION_TOKENS_BYTES,
    ByteLRU,
    CacheUsage,
    ints_bytes,
    str_bytes,
)
from ghostfim.engine.prompt.builder import PromptParts
from ghostfim.engine.tuning import (
    DEFINITIONS_AUTO_MAX_TOKENS,
    DEFINITIONS_AUTO_PREFILL_MS,
    DEFINITIONS_KEYSTROKE_PREFILL_MS,
)

Tokenize = Callable[[str], list[int]]


class CostModel(Protocol):
    def tokens_within(self, budget_ms: float) -> int: ...


class DefinitionTokens:
    """Turns a request's DefinitionBlock into tokens at the top of its prompts' prefix."""

    def __init__(self, tokenize: Tokenize, style: ContextStyle = "comment") -> None:
        self.tokenize = tokenize
        # The model family's layout (engine/prompt/fim.py): "off" puts no definitions in; the
        # others are comments here ("repo" measured worst on the models ghostfim fetches, and
        # only the remote servers lay it out: engine/remote/backends.py).
        self.style = style
        # Token counts of entries and tokens of whole blocks: the same few come back on every
        # keystroke at one place.
        self._counts: ByteLRU[str, int] = ByteLRU(DEFINITION_TOKENS_BYTES // 4, _count_bytes)
        self._blocks: ByteLRU[str, list[int]] = ByteLRU(
            DEFINITION_TOKENS_BYTES - DEFINITION_TOKENS_BYTES // 4, _block_bytes
        )
        self._auto_budgets: dict[bool, int] = {}
        self.last: DefinitionBlock | None = None  # the block last put in a prompt, fitted

    def auto_budget(self, cost: CostModel, keystroke: bool = False) -> int:
        """The "auto" budget, fixed at first use (a budget that moved with the cost model's
        refits would change the block, and with it every cached prompt). Keystroke prompts
        get what prefills in DEFINITIONS_KEYSTROKE_PREFILL_MS: their block's prefill is paid
        in a document's first prompt, whose suggestion a user reads before typing on."""
        if keystroke not in self._auto_budgets:
            ms = DEFINITIONS_KEYSTROKE_PREFILL_MS if keystroke else DEFINITIONS_AUTO_PREFILL_MS
            within = cost.tokens_within(ms)
            self._auto_budgets[keystroke] = min(DEFINITIONS_AUTO_MAX_TOKENS, within)
        return self._auto_budgets[keystroke]

    def count(self, text: str) -> int:
        n = self._counts.get(text)
        if n is None:
            n = self._counts[text] = len(self.tokenize(text))
        return n

    def tokens(self, block: DefinitionBlock, budget: int) -> tuple[list[int], DefinitionBlock]:
        """The block's tokens within `budget`, and the block as fitted (what went in)."""
        fitted = block.fit(budget, self.count)
        text = fitted.prompt_text()
        if not text:
            return [], fitted
        ids = self._blocks.get(text)
        if ids is None:
            ids = self._blocks[text] = self.tokenize(text)
        return list(ids), fitted

    def apply(
        self,
        parts: PromptParts,
        block: DefinitionBlock | None,
        cost: CostModel,
        room: int,
        keystroke: bool = False,
    ) -> PromptParts:
        """`parts` with the block before its prefix, in the FIM head and in the plain head;
        `room`: tokens the KV slot has left for it."""
        if not block or self.style == "off":
            return parts
        budget = self.auto_budget(cost, keystroke) if block.budget is None else block.budget
        ids, fitted = self.tokens(block, min(budget, room))
        self.last = fitted
        if not ids:
            return parts
        n_prefix = parts.prefix_tokens
        at = len(parts.head) - n_prefix - (1 if parts.tail else 0)  # PSM: the head ends with SUF
        head = [*parts.head[:at], *ids, *parts.head[at:]]
        plain = parts.plain_head
        if plain:
            p = len(plain) - n_prefix
            plain = (*plain[:p], *ids, *plain[p:])
        return replace(parts, head=head, plain_head=plain, definition_tokens=len(ids))

    def caches(self) -> tuple[CacheUsage, ...]:
        used = self._counts.nbytes + self._blocks.nbytes
        return (CacheUsage("definitionTokens", used, DEFINITION_TOKENS_BYTES),)


def _count_bytes(text: str, _n: int) -> int:
    return str_bytes(text) + 8


def _block_bytes(text: str, ids: list[int]) -> int:
    return str_bytes(text) + ints_bytes(ids)
