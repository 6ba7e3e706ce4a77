"""``probewise masks CONFIG``: the per-layer SDPA table of the mask probe.

CONFIG is a ``config.json`` (or its folder) or the name of a bundled config
(``probewise masks --list``). The scenario options are shared with ``preflight``
(:func:`probewise.cli._args.run_probe`), and so is the table (:mod:`probewise.cli._tables`).
"""

from __future__ import annotations

import argparse
import json

from probewise.cli._args import compare_implementations, run_probe
from probewise.cli._tables import implementation_row, print_implementation_table, print_mask_table
from probewise.errors import InvalidInputError


def _run(args: argparse.Namespace) -> int:  # pyright: ignore[reportUnusedFunction]  # run by name (cli._args)
    from probewise.errors import CrossDocumentAttentionError, FastPathLostError
    from probewise.throughput.attention.masks import bundled_configs

    if args.list:
        for name in bundled_configs():
            print(name)
        return 0
    if args.config is None:
        raise InvalidInputError("give CONFIG (a config.json, its folder, or a name from --list)")
    report = run_probe(str(args.config), args)
    compared = compare_implementations(str(args.config), args)
    failure: str | None = None
    try:
        if args.assert_fast:
            types = None if "all" in args.assert_fast else list(args.assert_fast)
            report.assert_fast_path(layer_types=types)
        else:
            report.assert_no_cross_document()
    except (FastPathLostError, CrossDocumentAttentionError) as error:
        failure = f"{type(error).__name__}: {error}"
    if args.json:
        document = report.to_dict()
        document["failure"] = failure
        if compared:
            document["implementations"] = {
                name: implementation_row(other) for name, other in compared
            }
        print(json.dumps(document, indent=2, allow_nan=False))
    else:
        print_mask_table(report)
        if compared:
            print()
            print_implementation_table(compared)
        if failure is not None:
            print()
            print(failure)
    return 1 if failure is not None else 0
