"""How long a completion request may take before it is answered empty: the one place.

Automatic requests get `GHOSTFIM_REQUEST_DEADLINE_S` (8 s; engine/env.py): a late suggestion
is useless in an editor, and the checks ask for an answer within 10 s. An explicit invocation
(the user asked, and waits) gets the full prompt with its workspace context, which on a CPU
takes seconds to prefill cold (the small model on 2 cores: ~1,300 tokens in 4-8 s), so it may
take twice what the measured prefill speed predicts for that prompt, plus 2 s to write its
lines, at least the automatic deadline and at most `GHOSTFIM_EXPLICIT_DEADLINE_S` (120 s).
A fast model's prediction stays under the automatic deadline, which it keeps; a deadline that
ignored the prediction cut a slow machine's explicit answers before their first line.

The clock starts once a backend serves: a request held while the model loads waits for the
model first (at most `GHOSTFIM_HOLD_LIMIT_S`, 300 s).
"""

from __future__ import annotations

from ghostfim.engine import env
from ghostfim.engine.backend import CompletionBackend


def hold_limit_s() -> float:
    return env.hold_limit_s()


def answer_deadline_s(
    explicit: bool, backend: CompletionBackend | None, full_prompt_tokens: int
) -> float:
    """Seconds a request may run on `backend` before it is answered empty."""
    automatic = env.automatic_deadline_s()
    if not explicit or backend is None or full_prompt_tokens <= 0:
        return automatic
    expected_ms = backend.expected_prefill_ms(full_prompt_tokens)
    if expected_ms is None:
        return automatic
    return min(env.explicit_deadline_s(), max(automatic, 2 * expected_ms / 1000 + 2))
