"""The Chrome trace reader's fast path against its exact path, table for table.

The fast path (``_totals.FastPath``) decodes a run of events as a tagged union and
hands anything it is not sure of to the exact path. Every table read with it must be
the table the exact path alone reads: on every fixture trace, and on generated traces
full of what it has to decline (odd ``ph`` and ``cat``, missing or odd fields, step
spans, damage).
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probewise.errors import TraceFormatError
from probewise.throughput import KernelTable
from probewise.throughput.readers import _totals
from probewise.throughput.readers.chrome_trace import read_chrome_trace


def _decline(self: object, totals: object, doc: bytes) -> bool:
    """``FastPath.add`` that leaves every run to the exact path."""
    return False


def _read(path: Path, *, fast: bool, salvage: bool = False) -> KernelTable | str:
    """The table (or the error's text), with the fast path on or declining every run."""
    with pytest.MonkeyPatch.context() as patch:
        if not fast:
            patch.setattr(_totals.FastPath, "add", _decline)
        try:
            return read_chrome_trace(path, workers=1, salvage=salvage)
        except TraceFormatError as error:
            return f"{type(error).__name__}: {error} [{error.kind}, {error.offset}]"


def _same(path: Path, *, salvage: bool = False) -> None:
    fast, exact = _read(path, fast=True, salvage=salvage), _read(path, fast=False, salvage=salvage)
    assert fast == exact
    assert repr(fast) == repr(exact)  # the same rows, exclusions and steps in the same order


@pytest.fixture
def tallied(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many events went through the fast path (so that no test here is vacuous)."""
    count = [0]
    tally = _totals.Totals.tally

    def counting(self: _totals.Totals, events: list[_totals._Tagged], *rest: object) -> None:  # pyright: ignore[reportPrivateUsage]
        count[0] += len(events)
        tally(self, events, *rest)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(_totals.Totals, "tally", counting)
    return count


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
    events: list[dict[str, object]] = [{"ph": "M", "name": "process_name", "pid": 1}]
    for i in range(60_000):
        ts = 1000.0 + i * 10
        if i % 5000 == 0:
            events.append(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": f"ProfilerStep#{i // 5000}",
                    "ts": ts,
                    "dur": 9000.5,
                    "args": {},
                }
            )
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": ts, "dur": 3})
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "ts": ts + 1,
                "dur": 2,
                "args": {"correlation": i, "cbid": 211},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": f"gemm_{i % 7}",
                "ts": ts + 5,
                "dur": 4.25,
                "args": {"correlation": i, "stream": 7},
            }
        )
        events.append({"ph": "f", "cat": "ac2g", "id": i, "ts": ts + 5, "bp": "e"})
        if i % 20_000 == 7:
            events.append({"ph": "i", "name": "Record Window End", "ts": ts, "s": "g"})
    path = tmp_path / "many.json"
    path.write_text(
        '{"traceEvents": [\n'
        + ",\n".join(map(json.dumps, events))
        + '\n], "displayTimeUnit": "ms"}'
    )
    assert path.stat().st_size > 4 << 20
    _same(path)
    assert tallied[0] > len(events) // 2


_CATS = st.sampled_from(
    [
        "kernel", "Kernel", "gpu_memcpy", "Memset", "gpu_user_annotation", "cuda_sync",
        "cuda_runtime", "xpu_runtime", "cuda_driver", "cpu_op", "user_annotation",
        "python_function", "ac2g", "Trace", "it's", 'q"uote', "ü", "",
    ]
)  # fmt: skip
_PHASES = st.sampled_from(["X", "X", "X", "i", "s", "f", "M", "B", "E", "C", "Q", ""])
_NUMBERS = st.one_of(st.integers(-5, 10**6), st.floats(-1.0, 1e7, allow_nan=False), st.just(10**20))
_VALUES = st.one_of(_NUMBERS, st.none(), st.booleans(), st.text(max_size=3))


@st.composite
def _events(draw: st.DrawFn, *, tidy: bool) -> dict[str, object]:
    """An event; a tidy one has what the fast path takes (it may still be odd in value)."""
    event: dict[str, object] = {}
    odd = st.nothing() if tidy else _VALUES
    if tidy or draw(st.integers(0, 9)):
        event["ph"] = draw(st.one_of(_PHASES.filter(lambda p: p not in ("Q", "")), odd))
    if tidy or draw(st.integers(0, 9)):
        event["cat"] = draw(st.one_of(_CATS, _CATS, _CATS, _CATS, odd))
    name = st.sampled_from(["gemm", "ProfilerStep#3", "ProfilerStep#12", '"a\\u00e9"'])
    event["name"] = draw(st.one_of(name, _VALUES))
    for key in ("ts", "dur"):
        if draw(st.integers(0, 6)):
            event[key] = draw(st.one_of(_NUMBERS, _NUMBERS, odd))
    if draw(st.integers(0, 3)):
        correlation = st.one_of(st.integers(0, 50), st.integers(0, 50), odd)
        args = st.one_of(
            st.fixed_dictionaries({"correlation": correlation}),
            st.fixed_dictionaries({"correlation": correlation, "stream": st.integers(0, 9)}),
            st.just(dict[str, int]()),
            odd,
            st.lists(st.integers(), max_size=2).filter(lambda _: not tidy),
        )
        event["args"] = draw(args)
    return event


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    events=st.lists(st.one_of(_events(tidy=True), _events(tidy=False)), max_size=40),
    pretty=st.booleans(),
    damage=st.sampled_from(["", "cut", "garbage"]),
    salvage=st.booleans(),
)
def test_generated_traces_are_read_as_the_exact_path_reads_them(
    tmp_path: Path, events: list[dict[str, object]], pretty: bool, damage: str, salvage: bool
) -> None:
    body = (
        json.dumps({"traceEvents": events}, indent=2)
        if pretty
        else msgspec.json.encode({"traceEvents": events}).decode()
    )
    if damage == "cut":
        body = body[: len(body) * 2 // 3]
    elif damage == "garbage":
        middle = len(body) // 2
        body = body[:middle] + "}{" + body[middle:]
    path = tmp_path / "generated.json"
    path.write_text(body, encoding="utf-8")
    _same(path, salvage=salvage)
