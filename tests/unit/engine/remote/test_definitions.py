"""The workspace's definitions in remote requests (engine/remote/backends.py `place_definitions`):
what each protocol's body holds with a block of two definitions in two files, and that a
request without definitions is sent exactly as before.

The bodies are the ones the fake servers of tests/support/fake_http.py received.
"""

from __future__ import annotations

from typing import Any

import pytest

from ghostfim.engine.backend import CompletionRequest, PromptMode
from ghostfim.engine.context.definitions import ContextEntry, DefinitionBlock
from ghostfim.engine.remote import config as remote_config
from ghostfim.engine.remote.backends import RemoteConfig, place_definitions, repo_text
from ghostfim.engine.remote.config import RemoteContextStyle
from ghostfim.engine.remote.servers import open_remote_backend
from tests.support.fake_http import QWEN_GGUF, FakeServer
from tests.unit.engine.remote.test_backends import PREFIX, SUFFIX

QWEN_STOPS = ["<|endoftext|>", "<|file_sep|>", "<|fim_pad|>", "<|repo_name|>"]
MEAN = 'def mean(values: list[float]) -> float:\n    """The arithmetic mean."""'
SAMPLE = "class Sample:\n    values: list[float]\n\n    def size(self) -> int: ..."
BLOCK = DefinitionBlock(
    "python",
    (
        ContextEntry("mean", "stats/core.py", MEAN),
        ContextEntry("Sample", "stats/sample.py", SAMPLE),
    ),
)
# The block as Python comments (DefinitionBlock.prompt_text), at the top of the prefix text.
COMMENTS = (
    "# stats/core.py:\n"
    "#   def mean(values: list[float]) -> float:\n"
    '#       """The arithmetic mean."""\n'
    "# stats/sample.py:\n"
    "#   class Sample:\n"
    "#       values: list[float]\n"
    "#\n"
    "#       def size(self) -> int: ...\n"
    "\n"
)
# The block in Qwen's repository-level layout, before the FIM prompt: each file, then the
# document's own name.
QWEN_REPO = (
    f"<|file_sep|>stats/core.py\n{MEAN}\n"
    f"<|file_sep|>stats/sample.py\n{SAMPLE}\n"
    "<|file_sep|>stats.py\n"
)
EXTRA = [
    {"filename": "stats/core.py", "text": MEAN},
    {"filename": "stats/sample.py", "text": SAMPLE},
]
MODES: list[PromptMode] = ["keystroke", "full"]


def sent(
    kind: str,
    model: str = "",
    style: RemoteContextStyle | None = None,
    **changes: Any,
) -> list[tuple[str, Any]]:
    """The body a request reached the fake server with, its keys in the order sent."""
    fields = {"prefix": PREFIX, "suffix": SUFFIX, "doc_id": "file:///stats.py", **changes}
    with FakeServer(kind) as server:
        config = RemoteConfig(kind, server.url, model=model, context_style=style)  # type: ignore[arg-type]
        backend = open_remote_backend(config)
        try:
            backend.complete(CompletionRequest(**fields))
        finally:
            backend.close()
    path, _, body = server.requests[-1]
    assert path in ("/infill", "/v1/completions", "/api/generate")
    return list(body.items())


# What each protocol sent before definitions existed (byte for byte: keys, order and values).
def infill_body(prefix: str = PREFIX, extra: list[dict[str, str]] | None = None) -> list[Any]:
    return [
        ("input_prefix", prefix),
        ("input_suffix", SUFFIX),
        ("input_extra", extra or []),
        ("prompt", ""),
        ("n_predict", 64),
        ("cache_prompt", True),
        ("stream", True),
        ("timings_per_token", True),
        ("temperature", 0.0),
        ("top_k", 1),
        ("samplers", ["top_k"]),
    ]


def openai_body(prompt: str) -> list[Any]:
    return [
        ("prompt", prompt),
        ("max_tokens", 64),
        ("temperature", 0.0),
        ("stream", True),
        ("model", QWEN_GGUF),
        ("stop", QWEN_STOPS),
    ]


def ollama_raw_body(prompt: str) -> list[Any]:
    options = {"num_predict": 64, "temperature": 0.0, "top_k": 1, "stop": QWEN_STOPS}
    return [
        ("model", "qwen2.5-coder:1.5b-base"),
        ("stream", True),
        ("options", options),
        ("prompt", prompt),
        ("raw", True),
    ]


def ollama_template_body(prompt: str) -> list[Any]:
    options = {"num_predict": 64, "temperature": 0.0, "top_k": 1}
    return [
        ("model", "mystery:7b"),
        ("stream", True),
        ("options", options),
        ("prompt", prompt),
        ("suffix", SUFFIX),
    ]


def qwen_fim(prefix: str, head: str = "") -> str:
    return f"{head}<|fim_prefix|>{prefix}<|fim_suffix|>{SUFFIX}<|fim_middle|>"


