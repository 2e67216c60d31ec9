"""`ghostfim setup`: the command line of engine/setup/install.py (which has the options, and
runs by itself as `python -m ghostfim.engine.setup.install`: what the editors run)."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ghostfim.engine.setup.install import DESCRIPTION, add_arguments

    setup = sub.add_parser(
        "setup",
        help="make this install ready: dependencies, the llama.cpp build, the model (idempotent)",
        description=DESCRIPTION,
    )
    add_arguments(setup)


def run_setup(args: argparse.Namespace) -> int:
    from ghostfim.engine.setup.install import options_from, run_setup

    return run_setup(options_from(args))
