"""Phase 3 of a request, after the prefill: tokens generated one at a time, or a draft model's
tokens checked in one batch first (speculative decoding).

    decode_n_tokens     greedy, one token per `llama_decode`, until a stop rule fires
    speculative_decode  the draft's proposal decoded in one batch; its tokens are taken while
                        this model would have picked them too, then decode_n_tokens goes on
                        from this model's own next token

Both take a `DecodeOptions` and return a `Decoded`. What every generated token goes through
(its text, the stop rules, the stream to the editor, the model's chance of the whole text) is
one `Generation`, so the two share it and differ only in where the next token comes from. The
KV cells change only through the session (engine/local/session.py), which makes every
llama.cpp call.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ghostfim.engine.backend import CancelToken, OnText
from ghostfim.engine.context.guide import MemberGuide, Next
from ghostfim.engine.local import native
from ghostfim.engine.text.stops import StopPolicy

Pick = tuple[int, float]  # a token and the model's probability of it


@dataclass(frozen=True)
class DecodeOptions:
    max_tokens: int
    policy: StopPolicy  # where the suggestion ends (engine/text/stops.py)
    heal: bytes = b""  # text the first tokens re-create (the prompt's last token, taken out)
    give_up_below: float = 0.0  # stop ("unsure") once the text's own chance falls below
    guide: MemberGuide | None = None  # the names a dot may go on with (workspace index)


@dataclass
class Decoded:
    """What was generated: the text, why it stopped, and each token's id, probability and
    where its text ends (for the confidence rule, engine/text/confidence.py)."""

    text: str = ""
    generated: int = 0
    reason: str = ""
    probs: list[float] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    draft_tokens: int = 0  # a draft's proposal checked (0: none)
    draft_kept: int = 0  # of which this model took


class Decoder(Protocol):
    """What decoding asks of the session that owns the model and its KV cells."""

    @property
    def end_tokens(self) -> frozenset[int]: ...

    def piece(self, token: int) -> bytes: ...
    def fits(self, slot: int, more: int) -> bool: ...
    def decode_one_token(
        self, slot: int, token: int, heal: bytes = b"", guided: Next | None = None
    ) -> Pick: ...
    def decode_proposal(
        self,
        slot: int,
        proposal: Sequence[int],
        heal: bytes,
        last_guided: Next | None = None,
    ) -> tuple[int, list[Pick]]: ...
    def drop_from(self, slot: int, position: int) -> None: ...


def past_heal(heal: bytes, piece: bytes) -> tuple[bytes, bytes]:
    """A token's piece against the text still to be healed: (what is left to heal, the
    piece's own text after it)."""
    done = min(len(heal), len(piece))
    return heal[done:], piece[done:]


class Generation:
    """The suggestion as its tokens come: each is taken (`take`) until one ends it."""

    def __init__(
        self, decoder: Decoder, options: DecodeOptions, cancel: CancelToken, on_text: OnText | None
    ) -> None:
        self.decoder = decoder
        self.options = options
        self.cancel = cancel
        self.on_text = on_text
        self.heal = options.heal  # what of it the tokens taken so far have not re-created
        self.result = Decoded()
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._chance = 1.0  # the model's own chance of the text so far

    def take(self, token: int, prob: float) -> str | None:
        """Add a token to the text; the reason generation stops here, or None to go on."""
        r, options = self.result, self.options
        if token in self.decoder.end_tokens:
            return "eog"
        self.heal, piece_bytes = past_heal(self.heal, self.decoder.piece(token))
        r.generated += 1
        r.text += self._utf8.decode(piece_bytes)
        r.probs.append(prob)
        r.ends.append(len(r.text))
        r.ids.append(token)
        decision = options.policy.check(r.text)
        if decision.stop:
            if decision.keep >= 0:
                r.text = r.text[: decision.keep]
            return decision.reason
        if self.on_text is not None:
            self.on_text(r.text, tuple(zip(r.ends, r.probs, strict=True)))
        if r.generated >= options.max_tokens:
            return "max_tokens"
        self._chance *= prob
        if self._chance < options.give_up_below:
            return "unsure"
        return "cancelled" if self.cancel.cancelled else None

    def guided(self) -> Next | None:
        """What the guide lets the next token be (None: any token)."""
        guide = self.options.guide
        return None if guide is None else guide.after(self.result.text)

    def stopped(self, reason: str) -> Decoded:
        self.result.reason = reason
        return self.result


