"""The model's vocabulary as Python data: each token's bytes, the tokens that end generation,
and the pieces by prefix for token healing. Read once at load, so that the decode loop looks a
token up in a list instead of calling into llama.cpp for every token.

Token healing: when the cursor stands inside a word ("    r|"), the prompt's last token is a
fragment the model would rarely have seen split that way, and models then start a fresh word
("return") instead of finishing this one: "rreturn". Token healing removes that last token from
the prompt and makes the first generated tokens start with its text; the suggestion is what
follows that text.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable

import numpy as np


class VocabIndex:
    """`pieces[id]`: the bytes of a token (b"" for special ones); `ends`: the ids that end
    generation; the non-special pieces sorted, so prefix queries are two binary searches."""

    def __init__(
        self,
        n_vocab: int,
        piece: Callable[[int], bytes],
        is_end: Callable[[int], bool] = lambda _id: False,
    ) -> None:
        self.pieces: list[bytes] = [piece(i) for i in range(n_vocab)]
        self.ends: frozenset[int] = frozenset(i for i in range(n_vocab) if is_end(i))
        entries = sorted((p, i) for i, p in enumerate(self.pieces) if p)
        self._sorted = [p for p, _ in entries]
        self._ids = np.array([i for _, i in entries], dtype=np.int64)
        self._exact = {p: i for p, i in entries}

    def candidates(self, text: bytes) -> np.ndarray:
        """Ids whose piece starts with `text`, or is a non-empty proper prefix of it."""
        lo = bisect_left(self._sorted, text)
        hi = bisect_left(self._sorted, text + b"\xff\xff\xff\xff")
        shorter = [self._exact[text[:k]] for k in range(1, len(text)) if text[:k] in self._exact]
        ids = self._ids[lo:hi]
        return np.concatenate([ids, np.array(shorter, dtype=np.int64)]) if shorter else ids
