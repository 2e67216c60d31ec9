"""engine/local/decode.py: where a draft's proposal stops for the member guide."""

from __future__ import annotations

from ghostfim.engine.context.guide import MemberGuide, Next
from ghostfim.engine.local.decode import DecodeOptions, _before_the_guide
from ghostfim.engine.text.stops import StopPolicy

PIECES = {1: b"ab", 2: b"c", 3: b" = ", 4: b"mod", 5: b".", 6: b"alp", 7: b"ha"}


class Pieces:
    def piece(self, token: int) -> bytes:
        return PIECES[token]


def options(guide: MemberGuide | None, heal: bytes = b"") -> DecodeOptions:
    return DecodeOptions(8, StopPolicy(False, 0, False, ""), heal=heal, guide=guide)


def test_a_proposal_is_checked_up_to_the_token_after_which_the_guide_names_what_follows() -> None:
    guide = MemberGuide(lambda d: frozenset({"alpha"}) if d == "mod" else None, "x")
    proposal = [1, 2, 3, 4, 5, 6, 7]  # "abc = mod.alpha"
    # After "mod" the guide has a say (what a dot goes on with): the proposal ends there, with
    # what the guide lets the pick be.
    after_mod = Next(ends=True, after_dot=("alpha",), open=True)
    assert _before_the_guide(Pieces(), proposal, options(guide)) == (4, after_mod)
    assert _before_the_guide(Pieces(), proposal, options(None)) == (7, None)
    assert _before_the_guide(Pieces(), [1, 2, 3], options(guide)) == (3, None)
    # Healed text is the prompt's, not the proposal's: "ab" re-creates it, and the guide has
    # its say after it (a dot after "xab").
    healing = MemberGuide(lambda d: frozenset({"alpha"}) if d == "xab" else None, "xab")
    assert _before_the_guide(Pieces(), [1, 5, 6], options(healing, heal=b"ab")) == (1, after_mod)
