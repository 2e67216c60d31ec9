"""The engine's configuration: every default, declared once.

`EngineConfig` is what the service runs with; the LSP server's settings (lsp/settings.py) are a
camelCase table over these fields with a validator each, and the editors' settings declare the
same ranges (tests/unit/lsp/test_settings_sync.py holds them together).

`Budgets` is one frozen value for the four budgets that change in place, without reopening the
backend: the prompt's prefix and suffix tokens, a keystroke's prefill time, the RAM for KV
snapshots. It travels whole: to loading, to `set_budgets`, to the remote configuration. What a
backend can honour is its own business (a KV slot holds so many tokens): it answers with the
budgets in effect and the clamps it applied (engine/prompt/builder.py `fit_budgets`).

`BackendSpec` is the backend's identity: what to open (the local model and its GPU layers, or
a remote server) plus the budgets. Two specs that differ only in budgets are the same backend
reconfigured in place (`same_backend`); any other difference opens a new one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ghostfim.engine.memory import DEFAULT_MAX_DOCUMENT_MB
from ghostfim.engine.secrets import redact_url
from ghostfim.engine.setup.presets import PRESET_NAMES, model_identity
from ghostfim.engine.text.stops import Multiline
from ghostfim.engine.tuning import AUTO_MAX_TOKENS, DEFINITIONS_AUTO_MAX_TOKENS

BackendKind = Literal["local", "llama-server", "openai", "ollama"]
FilterMode = Literal["adaptive", "fixed", "off"]
WorkspaceContextMode = Literal["auto", "off"]

MODEL_SIZES = PRESET_NAMES
MULTILINE_MODES: tuple[Multiline, ...] = ("auto", "always", "never")
BACKENDS: tuple[BackendKind, ...] = ("local", "llama-server", "openai", "ollama")
FILTER_MODES: tuple[FilterMode, ...] = ("adaptive", "fixed", "off")
WORKSPACE_CONTEXT_MODES: tuple[WorkspaceContextMode, ...] = ("auto", "off")


@dataclass(frozen=True)
class Budgets:
    prefix_tokens: int
    suffix_tokens: int
    keystroke_prefill_ms: float  # a keystroke's prefill budget (whole suffix if it fits)
    kv_snapshot_mb: int  # RAM for per-document KV snapshots (engine/local/kvslots.py)

    @property
    def snapshot_bytes(self) -> int:
        return self.kv_snapshot_mb * 1024 * 1024


@dataclass(frozen=True)
class Clamp:
    """A budget a backend could not honour, and why (reported, never silent)."""

    budget: str  # the Budgets field
    asked: float
    effective: float
    reason: str


@dataclass(frozen=True)
class BudgetsInEffect:
    """What a backend runs with: the budgets asked for, as far as it can honour them."""

    effective: Budgets
    clamps: tuple[Clamp, ...] = ()


@dataclass(frozen=True)
class EngineConfig:
    enable: bool = True
    model_size: str | None = None  # None: small on a CPU, medium when layers run on a GPU
    model_path: str | None = None  # a GGUF file; wins over model_size
    # A smaller model that writes suggestions first, checked by this one (engine/local/
    # drafted.py): "auto" (the small preset for a medium or large one), "none", a preset or
    # a GGUF file.
    model_draft: str = "auto"
    n_gpu_layers: int = -1  # -1: every layer when a CUDA GPU is usable
    debounce_ms: float | None = None  # None: adaptive (follows the typing rhythm)
    max_tokens: int = 64
    multiline: Multiline = "auto"
    prefix_tokens: int = 768
    suffix_tokens: int = 256
    keystroke_prefill_ms: float = 80.0
    kv_snapshot_mb: int = 256
    # Larger documents (MB of text, as characters) get no context picks and no whole-document
    # work; they are completed from the text around the cursor (engine/service/doclimit.py).
    max_document_mb: float = DEFAULT_MAX_DOCUMENT_MB
    max_rest_of_line: int = 8  # no automatic suggestion when more follows the cursor
    postprocess: bool = True  # the clean-up rules of engine/text/postprocess.py (off: benchmarks)
    # Confidence: cut a suggestion where the model stops being sure, and show nothing where
    # users refuse (engine/service/filter.py). "off" shows what the model wrote.
    filter: FilterMode = "adaptive"
    acceptance_stats: bool = True  # keep acceptance statistics on this machine (never sent)
    extra_context: bool = False  # chunks of other files before full prompts (engine/context/)
    extra_context_tokens: int | None = None  # their token budget; None: auto, 0: off
    # The workspace's code most like the lines before the cursor, and the definitions of the
    # workspace names used near it, before every prompt's prefix (engine/context/,
    # engine/service/workspace.py): "auto" or "off". On by default: on code the small model has
    # never seen, explicit requests get far more lines right that use another module's names,
    # at no cost to what the accepting users take (docs/benchmarks.md, "The workspace in the
    # prompt").
    workspace_context: WorkspaceContextMode = "auto"
    workspace_context_tokens: int | None = None  # their token budget; None: auto, 0: off
    backend: BackendKind = "local"
    backend_url: str = ""  # empty: the server's default port on 127.0.0.1
    backend_model: str = ""
    backend_api_key_env: str = ""  # the environment variable holding the key, never the key
    backend_timeout_ms: float = 5000.0
    # A key or URL credentials over plain http:// to another machine: refused unless this is
    # set (engine/secrets.py sends_in_clear); loopback needs no permission.
    backend_allow_insecure: bool = False

    @property
    def model_spec(self) -> str | None:
        """What the model loader is asked for: a path wins over a size."""
        return self.model_path or self.model_size

    @property
    def budgets(self) -> Budgets:
        return Budgets(
            self.prefix_tokens,
            self.suffix_tokens,
            self.keystroke_prefill_ms,
            self.kv_snapshot_mb,
        )

    @property
    def full_prompt_tokens(self) -> int:
        """The most a full prompt may hold: its text and, when on, the other files' chunks and
        the workspace context at their budgets ("auto" at its cap). The explicit request's
        deadline is sized from it."""
        tokens = self.prefix_tokens + self.suffix_tokens
        if self.extra_context:
            tokens += _budget_or(self.extra_context_tokens, AUTO_MAX_TOKENS)
        if self.workspace_context != "off":
            tokens += _budget_or(self.workspace_context_tokens, DEFINITIONS_AUTO_MAX_TOKENS)
        return tokens


def _budget_or(tokens: int | None, auto_cap: int) -> int:
    return auto_cap if tokens is None else tokens


DEFAULTS = EngineConfig()  # what the layers below take when they are not told otherwise
DEFAULT_BUDGETS = DEFAULTS.budgets


@dataclass(frozen=True)
class BackendSpec:
    """A backend's identity (hashable): what is opened, and the budgets it runs with."""

    kind: BackendKind
    identity: str | None  # local: the model file (presets.model_identity); remote: the URL
    model: str | None = field(default=None, compare=False)  # local: what the loader is asked
    draft: str = DEFAULTS.model_draft  # local: "auto", "none", or the draft's file (identity)
    n_gpu_layers: int = DEFAULTS.n_gpu_layers
    remote_model: str = DEFAULTS.backend_model
    api_key_env: str = DEFAULTS.backend_api_key_env
    timeout_ms: float = DEFAULTS.backend_timeout_ms
    allow_insecure: bool = DEFAULTS.backend_allow_insecure
    budgets: Budgets = field(default=DEFAULT_BUDGETS, compare=False)  # change in place

    def same_backend(self, other: object) -> bool:
        """Whether other opens the same backend (only the budgets may differ)."""
        return isinstance(other, BackendSpec) and self == other

    @property
    def label(self) -> str:
        if self.kind == "local":
            return self.model or "default model"
        # Shown in $/progress, messages and ghostfim/status: never the URL's credentials.
        where = redact_url(self.identity) if self.identity else "its default port"
        return f"{self.kind} at {where}"


def backend_spec(config: EngineConfig, default_model: str | None = None) -> BackendSpec:
    """The backend a configuration asks for."""
    if config.backend == "local":
        model = config.model_spec or default_model
        draft = config.model_draft
        return BackendSpec(
            "local",
            model_identity(model),  # a preset and its cached file's path are one model
            model,
            draft=draft if draft in ("auto", "none") else model_identity(draft) or draft,
            n_gpu_layers=config.n_gpu_layers,
            budgets=config.budgets,
        )
    return BackendSpec(
        config.backend,
        config.backend_url,
        remote_model=config.backend_model,
        api_key_env=config.backend_api_key_env,
        timeout_ms=config.backend_timeout_ms,
        allow_insecure=config.backend_allow_insecure,
        budgets=config.budgets,
    )
