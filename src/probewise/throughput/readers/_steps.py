"""Profiler steps: the ``ProfilerStep#N`` names in a run's bytes, and device time per step.

:func:`step_names` finds the step names a run of events holds (one scan of its bytes, so
that only runs with steps look at host ops' names); :func:`join` adds each device event's
nanoseconds to the step its launch falls in; :func:`merge_steps` sums a step number that
a file repeats. Used by :class:`~probewise.throughput.readers._totals.Totals`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final, cast

from probewise.throughput._kernel_rows import StepBreakdown

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["STEP_RAW", "join", "merge_steps", "step_names"]

STEP_RAW: Final = re.compile(rb'"ProfilerStep#([0-9]{1,18})"')  # longer: not a step number
_STEP_PREFIX: Final = b'"ProfilerStep'
_MANY_HASHES: Final = 4096


def step_names(doc: bytes, start: int = 0, end: int | None = None) -> set[bytes]:
    """The distinct ``"ProfilerStep#N"`` name strings (quoted) in ``doc[start:end]``."""
    found: set[bytes] = set()
    stop = len(doc) if end is None else end
    # '#' is found with memchr, far faster than the whole needle, and is rare in a
    # trace; where it is not (over _MANY_HASHES in a run) the rest is searched whole.
    width = len(_STEP_PREFIX)
    at = doc.find(b"#", start + width, stop)
    for _ in range(_MANY_HASHES):
        if at < 0:
            return found
        if doc.startswith(_STEP_PREFIX, at - width, stop):
            match = STEP_RAW.match(doc, at - width, stop)
            if match is not None:
                found.add(match.group(0))
        at = doc.find(b"#", at + 1, stop)
    at = doc.find(b'"ProfilerStep#', max(start, at - width), stop)
    while at >= 0:
        match = STEP_RAW.match(doc, at, stop)
        if match is not None:
            found.add(match.group(0))
        at = doc.find(b'"ProfilerStep#', at + 1, stop)
    return found


def join(
    spans: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]],
    launches: list[npt.NDArray[np.generic]],
    device: list[npt.NDArray[np.generic]],
    totals: npt.NDArray[np.int64],
    counts: npt.NDArray[np.int64],
) -> None:
    """Add each device event's ns to the step (start, end) its launch falls in.

    A device event's launch is the first launch with its correlation id (a stable sort);
    one pass over the device events, not one per step.
    """
    import numpy as np

    starts, ends = spans
    launch_corr, launch_ts = launches
    corr, ns = device[0], device[2]
    code = cast("npt.NDArray[np.int8]", device[1])
    order = np.argsort(launch_corr, kind="stable")
    launch_corr, launch_ts = launch_corr[order], launch_ts[order]
    at = np.searchsorted(launch_corr, corr)
    found = at < len(launch_corr)
    found[found] = launch_corr[at[found]] == corr[found]
    if len(launch_ts) == 0:  # device events but no launch events (a damaged trace)
        launched = np.full(corr.shape, np.nan)
    else:
        launched = np.where(found, launch_ts[np.minimum(at, len(launch_ts) - 1)], np.nan)
    index = np.searchsorted(starts, launched, side="right") - 1
    inside = found & (index >= 0)
    inside[inside] = launched[inside] <= ends[index[inside]]
    mine = index[inside]
    np.add.at(totals, mine * 3 + code[inside], ns[inside])
    counts += np.bincount(mine, minlength=len(counts))


def merge_steps(steps: list[StepBreakdown]) -> list[StepBreakdown]:
    """One entry per step number (a number repeated within a file is summed)."""
    merged: dict[int, StepBreakdown] = {}
    for step in steps:
        merged[step.step] = merged[step.step] + step if step.step in merged else step
    return list(merged.values())
