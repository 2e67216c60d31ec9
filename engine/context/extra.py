"""Extra context in a prompt: the ring's chunks (engine/context/ring.py) as tokens before a
full prompt's FIM prefix, in the model's repository-level layout (see ring.py's docstring)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from ghostfim.engine.context.ring import (
    IN_WINDOW,
    ContextChunk,
    ExtraContext,
    containment,
    key_lines,
)
from ghostfim.engine.memory import CONTEXT_TOKENS_BYTES, ByteLRU, CacheUsage, ints_bytes, str_bytes
from ghostfim.engine.prompt.builder import PromptParts
from ghostfim.engine.prompt.fim import FimTemplate
from ghostfim.engine.tuning import AUTO_MAX_TOKENS, AUTO_PREFILL_MS

Tokenize = Callable[[str], list[int]]


class CostModel(Protocol):
    def tokens_within(self, budget_ms: float) -> int: ...


class ExtraContextBuilder:
    """Turns a request's ExtraContext into tokens before a full prompt's FIM prefix."""

    def __init__(self, tokenize: Tokenize, template: FimTemplate) -> None:
        self.tokenize = tokenize
        self.template = template
        self._tokens: ByteLRU[tuple[str, str], list[int]] = ByteLRU(
            CONTEXT_TOKENS_BYTES, _chunk_bytes
        )
        self._auto_budget: int | None = None

    @property
    def supported(self) -> bool:
        """The model has a file separator (repository-level FIM); others get no extra context."""
        t = self.template
        return t.layout == "psm" and t.file_sep >= 0

    def auto_budget(self, cost: CostModel) -> int:
        """The "auto" budget, fixed at first use (the prefill cost is calibrated at load): a
        budget that moved with every refit would change which chunks fit, and with them the
        cached prompt."""
        if self._auto_budget is None:
            self._auto_budget = min(AUTO_MAX_TOKENS, cost.tokens_within(AUTO_PREFILL_MS))
        return self._auto_budget

    def caches(self) -> tuple[CacheUsage, ...]:
        return (CacheUsage("contextTokens", self._tokens.nbytes, self._tokens.limit),)

    def chunk_tokens(self, chunk: ContextChunk) -> list[int]:
        """`<|file_sep|>path\\ntext` (tokenized once per chunk)."""
        key = (chunk.filename, chunk.text)
        tokens = self._tokens.get(key)
        if tokens is None:
            tokens = [self.template.file_sep, *self.tokenize(f"{chunk.filename}\n{chunk.text}")]
            self._tokens[key] = tokens
        return tokens

    def head(self, extra: ExtraContext, window: str, budget: int) -> tuple[list[int], int]:
        """The extra-context tokens (and the number of chunks in them) for a prompt whose own
        text around the cursor is `window`; ([], 0) when nothing fits or nothing is left."""
        if not self.supported or budget <= 0 or not extra.chunks:
            return [], 0
        t = self.template
        seen = key_lines(window)
        fresh = [c for c in extra.chunks if containment(c.lines, seen) < IN_WINDOW]
        opener: list[int] = []
        if t.repo >= 0:
            opener = [t.repo, *self.tokenize(f"{extra.project or 'project'}\n")]
        closer = [t.file_sep, *self.tokenize(f"{extra.filename}\n")]
        left = budget - len(opener) - len(closer)
        chosen: list[ContextChunk] = []
        for chunk in reversed(fresh):  # the newest first, each if it still fits
            n = len(self.chunk_tokens(chunk))
            if n <= left:
                chosen.append(chunk)
                left -= n
        if not chosen:
            return [], 0
        tokens = list(opener)
        for chunk in reversed(chosen):  # ring order: the oldest first, the stable part first
            tokens.extend(self.chunk_tokens(chunk))
        tokens.extend(closer)
        return tokens, len(chosen)

    def apply(
        self,
        parts: PromptParts,
        extra: ExtraContext | None,
        cost: CostModel,
        room: int,
    ) -> PromptParts:
        """`parts` with the extra context before its FIM prefix (after BOS), its size in
        `extra_tokens`. `room`: tokens the KV slot has left for it."""
        if extra is None or not self.supported:
            return parts
        budget = self.auto_budget(cost) if extra.budget is None else extra.budget
        window = parts.prefix_text + "".join(parts.suffix_units)
        tokens, _ = self.head(extra, window, min(budget, room))
        if not tokens:
            return parts
        bos = self.template.bos
        k = 1 if bos >= 0 and parts.head[:1] == [bos] else 0
        head = [*parts.head[:k], *tokens, *parts.head[k:]]
        return replace(parts, head=head, extra_tokens=len(tokens))


def _chunk_bytes(key: tuple[str, str], tokens: list[int]) -> int:
    """A chunk's name and text (counted here too: the ring may drop the chunk before its
    tokens leave this cache) and its tokens."""
    return str_bytes(key[0]) + str_bytes(key[1]) + ints_bytes(tokens)
