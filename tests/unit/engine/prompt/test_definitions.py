"""engine/prompt/definitions.py: the workspace's definitions go right before the prefix in the
FIM head and in the plain head, and keystrokes at one place share everything before the typed
text (the KV cache serves the block)."""

from __future__ import annotations

from ghostfim.engine.backend import CompletionRequest
from ghostfim.engine.context.definitions import ContextEntry, DefinitionBlock
from ghostfim.engine.local.parts import prompt_parts
from ghostfim.engine.local.plan import common_prefix_len
from ghostfim.engine.prompt.definitions import DefinitionTokens
from ghostfim.engine.prompt.fim import FimTemplate
from tests.support.fakes import words
from tests.unit.engine.local.test_plan import planner

QWEN_BOS = FimTemplate(family="qwen", layout="psm", pre=1001, suf=1002, mid=1003, bos=1000)
BLOCK = DefinitionBlock(
    "python",
    (ContextEntry("connect", "pkg/net.py", "def connect(url: str) -> Client:", 3),),
    budget=100,
)
PREFIX = "".join(f"total_{i} = compute ( total_{i - 1} , {i} )\n" for i in range(1, 30))


class Cost:
    def tokens_within(self, budget_ms: float) -> int:
        return 1000


def test_the_block_goes_right_before_the_prefix_in_both_heads() -> None:
    from ghostfim.engine.prompt.builder import PromptBuilder

    builder = PromptBuilder(words, QWEN_BOS, prefix_tokens=400, suffix_tokens=100)
    parts = builder.parts("d", PREFIX + "x = ", "\nprint(x)\n", 29)
    defs = DefinitionTokens(words)
    with_block = defs.apply(parts, BLOCK, Cost(), room=1000)
    ids = words(BLOCK.prompt_text())
    n = with_block.definition_tokens
    assert n == len(ids) > 0
    assert with_block.head[:2] == [1000, 1001]  # BOS, PRE
    assert with_block.head[2 : 2 + n] == ids
    assert with_block.head[2 + n :] == parts.head[2:]
    assert list(with_block.plain_head[1 : 1 + n]) == ids  # after BOS
    assert with_block.plain_head[1 + n :] == parts.plain_head[1:]
    assert with_block.prompt().definition_tokens == n == with_block.plain().definition_tokens
    assert defs.last is not None and defs.last.names == ("connect",)
    # no room, or no block: the parts as they were
    assert defs.apply(parts, BLOCK, Cost(), room=0).head == parts.head
    assert defs.apply(parts, None, Cost(), room=1000) is parts


def test_keystrokes_at_one_place_share_the_block_and_the_prefix() -> None:
    p = planner()
    defs = DefinitionTokens(p.builder.tokenize)

    def keystroke(typed: str) -> list[int]:
        request = CompletionRequest(
            PREFIX + typed, "\n", doc_id="d", mode="keystroke", definitions=BLOCK
        )
        parts = prompt_parts(p.builder, p.extra, p.planner, request, defs)
        assert all(part.definition_tokens for part in parts)  # every window has the block
        return parts[0].plain().tokens  # the wide window's keystroke prompt (CPU layout)

    first, second = keystroke("res = com"), keystroke("res = comp")
    shared = common_prefix_len(first, second)
    block = p.builder.tokenize(BLOCK.prompt_text())
    assert first[: len(block)] == block == second[: len(block)]  # no BOS in this template
    assert shared > len(block) + 50  # the block and the prefix window
    assert len(second) - shared <= 3  # only the typed word's tokens are new


def test_auto_budgets_keystroke_prompts_by_a_shorter_prefill_than_full_ones() -> None:
    from ghostfim.engine.tuning import (
        DEFINITIONS_AUTO_PREFILL_MS,
        DEFINITIONS_KEYSTROKE_PREFILL_MS,
    )

    class Measured:  # 5 ms a token, as the small model on two cores
        refits = 0

        def tokens_within(self, budget_ms: float) -> int:
            return int(budget_ms / 5) + self.refits

    cost = Measured()
    defs = DefinitionTokens(words)
    keystroke, full = defs.auto_budget(cost, keystroke=True), defs.auto_budget(cost)
    assert keystroke == DEFINITIONS_KEYSTROKE_PREFILL_MS / 5 < full
    assert full == min(512, DEFINITIONS_AUTO_PREFILL_MS / 5)
    cost.refits = 7  # a refit later does not move a budget (it would change every block)
    assert defs.auto_budget(cost, keystroke=True) == keystroke
