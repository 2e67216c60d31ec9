"""engine/local/plan.py: the pure keystroke plan, with a stand-in tokenizer and KV slots over a
fake store (no llama.cpp): which prompt, in which slot, prefilled in chunks of what size."""

from __future__ import annotations

from ghostfim.engine.backend import CompletionRequest
from ghostfim.engine.context.definitions import DefinitionBlock, SnippetEntry
from ghostfim.engine.context.extra import ExtraContextBuilder
from ghostfim.engine.context.ring import ContextChunk, ExtraContext
from ghostfim.engine.local.kvslots import KEYSTROKE_SLOTS, SLOT_FULL, KvSlots
from ghostfim.engine.local.parts import prompt_parts
from ghostfim.engine.local.plan import (
    BACKGROUND_CHUNK_MS,
    FULL_CHUNK_MS,
    MIN_CHUNK_TOKENS,
    MIN_START_TOKENS,
    MIN_WIDE_TOKENS,
    PREFILL_CHUNK_MS,
    Planner,
    PromptPlan,
    Windows,
)
from ghostfim.engine.local.session import prepare_slot
from ghostfim.engine.local.speed import PrefillCostModel
from ghostfim.engine.prompt.builder import PromptBuilder, PromptParts
from ghostfim.engine.prompt.definitions import DefinitionTokens
from ghostfim.engine.prompt.fim import FimTemplate
from tests.support.fakes import FakeStore, words

QWEN = FimTemplate(
    family="qwen", layout="psm", pre=1001, suf=1002, mid=1003, file_sep=1004, repo=1005
)
CPU = "40+20"  # a slow CPU: 40 ms a decode call, 20 ms a token (pinned: nothing refits it)
GPU = "3+0.02"  # a 1.5B model on an H200
PREFIX = "".join(f"total_{i} = compute ( total_{i - 1} , {i} )\n" for i in range(1, 60))
SUFFIX = "".join(f"\ndef after_{i} ( x ) :\n    return x + {i}\n" for i in range(12))


class Planned:
    """A Planner with what ModelSession.plan gives it: each window's prompt parts, tokenized
    (here with a stand-in tokenizer), and a full prompt's extra context."""

    def __init__(self, planner: Planner, builder: PromptBuilder) -> None:
        self.planner, self.builder = planner, builder
        self.extra = ExtraContextBuilder(builder.tokenize, QWEN)
        self.definitions = DefinitionTokens(builder.tokenize)
        self.slots, self.windows, self.cost = planner.slots, planner.windows, planner.cost
        self.chunk_tokens = planner.chunk_tokens

    def parts(self, request: CompletionRequest) -> list[PromptParts]:
        return prompt_parts(self.builder, self.extra, self.planner, request, self.definitions)

    def plan(self, request: CompletionRequest) -> PromptPlan:
        return self.planner.plan(request, self.parts(request))


def planner(cost: str = CPU, prefix_tokens: int = 400, n_batch: int = 256) -> Planned:
    c = PrefillCostModel.pinned(cost)
    builder = PromptBuilder(words, QWEN, prefix_tokens=prefix_tokens, suffix_tokens=200)
    slots = KvSlots(n_ctx=3 * 4096)
    windows = Windows.sized(c, prefix_tokens)
    return Planned(Planner(slots, c, windows, 80.0, n_batch, prefix_tokens, 200), builder)


def keystroke(typed: str = "resu", **changes: object) -> CompletionRequest:
    fields: dict[str, object] = {"doc_id": "d", "mode": "keystroke", "max_tokens": 8, **changes}
    return CompletionRequest(PREFIX + typed, SUFFIX, **fields)  # type: ignore[arg-type]


def prefilled(p: Planned, plan: PromptPlan, doc: str = "d") -> None:
    """What ModelSession.prefill leaves in the slots once a plan is carried out."""
    tokens = plan.prompt.tokens
    keep = min(plan.slot.reuse(tokens), len(tokens) - 1)
    prepare_slot(p.slots, FakeStore(), plan.slot, doc, keep)
    p.slots.append(plan.slot.slot, tokens[keep:])


