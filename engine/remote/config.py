"""A remote backend's configuration, its errors, and the token counting it does without a
tokenizer (engine/remote/backends.py uses them)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from ghostfim.engine import env
from ghostfim.engine.config import DEFAULT_BUDGETS, DEFAULTS, BackendSpec, Budgets
from ghostfim.engine.secrets import check_backend_url, redact_url, sends_in_clear

RemoteKind = Literal["llama-server", "openai", "ollama"]

# How a request's workspace definitions (CompletionRequest.definitions) reach the model
# (engine/remote/backends.py `place_definitions`): "comment", as comments at the top of the
# prefix text, or "repo", the model's repository-level layout. "comment" is the default for
# every protocol: on the Instruct models ghostfim fetches it helped where the repository-level
# layout hurt (issue 31). RemoteConfig.context_style None reads this when a request is built.
RemoteContextStyle = Literal["comment", "repo"]
DEFAULT_CONTEXT_STYLE: RemoteContextStyle = "comment"

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
    allow_insecure: bool = DEFAULTS.backend_allow_insecure
    budgets: Budgets = DEFAULT_BUDGETS
    context_style: RemoteContextStyle | None = None  # None: DEFAULT_CONTEXT_STYLE

    @classmethod
    def of(cls, spec: BackendSpec) -> RemoteConfig:
        assert spec.kind != "local"
        return cls(
            kind=spec.kind,
            url=spec.identity or "",
            model=spec.remote_model,
            api_key_env=spec.api_key_env,
            timeout_ms=spec.timeout_ms,
            allow_insecure=spec.allow_insecure,
            budgets=spec.budgets,
        )

    @property
    def base_url(self) -> str:
        """The server's URL without a trailing slash (and, for openai, without `/v1`).

        A URL without a scheme is an error (BackendUrlError, a ValueError) naming the scheme
        to add: guessing http:// sent keys in clear to hosts meant to be reached over TLS.
        """
        url = check_backend_url(self.url or DEFAULT_URLS[self.kind])
        parts = urlsplit(url)
        path = parts.path.rstrip("/")
        if self.kind == "openai" and path.endswith("/v1"):
            path = path[: -len("/v1")]  # users copy the OpenAI base URL, which ends in /v1
        return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))

    def endpoint_url(self, path: str) -> str:
        """The URL of an endpoint: `path` after the base URL's path, its query kept (a key
        in `?api_key=` must follow every request, and must not end up inside the path)."""
        parts = urlsplit(self.base_url)
        return urlunsplit((parts.scheme, parts.netloc, parts.path + path, parts.query, ""))

    @property
    def shown_url(self) -> str:
        """The URL as shown in the status, messages and logs: no credentials."""
        try:
            return redact_url(self.base_url)
        except ValueError:
            return redact_url(self.url)

    def refuse_clear_text(self) -> None:
        """Raise RemoteBackendError when a request would send a key or URL credentials over
        plain http:// to another machine and backendAllowInsecure is not set."""
        has_key = bool(env.secret(self.api_key_env))
        if not self.allow_insecure and sends_in_clear(self.base_url, has_key):
            raise RemoteBackendError(
                f"{self.kind} at {self.shown_url}: refusing to send "
                + ("the API key" if has_key else "the URL's credentials")
                + " over plain http:// to another machine; use https://, or set "
                "backendAllowInsecure if this network is trusted"
            )

    @property
    def timeout_s(self) -> float:
        return self.timeout_ms / 1000.0

    @property
    def style(self) -> RemoteContextStyle:
        """The definitions' layout in effect: context_style, else the module's default."""
        return self.context_style or DEFAULT_CONTEXT_STYLE


# --- token counting without a tokenizer ---------------------------------------------------
def approx_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def approx_tokenize(text: str) -> list[int]:
    """PromptBuilder counts tokens with len(tokenize(text)); ids are never used here."""
    return [0] * approx_tokens(text)
