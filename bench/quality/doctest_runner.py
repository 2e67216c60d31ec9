"""Run one function's doctests against versions of its module's source: a subprocess helper.

    python -I doctest_runner.py < request.json > results.json

The request: {"path", "module", "package", "qualname", "sources": [text, ...], "timeout_s"}.
Each source is executed as a fresh module (named after the original, with `__package__` set so
that relative imports work), the function named by `qualname` is looked up in it, and its
docstring's examples run. One result per source: {"attempted", "failed", "error"}; a source
that does not compile, raises on import, runs out of time or lacks the function has an error.

Standalone on purpose (no project imports): it runs under `python -I` in a scratch folder, with
a memory cap and a per-source time limit, because it executes model-written code.
"""

from __future__ import annotations

import contextlib
import doctest
import io
import json
import signal
import sys
import types
from typing import Any

MEMORY_LIMIT = 2 << 30


class _Timeout(BaseException):
    pass


_alarms = [0]  # how often the timer fired during the current source


def _on_alarm(_signum: int, _frame: Any) -> None:
    _alarms[0] += 1
    raise _Timeout


def run_source(
    source: str, path: str, module: str, package: str, qualname: str, n: int, timeout_s: float
) -> dict[str, Any]:
    name = f"{module}__quality{n}"
    mod = types.ModuleType(name)
    mod.__file__ = path
    mod.__package__ = package or None
    sys.modules[name] = mod  # dataclasses, enums and pickling look the module up
    _alarms[0] = 0
    # A repeating timer: doctest swallows an exception raised inside an example and goes on to
    # the next one, so keep interrupting until the run is over.
    signal.setitimer(signal.ITIMER_REAL, timeout_s, 0.2)
    try:
        exec(compile(source, path, "exec"), mod.__dict__)
        target: Any = mod
        for part in qualname.split("."):
            target = getattr(target, part)
        finder = doctest.DocTestFinder(recurse=False)
        tests = finder.find(target, f"{name}.{qualname}", module=mod, globs=mod.__dict__)
        runner = doctest.DocTestRunner(verbose=False)
        for test in tests:
            runner.run(test, out=lambda _text: None)
        result: dict[str, Any] = {
            "attempted": runner.tries,
            "failed": runner.failures,
            "error": None,
        }
    except _Timeout:
        result = {"attempted": 0, "failed": 0, "error": "timeout"}
    except BaseException as exc:
        result = {"attempted": 0, "failed": 0, "error": f"{type(exc).__name__}: {exc}"[:300]}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.modules.pop(name, None)
    if _alarms[0] and result["error"] is None:
        result["error"] = "timeout"
    return result


def main() -> int:
    request = json.load(sys.stdin)
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    signal.signal(signal.SIGALRM, _on_alarm)
    sys.setrecursionlimit(5000)
    real_stdout = sys.stdout
    results = []
    for n, source in enumerate(request["sources"]):
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            results.append(
                run_source(
                    source,
                    request["path"],
                    request["module"],
                    request["package"],
                    request["qualname"],
                    n,
                    float(request.get("timeout_s", 10.0)),
                )
            )
    real_stdout.write(json.dumps(results))
    real_stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
