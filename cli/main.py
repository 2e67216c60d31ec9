"""The `ghostfim` command's tools: complete, models, doctor, setup, stats.

`serve`, the LSP server, is lsp/'s: the program (lsp/main.py, pyproject's entry point) hands
it in, so that the command-line tools drive the engine alone and import nothing from lsp/.

Errors a user can cause (a missing model, a corrupt file, a position outside the file) end in one
line on stderr and a non-zero exit, never a traceback (set GHOSTFIM_DEBUG=1 to see one).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence

from ghostfim.cli import setup as setup_command
from ghostfim.cli.errors import UserError
from ghostfim.engine import env
from ghostfim.engine.config import DEFAULTS
from ghostfim.engine.version import VERSION

EXIT_USAGE = 2
EXIT_FAILURE = 1

Serve = Callable[[argparse.Namespace], int]  # runs `ghostfim serve` (lsp/main.py)


def _build_parser(with_serve: bool = False) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ghostfim",
        description="Inline code completion from a local fill-in-the-middle model.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log more to stderr")
    parser.add_argument("--version", action="version", version=f"ghostfim {VERSION}")
    sub = parser.add_subparsers(dest="command", required=True)

    if with_serve:
        serve = sub.add_parser("serve", help="run the LSP server (stdio by default)")
        serve.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead of stdio")
        serve.add_argument(
            "--model", metavar="PRESET|PATH", help="initial model (settings override)"
        )

    complete = sub.add_parser("complete", help="print the ghost text at FILE:LINE:COL")
    complete.add_argument("location", metavar="FILE:LINE:COL", help="1-based line and column")
    complete.add_argument(
        "--model", metavar="PRESET|PATH", help="tiny|small|medium|large or a .gguf"
    )
    complete.add_argument("--json", action="store_true", help="one JSON object per completion")
    complete.add_argument(
        "--type",
        metavar="TEXT",
        dest="type_text",
        help="then type TEXT one character at a time, completing after each",
    )
    complete.add_argument(
        "--pace-ms",
        type=float,
        default=150.0,
        help="the pause before each typed character, after the previous suggestion is whole",
    )
    complete.add_argument("--max-tokens", type=int, default=64)
    complete.add_argument("--multiline", choices=("auto", "always", "never"), default="auto")
    complete.add_argument(
        "--no-postprocess",
        dest="postprocess",
        action="store_false",
        help="show the suggestion as generated, without the clean-up rules (for comparisons)",
    )
    complete.add_argument(
        "--n-gpu-layers",
        type=int,
        default=-1,
        help="-1: all layers on a CUDA GPU when there is one (default)",
    )
    complete.add_argument("--prefix-tokens", type=int, default=DEFAULTS.prefix_tokens)
    complete.add_argument("--suffix-tokens", type=int, default=DEFAULTS.suffix_tokens)
    complete.add_argument(
        "--keystroke-prefill-ms", type=float, default=DEFAULTS.keystroke_prefill_ms
    )

    models = sub.add_parser("models", help="list the model presets, fetch one")
    models.add_argument("--json", action="store_true")
    models.add_argument(
        "--fetch", metavar="PRESET", help="download/assemble a preset into the cache"
    )

    sub.add_parser("doctor", help="check the llama.cpp build, the GPU and the models")
    setup_command.add_parser(sub)
    stats = sub.add_parser(
        "stats", help="the acceptance statistics kept on this machine (never sent anywhere)"
    )
    stats.add_argument("--json", action="store_true")
    return parser


def forget_working_directory() -> None:
    """Take the working directory off `sys.path`: nothing ghostfim imports may come from it.

    Editors start the server in the user's workspace, which may be a stranger's repository
    with a `llama_cpp/` or `huggingface_hub/` of its own. The `ghostfim` script never puts
    it on the path, but `python -m ghostfim.lsp.main` and an empty PYTHONPATH entry do, and
    the modules ghostfim imports late (llama.cpp, the hub client) would then be the
    workspace's. Children are started isolated (engine/setup/child.py).
    """
    here = os.path.realpath(os.getcwd())
    sys.path[:] = [
        entry for entry in sys.path if entry not in ("", ".") and os.path.realpath(entry) != here
    ]


def main(argv: Sequence[str] | None = None, serve: Serve | None = None) -> int:
    """Parse and run a command; `serve` is the LSP server's (absent: the tools only)."""
    args = _build_parser(with_serve=serve is not None).parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="ghostfim: %(message)s",
    )
    try:
        if args.command == "serve" and serve is not None:
            return serve(args)
        if args.command == "complete":
            from ghostfim.cli.complete import run_complete

            return run_complete(args)
        if args.command == "models":
            return _run_models(args)
        if args.command == "stats":
            from ghostfim.cli.stats import run_stats

            return run_stats(args)
        if args.command == "doctor":
            from ghostfim.engine.setup.doctor import run_doctor

            return run_doctor()
        if args.command == "setup":
            return setup_command.run_setup(args)
    except UserError as exc:
        sys.stderr.write(f"ghostfim: error: {exc}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the last line of defence: one line, unless debugging
        if env.debug():
            raise
        sys.stderr.write(f"ghostfim: error: {exc}\n")
        return EXIT_FAILURE
    return EXIT_USAGE


def _run_models(args: argparse.Namespace) -> int:
    from ghostfim.engine.setup.fetch import ModelNotFoundError, fetch_model, list_models
    from ghostfim.engine.setup.presets import PRESET_NAMES

    if args.fetch:
        if args.fetch not in PRESET_NAMES:
            raise UserError(
                f"unknown preset {args.fetch!r}; choose one of {', '.join(PRESET_NAMES)}"
            )
        try:
            path = fetch_model(args.fetch)
        except ModelNotFoundError as exc:
            raise UserError(str(exc)) from None
        sys.stderr.write(f"ghostfim: {args.fetch} is at {path}\n")
    rows = list_models()
    if args.json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return 0
    sys.stdout.write(f"{'preset':<8} {'present':<8} {'size':>9}  {'name':<38} path\n")
    for row in rows:
        size = f"{row['bytes'] / 2**20:.0f} MiB" if row["bytes"] else "?"
        where = row["path"] or "(not fetched: ghostfim models --fetch " + row["preset"] + ")"
        sys.stdout.write(
            f"{row['preset']:<8} {'yes' if row['present'] else 'no':<8} {size:>9}  "
            f"{row['name']:<38} {where}\n"
        )
    return 0


if __name__ == "__main__":  # the tools alone; `ghostfim` (lsp/main.py) adds serve
    forget_working_directory()
    raise SystemExit(main())
