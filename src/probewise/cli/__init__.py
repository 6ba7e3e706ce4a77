"""The ``probewise`` command.

Each subcommand is one module, ``probewise.cli.<name>``, listed in :data:`COMMANDS`:
its ``HELP`` and ``DESCRIPTION``, its parser (``add_arguments(parser)``) and what runs
it (``run(args) -> int``, the exit status), the shape :class:`Command` states and the
type checkers hold each module to. The command modules import only the standard
library (and probewise's own light modules) at their top; numpy, scipy, torch and the
two halves are imported inside ``run`` and its helpers, so that ``probewise --help``
and ``probewise CMD --help`` import none of them (tests/cli/test_cli_startup.py holds
this). Conventions: ``--json`` prints one JSON document for machines; without it,
readable tables for people.

No command module imports another (the same test holds this): what two commands
share lives in the private modules, the mask probe's options and its run in
:mod:`probewise.cli._probe` (``masks``, ``preflight``), the length input and the
bucket sweep in :mod:`probewise.cli._sweep` (``lengths``, ``buckets``), the tables
and JSON documents in :mod:`probewise.cli._tables`, the plots in
:mod:`probewise.cli._plot`.

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
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, Protocol, cast, final

from probewise.cli import arms, buckets, calibrate, demo, fit, kernels, lengths, masks, preflight
from probewise.errors import ProbewiseError

__all__ = ["COMMANDS", "Command", "build_parser", "command_name", "main"]

EXIT_BAD_INPUT: Final = 2
"""Exit status for bad input: a :class:`~probewise.errors.ProbewiseError` or a usage error."""
EXIT_INTERNAL: Final = 3
"""Exit status for an unexpected exception: a bug in probewise."""
EXIT_INTERRUPTED: Final = 130
"""Exit status after Ctrl-C (128 + SIGINT, as shells report it)."""
DEBUG_ENV: Final = "PROBEWISE_DEBUG"
"""Set to ``1`` to print the full traceback of an internal error."""

Handler = Callable[[argparse.Namespace], int]


class Command(Protocol):
    """What a command module defines: the modules of :data:`COMMANDS` are its instances.

    The command's name is its module's (``probewise.cli.masks`` is ``probewise masks``).
    """

    @property
    def __name__(self) -> str:
        """The module's name, ``probewise.cli.<command>``."""
        ...

    @property
    def HELP(self) -> str:
        """One line, in ``probewise --help``'s list."""
        ...

    @property
    def DESCRIPTION(self) -> str:
        """What ``probewise CMD --help`` says above the options."""
        ...

    @property
    def RAW_DESCRIPTION(self) -> bool:
        """Keep the description's line breaks (a long text in paragraphs)."""
        ...

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add the command's arguments to its parser."""
        ...

    def run(self, args: argparse.Namespace) -> int:
        """Run the command on the parsed arguments; return the exit status."""
        ...


COMMANDS: tuple[Command, ...] = (
    preflight,
    masks,
    demo,
    kernels,
    lengths,
    buckets,
    fit,
    calibrate,
    arms,
)
"""Every subcommand, in the order ``probewise --help`` lists them."""


def command_name(command: Command) -> str:
    """``probewise.cli.masks`` -> ``masks``."""
    return command.__name__.rpartition(".")[2]


def version_line() -> str:
    """What ``probewise --version`` prints: the version, then on a line of its own the
    trace reader this install uses (whether ``pip install`` built the compiled scanner)."""
    from probewise import __version__
    from probewise.throughput.readers.chrome_trace import trace_reader

    return f"probewise {__version__}\ntrace reader: {trace_reader().value}"


@final
class _Version(argparse.Action):
    """``--version``: what :func:`version_line` says, on stdout, then exit 0. Found when
    the option is given, not when the parser is built (that would load the reader)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[object] | None,
        option_string: str | None = None,
    ) -> None:
        print(version_line())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand of :data:`COMMANDS` registered."""
    parser = argparse.ArgumentParser(
        prog="probewise",
        description="Measurement discipline for model probes.",
    )
    parser.add_argument(
        "--version",
        action=_Version,
        nargs=0,
        help="print the version and the trace reader in use (compiled scanner or pure Python)",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        sub = subparsers.add_parser(
            command_name(command),
            help=command.HELP,
            description=command.DESCRIPTION,
            formatter_class=(
                argparse.RawDescriptionHelpFormatter
                if command.RAW_DESCRIPTION
                else argparse.HelpFormatter
            ),
        )
        command.add_arguments(sub)
        sub.set_defaults(handler=command.run)
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
        # Inside the try: Ctrl-C while a subcommand's module imports (torch can take
        # seconds) is an interruption like any other, not a traceback.
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