def test_windows_follow_the_prefill_speed() -> None:
    cpu = Windows.sized(PrefillCostModel.pinned(CPU), 400)
    assert (cpu.start_tokens, cpu.wide_tokens) == (MIN_START_TOKENS, MIN_WIDE_TOKENS)
    assert cpu.has_narrow
    default = Windows.sized(PrefillCostModel(), 768)  # 45 ms + 5 ms a token
    assert (default.start_tokens, default.wide_tokens) == (88, 256)
    gpu = Windows.sized(PrefillCostModel.pinned(GPU), 768)
    assert gpu.start_tokens == gpu.wide_tokens == 768 and not gpu.has_narrow  # the whole budget


def test_a_full_prompt_holds_the_whole_suffix_in_its_own_slot() -> None:
    p = planner()
    plan = p.plan(CompletionRequest(PREFIX, SUFFIX, doc_id="d", mode="full"))
    prompt = plan.prompt
    assert plan.slot.slot == SLOT_FULL and plan.stable == 0  # a cancel aborts anywhere
    assert prompt.tokens[0] == QWEN.pre and prompt.tokens[-1] == QWEN.mid
    assert prompt.suffix_units_used == prompt.suffix_units_total > 5 and not plan.suffix_cut
    assert not prompt.narrow
    assert plan.chunk_tokens == p.chunk_tokens(full=True)
    assert plan.new_tokens == len(prompt.tokens)  # nothing cached yet


def test_a_cold_keystroke_on_a_cpu_is_the_narrow_plain_prefix() -> None:
    p = planner()
    before = [p.slots.tokens(s) for s in range(3)]
    plan = p.plan(keystroke())
    prompt = plan.prompt
    assert plan.slot.slot in KEYSTROKE_SLOTS
    assert prompt.narrow  # the start window: the service widens it in the background
    assert QWEN.suf not in prompt.tokens and QWEN.mid not in prompt.tokens  # plain code
    assert prompt.suffix_units_used == 0 and plan.suffix_cut  # a pause refresh can do better
    assert len(prompt.tokens) <= int(p.windows.start_tokens * 1.25) + 2
    assert plan.stable == prompt.stable_tokens > 0  # the text before the cursor finishes
    assert plan.chunk_tokens == p.chunk_tokens()
    assert [p.slots.tokens(s) for s in range(3)] == before  # planning changes nothing


def test_the_background_job_prepares_the_wide_window_and_keystrokes_move_to_it() -> None:
    p = planner()
    narrow = p.plan(keystroke())
    prefilled(p, narrow)
    wide = p.plan(keystroke(background=True, max_tokens=0))
    assert not wide.prompt.narrow and wide.slot.slot != narrow.slot.slot  # the other slot
    assert wide.stable == 0 and wide.chunk_tokens == p.chunk_tokens(background=True)
    assert len(wide.prompt.tokens) > len(narrow.prompt.tokens)
    prefilled(p, wide)
    # The next keystroke finds the wide window in the cache: only the typed tokens are new.
    typed = p.plan(keystroke("resul"))
    assert not typed.prompt.narrow and typed.slot.slot == wide.slot.slot
    assert typed.new_tokens <= 2
    again = p.plan(keystroke("resul", background=True, max_tokens=0))
    assert again.slot.slot == wide.slot.slot


BLOCK = DefinitionBlock(
    "python",
    (),
    budget=64,
    snippets=(SnippetEntry("pkg/totals.py", 40, "grand = compute ( grand , total_1 )"),),
)


def test_the_block_switch_prepares_the_start_window_behind_the_block() -> None:
    """The switch to a new workspace block prefills the start window behind it (half the wide
    window's prefill on a CPU: a short lull finishes it); the keystrokes then take the block
    warm, in the start window, and the widen follows behind the block."""
    p = planner()
    prefilled(p, p.plan(keystroke()))  # the document's first keystroke: no block yet
    switch = p.plan(keystroke(background=True, max_tokens=0, definitions=BLOCK, start_window=True))
    assert switch.prompt.narrow and switch.stable == 0
    assert switch.prompt.definition_tokens > 0
    wide = p.plan(keystroke(background=True, max_tokens=0, definitions=BLOCK))
    assert len(switch.prompt.tokens) < len(wide.prompt.tokens)  # the cheaper prefill
    prefilled(p, switch)
    typed = p.plan(keystroke("resul", definitions=BLOCK))
    assert typed.prompt.narrow and typed.slot.slot == switch.slot.slot
    assert typed.new_tokens <= 2  # the block and the start window were in the cache
    prefilled(p, typed)
    p.slots.typed_into(typed.slot.slot, typed.prompt.stable_tokens)  # as the session marks it
    widen = p.plan(keystroke("resul", background=True, max_tokens=0, definitions=BLOCK))
    assert not widen.prompt.narrow and widen.slot.slot != switch.slot.slot
    block = switch.prompt.definition_tokens
    assert widen.prompt.tokens[:block] == switch.prompt.tokens[:block]  # the widen keeps it
    gpu = planner(GPU)  # no narrow window: the switch prepares the one window there is
    start = keystroke(background=True, max_tokens=0, start_window=True)
    assert gpu.planner.windows_for(start) == (gpu.windows.wide_tokens,)
    assert not gpu.plan(start).prompt.narrow


