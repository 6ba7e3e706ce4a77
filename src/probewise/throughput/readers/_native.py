"""The trace reader's compiled scanner, where the install built it: a run in one C pass.

``_scan.c`` (built by setup.py, optional) checks a run of events as JSON and does in C
what :meth:`~probewise.throughput.readers._totals.Totals.add_exact` does with it, so host
events never become Python objects; :meth:`NativePath.add_scanned` adds what it found,
named here (:class:`Scanned`: the C side returns a plain tuple). Where it declines
(anything it does not read exactly, see the C file's header) or was not built, the fast
path and the exact path read the run as before, with the same results.
``PROBEWISE_PURE_PYTHON=1`` in the environment turns it off (the tests compare both).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, TypeAlias, final

import msgspec

from probewise.throughput.readers._steps import step_names
from probewise.throughput.readers._totals import (
    DECODE_EVENTS,
    K_MEMSET,
    K_RUNTIME,
    Event,
    Totals,
    add_row,
    category,
    role_of,
)

if TYPE_CHECKING:
    from probewise.throughput.readers import _scan

__all__ = ["BUILT", "SCAN", "NativePath", "Scan", "Scanned"]

Scan: TypeAlias = Callable[
    [bytes | bytearray | memoryview, int, int, Callable[[str | None], int]], "_scan.Scanned | None"
]


class Scanned(NamedTuple):
    """What the scanner found in one run (``_scan.c``'s ``results``, in its order)."""

    events: int
    """Events in the run."""
    counts: list[tuple[str | None, int, int]]
    """(category, events, events whose ``ph`` is not ``"X"``), in first-seen order."""
    step_events: bytes | None
    """The events named ``"ProfilerStep#..."``, as a JSON array (None: there were none)."""
    rows: list[tuple[int, bytes, int, int]]
    """(code, raw name, calls, ns) for each kernel, copy and fill name."""
    lane: list[tuple[int, int]]
    """(code, ns) for each device-lane code seen."""
    spans: int
    """Device-lane spans whose step-join columns were made."""
    keys: bytes
    """Each kernel, copy and fill span's duplicate key (int64s)."""
    device_corr: bytes
    """The step-join columns of the device spans: correlation ids (int64s)..."""
    device_code: bytes
    """... their codes (int8s) ..."""
    device_ns: bytes
    """... and their durations in ns (int64s)."""
    launch_corr: bytes
    """The launches' correlation ids (int64s) ..."""
    launch_ts: bytes
    """... and their starts (doubles)."""


def _built() -> Scan | None:
    try:
        from probewise.throughput.readers._scan import scan
    except ImportError:  # not built (no C compiler at install): the pure-Python paths
        return None
    return scan


_SCANNER = _built()
BUILT: bool = _SCANNER is not None
"""Whether this install has the compiled scanner (whether or not it is turned off)."""

SCAN: Scan | None = (
    None if os.environ.get("PROBEWISE_PURE_PYTHON", "") not in ("", "0") else _SCANNER
)
"""The scanner, or None where it was not built or is turned off (each reader takes it
when it starts, so a test can set it)."""


@final
class NativePath:
    """Offers each run to the scanner; one per file."""

    def __init__(self) -> None:
        self.scan = SCAN

    def add(self, totals: Totals, buf: bytes, start: int, end: int) -> bool:
        """Add the events of ``buf[start:end]`` (the inside of a JSON array) to ``totals``;
        False: nothing was added, the pure-Python paths decide."""
        if self.scan is None:
            return False
        steps = step_names(buf, start, end)
        launches = bool(totals.steps or totals.always_launches or steps)
        # role_of is asked once per category of the run (the scanner keeps the answers).
        raw = self.scan(buf, start, end, functools.partial(role_of, launches=launches))
        if raw is None:
            return False
        found = Scanned._make(raw)
        step_events: list[Event] = []
        if found.step_events is not None:
            try:
                step_events = DECODE_EVENTS.decode(found.step_events)
            except msgspec.DecodeError:  # pragma: no cover - the scanner checked their types
                return False
        self.add_scanned(found, totals, step_events, steps)
        return True

    def add_scanned(
        self, found: Scanned, totals: Totals, step_events: list[Event], steps: set[bytes]
    ) -> None:
        """The compiled path: add what the scanner found in one run, as the exact path would.

        ``step_events`` are the run's events named ``"ProfilerStep#..."`` (decoded by the
        exact path's decoder), ``steps`` the step names in the run's bytes.
        """
        totals.events += found.events
        runtime = 0
        for cat, n, not_x in found.counts:  # in first-seen order, as add_exact's Counter
            totals.cat_counts[cat] += n
            if not_x:
                totals.not_span_counts[cat] += not_x
            if category(cat) == K_RUNTIME:
                runtime += n
        for event in step_events:
            if bytes(event.name) in steps:
                totals.add_step(event)
        keep = bool(totals.steps) or totals.always_launches
        for code, ns in found.lane:
            totals.naive_ns += ns
            if code > K_MEMSET:
                totals.lane_ns[code] = totals.lane_ns.get(code, 0) + ns
        for code, name, calls, ns in found.rows:
            add_row(totals.rows[code], name, calls, ns)
        totals.device_keys.frombytes(found.keys)
        if keep:
            totals.device_corr.frombytes(found.device_corr)
            totals.device_code.frombytes(found.device_code)
            totals.device_ns.frombytes(found.device_ns)
            totals.launch_corr.frombytes(found.launch_corr)
            totals.launch_ts.frombytes(found.launch_ts)
        else:
            totals.skipped_launches += found.spans + runtime
        totals.bound()
