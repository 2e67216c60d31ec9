"""The server's settings: one typed, fully defaulted object.

Read from `initializationOptions` and `workspace/didChangeConfiguration` (section `ghostfim`,
camelCase keys, `model` nested). A bad value never stops the server: it is reported and its
default is used. See docs/protocol.md for the table.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

MODEL_SIZES = ("tiny", "small", "medium", "large")
MULTILINE_MODES = ("auto", "always", "never")
BACKENDS = ("local", "llama-server", "openai", "ollama")


@dataclass(frozen=True)
class Settings:
    enable: bool = True
    model_size: str | None = None  # None: small on a CPU, medium with a CUDA GPU
    model_path: str | None = None
    n_gpu_layers: int = -1  # -1: all layers when a CUDA GPU is usable
    debounce_ms: float | None = None  # None: "auto" (adapts to the typing rhythm)
    max_tokens: int = 64
    multiline: str = "auto"
    prefix_tokens: int = 768
    suffix_tokens: int = 256
    keystroke_prefill_ms: float = 80.0
    max_rest_of_line: int = 8  # no automatic suggestion when more follows the cursor
    postprocess: bool = True  # clean-up rules on every suggestion (off: for comparisons)
    extra_context: bool = False  # chunks of other files before full prompts (engine/context.py)
    extra_context_tokens: int | None = None  # their token budget; None: "auto", 0: off
    backend: str = "local"
    backend_url: str = ""
    backend_model: str = ""
    backend_api_key_env: str = ""
    backend_timeout_ms: float = 5000.0
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def model_spec(self) -> str | None:
        """What the model loader is asked for: a path wins over a size."""
        return self.model_path or self.model_size


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    raise ValueError("expected true or false")


def _int_range(lo: int, hi: int) -> Callable[[Any], int]:
    def check(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not float(v).is_integer():
            raise ValueError("expected a whole number")
        if not lo <= int(v) <= hi:
            raise ValueError(f"expected {lo}..{hi}")
        return int(v)

    return check


def _number_range(lo: float, hi: float) -> Callable[[Any], float]:
    def check(v: Any) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
            raise ValueError("expected a number")
        if not lo <= v <= hi:
            raise ValueError(f"expected {lo:g}..{hi:g}")
        return float(v)

    return check


def _choice(options: tuple[str, ...]) -> Callable[[Any], str]:
    def check(v: Any) -> str:
        if v not in options:
            raise ValueError(f"expected one of {', '.join(options)}")
        return str(v)

    return check


def _optional_str(v: Any) -> str | None:
    if v is None or v == "":
        return None
    if not isinstance(v, str):
        raise ValueError("expected a string")
    return v


def _str(v: Any) -> str:
    if v is None:
        return ""
    if not isinstance(v, str):
        raise ValueError("expected a string")
    return v


def _debounce(v: Any) -> float | None:
    if v == "auto" or v is None:
        return None
    return _number_range(0, 2000)(v)


def _extra_context_tokens(v: Any) -> int | None:
    if v == "auto" or v is None:
        return None
    return _int_range(0, 16_384)(v)


def _model_size(v: Any) -> str | None:
    return None if v is None else _choice(MODEL_SIZES)(v)


# settings key (as the client writes it) -> (field name, validator)
_KEYS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "enable": ("enable", _bool),
    "model.size": ("model_size", _model_size),
    "model.path": ("model_path", _optional_str),
    "nGpuLayers": ("n_gpu_layers", _int_range(-1, 10_000)),
    "debounceMs": ("debounce_ms", _debounce),
    "maxTokens": ("max_tokens", _int_range(1, 1024)),
    "multiline": ("multiline", _choice(MULTILINE_MODES)),
    "prefixTokens": ("prefix_tokens", _int_range(16, 16_384)),
    "suffixTokens": ("suffix_tokens", _int_range(0, 16_384)),
    "keystrokePrefillMs": ("keystroke_prefill_ms", _number_range(1, 10_000)),
    "maxRestOfLine": ("max_rest_of_line", _int_range(0, 10_000)),
    "postprocess": ("postprocess", _bool),
    "extraContext": ("extra_context", _bool),
    "extraContextTokens": ("extra_context_tokens", _extra_context_tokens),
    "backend": ("backend", _choice(BACKENDS)),
    "backendUrl": ("backend_url", _str),
    "backendModel": ("backend_model", _str),
    "backendApiKeyEnv": ("backend_api_key_env", _str),
    "backendTimeoutMs": ("backend_timeout_ms", _number_range(50, 600_000)),
}


def _flatten(raw: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in raw.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and name == "model":
            flat.update(_flatten(value, "model."))
        else:
            flat[name] = value
    return flat


def unwrap_section(raw: Any) -> Any:
    """Accept `{"settings": {"ghostfim": {...}}}`, `{"ghostfim": {...}}` or the bare object."""
    if isinstance(raw, Mapping) and "settings" in raw and isinstance(raw["settings"], Mapping):
        raw = raw["settings"]
    if isinstance(raw, Mapping) and "ghostfim" in raw and isinstance(raw["ghostfim"], Mapping):
        raw = raw["ghostfim"]
    return raw


def parse_settings(raw: Any, base: Settings | None = None) -> tuple[Settings, list[str]]:
    """Settings from a client's object, and one message per bad or unknown value.

    Keys that are absent keep their value from `base` (the defaults when None); keys that are
    present but bad take their default and are reported.
    """
    base = base or Settings()
    defaults = Settings()
    raw = unwrap_section(raw)
    if raw is None:
        return base, []
    if not isinstance(raw, Mapping):
        return base, [f"ghostfim settings must be an object, got {type(raw).__name__}"]
    changes: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in _flatten(raw).items():
        if key not in _KEYS:
            problems.append(f"unknown setting ghostfim.{key} (ignored)")
            continue
        name, validate = _KEYS[key]
        try:
            changes[name] = validate(value)
        except ValueError as exc:
            default = getattr(defaults, name)
            auto = ("debounce_ms", "extra_context_tokens")
            shown = "auto" if default is None and name in auto else default
            problems.append(f"ghostfim.{key}: {value!r} is invalid ({exc}); using {shown!r}")
            changes[name] = default
    return replace(base, **changes), problems


def settings_to_client(settings: Settings) -> dict[str, Any]:
    """The settings in the client's shape (camelCase, model nested)."""
    out: dict[str, Any] = {}
    by_field = {name: key for key, (name, _) in _KEYS.items()}
    for f in fields(settings):
        key = by_field.get(f.name)
        if key is None:
            continue
        value = getattr(settings, f.name)
        if f.name in ("debounce_ms", "extra_context_tokens") and value is None:
            value = "auto"
        if key.startswith("model."):
            out.setdefault("model", {})[key.split(".", 1)[1]] = value
        else:
            out[key] = value
    return out
