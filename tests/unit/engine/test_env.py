"""engine/env.py: every GHOSTFIM_* variable, read at call time (a test sets it with
monkeypatch and a running server sees a change)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ghostfim.engine import env
from ghostfim.engine.env import cache_dir


def test_cache_dir_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("GHOSTFIM_CACHE_DIR", str(tmp_path / "explicit"))
    assert cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv("GHOSTFIM_CACHE_DIR")
    assert cache_dir() == tmp_path / "xdg" / "ghostfim"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir() == tmp_path / "home" / ".cache" / "ghostfim"


def test_state_dir_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("GHOSTFIM_STATE_DIR", str(tmp_path / "explicit"))
    assert env.state_dir() == tmp_path / "explicit"
    monkeypatch.delenv("GHOSTFIM_STATE_DIR")
    assert env.state_dir() == tmp_path / "xdg" / "ghostfim"
    monkeypatch.delenv("XDG_STATE_HOME")
    assert env.state_dir() == tmp_path / "home" / ".local" / "state" / "ghostfim"


@pytest.mark.parametrize(
    ("read", "name"),
    [
        (env.offline, "GHOSTFIM_OFFLINE"),
        (env.hub_offline, "HF_HUB_OFFLINE"),
        (env.debug_protocol, "GHOSTFIM_DEBUG_PROTOCOL"),
    ],
)
def test_flags_are_read_at_each_call(
    monkeypatch: pytest.MonkeyPatch, read: object, name: str
) -> None:
    for value, expected in (("1", True), ("true", True), ("ON", True), ("0", False), ("", False)):
        monkeypatch.setenv(name, value)
        assert read() is expected, (name, value)  # type: ignore[operator]
    monkeypatch.delenv(name)
    assert read() is False  # type: ignore[operator]


def test_seconds_fall_back_to_their_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "GHOSTFIM_REQUEST_DEADLINE_S",
        "GHOSTFIM_EXPLICIT_DEADLINE_S",
        "GHOSTFIM_HOLD_LIMIT_S",
    ):
        monkeypatch.delenv(name, raising=False)
    assert (env.automatic_deadline_s(), env.explicit_deadline_s(), env.hold_limit_s()) == (
        8.0,
        120.0,
        300.0,
    )
    monkeypatch.setenv("GHOSTFIM_REQUEST_DEADLINE_S", "2.5")
    assert env.automatic_deadline_s() == 2.5
    for bad in ("soon", "0", "-3"):
        monkeypatch.setenv("GHOSTFIM_REQUEST_DEADLINE_S", bad)
        assert env.automatic_deadline_s() == 8.0, bad


def test_text_variables_and_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GHOSTFIM_PREFILL_COST", " 3+0.02 ")
    assert env.pinned_prefill_cost() == "3+0.02"
    monkeypatch.delenv("GHOSTFIM_TRACE", raising=False)
    assert env.trace_path() is None
    monkeypatch.setenv("GHOSTFIM_TRACE", "/tmp/trace.log")
    assert env.trace_path() == "/tmp/trace.log"
    monkeypatch.setenv("GHOSTFIM_DEBUG", "yes")
    assert env.debug()
    monkeypatch.setenv("MY_KEY", "sk-123")
    assert env.secret("MY_KEY") == "sk-123" and env.secret("") == ""
    monkeypatch.setenv("MY_KEY", "sk-456")  # rotated: read again
    assert env.secret("MY_KEY") == "sk-456"


def test_every_variable_is_in_the_table() -> None:
    names = [v.name for v in env.VARIABLES]
    assert len(set(names)) == len(names)
    source = Path(env.__file__).read_text()
    for name in set(re.findall(r'"(GHOSTFIM_[A-Z_]+)"', source)):
        assert name in names, name
    assert all(v.meaning for v in env.VARIABLES)
