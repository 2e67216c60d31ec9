"""Behaviour that depends on the model: the real small model (Qwen2.5-Coder 0.5B) on real text."""

from __future__ import annotations

import threading
import time

import pytest

from ghostfim.engine.backend import CancelToken, CompletionRequest
from ghostfim.engine.local.kvslots import SLOT_FULL, common_prefix_len
from ghostfim.engine.local.session import ModelSession
from tests.support.sessions import full_plan

pytestmark = pytest.mark.model


def split(source: str, marker: str) -> tuple[str, str]:
    i = source.index(marker) + len(marker)
    return source[:i], source[i:]


def test_fim_completion_inside_a_function_is_plausible_code(
    small_session: ModelSession, sample_source: str
) -> None:
    prefix, suffix = split(sample_source, '"""Population standard deviation."""\n    ')
    c = small_session.complete(CompletionRequest(prefix=prefix, suffix=suffix))
    assert c.text.startswith("return"), c.text
    assert "sqrt" in c.text or "** 0.5" in c.text, c.text
    compile(prefix + c.text + suffix, "<completed>", "exec")  # the filled file parses


def test_typing_one_character_redecodes_only_a_few_tokens(
    small_session: ModelSession, sample_source: str
) -> None:
    prefix, suffix = split(sample_source, '"""Population standard deviation."""\n    ')
    small_session.complete(
        CompletionRequest(prefix=prefix, suffix=suffix, doc_id="t", mode="keystroke")
    )
    c = small_session.complete(
        CompletionRequest(prefix=prefix + "r", suffix=suffix, doc_id="t", mode="keystroke")
    )
    t = c.timings
    assert t.prefill_new_tokens <= 3 + t.suffix_tokens + 2, t
    assert t.prefill_reused_tokens >= 0.9 * (t.prefill_reused_tokens + t.prefill_new_tokens), t
    assert c.text.startswith("eturn"), c.text


def test_full_prompt_holds_whole_suffix_keystroke_prompt_a_budget(
    small_session: ModelSession, sample_source: str
) -> None:
    prefix, suffix = split(sample_source, "def variance(values):\n    ")
    full = small_session.plan(CompletionRequest(prefix=prefix, suffix=suffix, doc_id="b")).prompt
    small_session.complete(CompletionRequest(prefix=prefix, suffix=suffix, doc_id="b"))
    plan = small_session.plan(
        CompletionRequest(prefix=prefix + '"', suffix=suffix, doc_id="b", mode="keystroke")
    )
    keystroke = plan.prompt
    assert full.suffix_units_used == full.suffix_units_total > 3
    allowed = small_session.cost.tokens_within(small_session.planner.keystroke_prefill_ms)
    new = len(keystroke.tokens) - common_prefix_len(plan.slot.cached, keystroke.tokens)
    # Within the budget, unless even the bare prompt (no suffix at all) is over it.
    assert new <= allowed + 2 or keystroke.suffix_units_used == 0, (new, allowed)


def _long_prompt(sample_source: str) -> tuple[str, str]:
    body = "\n".join(f"def helper_{i}(x):\n    return x * {i} + {i * 7}\n" for i in range(60))
    return body + "\n" + sample_source, ""


def test_cancel_stops_prefill_of_text_before_the_cursor_at_a_chunk_boundary(
    small_session: ModelSession, sample_source: str
) -> None:
    """The text before the cursor (what the next keystroke shares) finishes its chunk and
    stays cached; nothing past the chunk in flight runs."""
    prefix, _ = _long_prompt(sample_source)
    tokens = small_session.tokenize(prefix)
    small_session.complete(CompletionRequest(prefix="x = 1\n", suffix=""))  # evict the cache
    cancel = CancelToken()
    chunks_before = small_session.prefill_chunks
    errors: list[BaseException] = []

    def run() -> None:
        try:
            small_session.prefill(full_plan(small_session, tokens, stable=len(tokens)), cancel)
        except BaseException as exc:  # Cancelled, expected
            errors.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    time.sleep(0.6)
    cancel.cancel()
    cancelled_at = time.perf_counter()
    chunks_at_cancel = small_session.prefill_chunks
    worker.join(timeout=30)
    stopped_after = time.perf_counter() - cancelled_at
    assert errors and type(errors[0]).__name__ == "Cancelled"
    assert small_session.prefill_chunks - chunks_at_cancel <= 1, "ran past the chunk in flight"
    assert small_session.prefill_chunks > chunks_before
    # One chunk is sized to about 250 ms of prefill; allow for a slow, shared machine.
    assert stopped_after < 3.0, stopped_after
    # What was prefilled before the cancel is kept and reused.
    cached = small_session.slots.tokens(SLOT_FULL)
    kept = len(cached)
    assert 0 < kept < len(tokens) and cached == tokens[:kept]


