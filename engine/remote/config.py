"""A remote backend's configuration, its errors, and the token counting it does without a
tokenizer (engine/remote/backends.py uses them)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from ghostfim.engine.config import DEFAULT_BUDGETS, DEFAULTS, BackendSpec, Budgets

RemoteKind = Literal["llama-server", "openai", "ollama"]

# Each server's own default port on this machine (what its docs start it with).
DEFAULT_URLS: dict[str, str] = {
    "llama-server": "http://127.0.0.1:8080",
    "openai": "http://127.0.0.1:8000",  # vLLM's default
    "ollama": "http://127.0.0.1:11434",
}

# There is no tokenizer on this side, so prompt budgets count characters: code averages 3.5 to
# 4 characters a token with the coder models' BPE vocabularies; 3.5 errs towards shorter prompts.
CHARS_PER_TOKEN = 3.5


# --- errors ---------------------------------------------------------------------------------
class RemoteBackendError(RuntimeError):
    """The server could not serve this request; the message is meant for the status line."""


class RemoteUnavailable(RemoteBackendError):
    """No connection (refused, reset, unknown host): the server is down or unreachable."""


class RemoteTimeout(RemoteBackendError):
    """The server accepted the request but did not answer (or stream) within the timeout."""


# --- configuration --------------------------------------------------------------------------
@dataclass(frozen=True)
class RemoteConfig:
    kind: RemoteKind
    url: str = ""  # empty: the server's default port on 127.0.0.1
    model: str = ""  # empty: ask the server (llama-server, openai); required for ollama
    api_key_env: str = ""  # name of the environment variable holding the key (never the key)
    timeout_ms: float = DEFAULTS.backend_timeout_ms
    budgets: Budgets = DEFAULT_BUDGETS

    @classmethod
    def of(cls, spec: BackendSpec) -> RemoteConfig:
        assert spec.kind != "local"
        return cls(
            kind=spec.kind,
            url=spec.identity or "",
            model=spec.remote_model,
            api_key_env=spec.api_key_env,
            timeout_ms=spec.timeout_ms,
            budgets=spec.budgets,
        )

    @property
    def base_url(self) -> str:
        url = (self.url or DEFAULT_URLS[self.kind]).strip().rstrip("/")
        if "://" not in url:
            url = "http://" + url
        if self.kind == "openai" and url.endswith("/v1"):
            url = url[: -len("/v1")]  # users copy the OpenAI base URL, which ends in /v1
        return url

    @property
    def shown_url(self) -> str:
        """The URL without user:password@ (it goes into the status and the logs)."""
        parts = urlsplit(self.base_url)
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        return urlunsplit((parts.scheme, host, parts.path, "", ""))

    @property
    def timeout_s(self) -> float:
        return self.timeout_ms / 1000.0


# --- token counting without a tokenizer ---------------------------------------------------
def approx_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def approx_tokenize(text: str) -> list[int]:
    """PromptBuilder counts tokens with len(tokenize(text)); ids are never used here."""
    return [0] * approx_tokens(text)
