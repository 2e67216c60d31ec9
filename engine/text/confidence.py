"""Where the model stops being sure: the rule that cuts a suggestion while it is generated.

The model's probability of each token it picks is nearly free in a greedy loop (the logits are
there already). A suggestion is kept up to the first token the model was less sure of than
`min_prob`, ending on that token boundary; the rest is never generated, which is model time
saved as well as text the user does not have to read. When even the first word is unsure the
suggestion is dropped whole (`drop_unsure_start`), except for an explicit request, which keeps
its first word and is cut after it.

A word is what an editor's accept-word key takes: leading whitespace, then a run of word
characters or a run of other non-space characters (`sqrt`, `(`, `.append`, `))`). The
thresholds come from calibration on the accepting-user benchmark (engine/service/filter.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

_WORD = re.compile(r"\s*(?:\w+|[^\w\s]+)")


@dataclass(frozen=True)
class Confidence:
    min_prob: float  # keep tokens while the model's probability of each is at least this
    drop_unsure_start: bool = True  # an unsure first word drops the suggestion (automatic)


Verdict = Literal["keep", "cut", "drop"]


def first_word_end(text: str) -> int | None:
    """Where the first word of `text` ends, if a character after it shows it is complete."""
    m = _WORD.match(text)
    if m is None or m.end() >= len(text):
        return None  # no word yet, or it may still go on
    return m.end()


def judge(text: str, piece: str, prob: float, rule: Confidence) -> Verdict:
    """What to do with the next token (`piece`, picked with `prob`) after `text`:
    keep it; cut before it (the first word is whole: the suggestion is `text`); or drop the
    suggestion (the first word is not whole yet and the model is unsure of it)."""
    if prob >= rule.min_prob:
        return "keep"
    end = first_word_end(text + piece)
    if end is not None and end <= len(text):
        return "cut"
    return "drop" if rule.drop_unsure_start else "keep"
