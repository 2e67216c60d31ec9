"""engine/local/vocab.py: the vocabulary read once: pieces by id, the end tokens, and pieces by
prefix for token healing."""

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


def test_pieces_by_id_and_the_tokens_that_end_generation_are_read_once() -> None:
    asked: list[int] = []

    def piece(i: int) -> bytes:
        asked.append(i)
        return PIECES[i]

    index = VocabIndex(len(PIECES), piece, is_end=lambda i: i in (0, 8))
    assert index.pieces == PIECES and index.ends == {0, 8}
    assert sorted(asked) == list(range(len(PIECES)))  # each token once, at construction
    index.candidates(b"re")
    assert len(asked) == len(PIECES)