def decode_n_tokens(
    decoder: Decoder,
    slot: int,
    first: Pick,
    options: DecodeOptions,
    cancel: CancelToken,
    on_text: OnText | None,
    generation: Generation | None = None,
) -> Decoded:
    """Greedy decode from `first` (the prefill's pick), one token per decode, until a stop
    rule fires, the text's chance falls below `give_up_below`, or the slot is full.

    With `heal`, the first tokens re-create that text and only what follows is the
    suggestion. Each token's probability streams with the text: what of it is worth showing
    is the service's to decide, from wherever the user stands."""
    gen = generation or Generation(decoder, options, cancel, on_text)
    token, prob = first
    while (reason := gen.take(token, prob)) is None:
        if not decoder.fits(slot, 1):
            return gen.stopped("context_full")
        try:
            token, prob = decoder.decode_one_token(slot, token, gen.heal, gen.guided())
        except native.DecodeAborted:  # its cells are dropped already
            return gen.stopped("cancelled")
    return gen.stopped(reason)


def speculative_decode(
    decoder: Decoder,
    slot: int,
    first: Pick,
    proposal: Sequence[int],
    options: DecodeOptions,
    cancel: CancelToken,
    on_text: OnText | None,
) -> Decoded:
    """A draft model's `proposal` for the same state (engine/local/drafted.py), checked in
    one batched decode: its tokens are taken while this model would have picked them too;
    from the first it would not, this model's own pick goes on with decode_n_tokens. The
    text is this model's own, token for token.

    Token c of the proposal sits in the slot at `start + c`; `picks[c]` is this model's
    token after it."""
    gen = Generation(decoder, options, cancel, on_text)
    if not proposal or proposal[0] != first[0]:
        gen.result.draft_tokens = len(proposal)
        return decode_n_tokens(decoder, slot, first, options, cancel, on_text, gen)
    if cancel.cancelled:
        return gen.stopped("cancelled")
    # Where the guide has a say (a dot before a known module's or class's names) the proposal
    # ends: this model's pick there is made among those names, and one token at a time after.
    kept, last_guided = _before_the_guide(decoder, proposal, options)
    proposal = proposal[:kept]
    try:
        start, picks = decoder.decode_proposal(slot, proposal, options.heal, last_guided)
    except native.DecodeAborted:
        return gen.stopped("cancelled")
    if not picks:  # it did not fit: decode alone
        return decode_n_tokens(decoder, slot, first, options, cancel, on_text, gen)
    gen.result.draft_tokens, gen.result.draft_kept = len(proposal), 1  # token 0: its own pick
    token, prob = first
    for c, pick in enumerate(picks):
        reason = gen.take(token, prob)
        if reason is not None:
            return gen.stopped(reason)
        if c + 1 < len(proposal) and pick[0] == proposal[c + 1]:
            gen.result.draft_kept += 1
            token, prob = pick  # decoded already, with the proposal
            continue
        # This model picks otherwise after token c (or the proposal ends): the cells of the
        # rest of the proposal go, and it goes on alone from its own pick.
        decoder.drop_from(slot, start + c + 1)
        return decode_n_tokens(decoder, slot, pick, options, cancel, on_text, gen)
    raise AssertionError("the loop returns at the proposal's last token")


def _before_the_guide(
    decoder: Decoder, proposal: Sequence[int], options: DecodeOptions
) -> tuple[int, Next | None]:
    """How many of the proposal's tokens the guide lets pass unchecked: up to and with the
    first after which it says what may follow (and what it says), else all (and None)."""
    guide = options.guide
    if guide is None:
        return len(proposal), None
    heal, text = options.heal, b""
    for c, token in enumerate(proposal):
        heal, piece = past_heal(heal, decoder.piece(token))
        text += piece
        guided = guide.after(text.decode("utf-8", errors="replace"))
        if guided is not None:
            return c + 1, guided
    return len(proposal), None
