"""Settings parsing and LSP position handling."""

from __future__ import annotations

import pytest

from ghostfim.lsp.documents import DocumentIndex, PositionError, cursor_state
from ghostfim.lsp.settings import Settings, parse_settings, settings_to_client


def test_defaults_when_nothing_is_sent() -> None:
    settings, problems = parse_settings(None)
    assert settings == Settings() and problems == []


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


@pytest.mark.parametrize(
    "raw, field",
    [
        ({"model": {"size": "huge"}}, "model_size"),
        ({"maxTokens": "many"}, "max_tokens"),
        ({"maxTokens": 0}, "max_tokens"),
        ({"enable": "yes"}, "enable"),
        ({"debounceMs": -5}, "debounce_ms"),
        ({"backend": "cloud"}, "backend"),
        ({"nGpuLayers": 1.5}, "n_gpu_layers"),
    ],
)
def test_bad_values_are_reported_and_fall_back_to_default(raw: dict, field: str) -> None:
    s, problems = parse_settings(raw)
    assert len(problems) == 1 and "invalid" in problems[0]
    assert getattr(s, field) == getattr(Settings(), field)


def test_unknown_keys_and_non_objects_are_reported() -> None:
    assert "unknown setting" in parse_settings({"colour": "red"})[1][0]
    assert "must be an object" in parse_settings([1, 2])[1][0]


def test_round_trip_to_client_shape() -> None:
    s, _ = parse_settings({"model": {"size": "small"}, "maxTokens": 12})
    assert parse_settings(settings_to_client(s)) == (s, [])


TEXT = "a😀b = 1\r\nx\ry\n\u2028z\x0cw\n"


def test_utf16_positions_count_surrogate_pairs() -> None:
    idx = DocumentIndex()
    # 'a', then the emoji (2 UTF-16 units), then 'b'
    assert idx.offset_at("u", 1, TEXT, 0, 3, "utf-16") == 2
    assert idx.offset_at("u", 1, TEXT, 0, 5, "utf-8") == 2  # 1 + 4 bytes
    assert idx.offset_at("u", 1, TEXT, 0, 2, "utf-32") == 2


def test_only_lsp_line_ends_split_lines() -> None:
    idx = DocumentIndex()
    # lines: "a😀b = 1", "x", "y", "\u2028z\x0cw", ""
    assert idx.offset_at("u", 1, TEXT, 1, 0, "utf-16") == TEXT.index("x")
    assert idx.offset_at("u", 1, TEXT, 2, 0, "utf-16") == TEXT.index("y")
    assert idx.offset_at("u", 1, TEXT, 3, 2, "utf-16") == TEXT.index("\x0c")


def test_out_of_range_positions() -> None:
    idx = DocumentIndex()
    assert idx.offset_at("u", 1, TEXT, 1, 99, "utf-16") == TEXT.index("x") + 1  # clamps to EOL
    assert idx.offset_at("u", 1, TEXT, 4, 0, "utf-16") == len(TEXT)
    with pytest.raises(PositionError):
        idx.offset_at("u", 1, TEXT, 9, 0, "utf-16")
    with pytest.raises(PositionError):
        idx.offset_at("u", 1, TEXT, -1, 0, "utf-16")


def test_cursor_state_windows_and_normalises_line_ends() -> None:
    text = "x = 1\r\ny = "
    state = cursor_state("u", 3, None, text, len(text), 1)
    assert state.prefix == "x = 1\ny = " and state.suffix == ""
    assert state.edge_before.endswith("\r\ny = ")
