"""The Chrome trace reader's fast path against its exact path, table for table.

The fast path (``_fastpath.FastPath``) decodes a run of events as a tagged union and
hands anything it is not sure of to the exact path. Every table read with it must be
the table the exact path alone reads: on every fixture trace, and on generated traces
full of what it has to decline (odd ``ph`` and ``cat``, missing or odd fields, step
spans, damage).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _trace_gen import (
    GENERATED,
    assert_same_tables,
    counted,
    generated_trace,
    many_run_events,
    write_many_run_trace,
)
from hypothesis import HealthCheck, given, settings

# Private: the fast path is turned off or counted, and the scanner off, to compare the paths.
from probewise.throughput.readers import _fastpath, _native


def _decline(self: object, totals: object, doc: bytes) -> bool:
    """``FastPath.add`` that leaves every run to the exact path."""
    return False


def _fast(patch: pytest.MonkeyPatch) -> None:
    """The fast path as it is."""


def _exact(patch: pytest.MonkeyPatch) -> None:
    patch.setattr(_fastpath.FastPath, "add", _decline)


def _same(path: Path, *, salvage: bool = False) -> None:
    assert_same_tables(path, _fast, _exact, salvage=salvage)


@pytest.fixture(autouse=True)
def _pure_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled scanner off: these tests hold the fast path to the exact path
    (tests/throughput/readers/test_chrome_native.py holds the scanner to both)."""
    monkeypatch.setattr(_native, "SCAN", None)


@pytest.fixture
def tallied(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many events went through the fast path (so that no test here is vacuous)."""
    return counted(monkeypatch, _fastpath.FastPath, "add_tagged", len)


@pytest.mark.fixtures
def test_fixture_tables_are_the_exact_paths(shared_fixtures: Path, tallied: list[int]) -> None:
    paths = sorted((shared_fixtures / "traces").glob("*.json*"))
    assert len(paths) >= 10
    fast = 0
    for path in paths:
        before = tallied[0]
        _same(path)
        fast += tallied[0] > before
    # A file of one run goes the exact way whole if one event lacks ``cat`` (metadata,
    # instants), as most small fixtures do; the larger ones are several runs.
    assert fast >= 4


def test_a_many_run_trace_is_read_as_the_exact_path_reads_it(
    tmp_path: Path, tallied: list[int]
) -> None:
    """Several MiB: runs that end on a cut (not only the last run), with steps in some."""
    events = many_run_events()
    path = tmp_path / "many.json"
    write_many_run_trace(path, events)
    _same(path)
    assert tallied[0] > len(events) // 2


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(**GENERATED)
def test_generated_traces_are_read_as_the_exact_path_reads_them(
    tmp_path: Path, events: list[dict[str, object]], pretty: bool, damage: str, salvage: bool
) -> None:
    _same(generated_trace(tmp_path, events, pretty=pretty, damage=damage), salvage=salvage)
