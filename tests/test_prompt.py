"""Prompt building: budgets, line boundaries, a sticky prefix window, suffix units."""

from __future__ import annotations

from ghostfim.engine.prompt.builder import PromptBuilder, common_prefix_len
from ghostfim.engine.prompt.fim import FimTemplate

QWEN = FimTemplate(family="qwen", layout="psm", pre=1001, suf=1002, mid=1003)


def words(text: str) -> list[int]:
    """A stand-in tokenizer: one token per whitespace-separated word, plus one per newline."""
    return [hash(w) % 997 for w in text.replace("\n", " \n ").split(" ") if w]


def builder(prefix_tokens: int = 40, suffix_tokens: int = 12) -> PromptBuilder:
    return PromptBuilder(words, QWEN, prefix_tokens=prefix_tokens, suffix_tokens=suffix_tokens)


def doc(n: int) -> str:
    return "".join(f"line {i} has five words\n" for i in range(n))


def test_prefix_is_cut_at_a_line_boundary_within_budget() -> None:
    b = builder()
    text, start = b.choose_prefix("d", doc(100) + "cur", 100)
    assert text.startswith("line ") and text.endswith("cur")
    assert start > 0 and len(words(text)) <= 40
    assert text.split("\n")[0] == f"line {start} has five words"


def test_prefix_window_is_sticky_while_typing_and_moves_in_a_jump() -> None:
    b = builder()
    base = doc(100)
    _, start = b.choose_prefix("d", base, 100)
    starts = set()
    typed = ""
    for i in range(60):  # type a few more lines, one word at a time
        typed += f"w{i} " if i % 5 else "\n"
        _, s = b.choose_prefix("d", base + typed, 100 + typed.count("\n"))
        starts.add(s)
    assert len(starts) <= 3, starts  # a few jumps, not a slide of one line per line typed
    assert min(starts) == start


def test_other_documents_have_their_own_window() -> None:
    b = builder()
    _, a = b.choose_prefix("a", doc(100), 100)
    _, c = b.choose_prefix("c", doc(30), 30)
    assert a != c


def test_suffix_units_are_rest_of_line_then_whole_lines_within_budget() -> None:
    b = builder(suffix_tokens=12)
    units, counts = b.suffix_units(") + 1\nnext line here\nand another one\nmore\n")
    assert units[0] == ") + 1\n"
    assert units[1] == "next line here\n"
    assert sum(counts) <= 12


def test_psm_layout_puts_typed_text_before_the_whole_suffix() -> None:
    b = builder()
    parts = b.parts("d", "def f():\n    retu", "\n\nx = f()\n", 1)
    prompt = b.assemble(parts)
    assert prompt.tokens[0] == QWEN.pre and prompt.tokens[-1] == QWEN.mid
    assert prompt.tokens.index(QWEN.suf) > 1
    assert prompt.suffix_units_used == prompt.suffix_units_total
    assert b.assemble(parts, 0).suffix_tokens == 0


def test_common_prefix_len() -> None:
    assert common_prefix_len([1, 2, 3, 4], [1, 2, 9]) == 2
    assert common_prefix_len([], [1]) == 0
    assert common_prefix_len([1, 2], [1, 2, 3]) == 2
    assert common_prefix_len(list(range(1000)), [*range(700), -1]) == 700
