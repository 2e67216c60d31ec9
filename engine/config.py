"""The engine's configuration: every default, declared once.

`EngineConfig` is what the service runs with; the LSP server's settings (lsp/settings.py) are a
camelCase table over these fields with a validator each, and the editors' settings declare the
same ranges (tests/test_settings_sync.py holds them together).

`BackendSpec` is the backend's identity: what to open (the local model and its GPU layers, or
a remote server) plus the prompt budgets. Two specs that differ only in budgets are the same
backend reconfigured in place (`same_backend`); any other difference opens a new one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from ghostfim.engine.text.stops import Multiline

BackendKind = Literal["local", "llama-server", "openai", "ollama"]

MODEL_SIZES = ("tiny", "small", "medium", "large")
MULTILINE_MODES: tuple[Multiline, ...] = ("auto", "always", "never")
BACKENDS: tuple[BackendKind, ...] = ("local", "llama-server", "openai", "ollama")


@dataclass(frozen=True)
class EngineConfig:
    enable: bool = True
    model_size: str | None = None  # None: small on a CPU, medium with a CUDA GPU
    model_path: str | None = None  # a GGUF file; wins over model_size
    n_gpu_layers: int = -1  # -1: every layer when a CUDA GPU is usable
    debounce_ms: float | None = None  # None: adaptive (follows the typing rhythm)
    max_tokens: int = 64
    multiline: Multiline = "auto"
    prefix_tokens: int = 768
    suffix_tokens: int = 256
    keystroke_prefill_ms: float = 80.0  # a keystroke's prefill budget (whole suffix if it fits)
    max_rest_of_line: int = 8  # no automatic suggestion when more follows the cursor
    postprocess: bool = True  # the clean-up rules of engine/postprocess.py (off: comparisons)
    extra_context: bool = False  # chunks of other files before full prompts (engine/context.py)
    extra_context_tokens: int | None = None  # their token budget; None: auto, 0: off
    kv_snapshot_mb: int = 256  # RAM for per-document KV snapshots (engine/kvslots.py)
    backend: BackendKind = "local"
    backend_url: str = ""  # empty: the server's default port on 127.0.0.1
    backend_model: str = ""
    backend_api_key_env: str = ""  # the environment variable holding the key, never the key
    backend_timeout_ms: float = 5000.0

    @property
    def model_spec(self) -> str | None:
        """What the model loader is asked for: a path wins over a size."""
        return self.model_path or self.model_size

    @property
    def snapshot_bytes(self) -> int:
        return self.kv_snapshot_mb * 1024 * 1024


DEFAULTS = EngineConfig()  # what the layers below take when they are not told otherwise


@dataclass(frozen=True)
class BackendSpec:
    """A backend's identity (hashable): what is opened, and the budgets it runs with."""

    kind: BackendKind
    identity: str | None  # local: the model file (see loader.model_identity); remote: the URL
    model: str | None = field(default=None, compare=False)  # local: what the loader is asked
    n_gpu_layers: int = DEFAULTS.n_gpu_layers
    remote_model: str = DEFAULTS.backend_model
    api_key_env: str = DEFAULTS.backend_api_key_env
    timeout_ms: float = DEFAULTS.backend_timeout_ms
    snapshot_bytes: int = 0  # remote backends keep none
    prefix_tokens: int = DEFAULTS.prefix_tokens
    suffix_tokens: int = DEFAULTS.suffix_tokens

    def same_backend(self, other: object) -> bool:
        """Whether other opens the same backend (only the budgets may differ: the prompt's
        and the snapshots' RAM, which change in place)."""
        if not isinstance(other, BackendSpec):
            return False
        return self._without_budgets() == other._without_budgets()

    def _without_budgets(self) -> BackendSpec:
        return replace(self, prefix_tokens=0, suffix_tokens=0, snapshot_bytes=0)

    @property
    def label(self) -> str:
        if self.kind == "local":
            return self.model or "default model"
        return f"{self.kind} at {self.identity or 'its default port'}"


def backend_spec(config: EngineConfig, default_model: str | None = None) -> BackendSpec:
    """The backend a configuration asks for."""
    if config.backend == "local":
        from ghostfim.engine.local.loading import model_identity  # imported late: llama.cpp

        model = config.model_spec or default_model
        return BackendSpec(
            "local",
            model_identity(model),  # a preset and its cached file's path are one model
            model,
            n_gpu_layers=config.n_gpu_layers,
            snapshot_bytes=config.snapshot_bytes,
            prefix_tokens=config.prefix_tokens,
            suffix_tokens=config.suffix_tokens,
        )
    return BackendSpec(
        config.backend,
        config.backend_url,
        remote_model=config.backend_model,
        api_key_env=config.backend_api_key_env,
        timeout_ms=config.backend_timeout_ms,
        prefix_tokens=config.prefix_tokens,
        suffix_tokens=config.suffix_tokens,
    )
