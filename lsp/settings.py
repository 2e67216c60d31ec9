"""The server's settings: the camelCase table over the engine's configuration.

Every default is declared once, in `ghostfim.engine.config.EngineConfig`; this module only maps
the keys a client writes (section `ghostfim`, camelCase, `model` nested) to its fields, with a
validator each whose range the editors' settings declare too (tests/unit/lsp/test_settings_sync.py).

Read from `initializationOptions` and `workspace/didChangeConfiguration`. A bad value never
stops the server and never switches the model: it is reported and the field keeps its last
valid value; a key left out keeps its value too. See docs/protocol.md for the table.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ghostfim.engine.config import (
    BACKENDS,
    FILTER_MODES,
    MODEL_SIZES,
    MULTILINE_MODES,
    WORKSPACE_CONTEXT_MODES,
    EngineConfig,
)
from ghostfim.engine.secrets import BackendUrlError, check_backend_url, redact_url

Settings = EngineConfig  # the server's settings are the engine's configuration


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    raise ValueError("expected true or false")


@dataclass(frozen=True)
class IntRange:
    """A whole number in lo..hi (the range the editors' settings declare too)."""

    lo: int
    hi: int
    auto: bool = False  # "auto" (or null) is allowed too, and reads as None

    def __call__(self, v: Any) -> int | None:
        if self.auto and (v == "auto" or v is None):
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not float(v).is_integer():
            raise ValueError("expected a whole number")
        if not self.lo <= int(v) <= self.hi:
            raise ValueError(f"expected {self.lo}..{self.hi}")
        return int(v)


@dataclass(frozen=True)
class NumberRange:
    """A number in lo..hi."""

    lo: float
    hi: float
    auto: bool = False

    def __call__(self, v: Any) -> float | None:
        if self.auto and (v == "auto" or v is None):
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
            raise ValueError("expected a number")
        if not self.lo <= v <= self.hi:
            raise ValueError(f"expected {self.lo:g}..{self.hi:g}")
        return float(v)


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


def _backend_url(v: Any) -> str:
    """An http(s) URL, or empty for the backend's default port on this machine."""
    text = _str(v)
    try:
        return check_backend_url(text)
    except BackendUrlError as exc:
        raise ValueError(str(exc)) from None


def _draft(v: Any) -> str:
    """ "auto", "none", a preset or a path."""
    if v is None:
        return "auto"
    if not isinstance(v, str) or not v.strip():
        raise ValueError('expected "auto", "none", a preset or the path of a .gguf file')
    return v.strip()


def _model_size(v: Any) -> str | None:
    return None if v is None else _choice(MODEL_SIZES)(v)


# settings key (as the client writes it) -> (field name, validator)
KEYS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "enable": ("enable", _bool),
    "model.size": ("model_size", _model_size),
    "model.path": ("model_path", _optional_str),
    "model.draft": ("model_draft", _draft),
    "nGpuLayers": ("n_gpu_layers", IntRange(-1, 10_000)),
    "debounceMs": ("debounce_ms", NumberRange(0, 2000, auto=True)),
    "maxTokens": ("max_tokens", IntRange(1, 1024)),
    "multiline": ("multiline", _choice(MULTILINE_MODES)),
    "prefixTokens": ("prefix_tokens", IntRange(16, 16_384)),
    "suffixTokens": ("suffix_tokens", IntRange(0, 16_384)),
    "keystrokePrefillMs": ("keystroke_prefill_ms", NumberRange(1, 10_000)),
    "maxRestOfLine": ("max_rest_of_line", IntRange(0, 10_000)),
    "postprocess": ("postprocess", _bool),
    "filter": ("filter", _choice(FILTER_MODES)),
    "acceptanceStats": ("acceptance_stats", _bool),
    "extraContext": ("extra_context", _bool),
    "extraContextTokens": ("extra_context_tokens", IntRange(0, 16_384, auto=True)),
    "workspaceContext": ("workspace_context", _choice(WORKSPACE_CONTEXT_MODES)),
    "workspaceContextTokens": ("workspace_context_tokens", IntRange(0, 16_384, auto=True)),
    "backend": ("backend", _choice(BACKENDS)),
    "backendUrl": ("backend_url", _backend_url),
    "backendModel": ("backend_model", _str),
    "backendApiKeyEnv": ("backend_api_key_env", _str),
    "backendTimeoutMs": ("backend_timeout_ms", NumberRange(50, 600_000)),
    "backendAllowInsecure": ("backend_allow_insecure", _bool),
    "kvSnapshotMb": ("kv_snapshot_mb", IntRange(0, 65_536)),
    "maxDocumentMb": ("max_document_mb", NumberRange(0.01, 4096)),
}
AUTO_FIELDS = (
    "debounce_ms",
    "extra_context_tokens",
    "workspace_context_tokens",
)  # None is written "auto"

# --- workspace trust --------------------------------------------------------------------------
# Every setting is classified here, once: a repository the user merely opened must not choose
# what runs, what is loaded or downloaded, or where code and keys go. VS Code ignores an
# untrusted workspace's own values of exactly the TRUST_SENSITIVE keys (package.json
# `capabilities.untrustedWorkspaces.restrictedConfigurations`); the Neovim plugin takes every
# setting from the user's own configuration. tests/unit/lsp/test_settings_sync.py fails for a
# key in neither table, for a free-text or `backend*` key not in TRUST_SENSITIVE, and for a
# package.json whose restricted list is not exactly this one.

