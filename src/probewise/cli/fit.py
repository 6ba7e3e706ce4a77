"""``probewise fit``: the three-term step-time fit from timed points.

Points are ``LENGTH:SECONDS`` or ``LENGTH:SECONDS:BATCH`` arguments, or CSV files
with columns ``length,seconds[,batch]`` (a header row is optional); both may be
mixed. ``--batch`` sets the batch of points that do not give one.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

from probewise._files import read_regular_file
from probewise.errors import InvalidInputError

if TYPE_CHECKING:
    from probewise.throughput.timing.scaling import ScalingFit, ScalingPoint

HELP = "fit seconds = quadratic*b*L^2 + linear*b*L + fixed to timed steps"
DESCRIPTION = (
    "Fit step time against sequence length with three terms (attention-like, "
    "per-token, fixed per step), non-negative, from three or more distinct lengths."
)
RAW_DESCRIPTION = False

FIT_LOSSES = ("linear", "soft_l1")
"""The values of :class:`probewise.throughput.FitLoss` (a test holds them equal)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "points",
        nargs="+",
        metavar="POINT",
        help="LENGTH:SECONDS[:BATCH], or a CSV file of length,seconds[,batch]",
    )
    parser.add_argument("--batch", type=int, default=1, help="batch of points without one (1)")
    parser.add_argument(
        "--loss",
        choices=FIT_LOSSES,
        default=FIT_LOSSES[0],
        help="linear (least squares) or soft_l1 (robust to an outlier)",
    )
    parser.add_argument(
        "--at", type=int, metavar="L", help="length for the term shares (default: the largest)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON document for machines")
    parser.add_argument("--plot", metavar="OUT.png", help="write a PNG of the fit (matplotlib)")


def _point(text: str, batch: int, where: str) -> ScalingPoint:
    from probewise.throughput.timing.scaling import ScalingPoint

    parts = [p.strip() for p in text.split(":")]
    if len(parts) not in (2, 3):
        raise InvalidInputError(f"{where}: expected LENGTH:SECONDS[:BATCH], got {_shown(text)}")
    try:
        length = int(parts[0])
        seconds = float(parts[1])
        point_batch = int(parts[2]) if len(parts) == 3 else batch
    except ValueError:
        raise InvalidInputError(
            f"{where}: expected LENGTH:SECONDS[:BATCH] (integers and a number), got {_shown(text)}"
        ) from None
    try:
        return ScalingPoint(length, seconds, point_batch)
    except InvalidInputError as error:
        raise InvalidInputError(f"{where}: {error}") from None


def _csv_points(path: Path, batch: int) -> list[ScalingPoint]:
    data = read_regular_file(path)  # a FIFO or a folder is refused, never read
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InvalidInputError(f"{path}: not UTF-8 text (byte {error.start})") from None
    points: list[ScalingPoint] = []
    for number, row in enumerate(csv.reader(text.splitlines()), start=1):
        cells = [c.strip() for c in row]
        if not any(cells):
            continue
        if number == 1 and cells[0].lower() == "length":
            continue
        points.append(_point(":".join(cells), batch, f"{path}:{number}"))
    if not points:
        raise InvalidInputError(f"{path}: no points")
    return points


def read_points(items: list[str], batch: int) -> list[ScalingPoint]:
    """Points from ``LENGTH:SECONDS[:BATCH]`` arguments and CSV files."""
    points: list[ScalingPoint] = []
    for item in items:
        path = Path(item)
        if os.path.lexists(path):  # a file, a FIFO, a dangling or looping symlink
            points.extend(_csv_points(path, batch))
        elif ":" in item:
            points.append(_point(item, batch, f"point {_shown(item)}"))
        else:
            raise InvalidInputError(f"{_shown(item)} is neither LENGTH:SECONDS nor a CSV file")
    return points


def _shown(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")


def run(args: argparse.Namespace) -> int:
    from probewise.throughput.timing.scaling import FitLoss, ScalingFit

    if int(args.batch) < 1:
        raise InvalidInputError(f"--batch must be >= 1, got {args.batch}")
    points = read_points([str(p) for p in args.points], int(args.batch))
    fit = ScalingFit.fit(points, loss=FitLoss(str(args.loss)))
    at = fit.length_max if args.at is None else int(args.at)
    batch = int(args.batch)
    warnings_list = _warnings(fit, at)
    if args.plot is not None:
        from probewise.cli._plot import plot_fit

        plot_fit(Path(str(args.plot)), fit, points)
    if args.json:
        document = fit.to_dict()
        document["shares_at"] = {"length": at, "batch": batch, **fit.shares(at, batch)._asdict()}
        document["predicted_seconds_at"] = fit.terms(at, batch)._asdict()
        document["warnings"] = warnings_list
        print(json.dumps(document, indent=2, allow_nan=False))
        return 0
    _print(fit, at, batch, warnings_list)
    if args.plot is not None:
        print(f"\nplot written to {args.plot}")
    return 0


def _warnings(fit: ScalingFit, at: int) -> list[str]:
    notes: list[str] = []
    if fit.exactly_determined:
        notes.append(
            "exactly determined (three settings for three terms, dof 0): the fit "
            "interpolates; no noise estimate, no standard errors. Time a fourth length"
        )
    if fit.at_bound:
        pinned = ", ".join(t.value for t in fit.at_bound)
        notes.append(f"pinned at zero: {pinned} (the data ask for a negative term)")
    if fit.extrapolates(at):
        notes.append(
            f"length {at} is outside the fitted range {fit.length_min}..{fit.length_max}: "
            "an extrapolation"
        )
    return notes


def _err(x: float) -> str:
    return "-" if math.isnan(x) else f"±{x:.3g}"


def _print(fit: ScalingFit, at: int, batch: int, notes: list[str]) -> None:
    print(
        f"scaling fit ({fit.loss.value}): {fit.n_points} points at {fit.n_lengths} lengths, "
        f"{fit.length_min:,}..{fit.length_max:,} tokens"
    )
    print("  seconds = quadratic * batch * L^2 + linear * batch * L + fixed")
    shares = fit.shares(at, batch)
    seconds = fit.terms(at, batch)
    print(
        f"  {'term':<10} {'coefficient':>14} {'stderr':>12} {f'seconds at {at:,}':>16} {'share':>7}"
    )
    rows = (
        ("quadratic", fit.quadratic, fit.stderr.quadratic, seconds.quadratic, shares.quadratic),
        ("linear", fit.linear, fit.stderr.linear, seconds.linear, shares.linear),
        ("fixed", fit.fixed, fit.stderr.fixed, seconds.fixed, shares.fixed),
    )
    for name, coef, err, secs, share in rows:
        print(f"  {name:<10} {coef:>14.4g} {_err(err):>12} {secs:>16.4g} {share:>7.1%}")
    loo = "-" if math.isnan(fit.loo_max_error) else f"{fit.loo_max_error:.1%}"
    print(
        f"  dof {fit.dof}  r² {fit.r_squared:.4f}  max relative residual "
        f"{fit.max_relative_residual:.1%}  leave-one-length-out error {loo}"
    )
    if at % 2 == 0:  # the same tokens as one sequence or as two of half the length
        half = at // 2
        whole = fit.terms(at, batch)
        halves = fit.terms(half, 2 * batch)
        print(
            f"  {batch} x {at:,} tokens vs {2 * batch} x {half:,} (the same tokens): "
            f"{sum(whole):.4g} s vs {sum(halves):.4g} s ({sum(whole) / sum(halves):.2f}x)"
        )
    for note in notes:
        print(f"  warning: {note}")
