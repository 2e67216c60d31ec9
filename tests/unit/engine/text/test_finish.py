"""engine/text/finish.py: how every request ends, local or remote (the stop rules chosen for
the request, the cleaned suggestion, and what the Completion tells the service)."""

from __future__ import annotations

from ghostfim.engine.backend import CompletionRequest
from ghostfim.engine.text.finish import finish, marks_in, stop_policy
from ghostfim.engine.timings import Timings


def test_the_stop_policy_follows_the_request() -> None:
    request = CompletionRequest(prefix="def f(x):\n    return x", suffix="\n", multiline="never")
    ctx, policy = stop_policy(request)
    assert ctx.line_before == "    return x" and ctx.rest_of_line == ""
    assert policy.check(" + 1\n    y").stop  # one line: the newline ends it
    block = CompletionRequest(prefix="def f(x):\n", suffix="", multiline="always")
    assert not stop_policy(block)[1].check("    y = x\n    return y").stop


def test_the_suggestion_is_cleaned_and_the_raw_text_kept() -> None:
    request = CompletionRequest(prefix="x = foo(", suffix=")\n", mode="keystroke")
    ctx, _ = stop_policy(request)
    timings = Timings(ttft_ms=5.0)
    c = finish(request, ctx, "a, b)  ", "eog", timings, suffix_cut=True, widen=True)
    assert (c.text, c.raw_text, c.stop_reason) == ("a, b", "a, b)  ", "eog")
    assert c.timings is timings and c.mode == "keystroke" and c.suffix_cut and c.widen
    assert not c.cancelled


def test_a_cancel_and_switched_off_rules() -> None:
    request = CompletionRequest(prefix="x = foo(", suffix=")\n", postprocess=False)
    ctx, _ = stop_policy(request)
    cancelled = finish(request, ctx, "a", "cancelled", Timings())
    assert cancelled.cancelled and cancelled.text == "a" and cancelled.mode == "full"
    raw = finish(request, ctx, "a, b)  \n\n", "eog", Timings())
    assert raw.text == "a, b)"  # only well formed: the blank end goes, the bracket stays
    assert finish(request, ctx, "", "prefill_only", Timings()).text == ""


def test_the_tokens_marks_move_to_the_cleaned_text() -> None:
    """The clean-up drops the overlap with the text after the cursor: the marks follow, and
    the token it cut ends where the suggestion does."""
    request = CompletionRequest(prefix="x = foo(", suffix=")\n", mode="keystroke")
    ctx, _ = stop_policy(request)
    c = finish(
        request, ctx, "a, b)", "eog", Timings(), token_probs=(0.9, 0.8, 0.7),
        token_ends=(1, 4, 5),
    )  # fmt: skip
    assert c.text == "a, b" and c.marks == ((1, 0.9), (4, 0.8))


def test_marks_of_indentation_already_typed_go() -> None:
    assert marks_in("return x", "    return x", ((4, 0.5), (10, 0.9), (12, 0.8))) == (
        (6, 0.9),
        (8, 0.8),
    )
    assert marks_in("", "abc", ((3, 0.9),)) == ()
    # A clean-up that rewrote the text: one mark for all of it, as sure as all its tokens.
    assert marks_in("xyz", "abc", ((1, 0.5), (3, 0.5))) == ((3, 0.25),)