# The editors' own settings: VS Code declares them beside KEYS and never sends them.
CLIENT_KEYS: tuple[str, ...] = ("serverPath", "serverArgs", "trace.server")

# key -> why a workspace must not choose it (it loads a file, downloads, runs, or sends).
TRUST_SENSITIVE: dict[str, str] = {
    "model.size": "a preset is downloaded (up to 2 GB from Hugging Face) and loaded",
    "model.path": "llama.cpp parses the GGUF file it names",
    "model.draft": "a path: llama.cpp parses that file; a preset: it is downloaded",
    "backend": "a remote kind sends the code around the cursor to a host",
    "backendUrl": "the host that gets the code and the API key",
    "backendModel": "what the host runs, and what the user's API key is spent on",
    "backendApiKeyEnv": "whose value is sent to the host: any of the server's variables",
    "backendTimeoutMs": "how long code is in flight to the host; the remote connection is "
    "the user's choice as a whole (every backend* key)",
    "backendAllowInsecure": "the key and the code cross the network in clear text",
    "serverPath": "the program that runs",
    "serverArgs": "the arguments that program runs with",
}

# key -> why a workspace may set it: it only tunes what the user's chosen model does on this
# machine, within the ranges above, and names no file, program or host.
NOT_TRUST_SENSITIVE: dict[str, str] = {
    "enable": "suggestions on or off",
    "nGpuLayers": "where the chosen model's layers run, GPU or CPU",
    "debounceMs": "a wait before answering",
    "maxTokens": "the length of a suggestion",
    "multiline": "the shape of a suggestion",
    "prefixTokens": "how much of the open file the model sees",
    "suffixTokens": "how much of the open file the model sees",
    "keystrokePrefillMs": "work per keystroke",
    "maxRestOfLine": "when to suggest",
    "postprocess": "how a suggestion is cleaned",
    "filter": "which suggestions are shown",
    "acceptanceStats": "a local file at a fixed place in the user's state directory, never "
    "sent (engine/service/localstats.py)",
    "extraContext": "text of documents open in this window, sent only where the user's own "
    "backend settings (restricted) already send the file being typed in",
    "extraContextTokens": "how much of that text",
    "workspaceContext": "signatures and similar code from the workspace's own files (read, "
    "never run or imported; secret-named string values hidden), sent only where the user's own "
    "backend settings already send the file",
    "workspaceContextTokens": "how much of them",
    "kvSnapshotMb": "a memory budget that only the user's own editing fills",
    "maxDocumentMb": "which open documents get context picks: none past this size",
    "trace.server": "an LSP log in the editor's own output channel",
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

    Keys that are absent keep their value from `base` (the defaults when None), and so do
    keys whose value is bad: a typo never resets a setting, let alone switches the model.
    """
    base = base or Settings()
    raw = unwrap_section(raw)
    if raw is None:
        return base, []
    if not isinstance(raw, Mapping):
        return base, [f"ghostfim settings must be an object, got {type(raw).__name__}"]
    changes: dict[str, Any] = {}
    problems: list[str] = []
    if "model" in raw and raw["model"] is not None and not isinstance(raw["model"], Mapping):
        problems.append(
            f"ghostfim.model: {raw['model']!r} is invalid (expected an object with size or "
            f"path); keeping {_shown(base, 'model_size')!r}"
        )
        raw = {k: v for k, v in raw.items() if k != "model"}
    flat = _flatten(raw)
    if isinstance(raw.get("model"), Mapping):
        # A `model` object names the model whole: a size alone is no longer a path's.
        flat = {"model.size": None, "model.path": None, "model.draft": "auto", **flat}
    model_invalid = False
    for key, value in flat.items():
        if key not in KEYS:
            problems.append(f"unknown setting ghostfim.{key} (ignored)")
            continue
        name, validate = KEYS[key]
        try:
            changes[name] = validate(value)
        except ValueError as exc:
            model_invalid = model_invalid or key.startswith("model.")
            problems.append(
                f"ghostfim.{key}: {_quoted(name, value)} is invalid ({exc}); "
                f"keeping {_quoted(name, _shown(base, name))}"
            )
    if model_invalid:
        # The model is named as a whole: one bad part keeps all of it (what serves now). A
        # size typo must not read as "no size, no path" and load the default over it.
        changes.pop("model_size", None)
        changes.pop("model_path", None)
        changes.pop("model_draft", None)
    return replace(base, **changes), problems


# Values quoted back in messages only once redacted: a URL's credentials never reach one.
_URL_FIELDS = frozenset({"backend_url"})


def _quoted(name: str, value: Any) -> str:
    if name in _URL_FIELDS and isinstance(value, str):
        return repr(redact_url(value))
    return repr(value)


def _shown(settings: Settings, name: str) -> Any:
    value = getattr(settings, name)
    return "auto" if value is None and name in AUTO_FIELDS else value
