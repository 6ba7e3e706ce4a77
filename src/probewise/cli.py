"""The ``probewise`` command.

Each subcommand lives in a private module ``probewise._cli_<name>`` that defines
``register(subparsers)``; ``register`` adds the subcommand's parser and sets its
``handler`` default to a function ``(argparse.Namespace) -> int`` (the exit status).
Conventions: ``--json`` prints one JSON document for machines; without it, readable
tables for people. Errors print one line to stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import cast

from probewise.errors import ProbewiseError

__all__ = ["build_parser", "main"]

_SUBCOMMAND_MODULES: tuple[str, ...] = (
    "probewise._cli_preflight",
    "probewise._cli_masks",
    "probewise._cli_demo",
    "probewise._cli_kernels",
    "probewise._cli_lengths",
    "probewise._cli_buckets",
    "probewise._cli_fit",
    "probewise._cli_arms",
)

Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="probewise",
        description="Measurement discipline for model probes.",
    )
    from probewise import __version__

    parser.add_argument("--version", action="version", version=f"probewise {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in _SUBCOMMAND_MODULES:
        module = importlib.import_module(name)
        register = cast(
            "Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]", module.register
        )
        register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``probewise`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = cast("Handler", args.handler)
    try:
        return handler(args)
    except ProbewiseError as error:
        print(f"probewise {args.command}: error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
