"""The accepting user of the replay benchmark: what a user who reads the ghost text takes of it.

The user reads the ghost text once it has been on screen for a reaction time before their next
keystroke (bench/user_replay.py keeps the time) and takes it only when it is exactly what they
were about to type, which the trace knows (each keystroke state's `rest_of_line`):

- `tab`: the whole suggestion if all of it is a start of what they will type (one key, Tab);
  else its first line if that is right (one key, our clients' accept-line, Shift+Tab). In the
  traces the lines below the cursor already exist, so a suggestion with more lines is never
  right as a whole: only its first line can be taken.
- `words`: as `tab`, and otherwise the longest run of whole words at the start of the
  suggestion that is right, one key per word (VS Code's accept-next-word, Ctrl+Right).
- `none`: never reads (the plain typist of the latency benchmark).

A word is what accept-next-word takes at once: leading spaces or tabs, then the next run of
word characters (letters, digits, `_`) or the next run of other non-space characters. (VS Code
asks the language's word pattern; this is its default for code, minus number literals like
`3.14`, which it takes as one word.)

Everything here is pure: decisions from text, and the arithmetic of the figures.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

USERS = ("none", "tab", "words")
DecisionKind = Literal["full", "line", "words", "refuse"]

# Spaces then a word or a run of punctuation; else a run of spaces alone; else one line break.
_WORD_PIECE = re.compile(r"[ \t]*(?:\w+|[^\w\s]+)|[ \t]+|\s")


@dataclass(frozen=True)
class Decision:
    """What the user does with the suggestion they read: the text each accept key inserts."""

    kind: DecisionKind
    pieces: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    @property
    def chars(self) -> int:
        return len(self.text)

    @property
    def keys(self) -> int:
        return len(self.pieces)

    @property
    def accepted(self) -> bool:
        return self.kind != "refuse"

    @property
    def saved(self) -> int:
        return keystrokes_saved(self.chars, self.keys)


REFUSE = Decision("refuse")


def keystrokes_saved(chars: int, keys: int) -> int:
    """Characters the user did not type, less the keys that accepted them."""
    return chars - keys


def word_pieces(text: str) -> list[str]:
    """`text` cut where accept-next-word stops, in order; joined they are `text` again."""
    return _WORD_PIECE.findall(text)


def is_right(text: str, rest_of_line: str) -> bool:
    """Non-empty and exactly the start of what the user will type."""
    return bool(text) and rest_of_line.startswith(text)


def right_words(suggestion: str, rest_of_line: str) -> tuple[str, ...]:
    """The longest run of whole words at the start of the suggestion that is right."""
    taken: list[str] = []
    so_far = ""
    for piece in word_pieces(suggestion):
        if not is_right(so_far + piece, rest_of_line):
            break
        so_far += piece
        taken.append(piece)
    return tuple(taken)


def decide(user: str, suggestion: str, rest_of_line: str) -> Decision:
    """What `user` takes of `suggestion` when they will type `rest_of_line` next."""
    if user not in USERS:
        raise ValueError(f"unknown user {user!r}; known: {', '.join(USERS)}")
    if user == "none":
        return REFUSE
    # rest_of_line never holds a line break: a suggestion with one is only right line by line.
    if is_right(suggestion, rest_of_line):
        return Decision("full", (suggestion,))
    first = suggestion.split("\n", 1)[0]
    if "\n" in suggestion and is_right(first, rest_of_line):
        return Decision("line", (first,))
    if user == "words":
        words = right_words(suggestion, rest_of_line)
        if words:
            return Decision("words", words)
    return REFUSE


# --- the figures ----------------------------------------------------------------------------------
def per_100(count: float, chars_written: int) -> float | None:
    return None if chars_written <= 0 else round(100.0 * count / chars_written, 2)


def user_summary(
    decisions: Sequence[Decision], *, chars_written: int, cpu_s: float | None
) -> dict[str, Any]:
    """The user's figures for one pass: `decisions` is one per suggestion read.

    `chars_written` is every character of the lines the user wrote, typed or accepted (the same
    for every system: the trace's text); `cpu_s` is the server's CPU time over the pass.
    """
    accepts = [d for d in decisions if d.accepted]
    accepted_chars = sum(d.chars for d in accepts)
    keys = sum(d.keys for d in accepts)
    refused = len(decisions) - len(accepts)
    return {
        "chars_written": chars_written,
        "reads": len(decisions),
        "accepts": len(accepts),
        "accepts_full": sum(d.kind == "full" for d in accepts),
        "accepts_line": sum(d.kind == "line" for d in accepts),
        "accepts_words": sum(d.kind == "words" for d in accepts),
        "accept_keys": keys,
        "accepted_chars": accepted_chars,
        "accepted_share": round(accepted_chars / chars_written, 4) if chars_written else None,
        "keystrokes_saved_per_100": per_100(keystrokes_saved(accepted_chars, keys), chars_written),
        "refused": refused,
        "refused_per_100": per_100(refused, chars_written),
        "accept_rate": round(len(accepts) / len(decisions), 3) if decisions else None,
        "cpu_s": None if cpu_s is None else round(cpu_s, 2),
        "cpu_s_per_100": None if cpu_s is None else per_100(cpu_s, chars_written),
    }


def what_followed(shown: str, rest_of_line: str, *, at_trace_end: bool) -> str:
    """What the user did after refusing a suggestion, as the server sees it: ghostfim counts a
    refusal when the user types over what it said (or leaves), not while they type into it,
    and the end of a trace closes the document, which refuses nothing."""
    if at_trace_end:
        return "trace_end"
    if not rest_of_line:
        return "end_of_line"  # the next edit is elsewhere: the next line of the trace
    return "typed_into" if shown.startswith(rest_of_line[0]) else "typed_over"


def signal_counts(decisions: Sequence[Decision]) -> dict[str, int]:
    """The simulator's counts in the shape of ghostfim/status `acceptance`, to set side by side:
    a whole accept runs the item's command, a line or words is one partial accept of an item."""
    accepts = [d for d in decisions if d.accepted]
    return {
        "accepted": sum(d.kind == "full" for d in accepts),
        "partial": sum(d.kind != "full" for d in accepts),
        "refused": len(decisions) - len(accepts),
        "acceptedChars": sum(d.chars for d in accepts),
    }
