"""The end of every request, local or remote: the stop rules that cut the raw text while it is
generated, and the clean-up rules that make the suggestion an editor shows."""

from __future__ import annotations

from ghostfim.engine.backend import Completion, CompletionRequest, OnText
from ghostfim.engine.text.cursor import CursorContext
from ghostfim.engine.text.postprocess import clean_suggestion, drop_indent_already_typed
from ghostfim.engine.text.stops import StopPolicy
from ghostfim.engine.timings import Timings


def stop_policy(request: CompletionRequest) -> tuple[CursorContext, StopPolicy]:
    """The cursor's surroundings and the stop rules for this request."""
    ctx = CursorContext.around(request.prefix, request.suffix)
    return ctx, StopPolicy.for_context(request.multiline, ctx)


def streaming(
    on_text: OnText | None, request: CompletionRequest, ctx: CursorContext
) -> OnText | None:
    """`on_text` for a suggestion still being generated: the clean-up that cannot change as it
    grows (the indentation the user already typed) is applied to each partial text, so the
    streamed ghost text is a start of the final one; the rest of the rules wait for the end."""
    if on_text is None or not request.postprocess:
        return on_text
    sink = on_text

    def partial(raw: str) -> None:
        sink(drop_indent_already_typed(raw, ctx))

    return partial


def finish(
    request: CompletionRequest,
    ctx: CursorContext,
    raw: str,
    reason: str,
    timings: Timings,
    *,
    suffix_cut: bool = False,
    widen: bool = False,
    token_probs: tuple[float, ...] = (),
    token_ends: tuple[int, ...] = (),
    token_ids: tuple[int, ...] = (),
) -> Completion:
    """The cleaned suggestion, and what it says about the request."""
    return Completion(
        clean_suggestion(raw, ctx, request.postprocess) if raw else "",
        raw,
        timings,
        reason,
        cancelled=reason == "cancelled",
        mode=request.mode,
        suffix_cut=suffix_cut,
        widen=widen,
        token_probs=token_probs,
        token_ends=token_ends,
        token_ids=token_ids,
    )
