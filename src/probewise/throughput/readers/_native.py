"""The trace reader's compiled scanner, where the install built it: a run in one C pass.

``_scan.c`` (built by setup.py, optional) checks a run of events as JSON and does in C
what :meth:`~probewise.throughput.readers._totals.Totals.add` does with it, so host
events never become Python objects; :meth:`Totals.absorb` adds what it found. Where it
declines (anything it does not read exactly, see the C file's header) or was not built,
the fast path and the exact path read the run as before, with the same results.
``PROBEWISE_PURE_PYTHON=1`` in the environment turns it off (the tests compare both).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias, final

import msgspec

from probewise.throughput.readers._steps import step_names
from probewise.throughput.readers._totals import DECODE_EVENTS, Event, Totals, role_of

if TYPE_CHECKING:
    from probewise.throughput.readers._scan import Scanned

__all__ = ["BUILT", "SCAN", "NativePath", "Scan"]

Scan: TypeAlias = Callable[
    [bytes | bytearray | memoryview, int, int, Callable[[str | None], int]], "Scanned | None"
]


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
        scanned = self.scan(buf, start, end, functools.partial(role_of, launches=launches))
        if scanned is None:
            return False
        picked = scanned[2]
        step_events: list[Event] = []
        if picked is not None:
            try:
                step_events = DECODE_EVENTS.decode(picked)
            except msgspec.DecodeError:  # pragma: no cover - the scanner checked their types
                return False
        totals.absorb(scanned, step_events, steps)
        return True
