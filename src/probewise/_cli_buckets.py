"""``probewise buckets``: the bucket-size sweep alone (``probewise lengths --sweep`` in short).

The same input files as ``probewise lengths``; prints the sweep table (and, with
``--plot``, the histogram and the sweep). ``--sizes`` defaults to widths from 16 to
4,096 tokens in powers of two.
"""

from __future__ import annotations

import argparse

from probewise import _cli_lengths

_DEFAULT_SIZES = "16,32,64,128,256,512,1024,2048,4096"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "buckets",
        help="bucket-size sweep: waste, gain, sources, neighbour correlation per width",
        description=__doc__,
    )
    _cli_lengths.add_input_arguments(parser)
    parser.add_argument("--batch-size", type=int, required=True, metavar="N", help="batch size")
    parser.add_argument(
        "--sizes", dest="sweep", default=_DEFAULT_SIZES, metavar="W,W,...", help="bucket widths"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the shuffles (0)")
    parser.add_argument("--json", action="store_true", help="one JSON document for machines")
    parser.add_argument("--plot", metavar="OUT.png", help="write a PNG (matplotlib)")
    parser.set_defaults(handler=_cli_lengths.run_sweep_only)