def test_on_a_gpu_keystrokes_are_whole_suffix_fim_prompts() -> None:
    p = planner(GPU)
    for typed in ("", "v", "va"):
        plan = p.plan(keystroke(typed))
        prompt = plan.prompt
        assert prompt.suffix_units_used == prompt.suffix_units_total > 10  # the whole suffix
        assert prompt.tokens[0] == QWEN.pre and prompt.tokens[-1] == QWEN.mid
        assert not prompt.narrow and not plan.suffix_cut  # no widening, no pause refresh
        prefilled(p, plan)


def test_chunks_are_sized_to_a_cancels_wait() -> None:
    p = planner(n_batch=64)
    cost = p.cost
    assert p.chunk_tokens() == max(MIN_CHUNK_TOKENS, cost.tokens_within(PREFILL_CHUNK_MS))
    assert p.chunk_tokens(background=True) == max(
        MIN_CHUNK_TOKENS, cost.tokens_within(BACKGROUND_CHUNK_MS)
    )
    assert p.chunk_tokens(full=True) == min(64, cost.tokens_within(FULL_CHUNK_MS))
    assert p.chunk_tokens(background=True) < p.chunk_tokens() < p.chunk_tokens(full=True)
    assert planner(GPU, n_batch=64).chunk_tokens() == 64  # capped by the batch


def test_extra_context_goes_before_a_full_prompts_prefix_only() -> None:
    p = planner()
    chunk = ContextChunk("util.py", "def helper ( x ) :\n    return x\nvalue = helper ( 1 )\n")
    extra = ExtraContext((chunk,), "main.py", "proj", budget=200)
    full = p.plan(CompletionRequest(PREFIX, SUFFIX, doc_id="d", mode="full", extra_context=extra))
    plain = p.plan(CompletionRequest(PREFIX, SUFFIX, doc_id="d", mode="full"))
    head = full.prompt.tokens[: full.prompt.extra_tokens]
    assert full.prompt.extra_tokens > 0 and head[0] == QWEN.repo and QWEN.file_sep in head
    assert full.prompt.tokens[full.prompt.extra_tokens :] == plain.prompt.tokens
    ks = p.plan(keystroke(extra_context=extra))
    assert ks.prompt.extra_tokens == 0 and QWEN.file_sep not in ks.prompt.tokens


def test_the_plan_tokenizes_nothing_and_takes_the_windows_it_asked_for() -> None:
    p = planner()
    request = keystroke()
    parts = p.parts(request)
    assert p.planner.windows_for(request) == (p.windows.wide_tokens, p.windows.start_tokens)
    assert len(parts) == 2 and parts[0].prefix_tokens > parts[1].prefix_tokens

    def no_tokenizer(_text: str) -> list[int]:
        raise AssertionError("the plan called the tokenizer")

    p.builder.tokenize = no_tokenizer
    assert p.planner.plan(request, parts).prompt.narrow  # cold: the narrow window's parts
    background = keystroke(background=True, max_tokens=0)
    assert p.planner.windows_for(background) == (p.windows.wide_tokens,)
    full = CompletionRequest(PREFIX, SUFFIX, doc_id="d", mode="full")
    assert p.planner.windows_for(full) == (400,)
    gpu = planner(GPU)
    assert gpu.planner.windows_for(keystroke()) == (gpu.windows.wide_tokens,)  # no narrow