# --- the choice ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("style", "takes_files", "file_sep", "placement"),
    [
        ("comment", True, "", "comment"),
        ("comment", False, "<|file_sep|>", "comment"),
        ("repo", True, "", "input_extra"),
        ("repo", False, "<|file_sep|>", "file_sep"),
        ("repo", False, "", "comment"),  # no repository-level layout: comments after all
    ],
)
def test_the_placement_is_a_function_of_the_style(
    style: RemoteContextStyle, takes_files: bool, file_sep: str, placement: str
) -> None:
    assert place_definitions(style, takes_files=takes_files, file_sep=file_sep) == placement


def test_comments_are_the_default_style() -> None:
    assert remote_config.DEFAULT_CONTEXT_STYLE == "comment"
    assert RemoteConfig("openai").style == "comment"
    assert RemoteConfig("openai", context_style="repo").style == "repo"


def test_the_repository_layout_names_each_file_then_the_document() -> None:
    assert repo_text("<|file_sep|>", BLOCK.files(), "file:///stats.py") == QWEN_REPO
    assert (
        repo_text("<s>", [("a.py", "x")], "file:///w/my%20dir/b%20c.py")
        == "<s>a.py\nx\n<s>b c.py\n"
    )
    assert repo_text("<s>", [("a.py", "x")], "") == "<s>a.py\nx\n<s>file\n"


# --- without definitions: as before -------------------------------------------------------------
@pytest.mark.parametrize("definitions", [None, DefinitionBlock("python", ())])
@pytest.mark.parametrize("style", [None, "comment", "repo"])
def test_without_definitions_every_body_is_as_before(
    definitions: DefinitionBlock | None, style: RemoteContextStyle | None
) -> None:
    changes = {"definitions": definitions, "style": style}
    assert sent("llama-server", **changes) == infill_body()
    assert sent("openai", **changes) == openai_body(qwen_fim(PREFIX))
    assert sent("ollama", "qwen2.5-coder:1.5b-base", **changes) == ollama_raw_body(qwen_fim(PREFIX))
    assert sent("ollama", "mystery:7b", **changes) == ollama_template_body(PREFIX)


# --- llama-server /infill -------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_llama_server_gets_the_comment_block_at_the_top_of_input_prefix(mode: PromptMode) -> None:
    body = sent("llama-server", definitions=BLOCK, mode=mode)
    assert body == infill_body(prefix=COMMENTS + PREFIX)


@pytest.mark.parametrize("mode", MODES)
def test_llama_server_repo_style_sends_the_files_as_input_extra(mode: PromptMode) -> None:
    body = sent("llama-server", style="repo", definitions=BLOCK, mode=mode)
    assert body == infill_body(extra=EXTRA)  # input_prefix untouched: the server lays them out


def test_the_module_default_style_is_read_when_the_config_names_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(remote_config, "DEFAULT_CONTEXT_STYLE", "repo")
    assert sent("llama-server", definitions=BLOCK) == infill_body(extra=EXTRA)
    explicit = sent("llama-server", style="comment", definitions=BLOCK)
    assert explicit == infill_body(prefix=COMMENTS + PREFIX)


# --- OpenAI-compatible /v1/completions ----------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_openai_gets_the_comment_block_after_the_fim_prefix_token(mode: PromptMode) -> None:
    body = sent("openai", definitions=BLOCK, mode=mode)
    assert body == openai_body(qwen_fim(COMMENTS + PREFIX))


@pytest.mark.parametrize("mode", MODES)
def test_openai_repo_style_uses_the_familys_file_separator(mode: PromptMode) -> None:
    body = sent("openai", style="repo", definitions=BLOCK, mode=mode)
    assert body == openai_body(qwen_fim(PREFIX, head=QWEN_REPO))


def test_openai_repo_style_without_a_file_separator_falls_back_to_comments() -> None:
    body = dict(sent("openai", "deepseek-ai/deepseek-coder-1.3b-base", "repo", definitions=BLOCK))
    assert body["prompt"] == f"<｜fim▁begin｜>{COMMENTS}{PREFIX}<｜fim▁hole｜>{SUFFIX}<｜fim▁end｜>"


# --- Ollama /api/generate -----------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_ollama_raw_fim_text_gets_the_comment_block_after_the_fim_prefix_token(
    mode: PromptMode,
) -> None:
    body = sent("ollama", "qwen2.5-coder:1.5b-base", definitions=BLOCK, mode=mode)
    assert body == ollama_raw_body(qwen_fim(COMMENTS + PREFIX))


@pytest.mark.parametrize("mode", MODES)
def test_ollama_repo_style_uses_the_familys_file_separator(mode: PromptMode) -> None:
    body = sent("ollama", "qwen2.5-coder:1.5b-base", "repo", definitions=BLOCK, mode=mode)
    assert body == ollama_raw_body(qwen_fim(PREFIX, head=QWEN_REPO))


@pytest.mark.parametrize("style", ["comment", "repo"])
def test_ollamas_own_template_gets_the_comment_block_at_the_top_of_prompt(
    style: RemoteContextStyle,
) -> None:
    body = sent("ollama", "mystery:7b", style, definitions=BLOCK)
    assert body == ollama_template_body(COMMENTS + PREFIX)
