"""The `ghostfim` program (pyproject's entry point): `serve`, the LSP server, and the tools of
cli/main.py (complete, models, doctor, setup, stats).

    ghostfim serve                      # what the editors start
    python -m ghostfim.lsp.main serve   # the same from an interpreter (tests, benchmarks)
"""

from __future__ import annotations

import argparse

from ghostfim.cli.main import forget_working_directory, main


def serve(args: argparse.Namespace) -> int:
    from ghostfim.lsp.server import run_server  # pygls and the engine: only for serve

    return run_server(tcp=args.tcp, model=args.model)


def run() -> int:
    """The program in a process of its own: nothing is imported from the working directory
    (the workspace an editor starts the server in; docs/reliability.md, "Threat model")."""
    forget_working_directory()
    return main(serve=serve)


if __name__ == "__main__":
    raise SystemExit(run())
