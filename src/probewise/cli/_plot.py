"""The PNGs behind ``--plot``: lengths (histogram, bucket sweep) and the scaling fit.

matplotlib is an optional extra (``probewise[plot]``), imported only here and only
when a plot is asked for.
"""

# matplotlib's methods take untyped ``**kwargs`` (Artist properties), which pyright
# strict reports on every call; nothing else in this module is unknown.
# pyright: reportUnknownMemberType=false

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from probewise._extras import Extra, requires
from probewise.errors import InvalidInputError
from probewise.throughput.data.buckets import BucketSweep
from probewise.throughput.data.lengths import LengthStats
from probewise.throughput.timing.scaling import ScalingFit, ScalingPoint

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_fit", "plot_lengths"]


def _pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the non-interactive Agg backend, or a clear error."""
    with requires(Extra.PLOT, "--plot"):
        import matplotlib as mpl
    mpl.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _check_target(path: Path) -> None:
    """Refuse a target that exists and is not a regular file: writing a FIFO would block."""
    if path.exists() and not path.is_file():
        raise InvalidInputError(f"cannot write the plot to {path}: it is not a regular file")


def _save(figure: Figure, path: Path) -> None:
    import matplotlib.pyplot as plt

    figure.tight_layout()
    try:
        figure.savefig(path, dpi=120)
    except OSError as error:
        raise InvalidInputError(f"cannot write the plot to {path}: {error.strerror}") from None
    finally:
        plt.close(figure)


def plot_lengths(path: Path, stats: LengthStats, sweep: BucketSweep | None) -> None:
    """Write the histogram (and, with a sweep, waste against bucket width) to ``path``."""
    _check_target(path)
    plt = _pyplot()

    panels = 1 if sweep is None else 2
    figure, axes = plt.subplots(1, panels, figsize=(6.0 * panels, 4.0), squeeze=False)
    left = axes[0][0]
    edges = [b.lo for b in stats.histogram] + [stats.histogram[-1].hi]
    left.stairs([b.count for b in stats.histogram], edges, fill=True, color="#4c72b0")
    left.set_xscale("log")
    left.set_xlabel("sequence length (tokens)")
    left.set_ylabel("sequences")
    left.set_title(f"{stats.count:,} sequences, p50 {stats.p50:,.0f}, p99 {stats.p99:,.0f}")
    if sweep is not None:
        _plot_sweep(axes[0][1], sweep)
    _save(figure, path)


def _plot_sweep(ax: object, sweep: BucketSweep) -> None:
    from matplotlib.axes import Axes

    assert isinstance(ax, Axes)
    widths = [row.bucket_size or 0 for row in sweep.rows]
    ax.plot(widths, [100 * row.waste_share for row in sweep.rows], "o-", label="length buckets")
    ax.axhline(100 * sweep.random.waste_share, color="grey", linestyle="--", label="random")
    ax.axhline(
        100 * sweep.megabatch.waste_share, color="#dd8452", linestyle=":", label="megabatch (HF)"
    )
    ax.set_xscale("log")
    ax.set_xlabel("bucket width (tokens)")
    ax.set_ylabel("padding waste (%)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"bucket sweep, batch size {sweep.batch_size}")
    ax.legend()


def plot_fit(path: Path, fit: ScalingFit, points: list[ScalingPoint]) -> None:
    """Write the points, the fitted curve and its three terms (batch 1) to ``path``."""
    _check_target(path)
    plt = _pyplot()
    import numpy as np

    figure, ax = plt.subplots(figsize=(6.5, 4.5))
    lo, hi = fit.length_min, fit.length_max
    grid = np.geomspace(lo, hi, 200)
    quad = fit.quadratic * grid**2
    lin = fit.linear * grid
    fixed = np.full_like(grid, fit.fixed)
    ax.plot(grid, quad + lin + fixed, color="black", label="fit (batch 1)")
    for values, label in (
        (quad, "quadratic: batch * L^2"),
        (lin, "linear: batch * L"),
        (fixed, "fixed per step"),
    ):
        if float(values.max()) > 0.0:  # a term pinned at zero has no place on a log axis
            ax.plot(grid, values, "--", label=label)
        else:
            ax.plot([], [], " ", label=f"{label}: 0 (pinned)")
    per_batch = [p.seconds / p.batch for p in points]
    ax.scatter(
        [p.length for p in points], per_batch, color="#c44e52", zorder=3, label="measured / batch"
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("seconds per step")
    ax.set_title(f"step time: {fit.n_points} points, dof {fit.dof}, r² {fit.r_squared:.4f}")
    ax.legend()
    _save(figure, path)
