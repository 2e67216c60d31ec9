"""The end of every request, local or remote: the stop rules that cut the raw text while it is
generated, and the clean-up rules that make the suggestion an editor shows."""

from __future__ import annotations

from ghostfim.engine.backend import Completion, CompletionRequest, Mark, OnText
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

    def partial(raw: str, marks: tuple[Mark, ...]) -> None:
        text = drop_indent_already_typed(raw, ctx)
        sink(text, marks_in(text, raw, marks))

    return partial


def marks_in(text: str, raw: str, marks: tuple[Mark, ...]) -> tuple[Mark, ...]:
    """The marks of `raw`'s tokens moved to `text`, the clean-up of `raw` (a part of it: the
    clean-up drops indentation at the start and overlap at the end). Tokens wholly outside
    `text` go; the one cut by its end ends there. A clean-up that rewrote the text keeps one
    mark for all of it, as sure as all its tokens together."""
    if not text or not marks:
        return ()
    start = raw.find(text)
    if start < 0:
        sure = 1.0
        for _, prob in marks:
            sure *= prob
        return ((len(text), sure),)
    moved: list[Mark] = []
    for end, prob in marks:
        end -= start
        if end <= 0:
            continue
        if end >= len(text):
            moved.append((len(text), prob))
            break
        moved.append((end, prob))
    return tuple(moved)


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
    text = clean_suggestion(raw, ctx, request.postprocess) if raw else ""
    return Completion(
        text,
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
        marks=marks_in(text, raw, tuple(zip(token_ends, token_probs, strict=True))),
    )
