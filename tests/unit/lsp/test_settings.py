"""lsp/settings.py: the camelCase table over the engine's configuration. A bad value is
reported and keeps its last valid value; the model is named as a whole."""

from __future__ import annotations

import pytest

from ghostfim.lsp.settings import KEYS, Settings, parse_settings, unwrap_section
from tests.support.settings import settings_to_client


def test_defaults_when_nothing_is_sent() -> None:
    settings, problems = parse_settings(None)
    assert settings == Settings() and problems == []
    assert parse_settings({}) == (Settings(), [])


def test_nested_client_shape_and_wrappers_are_accepted() -> None:
    raw = {
        "settings": {
            "ghostfim": {
                "model": {"size": "tiny"},
                "maxTokens": 16,
                "debounceMs": 20,
                "multiline": "never",
            }
        }
    }
    s, problems = parse_settings(raw)
    assert problems == []
    assert (s.model_size, s.max_tokens, s.debounce_ms, s.multiline) == ("tiny", 16, 20.0, "never")
    assert parse_settings({"debounceMs": "auto"})[0].debounce_ms is None
    assert unwrap_section({"ghostfim": {"enable": False}}) == {"enable": False}
    assert unwrap_section([1]) == [1]


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"model": {"size": "huge"}}, "model_size"),
        ({"maxTokens": "many"}, "max_tokens"),
        ({"maxTokens": 0}, "max_tokens"),
        ({"enable": "yes"}, "enable"),
        ({"debounceMs": -5}, "debounce_ms"),
        ({"backend": "cloud"}, "backend"),
        ({"nGpuLayers": 1.5}, "n_gpu_layers"),
        ({"filter": "smart"}, "filter"),
        ({"acceptanceStats": "no"}, "acceptance_stats"),
        ({"prefixTokens": 16_385}, "prefix_tokens"),
    ],
)
def test_bad_values_are_reported_and_fall_back_to_default(raw: dict, field: str) -> None:
    s, problems = parse_settings(raw)
    assert len(problems) == 1 and "invalid" in problems[0]
    assert getattr(s, field) == getattr(Settings(), field)


def test_unknown_keys_and_non_objects_are_reported() -> None:
    assert "unknown setting" in parse_settings({"colour": "red"})[1][0]
    assert "must be an object" in parse_settings([1, 2])[1][0]
    s, problems = parse_settings({"model": 5, "maxTokens": 9})
    assert "ghostfim.model" in problems[0] and s.max_tokens == 9


def test_round_trip_to_client_shape() -> None:
    s, _ = parse_settings({"model": {"size": "small"}, "maxTokens": 12})
    client = settings_to_client(s)
    assert client["model"] == {"size": "small", "path": None, "draft": "auto"}
    assert parse_settings(client) == (s, [])
    assert set(KEYS) == {
        *(k for k in client if k != "model"),
        *(f"model.{k}" for k in client["model"]),
    }


def test_the_filter_and_the_acceptance_statistics() -> None:
    settings, problems = parse_settings({})
    assert (settings.filter, settings.acceptance_stats) == ("adaptive", True)
    for mode in ("adaptive", "fixed", "off"):
        assert parse_settings({"filter": mode})[0].filter == mode
    settings, problems = parse_settings({"filter": "off", "acceptanceStats": False})
    assert problems == [] and (settings.filter, settings.acceptance_stats) == ("off", False)
    assert settings_to_client(settings)["filter"] == "off"
    assert settings_to_client(settings)["acceptanceStats"] is False
    kept, problems = parse_settings({"filter": "smart", "acceptanceStats": 0}, settings)
    assert len(problems) == 2 and (kept.filter, kept.acceptance_stats) == ("off", False)


def test_extra_context_settings() -> None:
    settings, problems = parse_settings({})
    assert problems == [] and settings.extra_context is False  # off unless measured to help
    assert settings.extra_context_tokens is None  # auto
    assert settings_to_client(settings)["extraContextTokens"] == "auto"
    settings, problems = parse_settings({"extraContext": True, "extraContextTokens": 512})
    assert problems == []
    assert settings.extra_context is True and settings.extra_context_tokens == 512
    assert parse_settings(settings_to_client(settings)) == (settings, [])
    bad, problems = parse_settings({"extraContextTokens": -1, "extraContext": "yes"}, settings)
    # Bad values keep the last valid ones.
    assert len(problems) == 2 and bad.extra_context_tokens == 512 and bad.extra_context is True


def test_postprocess_and_the_rest_of_line_limit() -> None:
    settings, problems = parse_settings({"postprocess": False, "maxRestOfLine": 20})
    assert problems == [] and settings.postprocess is False
    assert settings_to_client(settings)["postprocess"] is False
    assert settings.max_rest_of_line == 20
    assert parse_settings({"postprocess": "no"})[0].postprocess is True  # bad: the default
    assert parse_settings({"postprocess": "no"}, settings)[0].postprocess is False  # kept


# --- the model is named as a whole ----------------------------------------------------------
def test_a_model_object_names_the_model_whole() -> None:
    by_path, _ = parse_settings({"model": {"path": "/m.gguf"}})
    assert (by_path.model_size, by_path.model_path) == (None, "/m.gguf")
    by_size, _ = parse_settings({"model": {"size": "tiny"}}, by_path)
    assert (by_size.model_size, by_size.model_path) == ("tiny", None)  # not the path's any more
    flat, _ = parse_settings({"model.size": "small"}, by_path)  # a flat key changes one part
    assert (flat.model_size, flat.model_path) == ("small", "/m.gguf")


def test_a_failed_path_then_a_size_typo_keeps_the_whole_model() -> None:
    """The path names a file that does not exist (its load fails; what served serves on);
    then the size is a typo: the whole model setting keeps its last valid value. It must
    never read as "no size, no path", which loads the default model over what serves."""
    tiny, problems = parse_settings({"model": {"size": "tiny"}})
    assert problems == []
    missing, problems = parse_settings({"model": {"path": "/nonexistent/x.gguf"}}, tiny)
    assert problems == [] and missing.model_spec == "/nonexistent/x.gguf"
    typo, problems = parse_settings({"model": {"size": "huge"}}, missing)
    assert len(problems) == 1 and "ghostfim.model.size" in problems[0]
    assert (typo.model_size, typo.model_path) == (missing.model_size, missing.model_path)
    assert typo.model_spec is not None  # never the default model
    bad_path, problems = parse_settings({"model": {"size": "small", "path": 5}}, tiny)
    assert len(problems) == 1 and "model.path" in problems[0]
    assert (bad_path.model_size, bad_path.model_path) == ("tiny", None)  # not half of it


def test_a_backend_url_needs_a_scheme_and_is_quoted_redacted() -> None:
    good, problems = parse_settings(
        {"backendUrl": "https://me:hunter22@gpu-box:8443/v1", "backendAllowInsecure": True}
    )
    assert problems == [] and good.backend_allow_insecure
    kept, problems = parse_settings({"backendUrl": "me:hunter22@other-box:8000"}, good)
    assert kept.backend_url == good.backend_url  # the last good URL stays
    assert len(problems) == 1 and "add https://" in problems[0], problems
    assert "hunter22" not in problems[0] and "***@other-box:8000" in problems[0]
    assert "***@gpu-box:8443" in problems[0]  # the URL kept, redacted too
    _, problems = parse_settings({"backendAllowInsecure": "yes"})
    assert "backendAllowInsecure" in problems[0]
