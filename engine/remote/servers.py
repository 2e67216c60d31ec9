"""The three server protocols (engine/remote/backends.py holds what they share):

llama-server  POST /infill            input_prefix/input_suffix, cache_prompt, streaming
openai        POST /v1/completions    a FIM prompt built here from the family's token texts
ollama        POST /api/generate      raw FIM prompt (known family) or prompt + suffix
"""

from __future__ import annotations

import logging
from typing import Any

from ghostfim.engine.remote.backends import RemoteBackend, RemotePrompt
from ghostfim.engine.remote.config import (
    RemoteBackendError,
    RemoteConfig,
)
from ghostfim.engine.remote.stream import (
    StreamEvent,
    as_float,
    as_int,
    error_text,
)

log = logging.getLogger("ghostfim.remote")


class LlamaServerBackend(RemoteBackend):
    """llama.cpp's llama-server: /infill applies the model's own FIM template server-side,
    `cache_prompt` reuses the slot's KV cache, `timings_per_token` reports the server's
    prompt time and cache reuse with the first token (a stopped stream never sees the end)."""

    kind = "llama-server"
    endpoint = "/infill"
    event_keys = ("content", "stop", "error")
    takes_files = True

    def _family(self) -> str:
        return "server (/infill)"

    def _sends_fim_text(self) -> bool:
        return False

    async def _identify(self) -> None:
        props = await self._get_json("/props")
        settings = props.get("default_generation_settings")
        n_ctx = as_int(settings.get("n_ctx")) if isinstance(settings, dict) else None
        name = str(props.get("model_alias") or props.get("model_path") or self.kind)
        self._identified_as(name, n_ctx or 0)

    def _body(self, prompt: RemotePrompt, max_tokens: int) -> dict[str, Any]:
        # ghostfim's layout: everything typed goes at the end of input_prefix (quality first,
        # see engine/prompt/fim.py); `prompt` (text after FIM_MID) stays empty. Definitions
        # are at input_prefix's top, or in input_extra ("repo": the server lays them out).
        return {
            "input_prefix": prompt.prefix,
            "input_suffix": prompt.suffix,
            "input_extra": [{"filename": f, "text": text} for f, text in prompt.files],
            "prompt": "",
            "n_predict": max(0, max_tokens),  # 0: evaluate the prompt into the cache only
            "cache_prompt": True,
            "stream": True,
            "timings_per_token": True,
            "temperature": 0.0,
            "top_k": 1,  # greedy, like the local backend
            "samplers": ["top_k"],
        }

    def _parse(self, data: dict[str, Any]) -> StreamEvent:
        if "error" in data:
            return StreamEvent(error=f"{self.kind}: {error_text(data['error'])}")
        timings = data.get("timings")
        timings = timings if isinstance(timings, dict) else {}
        return StreamEvent(
            text=str(data.get("content") or ""),
            done=bool(data.get("stop")),
            finish=str(data.get("stop_type") or ""),
            server_prefill_ms=as_float(timings.get("prompt_ms")),
            reused_tokens=as_int(timings.get("cache_n")),
            new_tokens=as_int(timings.get("prompt_n")),
        )


class OpenAIBackend(RemoteBackend):
    """OpenAI-compatible /v1/completions (vLLM, llama-cpp-python's server, LM Studio): the
    FIM prompt is built here from the family's special-token texts, which these servers parse
    as special tokens when they tokenize the prompt."""

    kind = "openai"
    endpoint = "/v1/completions"
    event_keys = ("choices", "error")

    async def _identify(self) -> None:
        if self.config.model:
            self._identified_as(self.config.model)
            return
        models = await self._get_json("/v1/models")
        data = models.get("data") or []
        if not isinstance(data, list) or not data or not isinstance(data[0], dict):
            raise RemoteBackendError(f"{self.kind} at {self.config.shown_url} serves no model")
        self.server_model = str(data[0].get("id") or "")
        self._identified_as(self.server_model)

    def _body(self, prompt: RemotePrompt, max_tokens: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "prompt": prompt.fim_text(self.fim),
            "max_tokens": max(1, max_tokens),  # a warm-up asks for one token
            "temperature": 0.0,
            "stream": True,
        }
        if self.server_model:
            body["model"] = self.server_model
        if self.fim.stops:
            body["stop"] = list(self.fim.stops[:4])  # OpenAI's API takes at most four
        return body

    def _parse(self, data: dict[str, Any]) -> StreamEvent:
        if "error" in data:
            return StreamEvent(error=f"{self.kind}: {error_text(data['error'])}")
        choices = data.get("choices") or [{}]
        choice = choices[0]
        if not isinstance(choice, dict):
            raise TypeError("choices[0] is not an object")
        finish = choice.get("finish_reason")
        usage = data.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        return StreamEvent(
            text=str(choice.get("text") or ""),
            done=finish is not None,
            finish=str(finish or ""),
            new_tokens=as_int(usage.get("prompt_tokens")),
        )


class OllamaBackend(RemoteBackend):
    """Ollama's /api/generate, one JSON object a line. For a known FIM family the prompt is
    ghostfim's FIM text sent `raw` (no chat template); otherwise `prompt` + `suffix` and the
    model's own template does the FIM (Ollama refuses a suffix for models without one)."""

    kind = "ollama"
    endpoint = "/api/generate"
    sse = False
    event_keys = ("response", "done", "error")

    def __init__(self, config: RemoteConfig) -> None:
        if not config.model:
            raise RemoteBackendError("ollama needs backendModel (e.g. qwen2.5-coder:1.5b-base)")
        super().__init__(config)

    def _family(self) -> str:
        return self.fim.name if self._sends_fim_text() else "server (suffix)"

    def _sends_fim_text(self) -> bool:
        return self.fim.layout != "prefix"

    async def _identify(self) -> None:
        self._identified_as(self.config.model)

    def _body(self, prompt: RemotePrompt, max_tokens: int) -> dict[str, Any]:
        options: dict[str, Any] = {
            "num_predict": max(1, max_tokens),
            "temperature": 0.0,
            "top_k": 1,
        }
        body: dict[str, Any] = {"model": self.config.model, "stream": True, "options": options}
        if self._sends_fim_text():
            body.update(prompt=prompt.fim_text(self.fim), raw=True)
            options["stop"] = list(self.fim.stops)
        else:
            body.update(prompt=prompt.prefix, suffix=prompt.suffix)
        return body

    def _parse(self, data: dict[str, Any]) -> StreamEvent:
        if "error" in data:
            return StreamEvent(error=f"{self.kind}: {error_text(data['error'])}")
        done = bool(data.get("done"))
        prompt_ns = as_float(data.get("prompt_eval_duration"))
        return StreamEvent(
            text=str(data.get("response") or ""),
            done=done,
            finish=str(data.get("done_reason") or ""),
            server_prefill_ms=prompt_ns / 1e6 if done and prompt_ns is not None else None,
            new_tokens=as_int(data.get("prompt_eval_count")) if done else None,
        )


BACKEND_CLASSES: dict[str, type[RemoteBackend]] = {
    "llama-server": LlamaServerBackend,
    "openai": OpenAIBackend,
    "ollama": OllamaBackend,
}


def open_remote_backend(config: RemoteConfig) -> RemoteBackend:
    """A backend for config, its server asked what it serves (if it is up yet)."""
    return BACKEND_CLASSES[config.kind](config).open()