def test_cancel_aborts_a_full_prompt_at_once(
    small_session: ModelSession, sample_source: str
) -> None:
    """A full prompt (explicit, refresh) prefills in large chunks that a cancel aborts inside:
    the keystrokes that cancel it use their own KV slots."""
    prefix, suffix = _long_prompt(sample_source)
    small_session.complete(CompletionRequest(prefix="y = 2\n", suffix=""))  # evict the cache
    cancel = CancelToken()
    result: list[object] = []
    worker = threading.Thread(
        target=lambda: result.append(
            small_session.complete(
                CompletionRequest(prefix=prefix, suffix=suffix, doc_id="long"), cancel
            )
        )
    )
    worker.start()
    time.sleep(0.5)
    cancel.cancel()
    cancelled_at = time.perf_counter()
    worker.join(timeout=30)
    stopped_after = time.perf_counter() - cancelled_at
    c = result[0]
    assert c.cancelled and c.stop_reason == "cancelled"  # type: ignore[attr-defined]
    assert stopped_after < 0.5, stopped_after  # a 1 s chunk, aborted inside


def test_cancel_stops_decoding_within_one_step(
    small_session: ModelSession, sample_source: str
) -> None:
    prefix = sample_source + "\n\nclass Matrix:\n"
    request = CompletionRequest(prefix=prefix, suffix="", max_tokens=400, multiline="always")
    small_session.complete(replace_tokens(request, 0))  # warm the prompt
    cancel = CancelToken()
    seen = threading.Event()
    steps_at_cancel: list[int] = []

    def on_text(text: str, marks: tuple[tuple[int, float], ...]) -> None:
        if len(text) > 20 and not seen.is_set():
            steps_at_cancel.append(small_session.decode_steps)
            cancel.cancel()
            seen.set()

    c = small_session.complete(request, cancel, on_text)
    assert c.cancelled and seen.is_set()
    assert small_session.decode_steps - steps_at_cancel[0] <= 1


def replace_tokens(request: CompletionRequest, n: int) -> CompletionRequest:
    from dataclasses import replace

    return replace(request, max_tokens=n)


def test_long_tokens_detokenize_exactly(small_session: ModelSession) -> None:
    text = "x = [\n" + " " * 48 + "1,\n" + "#" + "=" * 78 + "\n" + "\t" * 12 + "y\n"
    tokens = small_session.tokenize(text)
    pieces = [small_session.model.token_piece(t) for t in tokens]
    assert max(len(p) for p in pieces) > 32, "the text should hold a token longer than 32 bytes"
    assert b"".join(pieces).decode() == text


def test_the_whole_suggestion_is_generated_and_only_its_sure_start_shown(
    small_session: ModelSession,
) -> None:
    """The issue's own example: at `if f.` the model is sure of `startswith` and not of what
    follows. All of it is generated and kept (a user who types on meets it with no request);
    what shows ends before the unsure part, and after the user types into it, the rule judges
    again from there."""
    from ghostfim.engine.service.filter import ConfidenceFilter
    from ghostfim.engine.service.suggestions import shown_part
    from ghostfim.engine.text.place import place_of

    prefix, suffix = "fields = [f for f in field_list if f.", "]\n"
    rule = ConfidenceFilter().confidence_for(place_of("python", prefix, suffix), explicit=False)
    c = small_session.complete(CompletionRequest(prefix, suffix, mode="keystroke", max_tokens=24))
    ends = [end for end, _ in c.marks]
    assert ends == sorted(set(ends)) and ends[-1] == len(c.text)  # the marks fit the text
    shown = shown_part(c.text, c.marks, rule)
    assert shown and len(shown) < len(c.text) and c.text.startswith(shown), (shown, c.text)
    typed = c.text[: len(shown) + 2]  # into the unsure part
    assert c.text[len(typed) :].startswith(shown_part(c.text, c.marks, rule, typed))
