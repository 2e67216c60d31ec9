"""engine/text/finish.py: how every request ends, local or remote (the stop rules chosen for
the request, the cleaned suggestion, and what the Completion tells the service)."""

from __future__ import annotations

from ghostfim.engine.backend import CompletionRequest
from ghostfim.engine.text.finish import finish, stop_policy
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
