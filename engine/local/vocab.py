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
from collections.abc import Callable, Iterable

import numpy as np

# Bytes that go on a name (ASCII; engine/context/guide.py's names are identifiers).
_NAME_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_DOT = ord(".")


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
        # What may follow a name that ends (engine/context/guide.py): a piece that starts with
        # a byte no name has, or an end token; a dot apart (the guide says where it goes).
        ends = sorted(self.ends)
        self._name_ends = np.array(
            [*ends, *(i for p, i in entries if p[0] not in _NAME_BYTES and p[0] != _DOT)],
            dtype=np.int64,
        )
        self._not_dot = np.array([*ends, *(i for p, i in entries if p[0] != _DOT)], dtype=np.int64)
        self._dot = np.array([i for p, i in entries if p[0] == _DOT], dtype=np.int64)

    def candidates(self, text: bytes) -> np.ndarray:
        """Ids whose piece starts with `text`, or is a non-empty proper prefix of it."""
        lo = bisect_left(self._sorted, text)
        hi = bisect_left(self._sorted, text + b"\xff\xff\xff\xff")
        shorter = [self._exact[text[:k]] for k in range(1, len(text)) if text[:k] in self._exact]
        ids = self._ids[lo:hi]
        return np.concatenate([ids, np.array(shorter, dtype=np.int64)]) if shorter else ids

    def spelling(self, texts: Iterable[bytes]) -> np.ndarray:
        """Ids whose piece goes on spelling one of `texts` (a name's rest): a non-empty prefix
        of it, or all of it followed by a byte that cannot go on a name (`name(`)."""
        ids: set[int] = set()
        for text in texts:
            n = len(text)
            for i in self.candidates(text).tolist():  # those that start with it, or prefix it
                piece = self.pieces[i]
                if len(piece) <= n or piece[n] not in _NAME_BYTES:
                    ids.add(i)
        return np.fromiter(ids, dtype=np.int64, count=len(ids))

    def after_name(self, after_dot: Iterable[str] | None, bare: bool = False) -> np.ndarray:
        """Ids that may follow a name: a piece that ends it (`(`, ` `, a new line, an end
        token), or, with `bare` (the name may go on too), any piece that starts with no dot;
        and a dot only into one of `after_dot` (None: any)."""
        head = self._not_dot if bare else self._name_ends
        if after_dot is None:
            return np.concatenate([head, self._dot])
        return np.concatenate([head, self.spelling(b"." + name.encode() for name in after_dot)])
