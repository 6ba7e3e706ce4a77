"""The ``probewise`` command.

Each subcommand lives in a private module ``probewise._cli_<name>`` that defines
``register(subparsers)``; ``register`` adds the subcommand's parser and sets its
``handler`` default to a function ``(argparse.Namespace) -> int`` (the exit status).
Conventions: ``--json`` prints one JSON document for machines; without it, readable
tables for people.

Exit status (the one contract every subcommand keeps, enforced here in :func:`main`):

* 0: done, every check passed;
* 1: a check failed (``masks --assert-fast``, ``preflight``);
* 2: bad input: any :class:`~probewise.errors.ProbewiseError`, printed as one line
  on stderr (``probewise CMD: error: ...``), and argparse's usage errors;
* 3: an internal error: any other exception, printed as one line that names its
  type and where it was raised and says how to report it. The exception's message
  is left out (an unexpected exception may carry input data); set
  ``PROBEWISE_DEBUG=1`` to get the full traceback instead;
* 130: interrupted (Ctrl-C), one line on stderr.

No subcommand prints a Python traceback unless ``PROBEWISE_DEBUG=1`` is set.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, cast

from probewise.errors import ProbewiseError

__all__ = ["build_parser", "main"]

EXIT_BAD_INPUT: Final = 2
"""Exit status for bad input: a :class:`~probewise.errors.ProbewiseError` or a usage error."""
EXIT_INTERNAL: Final = 3
"""Exit status for an unexpected exception: a bug in probewise."""
EXIT_INTERRUPTED: Final = 130
"""Exit status after Ctrl-C (128 + SIGINT, as shells report it)."""
DEBUG_ENV: Final = "PROBEWISE_DEBUG"
"""Set to ``1`` to print the full traceback of an internal error."""

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


def _debug() -> bool:
    return os.environ.get(DEBUG_ENV, "").strip() not in ("", "0")


def _where(error: BaseException) -> str:
    """``file:line`` of the innermost frame the exception passed through (its origin)."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return "unknown location"
    last = frames[-1]
    parts = Path(last.filename).parts
    short = "/".join(parts[parts.index("probewise") :]) if "probewise" in parts else parts[-1]
    return f"{short}:{last.lineno}"


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real stdout (e.g. captured in tests)
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``probewise`` console script; returns the exit status.

    0 done, 1 a check failed, 2 bad input (one line on stderr), 3 an internal error
    (one line saying how to report it; ``PROBEWISE_DEBUG=1`` prints the traceback),
    130 interrupted. argparse's own usage errors exit 2 through :class:`SystemExit`.
    """
    prefix = "probewise"
    try:
        # Inside the try: Ctrl-C while the subcommands import (torch can take seconds)
        # is an interruption like any other, not a traceback.
        args = build_parser().parse_args(argv)
        prefix = f"probewise {args.command}"
        handler = cast("Handler", args.handler)
        return handler(args)
    except ProbewiseError as error:
        message = " ".join(str(error).split())  # one line, whatever the message held
        print(f"{prefix}: error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # the reader went away (e.g. `probewise lengths f | head`)
        _silence_stdout()
        return 0
    except KeyboardInterrupt:
        print(f"{prefix}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as error:
        if _debug():
            traceback.print_exc()
        print(
            f"{prefix}: internal error: {type(error).__name__} at {_where(error)}. "
            f"This is a bug in probewise, not in your input: please report it with the "
            f"command line and the output of the same command run with {DEBUG_ENV}=1",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
