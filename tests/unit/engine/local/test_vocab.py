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


NAME_PIECES = [b"", b"task", b"task_", b"push", b"task(", b"tasks", b"(", b" x", b"t", b"\n"]
NAME_PIECES += [b".", b".res", b".ta", b".(", b"x"]


def ids(array: object) -> list[int]:
    return sorted(int(i) for i in array)  # type: ignore[attr-defined]


def test_spelling_keeps_the_pieces_that_go_on_spelling_a_name_and_end_it_at_a_non_name_byte() -> (
    None
):
    index = VocabIndex(len(NAME_PIECES), lambda i: NAME_PIECES[i], is_end=lambda i: i == 0)
    assert ids(index.spelling([b"task_push"])) == [1, 2, 8]  # task, task_, t; not tasks, task(
    assert ids(index.spelling([b"task"])) == [1, 4, 8]  # the whole name, ended by `(`
    assert ids(index.spelling([b".task"])) == [10, 12]  # ., .ta
    assert len(index.spelling([])) == 0


def test_after_a_name_a_dot_goes_on_only_into_the_names_given() -> None:
    index = VocabIndex(len(NAME_PIECES), lambda i: NAME_PIECES[i], is_end=lambda i: i == 0)
    # The name ends: `(`, ` x`, a new line, an end token; a dot into `task` only.
    assert ids(index.after_name(["task"])) == [0, 6, 7, 9, 10, 12]
    assert ids(index.after_name(None)) == [0, 6, 7, 9, 10, 11, 12, 13]  # any dot
    # A bare name may go on too (task, x, ...), but a dot still only into the names given.
    assert ids(index.after_name(["res"], bare=True)) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 14]
