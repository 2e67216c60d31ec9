"""engine/local/vocab.py: token pieces by prefix, for token healing."""

from __future__ import annotations

from ghostfim.engine.local.vocab import VocabIndex

PIECES = [b"", b"r", b"re", b"ret", b"return", b" return", b"rex", b"x", b"\xff"]


def test_candidates_start_with_the_text_or_are_a_proper_prefix_of_it() -> None:
    index = VocabIndex(len(PIECES), lambda i: PIECES[i])
    assert sorted(int(i) for i in index.candidates(b"ret")) == [1, 2, 3, 4]  # ret, return; r, re
    assert sorted(int(i) for i in index.candidates(b"retu")) == [1, 2, 3, 4]
    assert sorted(int(i) for i in index.candidates(b"rex")) == [1, 2, 6]
    assert [int(i) for i in index.candidates(b" ret")] == [5]
    assert list(index.candidates(b"q")) == []
    assert 0 not in [int(i) for i in index.candidates(b"r")]  # empty pieces are not tokens
