"""engine/prompt/builder.py: budgets (and the one place they are clamped), line boundaries, a
sticky prefix window, suffix units, the layouts, token healing; a stand-in tokenizer."""

from __future__ import annotations

import gc
import tracemalloc

from ghostfim.engine.config import Budgets
from ghostfim.engine.prompt.builder import (
    MIN_PREFIX_TOKENS,
    PREFIX_SHARE_OF_ROOM,
    PREFIX_SLACK,
    PromptBuilder,
    fit_budgets,
)
from ghostfim.engine.prompt.fim import FimTemplate
from tests.support.fakes import words

QWEN = FimTemplate(family="qwen", layout="psm", pre=1001, suf=1002, mid=1003)
CODESTRAL = FimTemplate(family="codestral", layout="spm", pre=1001, suf=1002, bos=7)
PLAIN = FimTemplate(family="prefix-only", layout="prefix", bos=7)


def builder(
    prefix_tokens: int = 40, suffix_tokens: int = 12, template: FimTemplate = QWEN
) -> PromptBuilder:
    return PromptBuilder(words, template, prefix_tokens=prefix_tokens, suffix_tokens=suffix_tokens)


def doc(n: int) -> str:
    return "".join(f"line {i} has five words\n" for i in range(n))


# --- budgets -------------------------------------------------------------------------------------
def test_budgets_a_slot_can_hold_are_left_alone() -> None:
    asked = Budgets(768, 256, 80.0, 256)
    in_effect = fit_budgets(asked, prompt_room=3776)
    assert in_effect.effective == asked and in_effect.clamps == ()


def test_a_prefix_budget_past_the_slot_is_clamped_and_said() -> None:
    in_effect = fit_budgets(Budgets(16384, 256, 80.0, 256), prompt_room=3776)
    cap = int(3776 * PREFIX_SHARE_OF_ROOM / PREFIX_SLACK)
    [clamp] = in_effect.clamps
    assert (clamp.budget, clamp.asked, clamp.effective) == ("prefix_tokens", 16384, cap)
    assert "3776" in clamp.reason and "70%" in clamp.reason
    assert in_effect.effective.prefix_tokens == cap
    assert in_effect.effective.suffix_tokens == 256  # the suffix still fits
    assert in_effect.effective.keystroke_prefill_ms == 80.0  # not a slot's business
    assert in_effect.effective.kv_snapshot_mb == 256


def test_the_suffix_gets_what_the_prefix_window_leaves() -> None:
    in_effect = fit_budgets(Budgets(2000, 16384, 80.0, 256), prompt_room=3776)
    budgets = {c.budget: c for c in in_effect.clamps}
    prefix = in_effect.effective.prefix_tokens
    assert budgets["suffix_tokens"].effective == 3776 - int(prefix * PREFIX_SLACK)
    assert str(int(prefix * PREFIX_SLACK)) in budgets["suffix_tokens"].reason
    tiny = fit_budgets(Budgets(768, 256, 80.0, 256), prompt_room=10)
    assert tiny.effective.prefix_tokens == MIN_PREFIX_TOKENS  # never below something useful
    assert tiny.effective.suffix_tokens == 0


# --- the prefix window ---------------------------------------------------------------------------
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


def test_one_enormous_line_keeps_its_tail() -> None:
    b = builder(prefix_tokens=20)
    minified = "x = 1 ; " * 50_000
    text, start = b.choose_prefix("m", minified, 0)
    assert start == 0 and minified.endswith(text) and len(text) == 20 * 3


# --- the suffix ----------------------------------------------------------------------------------
def test_suffix_units_are_rest_of_line_then_whole_lines_within_budget() -> None:
    b = builder(suffix_tokens=12)
    units, counts = b.suffix_units(") + 1\nnext line here\nand another one\nmore\n")
    assert units[0] == ") + 1\n"
    assert units[1] == "next line here\n"
    assert sum(counts) <= 12


# --- the layouts ---------------------------------------------------------------------------------
def test_psm_layout_puts_typed_text_before_the_whole_suffix() -> None:
    b = builder()
    parts = b.parts("d", "def f():\n    retu", "\n\nx = f()\n", 1)
    prompt = parts.prompt()
    assert prompt.tokens[0] == QWEN.pre and prompt.tokens[-1] == QWEN.mid
    assert prompt.tokens.index(QWEN.suf) > 1
    assert prompt.suffix_units_used == prompt.suffix_units_total
    # The suffix is tokenized as a whole, once: the plan picks a prompt without the tokenizer.
    assert list(parts.suffix_ids) == words("".join(parts.suffix_units)) != []
    assert prompt.tokens == [*parts.head, *parts.suffix_ids, *parts.tail]
    # The text before the cursor, but its last tokens, is what the next keystroke shares.
    assert 0 < prompt.stable_tokens < prompt.tokens.index(QWEN.suf)


