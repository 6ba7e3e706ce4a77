"""Where the trace reader's CPU time goes: process time around its main steps.

Usage::

    python benchmarks/trace_reader_split.py /tmp/perf-trace-big/rank0.json

Wraps a few internal methods of the trace reader's stages (``probewise.throughput.readers``
``_source``, ``_events``, ``_native``, ``_fastpath``, ``_steps`` and ``_totals``) with
``time.process_time`` counters, reads the file once with ``workers=1`` and prints the
seconds spent inside each. They nest: ``_try`` holds the compiled scanner's
``NativePath.add`` (with ``add_scanned``) and, for the runs it declines or where it was
not built (``PROBEWISE_PURE_PYTHON=1``), the fast path's ``FastPath._decode`` and
``add_tagged`` and then the exact path's ``_decode`` and ``add_exact``; ``add_tagged``
and ``add_exact`` hold ``add_lane``, ``_pick``/``_select`` and ``_correlations``; ``more`` is the reading and copying into the
sliding buffer. ``step_names`` counts only the pure-Python paths' calls (the scanner's
path imports it by name). The wrappers add a little time of their own, so the parts are
upper bounds.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from probewise.throughput.readers import _events, _fastpath, _native, _source, _steps, _totals
from probewise.throughput.trace_sets import read_chrome_trace

spent: dict[str, float] = {}


def _wrap(owner: Any, name: str) -> None:
    inner: Callable[..., Any] = getattr(owner, name)
    # Two stages have a _decode: the fast path's and the exact path's.
    label = f"{owner.__name__}.{name}" if name == "_decode" else name

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.process_time() - started

    setattr(owner, name, timed)


def main() -> None:
    for owner, name in [
        (_source.Source, "more"),
        (_events.Parser, "_try"),
        (_events.Parser, "_decode"),
        (_fastpath.FastPath, "_decode"),
        (_native.NativePath, "add"),
        (_native.NativePath, "add_scanned"),
        (_fastpath.FastPath, "add_tagged"),
        (_events.Parser, "_cuts"),
        (_totals.Totals, "add_exact"),
        (_totals.Totals, "add_lane"),
        (_totals.Totals, "parts"),
        (_totals, "_select"),
        (_fastpath, "_pick"),
        (_totals, "_correlations"),
        (_steps, "step_names"),
    ]:
        _wrap(owner, name)
    started = time.process_time()
    read_chrome_trace(sys.argv[1], workers=1)
    print(f"total {time.process_time() - started:.2f} s CPU")
    for name, seconds in spent.items():
        print(f"  {name:<18}{seconds:6.2f}")


if __name__ == "__main__":
    main()
