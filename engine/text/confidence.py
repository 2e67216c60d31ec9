"""Where the model stops being sure: the rule that decides how much of a suggestion to show.

The model's probability of each token it picks is nearly free in a greedy loop (the logits are
there already). The rule weighs what a suggestion is worth to a user who reads it: if it is
right, they take it with one key and save its characters less that key; if it is wrong, they
have read it for nothing, which costs them `refusal_cost` keystrokes' worth. The chance that
the text so far is right is the product of its tokens' probabilities, each raised to
`sharpness` (the model's own probabilities, calibrated against what users actually typed).
So the value of showing the first k tokens is

    V(k) = P(k) * (chars(k) - 1) - refusal_cost * (1 - P(k))

What is shown grows while its value does; at the first token that would lower it, it ends
there, on that token boundary. The rest is still generated (until the model's own chance of
the whole text falls below the filter's give-up point, engine/service/filter.py) and kept: the
rule is applied again from wherever the user has typed to (engine/service/suggestions.py), so
a user who types past the unsure token sees the sure text after it at once, with no new
request. While no prefix is worth showing (V <= 0) nothing is shown. The first word has a
floor of its own: when the model gives the whole first word less than `first_word_min_prob`,
nothing of it is shown from there (a wrong first word is a suggestion that even a user who
takes single words refuses). With
`drop_unsure_start` off (an explicit request: the user asked) it is never dropped: it keeps at
least its first word.

A word is what an editor's accept-word key takes: leading whitespace, then a run of word
characters or a run of other non-space characters (`sqrt`, `(`, `.append`, `))`). The two
numbers come from calibration on the accepting-user benchmark (engine/service/filter.py).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

_WORD = re.compile(r"\s*(?:\w+|[^\w\s]+)")


@dataclass(frozen=True)
class Confidence:
    refusal_cost: float  # keystrokes' worth of reading a wrong suggestion
    sharpness: float  # the model's probability of a token, to this power: the chance it is right
    first_word_min_prob: float = 0.0  # below this for the whole first word: not shown
    drop_unsure_start: bool = True  # not worth showing at all: nothing (automatic requests)
    # At the end of a line that has code, a suggestion starting with a line break is the next
    # line, offered before the user decided the line is done: dropped (after Enter the new
    # line gets its own request). Measured: users took none of them (docs/history.md).
    drop_line_break_start: bool = False


Verdict = Literal["keep", "cut", "drop"]


def first_word_end(text: str) -> int | None:
    """Where the first word of `text` ends, if a character after it shows it is complete."""
    m = _WORD.match(text)
    if m is None or m.end() >= len(text):
        return None  # no word yet, or it may still go on
    return m.end()


class ConfidenceCut:
    """The rule applied to one suggestion as its tokens come, one `judge` each."""

    def __init__(self, rule: Confidence) -> None:
        self.rule = rule
        self.right = 1.0  # the chance the text so far is right
        # The value of the best prefix so far: showing nothing is worth 0 to an automatic
        # request; an explicit one shows something whatever it is worth.
        self.value = 0.0 if rule.drop_unsure_start else -math.inf
        self.worth_showing = not rule.drop_unsure_start
        self.first_word = 1.0  # the model's probability of the first word (while it grows)
        self.first_word_done = False

    def judge(self, text: str, piece: str, prob: float) -> Verdict:
        """Whether the next token (`piece`, picked with probability `prob`) joins `text`:
        keep it; cut before it (the suggestion is `text`); or drop the suggestion."""
        rule = self.rule
        if rule.drop_line_break_start and not text.strip() and piece.lstrip(" \t").startswith("\n"):
            return "drop"
        starts_word = self._first_word_whole(text, piece)
        if not self.first_word_done:
            self.first_word_done = starts_word
            if not starts_word:
                self.first_word *= prob
                if self.first_word < rule.first_word_min_prob and rule.drop_unsure_start:
                    return "drop"
        right = self.right * prob**rule.sharpness
        value = right * max(0, len(text) + len(piece) - 1) - rule.refusal_cost * (1 - right)
        if self.worth_showing and value < self.value and (rule.drop_unsure_start or starts_word):
            return "cut"  # an explicit request keeps its first word whole
        self.right = right
        if value > self.value:
            self.value = value
            self.worth_showing = True
        return "keep"

    @staticmethod
    def _first_word_whole(text: str, piece: str) -> bool:
        """`text` holds the whole first word (the piece after it starts something else)."""
        end = first_word_end(text + piece)
        return end is not None and end <= len(text)

    def final(self, text: str) -> str:
        """The suggestion once generation ended: nothing when no prefix was worth showing."""
        return text if self.worth_showing else ""
