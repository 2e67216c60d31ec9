"""How long a completion request may take before it is answered empty: the one place.

Automatic requests get `AUTOMATIC_DEADLINE_S` (a late suggestion is useless in an editor; the
checks ask for an answer within 10 s). An explicit invocation (the user asked, and waits) gets
the full prompt; on a slow model (one that prefilled slower than SLOW_PREFILL_MS_PER_TOKEN when
it loaded: the small model on 2 CPU cores, ~20 ms) its cold prefill takes ~20 s, so it may take
twice what the measured prefill speed predicts, at most `EXPLICIT_DEADLINE_S`. A fast model (the
tiny one: ~7 ms) keeps the automatic deadline, so that a busy machine never makes it hang.

The clock starts once a backend serves: a request held while the model loads waits for the
model first (at most HOLD_LIMIT_S).
"""

from __future__ import annotations

import os

from ghostfim.engine.backend import CompletionBackend

SLOW_PREFILL_MS_PER_TOKEN = 15.0


def _env_seconds(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


AUTOMATIC_DEADLINE_S = _env_seconds("GHOSTFIM_REQUEST_DEADLINE_S", 8.0)
EXPLICIT_DEADLINE_S = _env_seconds("GHOSTFIM_EXPLICIT_DEADLINE_S", 120.0)
HOLD_LIMIT_S = _env_seconds("GHOSTFIM_HOLD_LIMIT_S", 300.0)  # a first download may take minutes


def answer_deadline_s(
    explicit: bool, backend: CompletionBackend | None, full_prompt_tokens: int
) -> float:
    """Seconds a request may run on `backend` before it is answered empty."""
    if not explicit or backend is None or full_prompt_tokens <= 0:
        return AUTOMATIC_DEADLINE_S
    expected_ms = backend.expected_prefill_ms(full_prompt_tokens)
    if expected_ms is None or expected_ms / full_prompt_tokens < SLOW_PREFILL_MS_PER_TOKEN:
        return AUTOMATIC_DEADLINE_S
    return min(EXPLICIT_DEADLINE_S, max(AUTOMATIC_DEADLINE_S, 2 * expected_ms / 1000 + 2))