def test_the_plain_prompt_is_the_prefix_as_code_to_continue() -> None:
    b = builder()
    parts = b.parts("d", "def f():\n    retu", "\n\nx = f()\n", 1)
    plain = parts.plain()
    assert plain.tokens == list(parts.plain_head) == words(parts.prefix_text)
    assert plain.suffix_units_used == 0 < plain.suffix_units_total  # the suffix was cut


def test_spm_and_prefix_only_layouts() -> None:
    spm = builder(template=CODESTRAL)
    prompt = spm.parts("d", "x = ", "\ny = 2\n", 0).prompt()
    assert prompt.tokens[:2] == [7, CODESTRAL.suf]  # BOS, then the suffix first
    assert prompt.tokens[-(len(words("x = ")) + 1)] == CODESTRAL.pre
    plain = builder(template=PLAIN)
    prompt = plain.parts("d", "x = ", "\ny = 2\n", 0).prompt()
    assert prompt.tokens == [7, *words("x = ")] and prompt.suffix_units_total == 0


def test_token_healing_takes_the_word_fragment_out() -> None:
    def chars(text: str) -> list[int]:  # one token per character
        return [ord(c) for c in text]

    b = PromptBuilder(chars, QWEN, piece=lambda t: chr(t).encode(), prefix_tokens=40)
    parts = b.parts("d", "x = re", "", 0)
    # The fragment (with the space before it, " re" as in " return") is taken out of the
    # prompt: the model writes it again in its own tokens.
    assert parts.heal == b" re"
    assert parts.head == [QWEN.pre, *chars("x ="), QWEN.suf]
    assert parts.prompt().heal == b" re" and parts.prefix_tokens == len(chars("x ="))
    no_piece = PromptBuilder(chars, QWEN, prefix_tokens=40).parts("d", "x = re", "", 0)
    assert no_piece.heal == b""  # no vocabulary to heal with (a remote server's builder)


# --- memory (engine/memory.py) -------------------------------------------------------------------
def minified(n_chars: int) -> str:
    return "".join(f"function f{i}(a){{return a+{i}}};" for i in range(n_chars // 28))


def test_a_minified_file_keeps_the_caches_within_their_bytes() -> None:
    """Typing through a minified line makes a new 11 kB line to count at every keystroke (the
    prefix window's cut of it): 1,000 of them were 11 MB under a bound of 8,192 entries. Held
    to their byte limits, and so is what the builder really keeps (tracemalloc)."""
    # a token every four characters (what the counts are does not matter here, only the keys)
    b = PromptBuilder(lambda t: [7] * (len(t) // 4), QWEN, prefix_tokens=768, suffix_tokens=256)
    text = minified(200_000)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(1_000):
            at = 20_000 + 97 * i  # the windows the service hands over (a cut line, no start)
            b.parts("file:///app.min.js", text[at - 16_000 : at], text[at : at + 4_000], 0)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    caches = {c.name: c for c in b.caches()}
    assert set(caches) == {"lineTokens", "suffixTokens", "prefixAnchors"}
    for cache in caches.values():
        assert 0 <= cache.bytes <= cache.limit, cache
    assert caches["lineTokens"].bytes > caches["lineTokens"].limit // 2  # it was used
    assert held < sum(c.limit for c in caches.values()) * 1.2, held


def test_a_closed_documents_sticky_windows_go() -> None:
    b = builder()
    text = doc(200)
    for doc_id in ("file:///a.py", "file:///b.py"):
        b.parts(doc_id, text, "", 200)
        b.parts(doc_id, text, "", 200, prefix_budget=20)  # a window per budget
    anchors = next(c for c in b.caches() if c.name == "prefixAnchors")
    b.forget("file:///a.py")
    after = next(c for c in b.caches() if c.name == "prefixAnchors")
    assert 0 < after.bytes < anchors.bytes
    b.forget("file:///b.py")
    assert next(c for c in b.caches() if c.name == "prefixAnchors").bytes == 0
