"""engine/backend.py: the contract's small pieces (the cancel token, the request's line)."""

from __future__ import annotations

import threading

from ghostfim.engine.backend import NEVER_CANCELLED, CancelToken, CompletionRequest


def test_a_cancel_token_is_set_once_from_any_thread() -> None:
    token = CancelToken()
    assert not token.cancelled
    thread = threading.Thread(target=token.cancel)
    thread.start()
    thread.join()
    assert token.cancelled
    token.cancel()  # again: still set
    assert token.cancelled and not NEVER_CANCELLED.cancelled


def test_the_cursor_line_is_counted_from_the_prefix_unless_given() -> None:
    assert CompletionRequest(prefix="a\nb\nc", suffix="").line == 2
    assert CompletionRequest(prefix="a\nb\nc", suffix="", cursor_line=40).line == 40  # a window
    r = CompletionRequest(prefix="", suffix="")
    assert (r.line, r.mode, r.max_tokens, r.background, r.postprocess) == (
        0,
        "full",
        64,
        False,
        True,
    )
