"""The PNG behind ``probewise lengths --plot``: the length histogram and the bucket sweep.

matplotlib is an optional extra (``probewise[plot]``), imported only here and only
when a plot is asked for.
"""

# matplotlib's methods take untyped ``**kwargs`` (Artist properties), which pyright
# strict reports on every call; nothing else in this module is unknown.
# pyright: reportUnknownMemberType=false

from __future__ import annotations

from pathlib import Path

from probewise.errors import InvalidInputError
from probewise.throughput.buckets import BucketSweep
from probewise.throughput.lengths import LengthStats

__all__ = ["plot_lengths"]


def plot_lengths(path: Path, stats: LengthStats, sweep: BucketSweep | None) -> None:
    """Write the histogram (and, with a sweep, waste against bucket width) to ``path``."""
    try:
        import matplotlib as mpl
    except ImportError:
        raise InvalidInputError("--plot needs matplotlib: pip install 'probewise[plot]'") from None
    mpl.use("Agg")
    import matplotlib.pyplot as plt

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
    figure.tight_layout()
    try:
        figure.savefig(path, dpi=120)
    except OSError as error:
        raise InvalidInputError(f"cannot write the plot to {path}: {error.strerror}") from None
    finally:
        plt.close(figure)


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
