"""The contract between the completion service and whatever generates suggestions.

`ghostfim.engine.local.session.ModelSession` (the in-process model) is one backend; a remote
inference server behind HTTP (`ghostfim.engine.remote.backends`: llama-server, an OpenAI-compatible
server, Ollama) is another. The service calls them from its single model thread; a
`CancelToken` may be set from any thread and must stop the work (a remote backend closes its
stream so that the server stops generating).

This module holds types only. Both backends end a request the same way, with
`engine/text/finish.py`: the stop rules have cut the raw text, the clean-up rules make the
suggestion an editor shows, and the `Completion` says what the service needs to decide its
follow-ups (whether the prompt cut the suffix, whether a wider window is wanted).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from ghostfim.engine.config import Budgets, BudgetsInEffect
from ghostfim.engine.context.definitions import DefinitionBlock
from ghostfim.engine.context.guide import Members
from ghostfim.engine.context.ring import ExtraContext
from ghostfim.engine.text.stops import Multiline
from ghostfim.engine.timings import Timings

PromptMode = Literal["keystroke", "full"]
# Where a token's text ends in a suggestion, and the model's probability of it: what the
# confidence rule judges (engine/text/confidence.py). Empty where the backend does not know.
Mark = tuple[int, float]
# A suggestion as it grows: its text so far and the marks of its tokens.
OnText = Callable[[str, tuple[Mark, ...]], None]


class Cancelled(Exception):
    """The request's CancelToken was set; the KV cache holds only fully decoded tokens."""


class CancelToken:
    """A flag the engine polls between chunks/steps (and llama.cpp between graph nodes).

    Set from any thread: a plain attribute, since assigning it is atomic, and reading it
    (thousands of times a second, from the abort callback too) costs no call."""

    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


NEVER_CANCELLED = CancelToken()


@dataclass(frozen=True)
class CompletionRequest:
    prefix: str  # document text before the cursor
    suffix: str  # document text after the cursor
    doc_id: str = ""  # keeps the prefix window sticky per document
    cursor_line: int | None = None  # 0-based; counted from prefix when None
    mode: PromptMode = "full"  # "keystroke": suffix within the prefill budget
    max_tokens: int = 64
    multiline: Multiline = "auto"
    background: bool = False  # droppable work: a cancel may abort any part of the prefill
    # A background keystroke prefill of the narrow start window rather than the wide one (the
    # workspace block's switch: engine/service/followups.py). Ignored where there is no narrow
    # window (a GPU) and by foreground requests, which choose their window by what is warm.
    start_window: bool = False
    postprocess: bool = True  # the clean-up rules of engine/text/postprocess.py (off: benchmark)
    # Chunks of other files for a full prompt (engine/context/); keystroke prompts ignore it.
    extra_context: ExtraContext | None = None
    # Definitions from the workspace that the code near the cursor uses (engine/context/
    # definitions.py), for keystroke and full prompts alike; None when `workspaceContext` is off.
    definitions: DefinitionBlock | None = None
    # The names `a.b.` may go on with, where the workspace index knows them all (None: it
    # does not): a local model spells only those after such a dot (engine/context/guide.py).
    # None when `workspaceContext` is off; remote servers ignore it.
    members: Members | None = None
    # Stop generating once the model's own chance of the text so far (the product of its
    # tokens' probabilities) falls below this: what follows is text a user would almost never
    # be shown (the confidence filter's, engine/service/filter.py). 0: never. Remote servers
    # report no probabilities and ignore it.
    give_up_below: float = 0.0

    @property
    def line(self) -> int:
        """The cursor's 0-based line."""
        return self.prefix.count("\n") if self.cursor_line is None else self.cursor_line


@dataclass
class Completion:
    text: str  # cleaned suggestion (what an editor shows)
    raw_text: str  # what the model generated, cut by the stop rules
    timings: Timings
    stop_reason: str
    cancelled: bool = False
    mode: PromptMode = "full"
    # The prompt held less suffix than a full prompt would: a pause refresh with the full
    # prompt can do better.
    suffix_cut: bool = False
    # The keystroke prompt used the narrow start window: a background prefill of the wide
    # window (the same request, background=True, max_tokens=0) makes the next keystrokes better.
    widen: bool = False
    # The model's probability of each token it generated, and where each token's text ends in
    # raw_text (empty for backends that do not know, such as remote servers).
    token_probs: tuple[float, ...] = ()
    token_ends: tuple[int, ...] = ()
    token_ids: tuple[int, ...] = ()  # the tokens generated (what a draft proposes)
    # The tokens' marks in `text` (the cleaned suggestion): what the confidence rule shows
    # of it, from any point the user has typed to (engine/service/suggestions.py).
    marks: tuple[Mark, ...] = ()
    # A draft model wrote the suggestion first and this one checked it (engine/local/drafted.py):
    # the draft's text, and how many of its tokens were kept.
    draft_text: str | None = None
    # The workspace's definitions the prompt held (workspaceContext), by name.
    definitions: tuple[str, ...] = ()


@dataclass(frozen=True)
class ModelInfo:
    name: str
    path: str
    preset: str | None
    device: str  # "cpu" or "cuda (<gpu name>)"
    n_gpu_layers: int
    family: str  # FIM template family
    n_ctx: int
    memory_bytes: int = 0  # the weights, as loaded (0: not known, as for a remote server)
    draft: DraftInfo | None = None  # a draft model checked by this one (speculative decoding)


@dataclass(frozen=True)
class KvEvent:
    """A KV snapshot saved or restored (engine/local/kvslots.py)."""

    kind: Literal["save", "restore"]
    doc_id: str
    tokens: int
    bytes: int
    ms: float


@dataclass(frozen=True)
class KvStatus:
    """What a backend keeps of its KV cache across documents."""

    snapshots: int
    snapshot_bytes: int
    snapshot_limit_bytes: int
    saved: int
    restored: int
    dropped: int  # evicted by the byte bound
    last_save_ms: float
    last_restore_ms: float
    recent: tuple[KvEvent, ...] = ()


@dataclass(frozen=True)
class DraftInfo:
    """The smaller model that writes suggestions first (speculative decoding)."""

    name: str
    path: str
    memory_bytes: int
    proposed: int = 0  # tokens it proposed so far
    accepted: int = 0  # of them, those the target kept

    @property
    def acceptance(self) -> float | None:
        return None if self.proposed == 0 else self.accepted / self.proposed


class CompletionBackend(Protocol):
    @property
    def info(self) -> ModelInfo: ...

    @property
    def decode_steps(self) -> int:
        """Work counters, reported in ghostfim/status: one-token decodes run ..."""
        ...

    @property
    def prefill_chunks(self) -> int:
        """... and prefill chunks."""
        ...

    def complete(
        self,
        request: CompletionRequest,
        cancel: CancelToken | None = None,
        on_text: OnText | None = None,
    ) -> Completion: ...

    def expected_prefill_ms(self, n_tokens: int) -> float | None:
        """What a cold prefill of n_tokens is expected to take here (None: not known, as for
        a remote server). The explicit request deadline is sized from it."""
        ...

    def set_budgets(self, budgets: Budgets) -> BudgetsInEffect:
        """Change the prompt budgets and the RAM for KV snapshots in place (on the model
        thread, between requests); the answer is what it can honour, and any clamp."""
        ...

    def forget_document(self, doc_id: str) -> None:
        """A document was closed: what is kept for it (KV snapshots) can go."""
        ...

    def kv_status(self) -> KvStatus | None:
        """What the backend keeps of its KV cache, for ghostfim/status (None: nothing)."""
        ...

    def close(self) -> None: ...
