"""What the completion service needs from whatever generates suggestions.

`ghostfim.engine.session.ModelSession` (the in-process model) is one; a remote inference server behind
HTTP (llama-server, an OpenAI-compatible server, Ollama) is another. The service calls these
from its single model thread; `cancel` may be set from any thread and must stop the work (a
remote backend closes its stream so the server stops generating).
"""

from __future__ import annotations

from typing import Protocol

from ghostfim.engine.session import CancelToken, Completion, CompletionRequest, ModelInfo, OnText


class CompletionBackend(Protocol):
    info: ModelInfo
    keystroke_prefill_ms: float
    decode_steps: int  # work counters, reported in ghostfim/status
    prefill_chunks: int

    def complete(
        self,
        request: CompletionRequest,
        cancel: CancelToken | None = None,
        on_text: OnText | None = None,
    ) -> Completion: ...

    def full_suffix_tokens(self, suffix: str) -> int:
        """How much suffix a full prompt holds (to know whether a keystroke prompt cut it)."""
        ...

    def close(self) -> None: ...
